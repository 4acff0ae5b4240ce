"""Slides: the slide structure of every chapter, its reveal.js deck, and RISE in JupyterLab.

    pytest tests/test_lab_slides.py -m "not browser"   # structure and markup only (fast)
    pytest tests/test_lab_slides.py -m browser         # open every deck in headless Chromium

The decks are built (tools/slides.py) into a temporary folder next to a link to the website's
pinned ``_vendor/`` assets and served from 127.0.0.1: each one loads, has the slides its
notebook's structure says, typesets its math, moves through to the last slide, and requests
nothing from another host. Screenshots: ``tests/artifacts/deck-<chapter>.png``.
"""

from __future__ import annotations

import functools
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from tools import slides

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
LOCAL_HOSTS = {"127.0.0.1"}


def chapters() -> list[str]:
    return [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]


def read(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)


# -- structure (no browser) --------------------------------------------------------------------


@pytest.mark.parametrize("chapter", chapters())
def test_every_cell_gets_a_slide_type(chapter: str) -> None:
    nb = slides.with_slides(read(chapter))
    types = [c.metadata["slideshow"]["slide_type"] for c in nb.cells]
    assert set(types) <= slides.SLIDE_TYPES
    assert types[0] == "slide", f"{chapter}: the title cell must open the deck"
    for cell, kind in zip(nb.cells, types, strict=True):
        if "solution" in cell.metadata.get("tags", []):
            assert kind == "skip", f"{chapter}: a solution would be shown on a slide"


@pytest.mark.parametrize("chapter", chapters())
def test_deck_markdown_has_no_myst_left(chapter: str) -> None:
    deck = slides.deck_notebook(read(chapter), slides.read_bib())
    text = "\n".join(c.source for c in deck.cells if c.cell_type == "markdown")
    raw = re.findall(r"\{(?:cite|exercise|solution-start|solution-end)[^}]*\}", text)
    assert not raw, f"{chapter}: MyST markup would show raw on the slides: {raw[:3]}"


def test_citations_name_author_and_year() -> None:
    bib = slides.read_bib()
    assert bib["strabel2023transformers"] == "Strabel, 2023"
    assert bib["vaswani2017attention"] == "Vaswani et al., 2017"


def test_a_chapter_can_set_its_own_slide_types() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_markdown_cell("A note", metadata={"slideshow": {"slide_type": "notes"}}),
        nbformat.v4.new_code_cell("x = 1", metadata={"slideshow": {"slide_type": "fragment"}}),
    ]
    types = [c.metadata["slideshow"]["slide_type"] for c in slides.with_slides(nb).cells]
    assert types == ["slide", "notes", "fragment"]
    nb.cells[1].metadata["slideshow"]["slide_type"] = "page"
    with pytest.raises(ValueError, match="slide_type 'page'"):
        slides.with_slides(nb)


# -- the decks in a browser ----------------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """Every chapter's deck in ``<tmp>/slides/``, with ``<tmp>/_vendor`` the website's assets."""
    from tools.build_book import VENDOR, prepare_assets

    prepare_assets()  # downloads once (pinned, hash-checked), then offline
    site = tmp_path_factory.mktemp("decks")
    (site / "_vendor").symlink_to(VENDOR, target_is_directory=True)
    counts = {}
    for chapter in chapters():
        _, counts[chapter] = slides.build_deck(NOTEBOOKS / f"{chapter}.ipynb", site / "slides")
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/slides/", counts
    httpd.shutdown()
    httpd.server_close()


# [[h, v], scale, first words] of every slide: each is shown, the deck fits it, the scale is read
JS_FIT_EVERY_SLIDE = """() => {
  const out = [];
  document.querySelectorAll('.reveal .slides > section').forEach((stack, h) => {
    const n = Math.max(stack.querySelectorAll(':scope > section').length, 1);
    for (let v = 0; v < n; v++) {
      CourseDeck.slide(h, v);
      CourseDeckFit();
      const s = CourseDeck.getCurrentSlide();
      const rect = s.getBoundingClientRect(), frame = document.querySelector('.reveal');
      const spill = rect.bottom - frame.getBoundingClientRect().bottom;
      const scale = spill > 1 ? 0 : +s.dataset.fitScale;
      out.push([[h, v], scale, s.innerText.slice(0, 50).replace(/\\s+/g, ' ')]);
    }
  });
  return out;
}"""


