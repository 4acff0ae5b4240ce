"""The website: a strict offline build, then a real browser on the built pages.

    pytest tests/test_book.py -m book       # build checks (no browser)
    pytest tests/test_book.py -m browser    # headless Chromium on every page of the toc

The build runs once per test run (``python -m tools.build_book --clean``; the ``site`` fixture
of tests/conftest.py, shared with the slide decks' test). The browser tests serve
``book/_build`` from 127.0.0.1 and open the site under the sub-path ``/html/``, so
page-relative asset paths are exercised; one chapter is also opened from ``file://``.
Screenshots: ``tests/artifacts/<page>.png``, the whole page, for a page that fails its check;
``tests/artifacts/a11y/<page>-<theme>.png`` for the pages of FULL_SHOTS, in both themes.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from course_lib.static_explorer import CHAPTERS, chapter_explorer
from tests.browser import QUIZ_LAB_CHAPTER, Visit, serve
from tests.test_explorers import drive

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
def test_quiz_pages_are_titled_after_their_chapters(site: Path) -> None:
    """Each quiz page's <title> and the sidebar's list of quizzes name the chapter (issue 44)."""
    from course_lib import quiz
    from tools.build_book import chapter_titles

    titles = chapter_titles()
    for name in quiz.quiz_names():
        text = (site / "book" / "quizzes" / f"{name}.html").read_text(encoding="utf-8")
        tab = re.search(r"<title>(.*?)</title>", text, re.S).group(1)
        assert html.unescape(tab).startswith(f"Quiz: {titles[name]}"), (name, tab)
    index = (site / "book" / "intro.html").read_text(encoding="utf-8")
    listed = re.findall(r'<a class="reference internal" href="quizzes/[^"]*">(.*?)</a>', index)
    want = [f"Quiz: {titles[n]}" for n in quiz.quiz_names()]
    assert [html.unescape(re.sub(r"<[^>]+>", "", a)).strip() for a in listed] == want


@pytest.mark.book
def test_each_chapter_page_ends_its_lesson_with_a_quiz_that_responds(site: Path) -> None:
    """The quiz that ends each chapter is, on its page, the questions graded by the page's own
    script (tools/chapter_quizzes.py), never the stored widget, whose buttons would do nothing
    without a kernel: no widget view and no widget model of the quiz is left, and the link to
    the quiz's own page resolves (check_page answers a question in the browser)."""
    from course_lib import quiz

    for page in notebook_pages():
        name = Path(page).name
        text = (site / f"{page}.html").read_text(encoding="utf-8")
        assert text.count(f'<div class="course-quiz-embed" data-chapter="{name}">') == 1, page
        assert text.count('class="course-quiz-q ') == len(quiz.load(name)), page
        assert "Quiz(" not in text and 'course-quiz"' not in text, f"{page}: the frozen quiz"
        href = re.search(r'class="course-quiz-where">.*?<a href="([^"]+)"', text, re.S)[1]
        assert (site / page).parent.joinpath(href).resolve().is_file(), f"{page}: {href}"


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


class _ImageAlts(HTMLParser):
    """The ``alt`` of every ``<img>`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.alts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.alts.append(dict(attrs).get("alt") or "")


@pytest.mark.book
@pytest.mark.parametrize("page", notebook_pages(), ids=page_id)
def test_figures_alt_text_reaches_the_img(site: Path, page: str) -> None:
    """Every figure's alt text from its output metadata is the alt of an ``<img>`` on the page
    (book/_ext/alt_text.py), in the notebook's order."""
    wanted = []
    for cell in notebook(page)["cells"]:
        for output in cell.get("outputs", []):
            alt = output.get("metadata", {}).get("image/png", {}).get("alt")
            if "image/png" in output.get("data", {}) and alt:
                wanted.append(" ".join(alt.split()))
    parser = _ImageAlts()
    parser.feed((site / f"{page}.html").read_text(encoding="utf-8"))
    on_page = [a for a in parser.alts if a in wanted]
    assert on_page == wanted, (
        f"{page}: alt texts missing from the page: {set(wanted) - set(on_page)}"
    )


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


