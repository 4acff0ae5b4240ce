"""Slides from the chapters: a reveal.js deck per chapter, built offline into the website.

    python -m tools.slides                     # every chapter, into book/_web_assets/site/slides/
    python -m tools.slides 07_bpe --out /tmp/d # one chapter, elsewhere

A lecturer presents from the same notebook the learners read. The slide structure is the
standard Jupyter one (``metadata.slideshow.slide_type`` of each cell: what RISE shows live in
JupyterLab and what nbconvert turns into a deck). A chapter may set it on any cell in its
jupytext source (``# %% [markdown] slideshow={"slide_type": "slide"}``); every cell without it
gets one from :func:`slide_type`, so a chapter needs no slide markup to be presentable:

* a markdown cell with a ``#`` or ``##`` heading starts a slide, one with a ``###`` heading a
  sub-slide (reveal.js's vertical slides), and any other markdown cell after a code cell a
  sub-slide (one idea per slide);
* code cells and the prose right after a heading stay on the current slide;
* solutions, the ``{solution-start}``/``{solution-end}`` markers, the quiz (its ``## Quiz``
  cell and the code cell that shows it: a stored widget would not respond in a deck; learners
  take it in the notebook or on its website page) and the appendix
  (``## How this chapter is tested``) are skipped.

The MyST markup the website renders (citations, exercise directives) is written as plain
markdown for the deck: ``{cite}`key``` becomes "(Author, year)" from ``book/references.bib``.
reveal.js, MathJax, require.js and the widget embed script come from the website's pinned,
hash-checked copies in ``_vendor/`` (tools/build_book.py): a deck requests nothing from
another host.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BIB = ROOT / "book" / "references.bib"
TEMPLATE_DIR = Path(__file__).resolve().parent / "slides_template"
APPENDIX = "## How this chapter is tested"
QUIZ = "## Quiz"
SKIP_TAGS = {"solution", "remove-cell", "slides-skip"}
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}


# -- the slide structure -----------------------------------------------------------------------


def _first_heading(source: str) -> int:
    """The level of the highest heading in a markdown cell (0 if it has none).

    A chapter may end one section's prose and start the next section in the same cell: the
    cell then opens the new slide (splitting such cells keeps the prose with its section).
    """
    levels = [len(m.group(1)) for m in re.finditer(r"^(#{1,6})\s", source, re.M)]
    return min(levels) if levels else 0


def slide_type(cell: dict, previous: dict | None, in_appendix: bool) -> str:
    """The slide type of a cell without one: see the module docstring.

    >>> md = lambda s: {"cell_type": "markdown", "source": s, "metadata": {}}
    >>> code = {"cell_type": "code", "source": "x = 1", "metadata": {}}
    >>> slide_type(md("## 1.2 Softmax (core, 5 min)"), code, False)
    'slide'
    >>> slide_type(md("### A detail"), code, False), slide_type(md("Notice..."), code, False)
    ('subslide', 'subslide')
    >>> slide_type(md("Notice..."), md("## Title"), False), slide_type(code, None, False)
    ('-', '-')
    >>> slide_type(md("```{solution-end}\\n```"), code, False), slide_type(md("x"), code, True)
    ('skip', 'skip')
    >>> quiz = {"cell_type": "code", "source": 'quiz.show("02_softmax")', "metadata": {}}
    >>> slide_type(md("## Quiz (optional, 21 min)"), code, False), slide_type(quiz, None, False)
    ('skip', 'skip')
    """
    from course_lib.quiz import quiz_called_in

    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    tags = set(cell.get("metadata", {}).get("tags", []))
    if in_appendix or tags & SKIP_TAGS:
        return "skip"
    if cell["cell_type"] == "markdown" and source.lstrip().startswith(QUIZ):
        return "skip"
    if cell["cell_type"] == "code" and quiz_called_in(source):
        return "skip"
    if cell["cell_type"] == "markdown":
        if re.match(r"\s*(`{3,}|:{3,})\{solution-(start|end)\}", source):
            return "skip"
        level = _first_heading(source)
        if level in (1, 2):
            return "slide"
        if level >= 3 or (previous is not None and previous["cell_type"] == "code"):
            return "subslide"
        return "-"
    if cell["cell_type"] == "raw":
        return "skip"
    return "-"


def with_slides(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose every cell has ``metadata.slideshow.slide_type``.

    A type the chapter sets itself is kept; the others come from :func:`slide_type`.
    """
    out = copy.deepcopy(nb)
    previous, in_appendix = None, False
    for cell in out.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith(APPENDIX):
            in_appendix = True
        show = cell.metadata.setdefault("slideshow", {})
        given = show.get("slide_type")
        if given is not None and given not in SLIDE_TYPES:
            raise ValueError(f"slide_type {given!r} is not one of {sorted(SLIDE_TYPES)}")
        if given is None:
            show["slide_type"] = slide_type(cell, previous, in_appendix)
        if show["slide_type"] != "skip":
            previous = cell
    return out


