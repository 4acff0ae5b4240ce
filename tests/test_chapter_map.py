"""The README's chapter map, the website's intro table and its table of contents agree with the
notebooks that exist: a chapter is 'ready' (or, freshly scaffolded, 'draft') exactly when its
notebook is there and on the website."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


def table_rows(text: str) -> list[tuple[int, list[str]]]:
    """(chapter number, cells) of every row; a chapter split into two notebooks (README, "Split
    chapters") has two rows with the same number."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append((int(cells[0]), cells))
    return rows


def notebook_of(cells: list[str]) -> str:
    """The notebook a row names (README: `` `08_gpt` ``; book/intro.md: ``08_gpt.ipynb``)."""
    found = re.search(r"(\d\d_\w+)(?:`|\.ipynb)", " ".join(cells[1:]))
    assert found, f"the row {cells} names no notebook"
    return found.group(1)


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    return [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def test_the_notes_thirteen_chapters_are_planned_everywhere():
    rows = table_rows((ROOT / "README.md").read_text())
    readme = sorted({number for number, _ in rows})
    assert readme[:13] == list(range(1, 14)), readme  # the notes' topics; more may follow
    assert readme == list(range(1, len(readme) + 1)), f"chapter numbers have a gap: {readme}"
    intro = table_rows((ROOT / "book" / "intro.md").read_text())
    assert [n for n, _ in intro] == [n for n, _ in rows]
    for number, cells in rows:  # a second row of a number is its chapter's part 2
        name = notebook_of(cells)
        assert name.startswith(f"{number:02d}_"), f"README row {number} names {name}"
    names = [notebook_of(cells) for _, cells in rows]
    assert len(set(names)) == len(names), f"a notebook has two rows: {names}"
    for first, second in zip(rows, rows[1:], strict=False):
        if first[0] == second[0]:  # README "Split chapters": part 2 extends part 1's name
            assert notebook_of(second[1]).startswith(notebook_of(first[1]) + "_"), second


def test_ready_means_notebook_and_website_page():
    readme = table_rows((ROOT / "README.md").read_text())
    intro = {
        notebook_of(cells): cells
        for _, cells in table_rows((ROOT / "book" / "intro.md").read_text())
    }
    toc = {f.removeprefix("notebooks/") for f in toc_files() if f.startswith("notebooks/")}
    for number, cells in readme:
        name = notebook_of(cells)
        exists = name in NOTEBOOKS
        assert name in intro, f"book/intro.md has no row for {name}"
        for row, where in ((cells, "README"), (intro[name], "book/intro.md")):
            status = row[-1]
            assert status in ("ready", "draft", "planned"), f"{where} row {number}: {status}"
            assert (status != "planned") == exists, f"{where} row {number} ({name})"
        assert (name in toc) == exists, f"book/_toc.yml and notebooks/{name}.ipynb disagree"
    assert toc <= NOTEBOOKS, f"the toc lists missing notebooks: {sorted(toc - NOTEBOOKS)}"


def test_every_chapter_has_a_lecturers_page_in_the_toc():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "For lecturers")
    pages = [s["file"] for ch in part["chapters"] for s in ch.get("sections", [])]
    assert pages == [f"book/lecturers/{n}" for n in sorted(NOTEBOOKS)]
