"""Every notebook source (.py) and its executed notebook (.ipynb) exist in pairs and agree."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

from tools.handouts import worksheet

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def cells(path: Path) -> list[tuple[str, str, list[str]]]:
    nb = jupytext.read(path)
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


def test_pairs_are_complete():
    assert SOURCES, "no notebooks found"
    assert [p.stem for p in SOURCES] == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_py_and_ipynb_are_in_sync(src):
    assert cells(src) == cells(src.with_suffix(".ipynb")), (
        f"{src.name} and its .ipynb differ: run ./course notebooks {src.stem}"
    )


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_notebook_is_executed_in_order_without_errors(src):
    nb = json.loads(src.with_suffix(".ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "not executed top to bottom in one run"
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"stored error outputs: {[e['ename'] for e in errors]}"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_chapter_structure(src):
    text = src.read_text()
    for heading in ("## Exercises", "## Summary", "## References"):
        assert heading in text, f"{src.name} lacks a '{heading}' section"
    assert text.count("{exercise}") >= 3, "a chapter has at least three exercises"
    assert text.count("{solution-start}") == text.count("{exercise}"), (
        "every exercise needs a solution"
    )
    assert 'tags=["solution"]' in text


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_worksheet_keeps_exercises_and_their_context_and_drops_every_solution(src):
    """Solution code and its {solution-start}/{solution-end} markers are cells tagged solution;
    the worksheet is the title, the set-up cell, the cells tagged worksheet and the exercises."""
    full = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
    nb = worksheet(full)
    text = "\n".join(c.source for c in nb.cells)
    assert "{solution-start}" not in text and "{solution-end}" not in text, (
        "a {solution-start}/{solution-end} marker is not in its own cell tagged solution"
    )
    assert "require=True" not in text, "solution code left in a cell not tagged solution"
    assert text.count("{exercise}") == "\n".join(c.source for c in full.cells).count("{exercise}")
    assert "NotImplementedError" in text and "## Summary" not in text
    assert nb.cells[0].source == full.cells[0].source  # the Colab set-up cell (tools/publish.py)
    assert nb.cells[1].source == full.cells[1].source  # the chapter's title and outcomes
    assert "import" in nb.cells[2].source  # the set-up cell: imports and the checkers
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert len(nb.cells) < len(full.cells) / 2 or len(full.cells) < 40, (
        "a worksheet, not the chapter"
    )


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_solutions_are_folded_in_jupyterlab_too(src):
    nb = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert solutions and all(c.metadata.get("jupyter", {}).get("source_hidden") for c in solutions)


FLOAT64_ON_DEVICE = re.compile(
    r"(torch\.float64|\.double\(\))[^\n#]*(device=(?!dev64|device_for|\"cpu\"|'cpu')|\.to\((?!\"cpu\"|'cpu'|torch\.float))"
)


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_float64_tensors_never_go_to_the_chosen_device(src):
    """Apple MPS has no float64: a float64 tensor made on (or moved to) the course device fails
    there. float64 goes through course_lib.device.device_for (the CPU on MPS)."""
    bad = [
        f"line {i}: {line.strip()}"
        for i, line in enumerate(src.read_text().splitlines(), 1)
        if FLOAT64_ON_DEVICE.search(line)
    ]
    assert not bad, "float64 on the chosen device:\n" + "\n".join(bad)


#: A code cell's comment that is really markdown: a heading (`# ## 3.2 ...`) or display maths
#: (`# $$...`) at the start of a line. A `# %% [markdown]` marker was left out above it, so it
#: neither renders nor reaches the table of contents or the lecturer's plan.
MARKDOWN_IN_CODE = re.compile(r"^# (#{1,4} \S|\s*\$\$)")
#: The start of a Python statement in a markdown line (a `# %%` marker was left out above it, so
#: the code is shown as prose and never runs). A line counts only if it also parses as Python,
#: so prose such as "L = 65,536 tokens ..." or "for example, ..." is never flagged.
CODE_START = re.compile(
    r"^(\w+(\[[^\]]*\])?(\s*,\s*\w+)*\s*[-+*/]?=\s*\S|print\(|import \w|from [\w.]+ import "
    r"|for \w.* in .*:$|while .*:$|if .*:$|def \w+\(|class \w+|assert |return\b|\w+(\.\w+)+\()"
)


def cell_kind_problems(path: Path) -> list[str]:
    """Markdown left inside code cells and code left inside markdown cells, as 'cell N: line'.

    In a markdown cell, fenced blocks (```...```, ~~~...~~~), display maths ($$...$$) and
    indented blocks are left alone: code there is shown on purpose.
    """
    import ast

    problems = []
    for number, cell in enumerate(jupytext.read(path).cells):
        lines = cell.source.splitlines()
        if cell.cell_type == "code":
            problems += [
                f"cell {number} (code) carries markdown in a comment: {line.strip()[:80]}"
                for line in lines
                if MARKDOWN_IN_CODE.match(line)
            ]
            continue
        if cell.cell_type != "markdown":
            continue
        fence = maths = False
        for line in lines:
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                fence = not fence
                continue
            if stripped.startswith("$$") or (maths and stripped.endswith("$$")):
                if not (stripped.endswith("$$") and len(stripped) > 2 and not maths):
                    maths = not maths
                continue
            if fence or maths or line.startswith(("    ", "\t")) or not CODE_START.match(line):
                continue
            try:
                ast.parse(stripped)
            except SyntaxError:
                continue
            problems.append(f"cell {number} (markdown) carries unfenced code: {stripped[:80]}")
    return problems


#: Chapters whose cell-kind fixes are on another branch of issue 43 (remove each when it lands).
CELL_KIND_PENDING: set[str] = set()


@pytest.mark.parametrize(
    "src",
    [
        pytest.param(
            p,
            marks=pytest.mark.xfail(p.stem in CELL_KIND_PENDING, reason="issue 43", strict=True),
        )
        for p in SOURCES
    ],
    ids=lambda p: p.stem,
)
def test_every_cell_is_the_kind_it_should_be(src):
    """Prose in markdown cells, code in code cells (REVIEW.md, 'Cells'): a heading or display
    maths inside a code cell's comments is missing from the page, the table of contents and the
    lecturer's plan; code inside a markdown cell never runs."""
    problems = cell_kind_problems(src)
    assert not problems, (
        f"{src.name}: a '# %% [markdown]' or '# %%' marker is missing:\n" + "\n".join(problems)
    )