def count_slides(nb: nbformat.NotebookNode) -> dict[str, int]:
    """How many slides (horizontal) and sub-slides (vertical) a structured notebook makes."""
    types = [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells]
    return {"slides": types.count("slide"), "subslides": types.count("subslide")}


# -- MyST to plain markdown ----------------------------------------------------------------------


def read_bib(path: Path = BIB) -> dict[str, str]:
    """``{key: "Author, year"}`` (or "A and B", "A et al.") from a BibTeX file.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "r.bib"
    >>> _ = p.write_text("@misc{a1,\\n  author = {Strabel, Greg},\\n  year = {2023}\\n}\\n"
    ...                  "@book{b2,\\n  author = {Vaswani, A. and Shazeer, N. and Parmar, N.},\\n"
    ...                  "  year = {2017}\\n}")
    >>> read_bib(p)
    {'a1': 'Strabel, 2023', 'b2': 'Vaswani et al., 2017'}
    """
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    out = {}
    for m in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", text, re.S):
        key, body = m.group(1), m.group(2)
        author = re.search(r"author\s*=\s*\{(.*?)\},?\s*\n", body, re.S)
        year = re.search(r"year\s*=\s*\{?(\d{4})", body)
        names = [
            a.split(",")[0].strip(" {}") for a in (author.group(1) if author else "").split(" and ")
        ]
        names = [re.sub(r"[{}\\]", "", n) for n in names if n]
        who = (
            "?"
            if not names
            else names[0]
            if len(names) == 1
            else f"{names[0]} and {names[1]}"
            if len(names) == 2
            else f"{names[0]} et al."
        )
        out[key] = f"{who}, {year.group(1) if year else 'n.d.'}"
    return out


def plain_markdown(source: str, bib: dict[str, str]) -> str:
    """MyST roles and directives of the chapters written as plain markdown for a deck.

    >>> bib = {"strabel2023transformers": "Strabel, 2023", "may2024transformer": "May, 2024"}
    >>> plain_markdown("the notes {cite}`strabel2023transformers,may2024transformer`.", bib)
    'the notes (Strabel, 2023; May, 2024).'
    >>> print(plain_markdown("```{exercise} Count the pairs\\n:label: ex-1\\n\\nWrite it.\\n```", bib))
    **Exercise: Count the pairs**
    <BLANKLINE>
    Write it.
    """

    def cite(m: re.Match) -> str:
        keys = [k.strip() for k in m.group(2).split(",")]
        return "(" + "; ".join(bib.get(k, k) for k in keys) + ")"

    source = re.sub(r"\{cite(:[a-z]+)?\}`([^`]+)`", cite, source)

    def directive(m: re.Match) -> str:
        name, title, body = m.group(2), (m.group(3) or "").strip(), m.group(4)
        body = re.sub(r"^:[\w-]+:.*\n", "", body, flags=re.M).strip("\n")
        head = f"**{name.capitalize()}: {title}**" if title else f"**{name.capitalize()}**"
        return f"{head}\n\n{body}" if body else head

    source = re.sub(
        r"^(`{3,}|:{3,})\{(exercise|note|tip|warning|important|admonition|hint)\}([^\n]*)\n(.*?)^\1[ \t]*$",
        directive,
        source,
        flags=re.M | re.S,
    )
    source = re.sub(
        r"\{(ref|numref|doc|eq)\}`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`",
        lambda m: m.group(2) or m.group(3),
        source,
    )
    return source


def deck_notebook(nb: nbformat.NotebookNode, bib: dict[str, str]) -> nbformat.NotebookNode:
    """The notebook the deck is made of: slide types set, skipped cells dropped, MyST plain,
    and long slides split so that each fits the frame (:func:`split_long`)."""
    out = with_slides(nb)
    out.cells = [c for c in out.cells if c.metadata["slideshow"]["slide_type"] != "skip"]
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = plain_markdown(cell.source, bib)
    return split_long(out)


