"""The whole course as one PDF, printed from the built website: ``./course book --pdf``.

    python -m tools.pdf                      # book/_build/html -> book/_build/html/course.pdf

Each page of the course (the introduction, how to use it, every chapter's notebook in order, the
notation, errata and references; not the lecturers' pages, the quizzes or the status page) is
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
SKIP = ("book/lecturers/", "book/quizzes/", "book/status")


def pages_in_order(toc_file: Path = ROOT / "book" / "_toc.yml") -> list[str]:
    """The toc's pages that belong in the book, in order, as paths without suffix.

    >>> pages = pages_in_order()
    >>> pages[0], pages[2], pages[-1]
    ('book/intro', 'notebooks/01_matmul', 'book/references')
    """
    toc = yaml.safe_load(toc_file.read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return [f for f in files if not f.startswith(SKIP)]


# Solutions are left out of the print (the theme would print a folded dropdown open).
PRINT_CSS = (
    "@media print { .solution.admonition, .cell.tag_solution { display: none !important; } }"
)

WAIT_FOR_PAGE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await new Promise(r => setTimeout(r, 300));  // widgets' embed script renders their state
  return document.querySelectorAll('mjx-merror').length;
}"""


def build_pdf(html_dir: Path = HTML, out: Path | None = None) -> tuple[Path, int, float]:
    """Print every page and join them; return (the PDF, its page count, seconds taken)."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    from course_lib.doctor import find_chromium

    start = time.perf_counter()
    out = out or html_dir / PDF_NAME
    missing = [p for p in pages_in_order() if not (html_dir / f"{p}.html").is_file()]
    if missing:
        raise SystemExit(f"error: build the website first (./course book): missing {missing[:3]}")
    writer = PdfWriter()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        path = find_chromium()
        browser = (
            p.chromium.launch(
                executable_path=path, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            if path
            else p.chromium.launch()
        )
        page = browser.new_page()
        # no request leaves the machine: the site is self-contained
        page.route(
            "**/*",
            lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort(),
        )
        for i, name in enumerate(pages_in_order()):
            page.goto((html_dir / f"{name}.html").as_uri(), wait_until="load", timeout=120_000)
            errors = page.evaluate(WAIT_FOR_PAGE)
            if errors:
                raise SystemExit(f"error: {name}: {errors} TeX errors on the page")
            title = page.title().split("—")[0].split(" | ")[0].strip()
            part = Path(tmp) / f"{i:02d}.pdf"
            page.add_style_tag(content=PRINT_CSS)
            page.emulate_media(media="print")
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
    args = parser.parse_args(argv)
    out, pages, seconds = build_pdf(args.html, args.out)
    print(f"wrote {out} ({pages} pages, {out.stat().st_size / 2**20:.1f} MiB) in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