def check_title(pg, page: str) -> None:
    """The page's heading names it, and the browser's tab says the same: a chapter by its
    notebook's title, a quiz page as "Quiz: " and its chapter's title (never the Colab cell's
    comment, which once titled all of them)."""
    from tools.build_book import chapter_titles

    heading = pg.locator("h1").first.inner_text().strip().rstrip("#¶").strip()
    tab = pg.title()
    assert heading and tab.startswith(heading), f"{page}: tab {tab!r}, heading {heading!r}"
    assert "Colab" not in heading, f"{page}: titled by the Colab set-up cell: {heading!r}"
    name = Path(page).name
    if page.startswith("book/quizzes/"):
        assert heading == f"Quiz: {chapter_titles()[name]}", f"{page}: {heading!r}"
    elif page.startswith("notebooks/"):
        assert heading == chapter_titles()[name], f"{page}: {heading!r}"


def check_page(visit: Visit, page: str, shot: str) -> None:
    """Math typeset, figures shown, widgets rendered, no errors, nothing fetched off-host.
    Screenshot: the whole page where a check failed (a passing page's would cost a second or
    more each: a chapter is some 30,000 pixels tall; FULL_SHOTS are taken by the audit)."""
    pg = visit.page
    failed = True
    try:
        check_title(pg, page)
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
            # (the explorer alone: its whole grid, precomputed by the build, is not needed here)
            for s in drive(pg, chapter_explorer(chapter)[1]):
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
        if chapter == QUIZ_LAB_CHAPTER:  # one chapter: the quiz's script is the same on all
            check_chapter_quiz(pg, chapter)
        pg.wait_for_load_state("networkidle", timeout=30_000)
        failed = False
    finally:
        if failed:  # a passing page's pictures: FULL_SHOTS, taken by the audit in both themes
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    visit.check(page)


def check_chapter_quiz(pg, chapter: str) -> None:
    """The quiz that ends the chapter responds without a kernel: the right option of its first
    multiple-choice question, clicked, says so; printed, the quiz is one line pointing to the
    end of the book (tools/chapter_quizzes.py). One chapter's page (about 0.5 s): every page
    runs the same script (no console error on any page: check_page), and every page's quiz is
    placed whole (test_each_chapter_page_ends_its_lesson_with_a_quiz_that_responds)."""
    from course_lib import quiz

    questions = quiz.load(chapter)
    box = pg.locator(".course-quiz-embed")
    assert box.locator(".course-quiz-q").count() == len(questions), f"{chapter}: the quiz"
    i = next(k for k, q in enumerate(questions) if q["kind"] == "choice")
    right = next(k for k, o in enumerate(questions[i]["options"]) if o.get("correct"))
    question = box.locator(".course-quiz-q").nth(i)
    question.scroll_into_view_if_needed()
    question.locator("button.course-quiz-option").nth(right).click()
    assert question.get_attribute("data-answered") == "right", f"{chapter}: the quiz"
    pg.emulate_media(media="print")
    try:
        assert box.locator(".course-quiz-print").is_visible() and not question.is_visible()
    finally:
        pg.emulate_media(media="screen")


@pytest.mark.browser
@pytest.mark.parametrize("page", browser_pages(), ids=page_id)
def test_page_in_browser(browser, site_url: str, axe_js: Path, page: str) -> None:
    """Every page renders (check_page), then passes the accessibility audit in both themes
    (audit_accessibility): one visit for both, as a page load costs more than either check."""
    with open_in_theme(browser, site_url + f"{page}.html", THEMES[0]) as visit:
        assert visit.response is not None and visit.response.status == 200
        check_page(visit, page, page_id(page))
        audit_accessibility(visit, page, axe_js)


@pytest.mark.browser
def test_the_test_browser_reaches_no_other_host(browser, tmp_path: Path) -> None:
    """The visits' guard (tests/conftest.py: a proxy that is not there): a page on 127.0.0.1
    asking a host by name and one by address gets nothing, and the visit reports both."""
    (tmp_path / "probe.html").write_text(
        "<script>window.done = Promise.allSettled(['http://example.com/x.js',"
        " 'http://93.184.216.34/y.js'].map(u => fetch(u, {mode: 'no-cors'}))"
        ").then(r => r.map(x => x.status));</script>",
        encoding="utf-8",
    )
    with serve(tmp_path) as base, Visit(browser, base + "probe.html") as visit:
        outcomes = visit.page.evaluate("() => window.done")
        assert outcomes == ["rejected", "rejected"], outcomes
        assert visit.blocked == ["http://example.com/x.js", "http://93.184.216.34/y.js"]


