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
    """The rows of a chapter table whose first cell is a chapter number (a chapter split into
    two notebooks has two rows with its number, README 'Split chapters')."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append(cells)
    return rows


def numbers(rows: list[list[str]]) -> list[int]:
    return sorted({int(r[0]) for r in rows})


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    return [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def test_the_notes_thirteen_chapters_are_planned_everywhere():
    readme = numbers(table_rows((ROOT / "README.md").read_text()))
    assert readme[:13] == list(range(1, 14)), readme  # the notes' topics; more may follow
    assert readme == list(range(1, len(readme) + 1)), f"chapter numbers have a gap: {readme}"
    assert numbers(table_rows((ROOT / "book" / "intro.md").read_text())) == readme


def test_ready_means_notebook_and_website_page():
    readme = table_rows((ROOT / "README.md").read_text())
    intro = table_rows((ROOT / "book" / "intro.md").read_text())
    assert len(readme) == len(intro), "README and book/intro.md list different notebooks"
    toc = {f.removeprefix("notebooks/") for f in toc_files() if f.startswith("notebooks/")}
    for row, intro_row in zip(readme, intro, strict=True):
        number, name = row[0], re.search(r"`(\d\d_\w+)`", row[2]).group(1)
        linked = "](" not in intro_row[1] or f"{name}.ipynb" in intro_row[1]
        assert intro_row[0] == number and linked, (
            f"book/intro.md's row for {name} is not where the README has it"
        )
        exists = name in NOTEBOOKS
        for cells, where in ((row, "README"), (intro_row, "book/intro.md")):
            status = cells[-1]
            assert status in ("ready", "draft", "planned"), f"{where} row {number}: {status}"
            assert (status != "planned") == exists, f"{where} row {number} ({name})"
        assert (name in toc) == exists, f"book/_toc.yml and notebooks/{name}.ipynb disagree"
    assert toc <= NOTEBOOKS, f"the toc lists missing notebooks: {sorted(toc - NOTEBOOKS)}"


def test_every_chapter_has_a_lecturers_page_in_the_toc():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "For lecturers")
    pages = [s["file"] for ch in part["chapters"] for s in ch.get("sections", [])]
    assert pages == [f"book/lecturers/{n}" for n in sorted(NOTEBOOKS)]
