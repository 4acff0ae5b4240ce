"""How long a learner needs for each section of a chapter, from one stated rate.

    python -m tools.minutes notebooks/05_transformer_block.py   # one chapter, section by section
    python -m tools.minutes                                     # every chapter, totals only

Every chapter states its minutes per section (``## 5.3 Title (core, 8 min)``) and its core path.
Those figures come from one rate for every chapter, so that the densest sections get the most
time and two chapters' minutes mean the same thing:

* prose: ``WORDS_PER_MINUTE`` words of a markdown cell a minute (technical reading, with maths;
  a displayed equation counts as ``EQUATION_WORDS`` words);
* code: ``LINES_PER_MINUTE`` lines of a code cell a minute (reading it, running it, looking at
  what it prints), blank and comment-only lines left out, solution cells and the hidden Colab
  set-up cell too;
* a figure or a widget: ``FIGURE_MINUTES`` each (a cell that calls ``plt``, ``new_axes`` or a
  widget front-end);
* an exercise placed inside the section: ``EXERCISE_MINUTES`` by kind (read from its title:
  "Predict", "Stretch", "Debug"/"Find the bug", "Derive"; conceptual and implement otherwise).

A section's estimate is rounded to a whole minute, at least 2. ``tests/test_notebook_sources.py``
holds every numbered section's stated minutes to within ``TOLERANCE`` of the estimate. The
exercises at the end of a chapter are outside the sections and are not counted in the core path,
nor is the chapter's quiz (``## Quiz (optional, N min)``, the lesson's last code cell), whose
minutes are ``QUIZ_MINUTES`` per question by kind (:func:`quiz_minutes`).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

WORDS_PER_MINUTE = 120
EQUATION_WORDS = 15
LINES_PER_MINUTE = 6
FIGURE_MINUTES = 1.0
EXERCISE_MINUTES = {
    "predict": 3,
    "conceptual": 4,
    "implement": 12,
    "debug": 10,
    "derive": 10,
    "stretch": 15,
}
#: Minutes per quiz question (data/quizzes): reading it, choosing or working out an answer,
#: reading why; a numeric one is worked on paper.
QUIZ_MINUTES = {"choice": 1, "numeric": 2}
#: A stated figure may differ from the estimate by this share, or by MIN_SLACK minutes.
TOLERANCE = 0.3
MIN_SLACK = 2

SECTION = re.compile(r"^## (\d+)\.(\d+) (.*?)\s*\((core|optional), (\d+) min\)\s*$", re.M)
HEADING = re.compile(r"^#{1,2} ", re.M)
FIGURE = re.compile(r"\bplt\.|new_axes\(|\bwidget\.|_widget\(|interact\(|explorer\(|display\(")


@dataclass
class Section:
    number: str
    title: str
    kind: str  # core or optional
    stated: int
    words: int = 0
    code_lines: int = 0
    figures: int = 0
    exercises: tuple[str, ...] = ()

    @property
    def estimate(self) -> int:
        minutes = (
            self.words / WORDS_PER_MINUTE
            + self.code_lines / LINES_PER_MINUTE
            + self.figures * FIGURE_MINUTES
            + sum(EXERCISE_MINUTES[k] for k in self.exercises)
        )
        return max(2, round(minutes))

    @property
    def within(self) -> bool:
        slack = max(MIN_SLACK, math.ceil(TOLERANCE * self.estimate))
        return abs(self.stated - self.estimate) <= slack


def quiz_minutes(chapter: str) -> int:
    """The minutes of a chapter's quiz at the course's rate.

    >>> quiz_minutes("01_matmul") >= 12
    True
    """
    from course_lib import quiz

    return sum(QUIZ_MINUTES[q["kind"]] for q in quiz.load(chapter))


def exercise_kind(title: str) -> str:
    """The kind of an exercise, from its title.

    >>> exercise_kind("Predict, then check: the softmax of equal logits")
    'predict'
    >>> exercise_kind("Find the bug: a global-max softmax")
    'debug'
    >>> exercise_kind("A stable softmax")
    'implement'
    """
    t = title.lower()
    for word, kind in (
        ("predict", "predict"),
        ("stretch", "stretch"),
        ("bug", "debug"),
        ("debug", "debug"),
        ("derive", "derive"),
        ("why", "conceptual"),
        ("concept", "conceptual"),
    ):
        if word in t:
            return kind
    return "implement"


def count_words(markdown: str) -> int:
    """Words of prose, a displayed equation counting as EQUATION_WORDS.

    >>> count_words("Two words $$x = y$$ and more")
    19
    """
    equations = re.findall(r"\$\$.*?\$\$", markdown, re.S)
    rest = re.sub(r"\$\$.*?\$\$", " ", markdown, flags=re.S)
    rest = re.sub(r"```.*?```", " ", rest, flags=re.S)  # directives' fences are not prose words
    return len(rest.split()) + EQUATION_WORDS * len(equations)


def code_lines(source: str) -> int:
    """Lines a learner reads in a code cell: not blank, not only a comment, not a magic."""
    return sum(
        1
        for line in source.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "%", "!"))
    )


def sections(path: Path) -> list[Section]:
    """The numbered sections of a chapter's jupytext source, with what each holds."""
    import jupytext

    nb = jupytext.read(path)
    found: list[Section] = []
    current: Section | None = None
    exercises: list[str] = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            for match in HEADING.finditer(cell.source):
                line = cell.source[match.start() :].splitlines()[0]
                numbered = SECTION.match(line.removeprefix("#").lstrip()) or SECTION.match(line)
                if current is not None:
                    current.exercises = tuple(exercises)
                exercises = []
                current = (
                    Section(
                        numbered[1] + "." + numbered[2], numbered[3], numbered[4], int(numbered[5])
                    )
                    if numbered and line.startswith("## ")
                    else None
                )
                if current is not None:
                    found.append(current)
            if current is not None:
                current.words += count_words(cell.source)
                exercises += [
                    exercise_kind(t) for t in re.findall(r"```\{exercise\}\s*(.*)", cell.source)
                ]
        elif current is not None and not {"solution", "colab-setup"} & set(tags):
            current.code_lines += code_lines(cell.source)
            current.figures += 1 if FIGURE.search(cell.source) else 0
    if current is not None:
        current.exercises = tuple(exercises)
    return found


def report(path: Path, detail: bool) -> tuple[int, int]:
    """Print a chapter's sections against the rate; return (core, optional) estimated minutes."""
    totals = {"core": 0, "optional": 0}
    stated = {"core": 0, "optional": 0}
    for s in sections(path):
        totals[s.kind] += s.estimate
        stated[s.kind] += s.stated
        if detail:
            flag = "" if s.within else "   <-- outside the tolerance"
            print(
                f"{s.number:>6} {s.kind:8} stated {s.stated:3} estimate {s.estimate:3} "
                f"({s.words} words, {s.code_lines} code lines, {s.figures} figures, "
                f"exercises {list(s.exercises)}) {s.title[:40]}{flag}"
            )
    print(
        f"{path.stem}: core stated {stated['core']}, estimated {totals['core']}; "
        f"optional stated {stated['optional']}, estimated {totals['optional']}"
        + _quiz_note(path.stem)
    )
    return totals["core"], totals["optional"]


def _quiz_note(chapter: str) -> str:
    from course_lib import quiz

    if chapter not in quiz.quiz_names():
        return ""
    return f"; the quiz (optional) {quiz_minutes(chapter)}"


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
    for path in paths:
        report(path, detail=bool(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
