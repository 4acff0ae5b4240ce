"""The website: a strict offline build, then a real browser on the built pages.

    pytest tests/test_book.py -m book       # build checks (no browser)
    pytest tests/test_book.py -m browser    # headless Chromium on every page of the toc

The build runs once per session of this module (``python -m tools.build_book --clean``). The
browser tests serve ``book/_build`` from 127.0.0.1 and open the site under the sub-path
``/html/``, so page-relative asset paths are exercised; one chapter is also opened from
``file://``. Screenshots go to ``tests/artifacts/<page>.png``.
"""

from __future__ import annotations

import fcntl
import functools
import json
import re
import subprocess
import sys
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from test_explorers import built, drive  # tests/ is on sys.path (pytest's prepend import mode)

from course_lib.static_explorer import CHAPTERS

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = BOOK / "_build"
HTML = BUILD / "html"
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
LOCAL_HOSTS = {"127.0.0.1"}


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


# -- the build --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site() -> Path:
    """Run the strict offline build once; fail with its log if it fails."""
    lock_path = BOOK / "_web_assets" / ".build.lock"  # gitignored; --clean leaves it alone
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:  # one build at a time (pytest-xdist)
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(
            [sys.executable, "-m", "tools.build_book", "--clean"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    if proc.returncode != 0:
        log = (proc.stdout + proc.stderr)[-30000:]
        pytest.fail(f"the strict website build failed:\n{log}", pytrace=False)
    return HTML


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


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def server(site: Path):
    """Serve book/_build on 127.0.0.1 (a free port); the site is under the sub-path /html/."""
    handler = functools.partial(_QuietHandler, directory=str(BUILD))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/{HTML.relative_to(BUILD).as_posix()}/"
    httpd.shutdown()
    httpd.server_close()


class PageVisit:
    """Open one URL in a fresh context, recording errors and every request it makes."""

    def __init__(self, browser, url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.blocked: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("request", lambda req: self.requests.append(req.url))
        self.page.route("**/*", self._route)
        self.response = self.page.goto(url, wait_until="load", timeout=60_000)

    def _console(self, msg) -> None:
        if msg.type == "error":
            self.errors.append(f"console error: {msg.text} ({msg.location.get('url')})")

    def _route(self, route) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme in {"file", "data", "blob"} or parts.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def remote_requests(self) -> list[str]:
        return [
            u
            for u in self.requests
            if urlsplit(u).scheme not in {"file", "data", "blob"}
            and urlsplit(u).hostname not in LOCAL_HOSTS
        ]

    def close(self) -> None:
        self.context.close()


def check_page(visit: PageVisit, page: str, shot: str) -> None:
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
        chapter = page.removeprefix("notebooks/")
        if chapter in CHAPTERS:  # its main explorer responds: three settings, course_lib's values
            for s in drive(pg, built(chapter)[1]):
                assert s["shown_key"] == s["key"] and s["same_text"], f"{page}: {s}"
                assert s["shown_value"] == s["value"], f"{page}: {s}"
            explorer = pg.locator(".course-explorer")
            explorer.scroll_into_view_if_needed()
            assert explorer.is_visible(), f"{page}: the explorer is not visible once scrolled to"
        views = pg.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        if has_widget_state(page) and views:  # the widgets left frozen (the explorer replaced one)
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
            if chapter not in CHAPTERS:  # else the visible one is the explorer, checked above
                assert visible, f"{page}: no widget is visible"
            if visible:
                widget = shown.nth(visible[-1])  # the last: an interactive one, not a progress bar
                widget.scroll_into_view_if_needed()
                assert widget.is_visible(), f"{page}: the widget is not visible once scrolled to"
            assert pg.locator(".widget-error").count() == 0, f"{page}: a widget failed to render"
        pg.wait_for_load_state("networkidle", timeout=30_000)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    assert not visit.errors, f"{page}: errors in the browser console:\n" + "\n".join(visit.errors)
    assert not visit.blocked, f"{page}: requests to other hosts (blocked): {visit.blocked}"
    assert not visit.remote_requests(), f"{page}: requests left 127.0.0.1"


@pytest.mark.browser
@pytest.mark.parametrize("page", browser_pages(), ids=page_id)
def test_page_in_browser(browser, server: str, page: str) -> None:
    visit = PageVisit(browser, server + f"{page}.html")
    try:
        assert visit.response is not None and visit.response.status == 200
        check_page(visit, page, page_id(page))
    finally:
        visit.close()


@pytest.mark.browser
def test_chapter_from_file_url(browser, site: Path) -> None:
    """The site also works opened from disk (book/_build/html/index.html)."""
    pages = notebook_pages()
    if not pages:
        pytest.skip("no chapter in the toc yet")
    page = pages[0]
    visit = PageVisit(browser, (site / f"{page}.html").as_uri())
    try:
        check_page(visit, page, f"{page_id(page)}-file")
    finally:
        visit.close()