@pytest.mark.browser
def test_the_audit_leaves_out_only_code_blocks_whose_colours_it_has_seen(
    browser, tmp_path: Path, axe_js: Path
) -> None:
    """JS_MARK_REPEATED_CODE: a block whose text repeats the colours, sizes and backgrounds of
    one before it is left out; a block with a colour of its own, or on another background, is
    audited, and its low-contrast token is reported; a second call (the other theme) starts
    afresh."""
    code = '<div class="highlight"><pre>{}</pre></div>'
    k = '<span class="k">def</span> '
    (tmp_path / "page.html").write_text(
        "<html lang='en'><head><title>t</title><style>.k{color:#000}.pale{color:#ddd}"
        ".admonition{background:#eef}</style>"
        "</head><body><main>"
        + code.format(k + "first")  # audited: the first
        + code.format(k + "again")  # left out: the same colours on the same background
        + code.format(k + '<span class="pale">pale</span>')  # audited: a colour of its own
        + f'<div class="admonition">{code.format(k + "boxed")}</div>'  # another background
        + "</main></body></html>",
        encoding="utf-8",
    )
    with serve(tmp_path) as base, Visit(browser, base + "page.html") as visit:
        marks = (
            "() => [...document.querySelectorAll('div.highlight')]"
            ".map(b => b.hasAttribute('data-course-a11y-same'))"
        )
        bad = failing(axe_violations(visit.page, axe_js, THEMED))
        left = visit.page.evaluate(marks)
        visit.page.add_style_tag(content=".k{color:#123}")  # as a theme would change it
        assert visit.page.evaluate(JS_MARK_REPEATED_CODE) == 1
        again = visit.page.evaluate(marks)
    assert left == again == [False, True, False, False]
    assert len(bad) == 1 and "pale" in bad[0], bad


@pytest.mark.browser
def test_chapter_from_file_url(browser, site: Path) -> None:
    """The site also works opened from disk (book/_build/html/index.html)."""
    pages = notebook_pages()
    if not pages:
        pytest.skip("no chapter in the toc yet")
    page = pages[0]
    with Visit(browser, (site / f"{page}.html").as_uri()) as visit:
        check_page(visit, page, f"{page_id(page)}-file")


# -- the whole course as one PDF (tools/pdf.py) ------------------------------------------------


@pytest.fixture(scope="module")
def course_pdf(site: Path):
    """course.pdf read once for its two tests (same module: the same worker): every glyph
    placed, and each page's text (tools/pdf_check.py)."""
    from tools.pdf_check import check

    return check(site / "course.pdf")


@pytest.mark.book
def test_the_course_as_one_pdf(site: Path, course_pdf) -> None:
    """course.pdf: the book's pages in order, math typeset, every figure present, no solution."""
    import unicodedata

    from pypdf import PdfReader

    from tools.pdf import pages_in_order

    reader = PdfReader(site / "course.pdf")
    # NFKC undoes the typesetter's ligatures ("ﬁ" -> "fi")
    texts = [unicodedata.normalize("NFKC", text) for text in course_pdf.texts]
    assert len(texts) == len(reader.pages)
    outline = [item.title for item in reader.outline]
    assert len(outline) == len(pages_in_order()), outline
    starts, at = [], 0
    for name in sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        first = next(c for c in nb["cells"] if c["cell_type"] == "markdown")  # after Colab's
        title = "".join(first["source"]).splitlines()[0].lstrip("# ").strip()
        words = title.split()[:3]
        found = next((i for i in range(at, len(texts)) if all(w in texts[i] for w in words)), None)
        assert found is not None, f"{name} ({title!r}) is not in the PDF after page {at}"
        starts.append(found)
        at = found
    assert starts == sorted(starts), "the chapters are out of order"
    whole = "\n".join(texts)
    prose = [ln for ln in whole.splitlines() if not ln.lstrip().startswith("#")]  # not code
    raw = [ln for ln in prose if "$$" in ln or "\\begin{" in ln]
    assert not raw, f"raw TeX in the PDF (math not typeset): {raw[:3]}"
    # solutions are folded on the site, so the print leaves them out (chapter 1's first one)
    assert "Exercise 1.1" in whole or "The product from outer products" in whole
    assert "out += np.outer(X[:, l], Y[l, :])" not in whole
    # ... which the text would show: a line of chapter 1's code that is printed, there whole
    assert "row = sum(X[i, l] * Y[l, :] for l in range(X.shape[1]))" in whole
    figures = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if "solution" in cell.get("metadata", {}).get("tags", []):
                continue
            figures += sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
    images = sum(_images_drawn(page.get("/Resources")) for page in reader.pages)
    assert images >= figures, f"{images} images in the PDF, {figures} figures in the chapters"