@pytest.mark.browser
@pytest.mark.parametrize("chapter", chapters())
def test_deck_in_browser(browser, decks, chapter: str) -> None:
    base, counts = decks
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = context.new_page()
    errors, requests, blocked = [], [], []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    pg.on("request", lambda r: requests.append(r.url))

    def route(r) -> None:
        host = urlsplit(r.request.url).hostname
        if host in LOCAL_HOSTS or urlsplit(r.request.url).scheme in {"data", "blob"}:
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    pg.route("**/*", route)
    try:
        pg.goto(base + f"{chapter}.slides.html", wait_until="load", timeout=60_000)
        pg.wait_for_function("() => window.CourseDeck && CourseDeck.isReady()", timeout=60_000)
        total = pg.evaluate("() => CourseDeck.getTotalSlides()")
        want = counts[chapter]["slides"] + counts[chapter]["subslides"]
        assert total == want, f"{chapter}: {total} slides in the deck, the structure says {want}"
        shown = slides.deck_notebook(read(chapter), slides.read_bib())
        has_math = bool(
            re.search(
                r"\$[^$\s][^$]*\$",
                "\n".join(c.source for c in shown.cells if c.cell_type == "markdown"),
            )
        )
        if has_math:
            pg.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000
            )
            pg.evaluate("() => MathJax.startup.promise")
            assert pg.locator("mjx-container").count() > 0, f"{chapter}: no math typeset"
            assert pg.locator("mjx-merror").count() == 0, f"{chapter}: TeX errors in the deck"
        # every slide, as presented in a 1280 x 720 frame: nothing may spill off it, and the
        # deck may scale a slide down to fit only so far (tools/slides.py splits the rest)
        scales = pg.evaluate(JS_FIT_EVERY_SLIDE)
        assert len(scales) == total, f"{chapter}: stepped through {len(scales)} of {total} slides"
        small = [(at, s, text) for at, s, text in scales if s < slides.MIN_SCALE]
        assert not small, (
            f"{chapter}: slides that fit the frame only below scale {slides.MIN_SCALE}: {small[:3]}"
        )
        pg.evaluate("() => CourseDeck.slide(CourseDeck.getHorizontalSlides().length - 1, 1e3)")
        assert pg.evaluate("() => CourseDeck.isLastSlide()"), f"{chapter}: did not reach the end"
        pg.evaluate("() => CourseDeck.slide(0, 0)")
        pg.wait_for_timeout(300)
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"deck-{chapter}.png"))
    finally:
        context.close()
    assert not errors, f"{chapter}: console errors in the deck: {errors[:5]}"
    assert not blocked, f"{chapter}: the deck asked other hosts for: {blocked[:5]}"
    remote = [u for u in requests if urlsplit(u).hostname not in LOCAL_HOSTS]
    assert not [u for u in remote if not u.startswith(("data:", "blob:"))]


# -- RISE: the live slideshow inside JupyterLab ------------------------------------------------

RISE_CHAPTER = "02_softmax"  # math, figures and a widget; one chapter keeps the test short

JS_LEAVES = """() => [...document.querySelectorAll('.reveal .slides section')]
    .filter(s => !s.querySelector('section'))"""


