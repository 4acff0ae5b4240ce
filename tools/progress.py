"""``./course progress``: which exercises you have solved, chapter by chapter.

    ./course progress           # passed/total per chapter, and what is left
    ./course progress --reset   # forget the record (course_lib.progress)

The exercises of a chapter are those with a checker (implement and predict-then-check); the
record is the one the checkers keep on this machine as you work (see course_lib.progress).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_lib import progress
from tools.grade import read_sheet

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = re.compile(r"from course_lib\.(\w+) import exercises as check\b")


@dataclass
class Exercise:
    label: str
    title: str
    keys: list[str]  # the checkers that grade it, as course_lib.progress records them


def exercise_keys(call: str) -> str | None:
    """The progress key of a checker call.

    >>> exercise_keys("check.layer_flops(linear_flops)")
    'layer_flops'
    >>> exercise_keys("check_prediction(p, 3, what='the shape')")
    'prediction: the shape'
    """
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    for k in node.keywords:
        if k.arg == "what" and isinstance(k.value, ast.Constant):
            return f"prediction: {k.value.value}"
    return None


def chapter_exercises(path: Path) -> tuple[str | None, list[Exercise]]:
    """The checker package of a chapter notebook and its graded exercises, in order."""
    nb = nbformat.from_dict(json.loads(path.read_text()))  # no validation: a quick read
    for cell in nb.cells:
        if isinstance(cell.source, list):
            cell.source = "".join(cell.source)
    found = PACKAGE.search("\n".join(c.source for c in nb.cells if c.cell_type == "code"))
    sheet = read_sheet(nb)
    exercises = [
        Exercise(label, sheet.titles[label], list(dict.fromkeys(filter(None, keys))))
        for label, keys in ((lb, map(exercise_keys, sheet.calls[lb])) for lb in sheet.graded)
    ]
    return (found.group(1) if found else None), exercises


def _failing_again(exercise: Exercise, mine: dict) -> str:
    """A note for an exercise that was solved once but whose latest check failed."""
    entries = [mine.get(k, {}) for k in exercise.keys]
    if any(e.get("solved_before") and not e.get("passed") for e in entries):
        return " (solved before; your latest check of it failed)"
    return ""


def report(notebooks: list[Path], record: dict) -> str:
    lines = []
    done = total = 0
    for path in notebooks:
        package, exercises = chapter_exercises(path)
        mine = record.get(package or "", {})
        solved = [
            e for e in exercises if e.keys and all(mine.get(k, {}).get("passed") for k in e.keys)
        ]
        left = [e for e in exercises if e not in solved]
        done, total = done + len(solved), total + len(exercises)
        line = f"{path.stem:<28} {len(solved):>2}/{len(exercises):<2}"
        if left and len(solved) + sum(any(k in mine for k in e.keys) for e in left):
            line += "  left: " + "; ".join(e.title + _failing_again(e, mine) for e in left)
        elif not left and exercises:
            line += "  all done"
        lines.append(line.rstrip())
    lines.append(f"{'in all':<28} {done:>2}/{total}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reset", action="store_true", help="forget every recorded exercise")
    args = parser.parse_args(argv)
    if args.reset:
        had = progress.reset()
        print(f"progress reset ({progress.progress_file()} {'removed' if had else 'was empty'})")
        return 0
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    print(f"Your exercises, from {progress.progress_file()} (only on this machine):")
    print(report(notebooks, progress.load()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