@pytest.mark.book
def test_the_pdf_loses_nothing(course_pdf) -> None:
    """No text clipped by the page or by a box (a code line cut at the right edge), and no
    glyph its fonts lack (a checker's verdict mark printed as an empty box): every glyph of
    course.pdf placed by tools/pdf_check.py."""
    problems = course_pdf
    assert problems.glyphs > 100_000, problems.summary()  # the whole course was read
    assert not problems.clipped and not problems.missing, problems.summary()


def test_the_pdf_check_finds_clipped_text_and_missing_glyphs(tmp_path: Path) -> None:
    """tools/pdf_check.py on a PDF made for it: a line off the page's right edge, a line cut by
    a clipping box, and a glyph drawn with glyph id 0 (.notdef)."""
    from pypdf import PdfWriter
    from pypdf.generic import (
        ArrayObject,
        DecodedStreamObject,
        DictionaryObject,
        NameObject,
        NumberObject,
    )

    from tools.pdf_check import check

    writer = PdfWriter()
    page = writer.add_blank_page(width=200, height=200)
    tounicode = DecodedStreamObject()
    tounicode.set_data(
        b"begincmap\n2 beginbfchar\n<0000> <2705>\n<0041> <0041>\nendbfchar\nendcmap"
    )
    cid = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/CIDFontType2"),
            NameObject("/DW"): NumberObject(500),
        }
    )
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type0"),
            NameObject("/Encoding"): NameObject("/Identity-H"),
            NameObject("/DescendantFonts"): ArrayObject([writer._add_object(cid)]),
            NameObject("/ToUnicode"): writer._add_object(tounicode),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    content = DecodedStreamObject()
    content.set_data(
        b"BT /F1 10 Tf 20 150 Td <00410041> Tj ET\n"  # two As, on the page
        b"BT /F1 10 Tf 195 120 Td <004100410041> Tj ET\n"  # runs off the right edge
        b"q 0 0 100 200 re W n BT /F1 10 Tf 90 90 Td <0041004100410041> Tj ET Q\n"  # a box
        b"BT /F1 10 Tf 20 50 Td <0000> Tj ET\n"  # glyph id 0: the empty box
    )
    page[NameObject("/Contents")] = writer._add_object(content)
    path = tmp_path / "t.pdf"
    with open(path, "wb") as f:
        writer.write(f)
    problems = check(path)
    assert problems.glyphs == 2 + 3 + 4 + 1
    assert [(g.page, g.char) for g in problems.missing] == [(1, "\u2705")]
    assert len(problems.clipped) == 2 + 2  # the edge cuts two of three, the box two of four
    assert "U+2705" in problems.summary() and "clipped" in problems.summary()
    assert problems.texts == ["AA\nAAA\nAAAA\n\u2705"]  # a line each: four baselines