@pytest.mark.browser
@pytest.mark.xfail(
    reason="jupyterlab-rise 0.43.1's slideshow page (its own app, built against JupyterLab 4.3) "
    "cannot load jupyterlab-myst 2.7.0 or the widget manager 5.0.16 (shared modules "
    "@jupyterlab/markdownviewer and @jupyterlab/console missing: console errors, MyST raw, "
    "widgets not drawn); its default theme fetches fonts.googleapis.com, and theme 'white' "
    "set in tools/lab.py TEST_SETTINGS fails to load its CSS. Slides, math and navigation work.",
    strict=False,
)
def test_rise_slideshow_in_jupyterlab(browser, tmp_path) -> None:
    """jupyterlab-rise presents a chapter (slide types as tools/slides.py sets them) in Lab."""
    from tools.lab import TEST_SETTINGS, LabServer

    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    nb = slides.with_slides(read(RISE_CHAPTER))
    nbformat.write(nb, root / "notebooks" / f"{RISE_CHAPTER}.ipynb")
    n = slides.count_slides(nb)
    want = n["slides"] + n["subslides"]
    errors, remote = [], []
    server = LabServer(root, state=tmp_path / "state", settings=TEST_SETTINGS)
    with server:
        context = browser.new_context(viewport={"width": 1280, "height": 720})
        pg = context.new_page()
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))

        def route(r) -> None:
            if urlsplit(r.request.url).hostname in LOCAL_HOSTS or r.request.url.startswith("data:"):
                r.continue_()
            else:
                remote.append(r.request.url)
                r.abort()

        pg.route("**/*", route)
        try:
            pg.goto(f"{server.base}/rise/notebooks/{RISE_CHAPTER}.ipynb?token={server.token}")
            pg.wait_for_function(f"() => ({JS_LEAVES})().length >= {want}", timeout=120_000)
            assert pg.evaluate(f"() => ({JS_LEAVES})().length") == want
            pg.wait_for_selector("mjx-container", state="attached", timeout=60_000)
            assert pg.locator("mjx-merror").count() == 0, "TeX errors in the slideshow"
            pg.wait_for_selector(".reveal .slides section.present", timeout=60_000)
            first = pg.evaluate(
                "() => document.querySelector('.reveal .slides section.present').innerText"
            )
            pg.keyboard.press("ArrowRight")
            pg.wait_for_function(
                "t => document.querySelector('.reveal .slides section.present').innerText !== t",
                arg=first,
                timeout=10_000,
            )
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / f"rise-{RISE_CHAPTER}.png"))
        finally:
            context.close()
    assert not remote, f"the slideshow asked other hosts for: {remote[:5]}"
    # Known: RISE's slideshow page is its own small app (built against JupyterLab 4.3), in
    # which jupyterlab-myst 2.7.0 cannot load (no shared @jupyterlab/markdownviewer there), so
    # markdown shows as plain markdown in the slideshow and the console logs the failure.
    known = re.compile(
        r"Shared module @jupyterlab/markdownviewer doesn't exist|Maximum call stack size exceeded"
    )
    other = [e for e in errors if not known.search(e)]
    assert not other, f"console errors in the RISE slideshow: {other[:5]}"
    if errors:
        pytest.xfail(
            "jupyterlab-rise 0.43.1 cannot load jupyterlab-myst 2.7.0 in its slideshow page "
            f"({len(errors)} console errors; MyST markup shown raw on the slides)"
        )


def test_annotate_writes_slide_types_into_a_source_and_nothing_else(tmp_path) -> None:
    import shutil

    import jupytext

    src = tmp_path / "07_bpe.py"
    shutil.copy(NOTEBOOKS / "07_bpe.py", src)
    before = jupytext.read(src)
    assert slides.annotate(src) > 0
    after = jupytext.read(src)
    assert [c.source for c in after.cells] == [c.source for c in before.cells]
    derived = [c.metadata["slideshow"]["slide_type"] for c in slides.with_slides(before).cells]
    stored = [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in after.cells]
    assert stored == derived
    assert slides.annotate(src) == 0  # a second run changes nothing


def test_long_slides_are_split_at_cell_and_paragraph_boundaries() -> None:
    long_prose = "\n\n".join(f"Paragraph {i}: " + "words " * 60 for i in range(12))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("## A section\n\n" + long_prose),
        nbformat.v4.new_code_cell("x = 1"),
    ]
    deck = slides.deck_notebook(nb, {})
    types = [c.metadata["slideshow"]["slide_type"] for c in deck.cells]
    assert types[0] == "slide" and types.count("subslide") >= 2
    assert "\n\n".join(c.source for c in deck.cells if c.cell_type == "markdown").endswith(
        long_prose.split("\n\n")[-1]
    )
    height = 0.0
    for cell, kind in zip(deck.cells, types, strict=True):
        height = (
            slides.cell_lines(cell)
            if kind in ("slide", "subslide")
            else height + slides.cell_lines(cell)
        )
        assert height <= slides.BUDGET