#: Chapters that still print solution commentary after {solution-end} (remove each when fixed).
AFTER_SOLUTION_PENDING: set[str] = set()


@pytest.mark.parametrize(
    "src",
    [
        pytest.param(
            p,
            marks=pytest.mark.xfail(
                p.stem in AFTER_SOLUTION_PENDING, reason="issue 43", strict=True
            ),
        )
        for p in SOURCES
    ],
    ids=lambda p: p.stem,
)
def test_nothing_follows_a_solution_in_its_cell(src):
    """Text after ```{solution-end}``` in the same cell is rendered outside the folded dropdown on
    the website (in Jupyter the cell is hidden, so nobody sees the leak there): commentary on a
    solution belongs before the marker, inside the fold."""
    leaks = []
    for number, cell in enumerate(jupytext.read(src).cells):
        if "{solution-end}" in cell.source:
            tail = cell.source.split("{solution-end}", 1)[1].strip().strip("`").strip()
            if tail:
                leaks.append(f"cell {number}: {tail[:80]}")
    assert not leaks, f"{src.name}: text after {{solution-end}}:\n" + "\n".join(leaks)


def test_the_cell_kind_check_flags_what_it_should_and_nothing_else(tmp_path):
    """The check itself, on a made-up source: each planted mistake is found, and the legitimate
    look-alikes (prose with '=', fenced and indented code, maths, comments in code) are not."""
    src = tmp_path / "99_probe.py"
    src.write_text(
        "# %% [markdown]\n"
        "# # 99. Probe\n"
        "#\n"
        "# For a sequence of L = 65,536 tokens the matrix takes 16 GiB, and\n"
        "# for example, the sum runs over i = 1, ..., n.\n"
        "#\n"
        "# $$\n"
        "# x = y + 1\n"
        "# $$\n"
        "#\n"
        "# ```python\n"
        "# weights = softmax(scores)\n"
        "# ```\n"
        "#\n"
        "#     total = sum(counts)\n"
        "\n"
        "# %%\n"
        "x = 1  # a comment with = and a #hash\n"
        "# the next step computes ## of them, $x$ inline\n"
        "print(x)\n"
        "\n"
        "# %% [markdown]\n"
        "# The page's version builds it:\n"
        "values = compute(3)\n"
        "print(values)\n"
        "\n"
        "# %%\n"
        "y = 2\n"
        "#\n"
        "# ## 99.2 A section that lost its marker (core, 5 min)\n"
        "#\n"
        "# $$C(s, y) = 1$$\n"
    )
    problems = cell_kind_problems(src)
    assert len(problems) == 4, problems
    assert sum("unfenced code" in p for p in problems) == 2  # values = ..., print(values)
    assert sum("markdown in a comment" in p for p in problems) == 2  # the heading and the $$


def readme_status() -> dict[str, str]:
    """The README chapter map's status of each notebook (ready, draft or planned)."""
    rows = re.findall(
        r"^\| \d+ \| [^|]+\| \[?`(\d\d_\w+)`[^|]*\| (\w+) \|$", README.read_text(), re.M
    )
    return dict(rows)


README = ROOT / "README.md"
READY = [src for src in SOURCES if readme_status().get(src.stem) == "ready"]
SECTION = re.compile(r"^# ## (\d+)\.(\d+) (.*)$", re.M)
MINUTES = re.compile(r"\((core|optional), (\d+) min\)$")


def test_the_chapter_map_marks_chapters_ready():
    assert len(READY) >= 8, f"the README's chapter map parsed wrongly: {readme_status()}"


