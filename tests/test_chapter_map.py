"""The README's chapter map, the website's intro table and its table of contents agree with the
notebooks that exist: a chapter is 'ready' (or, freshly scaffolded, 'draft') exactly when its
notebook is there and on the website."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


def table_rows(text: str) -> dict[int, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows[int(cells[0])] = cells
    return rows


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    return [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def test_the_notes_thirteen_chapters_are_planned_everywhere():
    readme = sorted(table_rows((ROOT / "README.md").read_text()))
    assert readme[:13] == list(range(1, 14)), readme  # the notes' topics; more may follow
    assert readme == list(range(1, len(readme) + 1)), f"chapter numbers have a gap: {readme}"
    assert sorted(table_rows((ROOT / "book" / "intro.md").read_text())) == readme


def test_ready_means_notebook_and_website_page():
    readme = table_rows((ROOT / "README.md").read_text())
    intro = table_rows((ROOT / "book" / "intro.md").read_text())
    toc = {f.removeprefix("notebooks/") for f in toc_files() if f.startswith("notebooks/")}
    for number in sorted(readme):
        name = re.search(r"`(\d\d_\w+)`", readme[number][2]).group(1)
        exists = name in NOTEBOOKS
        for table, where in ((readme, "README"), (intro, "book/intro.md")):
            status = table[number][-1]
            assert status in ("ready", "draft", "planned"), f"{where} row {number}: {status}"
            assert (status != "planned") == exists, f"{where} row {number} ({name})"
        assert (name in toc) == exists, f"book/_toc.yml and notebooks/{name}.ipynb disagree"
    assert toc <= NOTEBOOKS, f"the toc lists missing notebooks: {sorted(toc - NOTEBOOKS)}"


def test_every_chapter_has_a_lecturers_page_in_the_toc():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "For lecturers")
    pages = [s["file"] for ch in part["chapters"] for s in ch.get("sections", [])]
    assert pages == [f"book/lecturers/{n}" for n in sorted(NOTEBOOKS)]