# -- slides that fit the frame ---------------------------------------------------------------
# Heights in lines of body text: a 1280 x 720 frame shows about FRAME lines of the deck's text
# (measured in Chromium: tests/test_lab_slides.py checks every slide of every deck), and a slide
# may be scaled down to MIN_SCALE to fit; beyond that it is split.
FRAME = 17
MIN_SCALE = 0.6
BUDGET = FRAME / MIN_SCALE * 0.85  # a margin for the estimate's error
CHARS_PER_LINE = 72
OUTPUT_ONLY = (
    "deck-output-only"  # a cell whose input the deck hides (its code is on the slide before)
)


def _text_lines(text: str, chars: int = CHARS_PER_LINE) -> float:
    return sum(max(1, -(-len(line) // chars)) for line in text.splitlines())


def cell_lines(cell: dict) -> float:
    r"""An estimate of a cell's height on a slide, in lines of body text.

    >>> cell_lines({"cell_type": "markdown", "source": "## A heading\n\nOne line."})
    3.5
    >>> cell_lines({"cell_type": "code", "source": "x = 1", "outputs": []})
    1.6
    """
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    if cell["cell_type"] == "markdown":
        lines = 0.0
        for line in source.splitlines():
            if not line.strip():
                lines += 0.5
            elif line.lstrip().startswith("#"):
                lines += 2.0
            elif line.strip() == "$$":
                lines += 0.75
            else:
                lines += _text_lines(line)
        return lines
    tags = cell.get("metadata", {}).get("tags", [])
    lines = 0.0 if OUTPUT_ONLY in tags else 0.8 * len(source.splitlines()) + 0.8  # code is smaller
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if out.get("output_type") == "stream":
            text = out.get("text", "")
            lines += 0.8 * _text_lines(text if isinstance(text, str) else "".join(text), 100)
        elif "image/png" in data or "image/svg+xml" in data:
            lines += 13.0
        elif "application/vnd.jupyter.widget-view+json" in data:
            lines += 16.0  # a widget's controls and output: a slide of its own
        elif "text/html" in data:
            lines += 10.0
        elif "text/plain" in data:
            text = data["text/plain"]
            lines += 0.8 * _text_lines(text if isinstance(text, str) else "".join(text), 100)
        elif out.get("output_type") == "error":
            lines += 6.0
    return lines


def markdown_blocks(source: str) -> list[str]:
    r"""A markdown cell cut where a slide may break: between paragraphs and between the items
    of a list, never inside a fenced block or a display equation.

    >>> markdown_blocks("Intro.\n\n- one\n- two\n\n$$\nx\n\ny\n$$")
    ['Intro.', '- one', '- two', '$$\nx\n\ny\n$$']
    """
    blocks: list[list[str]] = [[]]
    fence = None
    for line in source.splitlines():
        stripped = line.strip()
        if fence is None:
            if stripped.startswith(("```", "~~~", ":::")):
                fence = stripped[:3]
            elif stripped == "$$":
                fence = "$$"
            if fence is None and not stripped:
                blocks.append([])
                continue
            if fence is None and re.match(r"([-*+]|\d+\.)\s", line) and blocks[-1]:
                blocks.append([])
        elif stripped.startswith(fence) and fence != "$$" or (fence == "$$" and stripped == "$$"):
            fence = None
            blocks[-1].append(line)
            continue
        blocks[-1].append(line)
    return ["\n".join(b) for b in blocks if any(x.strip() for x in b)]


def split_long(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of a deck notebook in which no slide is estimated taller than BUDGET lines.

    A long markdown cell is cut into its blocks (:func:`markdown_blocks`); then, slide by slide,
    a cell that would overflow the running total starts a sub-slide of its own. A single cell
    taller than the budget stays whole (the deck scales it down).
    """
    cells: list = []
    for cell in nb.cells:
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if cell.cell_type == "markdown" and cell_lines(cell) > BUDGET / 2:
            for i, block in enumerate(markdown_blocks(cell.source)):
                part = nbformat.v4.new_markdown_cell(block)
                part.metadata["slideshow"] = {"slide_type": kind if i == 0 else "-"}
                cells.append(part)
        elif cell.cell_type == "code" and cell_lines(cell) > BUDGET and cell.get("outputs"):
            # the code on one slide, what it shows on the next (its input hidden there)
            code = copy.deepcopy(cell)
            code.outputs = []
            shown = nbformat.v4.new_code_cell(cell.source, outputs=copy.deepcopy(cell.outputs))
            shown.execution_count = cell.get("execution_count")
            shown.metadata["tags"] = [OUTPUT_ONLY]
            shown.metadata["slideshow"] = {"slide_type": "-"}
            cells += [code, shown]
        else:
            cells.append(cell)
    used = 0.0
    for cell in cells:
        show = cell.metadata.setdefault("slideshow", {})
        height = cell_lines(cell)
        if show.get("slide_type") in ("slide", "subslide"):
            used = height
        elif show.get("slide_type") in ("notes", "skip"):
            continue
        elif used + height > BUDGET and used > 0:
            show["slide_type"] = "subslide"
            used = height
        else:
            used += height
    out = copy.deepcopy(nb)
    out.cells = cells
    return out


# -- the deck ------------------------------------------------------------------------------------


def favicon_uri() -> str:
    """The website's icon (book/favicon.svg) as a data: URI, for the decks' <head>: a deck
    names its icon wherever it is opened, so the browser does not ask for /favicon.ico."""
    from urllib.parse import quote

    svg = (ROOT / "book" / "favicon.svg").read_text(encoding="utf-8")
    return "data:image/svg+xml," + quote(" ".join(svg.split()), safe=" =:/',;")


def build_deck(src: Path, out_dir: Path, vendor: str = "../_vendor") -> tuple[Path, dict[str, int]]:
    """Write ``out_dir/<chapter>.slides.html``; ``vendor`` is the path from there to _vendor/."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    nb = nbformat.read(src, as_version=4)
    deck = deck_notebook(nb, read_bib())
    config = Config(
        {"TagRemovePreprocessor": {"remove_input_tags": {OUTPUT_ONLY}, "enabled": True}}
    )
    exporter = SlidesExporter(
        config=config,
        extra_template_basedirs=[str(TEMPLATE_DIR)],
        template_name="course_reveal",
        reveal_url_prefix=f"{vendor}/reveal.js",
        reveal_theme="white",
        reveal_transition="none",
        reveal_number="c/t",
        reveal_scroll=False,
        require_js_url=f"{vendor}/requirejs/require.js",
        mathjax_url=f"{vendor}/mathjax/es5/tex-mml-chtml.js",
        widget_renderer_url=f"{vendor}/html-manager/dist/embed-amd.js",
    )
    resources = {"metadata": {"name": src.stem}, "vendor": vendor, "favicon": favicon_uri()}
    body, _ = exporter.from_notebook_node(deck, resources=resources)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{src.stem}.slides.html"
    path.write_text(body, encoding="utf-8")
    return path, count_slides(deck)


def annotate(src: Path) -> int:
    """Write the derived slide types into a jupytext source (``notebooks/NN_topic.py``).

    Only cells without a type get one, and only where it is not the default ``-``, so the
    source gains a ``slideshow=...`` header on its headings, new ideas and skipped cells and
    nothing else (cell sources are unchanged). RISE in JupyterLab reads these types; the
    ``.ipynb`` picks them up at the next ``./course notebooks``. Returns the cells annotated.
    """
    import jupytext

    nb = jupytext.read(src)
    derived = with_slides(nb)
    changed = 0
    for cell, done in zip(nb.cells, derived.cells, strict=True):
        kind = done.metadata["slideshow"]["slide_type"]
        if "slide_type" not in cell.metadata.get("slideshow", {}) and kind != "-":
            cell.metadata["slideshow"] = {"slide_type": kind}
            changed += 1
    jupytext.write(nb, src, fmt="py:percent")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapters such as 07_bpe (default: all)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "book" / "_web_assets" / "site" / "slides"
    )
    parser.add_argument(
        "--annotate",
        action="store_true",
        help="write the derived slide types into notebooks/NN_topic.py instead (see annotate)",
    )
    args = parser.parse_args(argv)
    wanted = {Path(n).name.removesuffix(".ipynb").removesuffix(".py") for n in args.names}
    sources = [
        p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if not wanted or p.stem in wanted
    ]
    if wanted - {p.stem for p in sources}:
        sys.exit(f"error: no chapter {sorted(wanted - {p.stem for p in sources})}")
    if args.annotate:
        for src in sources:
            n = annotate(src.with_suffix(".py"))
            print(f"{src.with_suffix('.py').relative_to(ROOT)}: {n} cells given a slide type")
        return 0
    for src in sources:
        path, n = build_deck(src, args.out)
        print(
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
            f"{n['slides']} slides, {n['subslides']} sub-slides"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