def test_the_pdf_checks_reader_reads_streams_as_pypdf_does() -> None:
    """tools/pdf_check.operations, the fast reader of content streams, gives pypdf's
    operations: literal strings with escapes, nested and continued; hex strings with spaces;
    arrays; a marked-content dictionary; names with # escapes; comments; and where it cannot
    read a stream (an inline image, a number glued to an operator, a bracket closed by the
    other kind) it says so, and pypdf reads it."""
    from pypdf.generic import ContentStream, DecodedStreamObject

    from tools import pdf_check

    data = (
        b"% a comment\n/P <</MCID 3 /Alt (a \\(b\\) c)>> BDC .5 -1 +2. 0 0 1 cm\n"
        b"BT /F#31 9.5 Tf [(A\\101\\n) -250 <00 4 1> 12] TJ (x(y)z\\\nw) Tj\n"
        b"1 0 0 -1 3 4 Tm (a) ' 1 2 (b) \" ET EMC q [1 2] 0 d Q"
    )
    stream = DecodedStreamObject()
    stream.set_data(data)

    def plain(value):
        if hasattr(value, "original_bytes"):
            return bytes(value.original_bytes)
        if isinstance(value, dict):
            return [plain(v) for item in value.items() for v in item]
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        if isinstance(value, bytes):
            return bytes(value)
        return float(value) if isinstance(value, int | float) else str(value)

    ours = [(plain(args), op) for args, op in pdf_check.operations(data)]
    theirs = [(plain(args), op.decode()) for args, op in ContentStream(stream, None).operations]
    assert ours == theirs
    assert ours[4] == ([[b"A" + b"A\n", -250.0, b"\x00\x41", 12.0]], "TJ")
    assert ours[5] == ([b"x(y)zw"], "Tj")
    with pytest.raises(pdf_check._NotParsed, match="inline image"):
        pdf_check.operations(b"q BI /W 1 /H 1 ID \x00 EI Q")
    for glued in (b"1 -2.Td", b"0g", b"[1 2 >> 0 d"):  # pypdf reads these; the fast one will not
        with pytest.raises(pdf_check._NotParsed):
            pdf_check.operations(glued)
    glued = DecodedStreamObject()
    glued.set_data(b"BT 1 -2.Td ET")
    assert pdf_check._operations(glued, None)[1] == ([1, -2], b"Td")  # pypdf's reading


# -- accessibility: axe-core on every page, in the light and the dark theme -------------------

THEMES = ("light", "dark")
#: Rules whose violations fail the audit: any missing alt text; serious or critical contrast;
#: unnamed form controls (the widgets' slider handles, named by book/_ext/static/course-a11y.js).
#: The rest (the theme's search button and sidebar, reported by axe as best practice) is logged
#: in tests/artifacts/a11y/violations.jsonl.
ANY_IMPACT = {"minor", "moderate", "serious", "critical"}
FAILING = {
    "image-alt": ANY_IMPACT,
    "color-contrast": {"serious", "critical"},
    "aria-input-field-name": ANY_IMPACT,
}

#: The rules whose outcome a theme can change (colours): the other themes are audited for these.
THEMED = ("color-contrast",)


@pytest.fixture(scope="module")
def axe_js() -> Path:
    """axe-core's script, vendored like the site's assets (pinned, sha512-checked, uncommitted)."""
    from tools import build_book

    build_book.unpack(build_book.AXE)
    return build_book.AXE.root / build_book.AXE.dest / "axe.min.js"


def open_in_theme(browser, url: str, theme: str) -> Visit:
    """Open ``url`` with the reader's stored choice of theme (pydata-sphinx-theme's ``mode``)."""
    visit = Visit(browser, None)
    visit.context.add_init_script(f"localStorage.setItem('mode', '{theme}');")
    visit.response = visit.page.goto(url, wait_until="load", timeout=60_000)
    return visit


def settle(pg, page: str) -> None:
    """Wait until math is typeset and stored widgets are drawn, so the audit sees the page."""
    if pg.locator(".math").count():
        pg.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000
        )
        pg.evaluate("() => MathJax.startup.promise")
    if has_widget_state(page):
        views = pg.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        pg.wait_for_function(
            f"() => document.querySelectorAll('.widget-subarea').length >= {views}",
            timeout=30_000,
        )
    if pg.locator(".course-live").count():  # the live views (tools/live_pages.py) have drawn
        pg.wait_for_function(
            "() => [...document.querySelectorAll('.course-live')]"
            ".every(e => e.dataset.state !== 'loading' && (e.dataset.updates || e.dataset.state"
            " !== 'ready'))",
            timeout=60_000,
        )
    if page.startswith("book/quizzes/"):
        answer_quiz(pg)
    pg.wait_for_load_state("networkidle", timeout=30_000)


