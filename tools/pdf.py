"""The whole course as one PDF, printed from the built website: ``./course book --pdf``.

    python -m tools.pdf                      # book/_build/html -> book/_build/html/course.pdf

Each page of the course (the introduction, how to use it, every chapter's notebook in order, the
notation, errata and references, then every chapter's quiz with its answers; not the lecturers'
pages or the status page) is
opened from ``file://`` in the same headless Chromium the browser tests drive, its math typeset
by the site's own MathJax, and printed with the theme's print style (no sidebars); the pages are
joined into one file with a bookmark per page. Nothing is downloaded: the browser is the
system's, the assets are the site's. The solutions are left out.
The website links the file as ``course.pdf``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "book" / "_build" / "html"
PDF_NAME = "course.pdf"
SKIP = ("book/lecturers/", "book/status")
#: pages printed at the end of the book, after the references: the quizzes, each with its answers
AT_THE_END = ("book/quizzes/",)
#: how to get the browser that prints the PDF (one line)
BROWSER_HINT = (
    "install Chromium (Debian/Ubuntu, as root: `apt-get install chromium`; elsewhere "
    "`python -m playwright install chromium`) or set CHROMIUM=/path/to/chrome"
)


class PdfUnavailable(RuntimeError):
    """No browser to print with: the message says, in one line, what is missing and how to get
    it (./course book then builds the website without the PDF)."""


def launch_browser(p):
    """The Chromium :func:`course_lib.doctor.find_chromium` finds, started headless by
    Playwright ``p``; :class:`PdfUnavailable` where there is none or it does not start."""
    from course_lib.doctor import find_chromium

    path = find_chromium()
    if path is None:
        raise PdfUnavailable(f"no Chromium to print course.pdf with: {BROWSER_HINT}")
    try:
        # pages are read from files; any http(s) request goes to a proxy that is not there
        # (loopback included) and fails at once: nothing leaves the machine, and no request
        # is routed through Python (which costs time on every one of a page's files)
        args = ["--headless", "--no-sandbox", "--disable-gpu"]
        args += ["--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
        return p.chromium.launch(executable_path=path, args=args)
    except Exception as exc:  # playwright's Error: a missing or broken executable
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PdfUnavailable(f"Chromium ({path}) did not start ({first}): {BROWSER_HINT}") from exc


def pages_in_order(toc_file: Path = ROOT / "book" / "_toc.yml") -> list[str]:
    """The toc's pages that belong in the book, in order, as paths without suffix: the quizzes
    come last, after the references.

    >>> pages = pages_in_order()
    >>> pages[0], pages[2], pages[-1].startswith('book/quizzes/13_')
    ('book/intro', 'notebooks/01_matmul', True)
    >>> pages[pages.index('book/references') + 1]
    'book/quizzes/01_matmul'
    """
    toc = yaml.safe_load(toc_file.read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    files = [f for f in files if not f.startswith(SKIP)]
    return [f for f in files if not f.startswith(AT_THE_END)] + [
        f for f in files if f.startswith(AT_THE_END)
    ]


# Solutions are left out of the print (the theme would print a folded dropdown open). Code and
# text outputs wrap at the page's edge instead of running off it (a long line continues on the
# next one, broken at a space where there is one), and no box keeps a scroll bar in print.
PRINT_CSS = """
@media print {
  .solution.admonition, .cell.tag_solution { display: none !important; }
  pre, pre code, code, kbd, samp, .highlight pre, .output pre, .cell_output pre {
    white-space: pre-wrap !important;
    overflow-wrap: anywhere !important;
    word-break: normal !important;
  }
  pre, .highlight, div.highlight, .cell_input, .cell_output, .output, .output_area,
  .table-wrapper, .pst-scrollable-table-container, .bd-article-container, .docutils.container {
    overflow: visible !important;
    max-width: 100% !important;
  }
  img, svg, video, canvas { max-width: 100% !important; height: auto; }
}
"""
#: the printable width of an A4 page less the side margins (14 mm each), in CSS pixels: the
#: viewport the pages are laid out in before printing, so that what overflows can be measured
PRINT_WIDTH = round((210 - 2 * 14) / 25.4 * 96)

#: A font for every glyph the pages use that the system's fonts may lack (the checkers' ✅ and
#: ❌, arrows, dingbats, chapter 7's Chinese and Korean): Noto Sans Symbols 2, Noto Emoji, Noto
#: Sans SC and KR
#: (OFL-1.1), from their pinned npm
#: packages, served with the site (tools/build_book.py, ``_vendor/fonts``) and added last to
#: every element's font list, so they are used only for what the page's own fonts lack.
FALLBACK_FONTS = ('"Noto Sans Symbols 2"', '"Noto Emoji"', '"Noto Sans SC"', '"Noto Sans KR"')
FONT_CSS = tuple(
    f"fonts/{name}/400.css"
    for name in ("noto-sans-symbols-2", "noto-emoji", "noto-sans-sc", "noto-sans-kr")
)

#: In the print layout: every element's font list ends with the fallback fonts; whatever still
#: overflows its box (a wide table, display math, a widget) is shrunk to fit; returns how many.
FIT_FOR_PRINT = """(fallback) => {
  // every font list read first, then every one written: a read after a write would make the
  // browser recompute the page's styles once per element (seconds on a chapter)
  const all = [...document.querySelectorAll('body, body *')];
  const families = all.map(el => getComputedStyle(el).fontFamily);
  all.forEach((el, i) => {
    if (families[i] && !families[i].includes(fallback[0])) {
      el.style.fontFamily = families[i] + ', ' + fallback.join(', ');
    }
  });
  const limit = document.documentElement.clientWidth;
  let shrunk = 0;
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('[data-course-shrunk]')) continue;
    const style = getComputedStyle(el);
    const rect = el.getBoundingClientRect();
    if (rect.width === 0 || style.position === 'fixed') continue;
    const clips = style.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1;
    const offPage = rect.right > limit + 1 && rect.left < limit;
    if (!clips && !offPage) continue;
    const room = clips ? el.clientWidth : Math.max(limit - rect.left, 1);
    const need = clips ? el.scrollWidth : rect.width;
    const scale = Math.max(0.3, room / need);
    if (scale < 0.999) {
      el.style.zoom = scale;
      el.setAttribute('data-course-shrunk', scale.toFixed(2));
      shrunk += 1;
    }
  }
  return shrunk;
}"""

#: The print stylesheet and the fallback fonts' stylesheets, added at once; resolves when the
#: fonts' stylesheets have loaded (one restyle of the page, not one per sheet).
ADD_PRINT_STYLES = """async ([css, fontSheets]) => {
  const style = document.createElement('style');
  style.textContent = css;
  const links = fontSheets.map(href => {
    const link = document.createElement('link');
    link.rel = 'stylesheet';
    link.href = href;
    return link;
  });
  const loaded = links.map(link => new Promise(r => { link.onload = link.onerror = r; }));
  document.head.append(style, ...links);
  await Promise.all(loaded);
  return true;
}"""

#: Math typeset, and every stored widget view drawn by the widgets' embed script (each view
#: gets a .widget-subarea; at most 20 s); returns the number of TeX errors.
WAIT_FOR_PAGE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  const views = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]').length;
  const until = performance.now() + 20000;
  while (document.querySelectorAll('.widget-subarea').length < views && performance.now() < until) {
    await new Promise(r => setTimeout(r, 50));
  }
  return document.querySelectorAll('mjx-merror').length;
}"""


