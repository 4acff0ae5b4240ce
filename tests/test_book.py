"""The website: a strict offline build, then a real browser on the built pages.

    pytest tests/test_book.py -m book       # build checks (no browser)
    pytest tests/test_book.py -m browser    # headless Chromium on every page of the toc

The build runs once per test run (``python -m tools.build_book --clean``; the ``site`` fixture
of tests/conftest.py, shared with the slide decks' test). The browser tests serve
``book/_build`` from 127.0.0.1 and open the site under the sub-path ``/html/``, so
page-relative asset paths are exercised; one chapter is also opened from ``file://``. Screenshots go to ``tests/artifacts/<page>.png``.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.browser import Visit

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
VENDOR_FILES = (
    "_vendor/mathjax/es5/tex-mml-chtml.js",
    "_vendor/mathjax/es5/input/tex/extensions/ams.js",  # a lazily loaded TeX extension
    "_vendor/mathjax/es5/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff",
    "_vendor/mathjax/es5/ui/menu.js",
    "_vendor/requirejs/require.js",
    "_vendor/widgets-config.js",
    "_vendor/html-manager/dist/embed-amd.js",
)


# -- the table of contents -------------------------------------------------------------------


def toc_files() -> list[str]:
    """Every page of ``book/_toc.yml`` in order, as paths relative to the root, no suffix."""
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    return files


def notebook_pages() -> list[str]:
    return [f for f in toc_files() if f.startswith("notebooks/")]


def browser_pages() -> list[str]:
    """The intro, every chapter and every other page of the toc."""
    return toc_files()


def page_id(page: str) -> str:
    """A unique, readable id: the chapter's name, or the page's path below book/ with dashes
    (book/lecturers/08_gpt -> lecturers-08_gpt, beside the chapter 08_gpt)."""
    if page.startswith("notebooks/"):
        return Path(page).name
    return page.removeprefix("book/").replace("/", "-")


def notebook(page: str) -> dict:
    return json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))


def has_widget_state(page: str) -> bool:
    if not page.startswith("notebooks/"):
        return False
    state = notebook(page).get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})
    return bool(state.get("state"))


# -- the build (the ``site`` fixture is in tests/conftest.py) ---------------------------------


class _Resources(HTMLParser):
    """Collect the URLs a page loads by itself: scripts, styles, icons, images, frames."""

    NOT_LOADED = {"canonical", "alternate", "next", "prev", "index", "search", "author", "help"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "link":
            rels = set((a.get("rel") or "").lower().split())
            if a.get("href") and not rels <= self.NOT_LOADED:
                self.urls.append(a["href"])
        elif tag in {"script", "img", "iframe", "source", "audio", "video", "embed"}:
            if a.get("src"):
                self.urls.append(a["src"])


def is_remote(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme not in {"", "file", "data", "blob"}


@pytest.mark.book
def test_every_toc_entry_has_a_page(site: Path) -> None:
    missing = [f for f in toc_files() if not (site / f"{f}.html").is_file()]
    assert not missing, f"pages listed in book/_toc.yml but not built: {missing}"
    assert (site / "index.html").is_file()


@pytest.mark.book
def test_pages_load_nothing_from_other_hosts(site: Path) -> None:
    offenders = {}
    pages = sorted(p for p in site.rglob("*.html") if "_vendor" not in p.parts)
    assert pages
    for path in pages:
        parser = _Resources()
        parser.feed(path.read_text(encoding="utf-8"))
        remote = [u for u in parser.urls if is_remote(u)]
        if remote:
            offenders[path.relative_to(site).as_posix()] = remote
    assert not offenders, f"pages load scripts or styles from other hosts: {offenders}"


@pytest.mark.book
def test_web_assets_are_served_locally(site: Path) -> None:
    missing = [f for f in VENDOR_FILES if not (site / f).is_file()]
    assert not missing, f"missing from the built site: {missing}"
    assert not (site / "_static" / "_vendor").exists(), "_vendor/ must not live in _static/"
    for page in notebook_pages():
        html = (site / f"{page}.html").read_text(encoding="utf-8")
        assert "_vendor/mathjax/es5/tex-mml-chtml.js" in html, f"{page}: MathJax not local"
        if has_widget_state(page):
            for name in ("requirejs/require.js", "html-manager/dist/embed-amd.js"):
                assert f"../_vendor/{name}" in html, f"{page}: {name} not loaded page-relative"
    # pages without widgets do not pay for the widget scripts
    assert "embed-amd.js" not in (site / "book" / "references.html").read_text(encoding="utf-8")


def unfolded_solution_cells(nb: dict) -> list[int]:
    """Indices of code cells tagged ``solution`` that the website would show unfolded.

    A solution is folded (book/how_to_use.md) when its code cell carries ``hide-input`` (or
    ``hide-cell``/``remove-*``), or when it sits inside a gated ``{solution-start}`` ...
    ``{solution-end}`` block with ``:class: dropdown``.
    """
    folded_tags = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
    start = re.compile(r"^(`{3,}|:{3,})\{solution-start\}.*?^\1\s*$", re.M | re.S)
    end = re.compile(r"^(`{3,}|:{3,})\{solution-end\}", re.M)
    in_dropdown, unfolded = False, []
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            # a cell may close one block and open the next: apply the markers in order
            for m in sorted(
                [*start.finditer(source), *end.finditer(source)], key=lambda m: m.start()
            ):
                in_dropdown = "{solution-start}" in m.group(0) and bool(
                    re.search(r"^:class:.*\bdropdown\b", m.group(0), re.M)
                )
        elif "solution" in tags and not tags & folded_tags and not in_dropdown:
            unfolded.append(i)
    return unfolded


@pytest.mark.book
@pytest.mark.parametrize("page", notebook_pages(), ids=page_id)
def test_solution_code_is_folded(page: str) -> None:
    """Solutions are folded on the website: by a dropdown solution block or ``hide-input``."""
    unfolded = unfolded_solution_cells(notebook(page))
    assert not unfolded, (
        f"{page}: code cells {unfolded} are tagged solution but would show unfolded; add the "
        "hide-input tag or wrap them in a {solution-start} block with :class: dropdown"
    )


# -- the browser ------------------------------------------------------------------------------


def check_page(visit: Visit, page: str, shot: str) -> None:
    """Math typeset, figures shown, widgets rendered, no errors, nothing fetched off-host."""
    pg = visit.page
    try:
        is_chapter = page.startswith("notebooks/")
        n_math = pg.locator(".math").count()
        if is_chapter:
            assert n_math > 0, f"{page}: a chapter without any math?"
        if n_math:
            pg.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000
            )
            pg.evaluate("() => MathJax.startup.promise")
            pg.wait_for_selector("mjx-container", state="attached", timeout=30_000)
            n_mjx = pg.locator("mjx-container").count()
            untypeset = pg.evaluate(
                "() => [...document.querySelectorAll('.math')]"
                ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent)"
            )
            assert n_mjx > 0, f"{page}: MathJax typeset nothing"
            assert not untypeset, f"{page}: math left untypeset: {untypeset[:5]}"
            assert pg.locator("mjx-merror").count() == 0, f"{page}: TeX errors on the page"
        if is_chapter:
            pg.wait_for_function(
                "() => [...document.querySelectorAll('.cell_output img')].every(i => i.complete)",
                timeout=30_000,
            )
            sizes = pg.evaluate(
                "() => [...document.querySelectorAll('.cell_output img')]"
                ".map(i => [i.getAttribute('src'), i.naturalWidth])"
            )
            broken = [src for src, width in sizes if width == 0]
            assert sizes, f"{page}: no figure from a notebook output"
            assert not broken, f"{page}: figures that did not load: {broken}"
            figure = pg.locator(".cell_output img").first
            figure.scroll_into_view_if_needed()
            assert figure.is_visible(), f"{page}: the first figure is not visible"
        if is_chapter:
            shown = [
                i
                for i, cell in enumerate(pg.locator(".tag_solution .cell_input").all())
                if cell.is_visible()
            ]
            assert not shown, f"{page}: solution code visible before a click: {shown}"
        if has_widget_state(page):
            views = pg.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
            # attached, not visible: a finished progress bar (tqdm, leave=False) hides itself
            pg.wait_for_selector(
                ".cell_output .widget-subarea .jupyter-widgets", state="attached", timeout=30_000
            )
            pg.wait_for_function(
                f"() => document.querySelectorAll('.widget-subarea').length >= {views}",
                timeout=30_000,
            )
            shown = pg.locator(".cell_output .widget-subarea > .jupyter-widgets")
            visible = [i for i in range(shown.count()) if shown.nth(i).is_visible()]
            assert visible, f"{page}: no widget is visible"
            widget = shown.nth(visible[-1])  # the last: an interactive one, not a progress bar
            widget.scroll_into_view_if_needed()
            assert widget.is_visible(), f"{page}: the widget is not visible once scrolled to"
            assert pg.locator(".widget-error").count() == 0, f"{page}: a widget failed to render"
        pg.wait_for_load_state("networkidle", timeout=30_000)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    visit.check(page)


@pytest.mark.browser
@pytest.mark.parametrize("page", browser_pages(), ids=page_id)
def test_page_in_browser(browser, site_url: str, page: str) -> None:
    with Visit(browser, site_url + f"{page}.html") as visit:
        assert visit.response is not None and visit.response.status == 200
        check_page(visit, page, page_id(page))


@pytest.mark.browser
def test_chapter_from_file_url(browser, site: Path) -> None:
    """The site also works opened from disk (book/_build/html/index.html)."""
    pages = notebook_pages()
    if not pages:
        pytest.skip("no chapter in the toc yet")
    page = pages[0]
    with Visit(browser, (site / f"{page}.html").as_uri()) as visit:
        check_page(visit, page, f"{page_id(page)}-file")