def answer_quiz(pg) -> None:
    """Answer every question, alternately right and wrong, so that both kinds of feedback are
    on the page when it is audited."""
    pg.evaluate(
        """() => document.querySelectorAll('.course-quiz-q').forEach((q, i) => {
          const data = JSON.parse(q.dataset.quiz), right = i % 2 === 0;
          if (data.kind === 'choice') {
            const k = data.options.findIndex(o => o.correct === right);
            q.querySelectorAll('button.course-quiz-option')[k].click();
          } else {
            q.querySelector('input').value = right ? String(data.answer) : 'not a number';
            q.querySelector('button.course-quiz-check').click();
          }
        })"""
    )
    shown = pg.locator(".course-quiz-feedback.right, .course-quiz-feedback.wrong").count()
    assert shown == pg.locator(".course-quiz-q").count(), "a quiz question gave no feedback"


#: Pages screenshotted whole in both themes (an explorer, figures, a quiz); the others show
#: the first screenful.
FULL_SHOTS = {"notebooks/02_softmax", "notebooks/04_attention", "book/quizzes/04_attention"}


#: Marks each code block whose colours another block on the page already shows: every text
#: element in it has a colour, font size, weight and opacity, on an effective background (the
#: nearest painted one above it), that an earlier block's text had. axe-core's contrast check of a text
#: element reads exactly these (its colour against the background behind it; size and weight
#: set the threshold), so a marked block fails only where an audited one fails; the audit
#: leaves it out (a chapter's 90 code blocks are some 6,000 elements: a third of its audit).
#: Marks from an earlier call are cleared first (the theme changes every colour).
JS_MARK_REPEATED_CODE = """() => {
  document.querySelectorAll('[data-course-a11y-same]')
    .forEach(b => b.removeAttribute('data-course-a11y-same'));
  const painted = new Map();
  const background = el => {
    if (!el) return 'none';
    if (!painted.has(el)) {
      const c = getComputedStyle(el).backgroundColor;
      painted.set(el, c && c !== 'transparent' && !/^rgba\\(.*, 0\\)$/.test(c)
        ? c : background(el.parentElement));
    }
    return painted.get(el);
  };
  const seen = new Set();
  let left = 0;
  for (const block of document.querySelectorAll('div.highlight')) {
    const keys = [...block.querySelectorAll('*')].filter(
      e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())
    ).map(e => {
      const s = getComputedStyle(e);
      return [s.color, s.fontSize, s.fontWeight, s.opacity, background(e)].join('|');
    });
    if (keys.length && keys.every(k => seen.has(k))) {
      block.setAttribute('data-course-a11y-same', '');
      left += 1;
    } else {
      keys.forEach(k => seen.add(k));
    }
  }
  return left;
}"""


def axe_violations(pg, axe_js: Path, rules: tuple[str, ...] = tuple(FAILING)) -> list[dict]:
    """The page's violations of ``rules`` (those of FAILING unless told; axe-core runs only
    those: the full set of best practices would triple the time of an audit), code blocks that
    repeat another's colours left out (JS_MARK_REPEATED_CODE), and MathJax's output: it draws
    the characters of its fonts from style sheets, with no text node, so axe checks none of them
    (a chapter's 5,000 elements of math: a tenth of its audit); the few characters outside
    those fonts (``mjx-utext``, a text node) take the prose's colour, which the audit checks."""
    if not pg.evaluate("() => !!window.axe"):
        pg.add_script_tag(path=str(axe_js))  # inlined by Playwright: no request
    pg.evaluate(JS_MARK_REPEATED_CODE)
    return pg.evaluate(
        """async (rules) => (await axe.run({exclude: [['[data-course-a11y-same]'], ['mjx-container']]},
                                           {resultTypes: ['violations'],
                                            runOnly: {type: 'rule', values: rules}})).violations
        .map(v => ({id: v.id, impact: v.impact, help: v.help,
                    nodes: v.nodes.map(n => ({target: n.target.join(' '),
                                              impact: n.impact,
                                              summary: n.failureSummary,
                                              html: n.html.slice(0, 200)}))}))""",
        list(rules),
    )