def build_pdf(
    html_dir: Path = HTML, out: Path | None = None, only: list[str] | None = None
) -> tuple[Path, int, float]:
    """Print every page (or those of ``only``) and join them; return (the PDF, its page count,
    seconds taken)."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    from course_lib.doctor import find_chromium

    if find_chromium() is None:  # say so before anything else
        raise PdfUnavailable(f"no Chromium to print course.pdf with: {BROWSER_HINT}")
    start = time.perf_counter()
    out = out or html_dir / PDF_NAME
    missing = [p for p in pages_in_order() if not (html_dir / f"{p}.html").is_file()]
    if missing:
        raise SystemExit(f"error: build the website first (./course book): missing {missing[:3]}")
    writer = PdfWriter()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": PRINT_WIDTH, "height": 1100})
        fonts = [html_dir / "_vendor" / f for f in FONT_CSS]
        page.emulate_media(media="print")  # laid out once, for print, from the start
        sheets = [css.as_uri() for css in fonts if css.is_file()]
        for i, name in enumerate(only or pages_in_order()):
            page.goto((html_dir / f"{name}.html").as_uri(), wait_until="load", timeout=120_000)
            errors = page.evaluate(WAIT_FOR_PAGE)
            if errors:
                raise SystemExit(f"error: {name}: {errors} TeX errors on the page")
            title = page.title().split("—")[0].split(" | ")[0].strip()
            part = Path(tmp) / f"{i:02d}.pdf"
            page.evaluate(ADD_PRINT_STYLES, [PRINT_CSS, sheets])
            page.evaluate(FIT_FOR_PRINT, list(FALLBACK_FONTS))
            page.evaluate("document.fonts.ready.then(() => true)")
            page.pdf(
                path=str(part),
                format="A4",
                margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=(
                    '<div style="font-size:8px;width:100%;text-align:center;color:#555">'
                    f"{title} · page <span class=pageNumber></span></div>"
                ),
            )
            first = len(writer.pages)
            writer.append(PdfReader(part))
            writer.add_outline_item(title=title, page_number=first)
        browser.close()
    writer.add_metadata({"/Title": "Transformers, from matrix multiplication to LoRA"})
    with open(out, "wb") as f:
        writer.write(f)
    return out, len(writer.pages), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=HTML, help="the built website")
    parser.add_argument("--out", type=Path, help=f"the PDF (default: HTML/{PDF_NAME})")
    parser.add_argument("--page", action="append", help="only this page (e.g. notebooks/07_bpe)")
    args = parser.parse_args(argv)
    try:
        out, pages, seconds = build_pdf(args.html, args.out, args.page)
    except PdfUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out} ({pages} pages, {out.stat().st_size / 2**20:.1f} MiB) in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
