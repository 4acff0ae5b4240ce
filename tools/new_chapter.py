"""Scaffold a new chapter in the course's layout: ``./course new NN_topic [--package NAME]``.

    python -m tools.new_chapter 07_bpe --package bpe --title "Byte-pair encoding"

Creates, and refuses to overwrite:

* ``course_lib/<package>/`` with ``__init__.py``, ``reference.py``, ``accelerated.py``,
  ``spec.py`` (an empty ``SPECS``), ``exercises.py`` (one example checker) and ``widget.py``;
* ``tests/test_<package>.py``;
* ``notebooks/NN_topic.py`` with the standard sections (outcomes, assumptions, the lesson, the
  notes' errors, exercises of three kinds, summary, references, "How this chapter is tested"),
  executed into ``notebooks/NN_topic.ipynb``;
* the chapter's rows in the README chapter map, ``book/intro.md`` and ``book/_toc.yml``
  (status ``draft``: the chapter is on the website, marked unfinished).

``./course test`` passes on the freshly scaffolded chapter; replace every "TODO" before calling
the chapter ready.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tools import publish

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"(?P<number>\d\d)_(?P<topic>[a-z][a-z0-9_]*)")

INIT = '''"""Chapter {number}: {title}.

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.{package} import reference``.
"""
'''

REFERENCE = '''"""Chapter {number} ({title}): NumPy references, float64, written to be read next to the notes.

Every public function here has a PyTorch twin of the same name and signature in
:mod:`course_lib.{package}.accelerated`, and a spec in :mod:`course_lib.{package}.spec`.
"""

from __future__ import annotations

__all__: list[str] = []
'''

ACCELERATED = '''"""Chapter {number} ({title}): PyTorch twins of :mod:`course_lib.{package}.reference`.

Batched over leading dimensions, on any device, dtype-preserving, autograd-friendly.
"""

from __future__ import annotations

__all__: list[str] = []
'''

SPEC = '''"""Conformance specs of Chapter {number}: one :class:`~course_lib.conformance.Spec` per mirrored function."""

from __future__ import annotations

from course_lib.conformance import Spec

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []
'''

EXERCISES = '''"""Exercise checkers of Chapter {number}: ``from course_lib.{package} import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).
"""

from __future__ import annotations

from collections.abc import Callable

from course_lib.checker import Outcome, check_cases, seeded

__all__ = ["square"]

#: Seed of this chapter's checker inputs.
SEED = {number}


def square(fn: Callable, *, require: bool = False) -> Outcome:
    """TODO: replace this example checker: ``fn(x)`` returns ``x * x`` elementwise.

    >>> square(lambda x: x * x).passed
    True
    """
    rng = seeded(SEED)
    cases = [("a vector", (x,), x * x) for x in [rng.standard_normal(4)]]
    return check_cases("an example checker", fn, cases, require=require)
'''

WIDGET = '''"""Widgets of Chapter {number}: thin front-ends over pure functions of this folder.

Wire controls to a render function with :func:`course_lib.interact.live_html`.
"""

from __future__ import annotations

__all__: list[str] = []
'''

TEST = '''"""Chapter {number} ({title}): hand-derived values, parity with an established library, bad input."""

from __future__ import annotations

import numpy as np

from course_lib.{package} import exercises as check


def test_example_checker_accepts_a_solution_and_names_a_mistake():
    assert check.square(np.square)
    outcome = check.square(lambda x: 2 * x)
    assert not outcome and "wrong values" in str(outcome)
'''

NOTEBOOK = """# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # {int_number}. {title}
#
# TODO: what this chapter is about and why, in two to four sentences.
#
# **After this chapter you can**
#
# - TODO: an outcome the learner can check for themselves.
#
# **Assumes**: TODO (which chapters, which maths).
# **Core path**: about TODO minutes; the optional sections add about TODO minutes.
#
# The chapter follows TODO of Strabel's notes {{cite}}`strabel2023transformers`.

# %%
import numpy as np

from course_lib import seed_everything
from course_lib.checker import check_prediction
from course_lib.{package} import exercises as check

rng = seed_everything(0)

# %% [markdown]
# ## {int_number}.1 TODO: the first idea (core, TODO min)
#
# The notes' statement, then our commentary, then the centrepiece code on the page with shape
# comments, and one assertion that it equals the library's NumPy and PyTorch versions.

# %% [markdown]
# ## {int_number}.2 What the notes get wrong (core, TODO min)
#
# TODO: each error, reproduced, then the correct form, asserted; the source named.

# %% [markdown]
# ## Exercises
#
# Four kinds: implement (a checker tells you what is wrong), predict then check, a conceptual
# question, and a stretch problem. Solutions are folded below each exercise.
#
# ```{{exercise}} TODO: an implementation exercise
# :label: ex-{package}-implement
#
# Write `square(x)` that returns `x * x` elementwise.
# ```


# %%
def square(x):
    raise NotImplementedError  # your code here


check.square(square)

# %% [markdown] tags=["solution"]
# ```{{solution-start}} ex-{package}-implement
# :class: dropdown
# ```


# %% tags=["solution"]
def square(x):
    return np.asarray(x) * np.asarray(x)


check.square(square, require=True)

# %% [markdown] tags=["solution"]
# ```{{solution-end}}
# ```

# %% [markdown]
# ```{{exercise}} TODO: predict, then check
# :label: ex-{package}-predict
#
# Before running the cell, write down what `np.square(-3)` returns. Then run it.
# ```

# %%
prediction = None  # your prediction here
check_prediction(prediction, int(np.square(-3)), what="the square of -3")