def failing(violations: list[dict]) -> list[str]:
    """The violations the course does not accept, one line per element."""
    return [
        f"{v['id']} ({n['impact']}): {n['target']}: {n['summary']} | {n['html']}"
        for v in violations
        if v["id"] in FAILING
        for n in v["nodes"]
        if (n["impact"] or v["impact"]) in FAILING[v["id"]]
    ]


def switch_theme(pg, theme: str) -> None:
    """Switch the open page to ``theme`` as the theme's toggle does (its data-theme)."""
    pg.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    before = pg.evaluate("() => getComputedStyle(document.body).backgroundColor")
    pg.evaluate(
        f"() => {{ localStorage.setItem('mode', '{theme}'); "
        f"document.documentElement.dataset.theme = '{theme}'; "
        f"document.documentElement.dataset.mode = '{theme}'; }}"
    )
    # no transition: the page's colours are final once its background has changed
    pg.wait_for_function(
        "(b) => getComputedStyle(document.body).backgroundColor !== b", arg=before, timeout=10_000
    )


def _images_drawn(resources) -> int:
    """Image XObjects a page's resources hold, form XObjects followed (pypdf's ``page.images``
    decodes every image to list them, nine seconds for the course's PDF; this only counts)."""
    resources = resources.get_object() if resources is not None else None
    if not resources or "/XObject" not in resources:
        return 0
    n = 0
    for ref in resources["/XObject"].get_object().values():
        obj = ref.get_object()
        if obj.get("/Subtype") == "/Image":
            n += 1
        elif obj.get("/Subtype") == "/Form":
            n += _images_drawn(obj.get("/Resources"))
    return n


def audit_accessibility(visit: Visit, page: str, axe_js: Path) -> None:
    """axe-core finds no missing alt text, no serious contrast failure and no unnamed control,
    in the light and the dark theme; figures keep a light background behind them in the dark
    theme; figures' alt text is text; nothing leaves the host. Both themes on the open page."""
    pg = visit.page
    settle(pg, page)
    (ARTIFACTS / "a11y").mkdir(parents=True, exist_ok=True)
    for theme in THEMES:
        if theme != THEMES[0]:
            switch_theme(pg, theme)
        assert pg.evaluate("() => document.documentElement.dataset.theme") == theme
        # alt text and control names are the same in every theme: audited once; colours twice
        violations = axe_violations(pg, axe_js, tuple(FAILING) if theme == THEMES[0] else THEMED)
        if page in FULL_SHOTS:
            shot = ARTIFACTS / "a11y" / f"{page_id(page)}-{theme}.png"
            pg.screenshot(path=str(shot), full_page=True)
        with open(ARTIFACTS / "a11y" / "violations.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps({"page": page, "theme": theme, "violations": violations}))
            log.write("\n")
        bad = failing(violations)
        assert not bad, f"{page} ({theme}): accessibility violations:\n" + "\n".join(bad)
        backgrounds = pg.evaluate(
            "() => [...document.querySelectorAll('.cell_output img')]"
            ".map(i => getComputedStyle(i).backgroundColor)"
        )
        dark = [b for b in backgrounds if _luminance(b, theme) < 0.5]
        assert not dark, f"{page} ({theme}): figures on a dark background: {dark[:3]}"
    # Sphinx writes an image's file name as its alt when it has none: that is no text
    alts = pg.evaluate("() => [...document.querySelectorAll('.cell_output img')].map(i => i.alt)")
    unnamed = [a for a in alts if not a.strip() or re.search(r"\.(png|jpe?g|svg|gif)$", a)]
    assert not unnamed, f"{page}: figures whose alt text is a file name or empty: {unnamed}"
    assert not visit.blocked and not visit.remote_requests(), f"{page}: requests left the host"


def _luminance(css_colour: str, theme: str) -> float:
    """Relative luminance (0 black .. 1 white) of ``rgb(...)``/``rgba(...)``; a transparent
    background shows the page behind it: white in the light theme, dark in the dark one."""
    nums = [float(x) for x in re.findall(r"[\d.]+", css_colour)]
    if len(nums) == 4 and nums[3] == 0:
        return 1.0 if theme == "light" else 0.0
    r, g, b = (c / 255 for c in nums[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b