@pytest.mark.parametrize("src", READY, ids=lambda p: p.stem)
def test_ready_chapter_follows_the_pattern(src):
    """README, 'The chapter pattern': minutes on every numbered section, a core path that adds
    up, exercises of four kinds, the testing appendix last, and no TODO left."""
    text = src.read_text()
    assert "TODO" not in text, "a ready chapter has no TODO left"
    sections = SECTION.findall(text)
    assert sections, "no numbered sections"
    minutes = {"core": 0, "optional": 0}
    for number, sub, title in sections:
        assert int(number) == int(src.stem[:2]), f"section {number}.{sub} in chapter {src.stem}"
        kind = MINUTES.search(title)
        assert kind, (
            f"section {number}.{sub} '{title}' does not say (core, N min) or (optional, N min)"
        )
        minutes[kind[1]] += int(kind[2])
    stated = re.search(
        r"\*\*Core path\*\*:? about (\d+) minutes.*?optional[\s#]+sections[\s#]+add[\s#]+about[\s#]+(\d+)",
        text,
        re.S,
    )
    assert stated, "the opening states the core path and the optional minutes"
    core, optional = int(stated[1]), int(stated[2])
    assert abs(core - minutes["core"]) <= 3, f"core path {core} min, core sections {minutes}"
    assert abs(optional - minutes["optional"]) <= 5, f"optional {optional} min, sections {minutes}"
    assert minutes["core"] <= 60, "a 50-minute core path, give or take"
    # every section's minutes from the one rate of tools/minutes.py (README, 'The chapter pattern')
    from tools import minutes as rate

    estimated = rate.sections(src)
    off = [
        f"{s.number} '{s.title}': stated {s.stated} min, the rate gives {s.estimate}"
        for s in estimated
        if not s.within
    ]
    assert not off, "minutes off the course's rate (python -m tools.minutes):\n" + "\n".join(off)
    core_estimate = sum(s.estimate for s in estimated if s.kind == "core")
    assert core_estimate <= 60, f"the core path takes {core_estimate} min at the course's rate"
    headings = re.findall(r"^# ## (.*)$", text, re.M)
    assert headings[-1] == "How this chapter is tested", "the testing appendix comes last"
    assert "check_prediction" in text, "a predict-then-check exercise"
    assert re.search(r"stretch", text, re.I), "a stretch problem"


@pytest.mark.parametrize("src", READY, ids=lambda p: p.stem)
def test_ready_chapter_ends_with_its_quiz(src):
    """The lesson ends with the chapter's own quiz (issue 44; README, 'The chapter pattern'):
    its last code cell before the testing appendix is ``quiz.show("NN_topic")`` with its own
    import (it runs alone), under ``## Quiz (optional, N min)`` with the rate's minutes
    (tools/minutes.py), and only the references follow it; the executed notebook stores the
    rendered quiz (the website puts a copy that responds in its place: tools/chapter_quizzes.py)."""
    from course_lib.quiz import quiz_called_in
    from tools import minutes as rate

    # the executed notebook (its cells are the source's: test_py_and_ipynb_are_in_sync)
    cells = nbformat.read(src.with_suffix(".ipynb"), as_version=4).cells
    appendix = next(  # the cell that opens the testing appendix (it may hold the references)
        i
        for i, c in enumerate(cells)
        if c.cell_type == "markdown"
        and re.search(r"^## How this chapter is tested", c.source, re.M)
    )
    quizzes = [i for i, c in enumerate(cells) if c.cell_type == "code" and quiz_called_in(c.source)]
    assert len(quizzes) == 1, f"{src.stem}: {len(quizzes)} quiz cells, want one"
    at = quizzes[0]
    code = [i for i, c in enumerate(cells[:appendix]) if c.cell_type == "code"]
    assert code[-1] == at, f"{src.stem}: the quiz is not the lesson's last code cell"
    assert cells[at].source.strip() == f'from course_lib import quiz\n\nquiz.show("{src.stem}")'
    heading = re.fullmatch(r"## Quiz \(optional, (\d+) min\)", cells[at - 1].source.split("\n")[0])
    assert heading, f"{src.stem}: the quiz cell follows {cells[at - 1].source[:40]!r}"
    stated, estimate = int(heading[1]), rate.quiz_minutes(src.stem)
    slack = max(rate.MIN_SLACK, math.ceil(rate.TOLERANCE * estimate))
    assert abs(stated - estimate) <= slack, f"quiz: stated {stated} min, the rate gives {estimate}"
    follow = cells[at + 1 : appendix + 1]
    assert follow and follow[0].source.startswith("## References"), "the references follow"
    assert all(c.cell_type == "markdown" for c in follow), "only the references follow the quiz"
    data = [o.get("data", {}) for o in cells[at].get("outputs", [])]
    assert any("application/vnd.jupyter.widget-view+json" in d for d in data), (
        f"{src.stem}: the quiz cell stores no rendered quiz: run ./course notebooks {src.stem}"
    )
    assert ["".join(d.get("text/plain", "")) for d in data] == [f"Quiz('{src.stem}')"]