# %% [markdown] tags=["solution"]
# ```{{solution-start}} ex-{package}-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 9  # the square of a negative number is positive
assert check_prediction(prediction, int(np.square(-3)), what="the square of -3").passed

# %% [markdown] tags=["solution"]
# ```{{solution-end}}
# ```

# %% [markdown]
# ```{{exercise}} TODO: a conceptual question
# :label: ex-{package}-concept
#
# Why does squaring lose the sign?
# ```

# %% [markdown] tags=["solution"]
# ```{{solution-start}} ex-{package}-concept
# :class: dropdown
# ```
#
# Because $(-x)^2 = x^2$: the map is two-to-one.
#
# ```{{solution-end}}
# ```

# %% [markdown]
# ```{{exercise}} Stretch: TODO
# :label: ex-{package}-stretch
#
# TODO: a harder, optional problem.
# ```

# %% [markdown] tags=["solution"]
# ```{{solution-start}} ex-{package}-stretch
# :class: dropdown
# ```
#
# TODO: the worked answer.
#
# ```{{solution-end}}
# ```

# %% [markdown]
# ## Summary
#
# - TODO
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023 {{cite}}`strabel2023transformers`.
#
# ## How this chapter is tested
#
# TODO: the conformance specs, parity tests and benchmarks that stand behind the lesson.
"""


def _insert_row(path: Path, number: int, row: str) -> None:
    """Replace the chapter's row (``| number | ...``) of a markdown table, or add it after the
    last numbered row if the chapter has none yet."""
    lines = path.read_text().splitlines()
    last = None  # the table's last numbered row: a chapter beyond the map is appended after it
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0].isdigit():
            last = i
        if line.startswith("|") and cells and cells[0] == str(number):
            lines[i] = row
            path.write_text("\n".join(lines) + "\n")
            return
    if last is None:
        raise SystemExit(f"error: {path.name} has no chapter table to add chapter {number} to")
    lines.insert(last + 1, row)
    path.write_text("\n".join(lines) + "\n")


def _add_to_toc(path: Path, stem: str) -> None:
    """Add ``notebooks/<stem>`` to the toc's Chapters part, and ``book/lecturers/<stem>`` to the
    lecturers' part, in number order."""
    text = path.read_text()
    entry = f"      - file: notebooks/{stem}"
    lines = text.splitlines()
    chapters = [i for i, line in enumerate(lines) if line.startswith("      - file: notebooks/")]
    after = [i for i in chapters if lines[i].split("notebooks/")[1] > stem]
    at = after[0] if after else chapters[-1] + 1
    lines.insert(at, entry)
    # and its lecturer's page (generated by tools/lecturers.py), in the same order
    page = f"          - file: book/lecturers/{stem}"
    pages = [
        i for i, line in enumerate(lines) if line.startswith("          - file: book/lecturers/")
    ]
    if pages:
        later = [i for i in pages if lines[i].split("lecturers/")[1] > stem]
        lines.insert(later[0] if later else pages[-1] + 1, page)
    path.write_text("\n".join(lines) + "\n")


def scaffold(stem: str, package: str, title: str, root: Path = ROOT) -> list[Path]:
    """Write the chapter's files under ``root``; return them. Refuses to overwrite anything."""
    m = NAME.fullmatch(stem)
    if not m:
        raise SystemExit(f"error: the chapter name must look like 07_bpe (NN_topic), got {stem!r}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", package):
        raise SystemExit(f"error: the package must be a Python identifier, got {package!r}")
    number = int(m.group("number"))
    fields = {"number": number, "int_number": number, "package": package, "title": title}
    files = {
        root / "course_lib" / package / "__init__.py": INIT,
        root / "course_lib" / package / "reference.py": REFERENCE,
        root / "course_lib" / package / "accelerated.py": ACCELERATED,
        root / "course_lib" / package / "spec.py": SPEC,
        root / "course_lib" / package / "exercises.py": EXERCISES,
        root / "course_lib" / package / "widget.py": WIDGET,
        root / "tests" / f"test_{package}.py": TEST,
        root / "notebooks" / f"{stem}.py": NOTEBOOK,
    }
    existing = [p for p in files if p.exists()]
    if existing:
        raise SystemExit(f"error: {existing[0].relative_to(root)} exists; nothing was written")
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields))
    # the hidden Colab set-up cell every notebook starts with (tools/publish.py)
    publish.write_py(root / "notebooks" / f"{stem}.py", publish.published(root))
    _insert_row(
        root / "README.md",
        number,
        f"| {number} | {title} | [`{stem}`](notebooks/{stem}.ipynb) | draft |",
    )
    _insert_row(
        root / "book" / "intro.md",
        number,
        f"| {number} | [{title}](../notebooks/{stem}.ipynb) | draft |",
    )
    _add_to_toc(root / "book" / "_toc.yml", stem)
    return list(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="NN_topic, e.g. 07_bpe")
    parser.add_argument("--package", help="the course_lib folder (default: the topic)")
    parser.add_argument("--title", help="the chapter's title (default: from the topic)")
    parser.add_argument("--no-execute", action="store_true", help="do not execute the notebook")
    args = parser.parse_args(argv)
    m = NAME.fullmatch(args.name)
    if not m:
        parser.error(f"the chapter name must look like 07_bpe (NN_topic), got {args.name!r}")
    package = args.package or m.group("topic")
    title = args.title or m.group("topic").replace("_", " ").capitalize()
    for path in scaffold(args.name, package, title):
        print(f"created {path.relative_to(ROOT)}")
    if not args.no_execute:
        from tools.execute_notebooks import execute

        execute(ROOT / "notebooks" / f"{args.name}.py")
        print(f"executed notebooks/{args.name}.ipynb")
    print("next: fill in every TODO, then ./course test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
