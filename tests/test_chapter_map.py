"""The README's chapter map, the website's intro table and its table of contents agree with the
notebooks that exist: a chapter is 'ready' (or, freshly scaffolded, 'draft') exactly when its
notebook is there and on the website."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


def table_rows(text: str) -> list[list[str]]:
    """The rows of a chapter table whose first cell is a chapter number, in order. A chapter split
    into two notebooks (README, "Split chapters") has a row per notebook, both with its number."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append(cells)
    return rows


def row_notebook(cells: list[str]) -> str:
    """The notebook a row names: `05_x` in the README, (../notebooks/05_x.ipynb) in the intro."""
    found = re.search(r"`(\d\d_\w+)`|notebooks/(\d\d_\w+)\.ipynb", " ".join(cells))
    assert found, f"a chapter row names no notebook: {cells}"
    return found.group(1) or found.group(2)


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    return [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def test_the_notes_thirteen_chapters_are_planned_everywhere():
    readme = table_rows((ROOT / "README.md").read_text())
    numbers = sorted({int(r[0]) for r in readme})
    assert numbers[:13] == list(range(1, 14)), numbers  # the notes' topics; more may follow
    assert numbers == list(range(1, len(numbers) + 1)), f"chapter numbers have a gap: {numbers}"
    intro = table_rows((ROOT / "book" / "intro.md").read_text())
    as_pairs = [(int(r[0]), row_notebook(r)) for r in readme]
    assert as_pairs == [(int(r[0]), row_notebook(r)) for r in intro], "README and intro differ"
    assert as_pairs == sorted(as_pairs), "the chapter map is out of order"
    for number, name in as_pairs:
        assert int(name[:2]) == number, f"row {number} names {name}"


def test_ready_means_notebook_and_website_page():
    readme = table_rows((ROOT / "README.md").read_text())
    intro = {row_notebook(r): r for r in table_rows((ROOT / "book" / "intro.md").read_text())}
    toc = [f.removeprefix("notebooks/") for f in toc_files() if f.startswith("notebooks/")]
    for row in readme:
        name = row_notebook(row)
        exists = name in NOTEBOOKS
        for status, where in ((row[-1], "README"), (intro[name][-1], "book/intro.md")):
            assert status in ("ready", "draft", "planned"), f"{where} row {name}: {status}"
            assert (status != "planned") == exists, f"{where} row {name}"
        assert (name in toc) == exists, f"book/_toc.yml and notebooks/{name}.ipynb disagree"
    assert set(toc) <= NOTEBOOKS, f"the toc lists missing notebooks: {sorted(set(toc) - NOTEBOOKS)}"
    assert toc == sorted(toc), "the toc's chapters are out of order (a part 2 follows its part 1)"
    named = [row_notebook(r) for r in readme]
    assert NOTEBOOKS <= set(named), f"notebooks without a chapter-map row: {NOTEBOOKS - set(named)}"


def test_every_chapter_has_a_lecturers_page_in_the_toc():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "For lecturers")
    pages = [s["file"] for ch in part["chapters"] for s in ch.get("sections", [])]
    assert pages == [f"book/lecturers/{n}" for n in sorted(NOTEBOOKS)]
