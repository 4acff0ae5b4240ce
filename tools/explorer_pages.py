"""Put each chapter's static explorer on its built page, in place of the frozen widget.

    python -m tools.explorer_pages            # post-process book/_build/html (after a build)

``tools/build_book.py`` runs this after ``jupyter-book build``. For every chapter registered in
:data:`course_lib.static_explorer.CHAPTERS` it finds the one code cell of the chapter's page
whose source contains the chapter's explorer call (``CALL``), and replaces that cell's widget
view (the ``<script type="application/vnd.jupyter.widget-view+json">`` the embed manager would
render, frozen) with :func:`course_lib.static_explorer.explorer_html`. It fails, naming the
chapter, if a page is missing, if no cell or more than one cell makes the call (a chapter was
renamed, or its call changed), or if the cell has no widget output. Running it again replaces
the explorers it wrote before (they sit between ``<!-- course-explorer:... -->`` markers).

Each chapter's grid is kept in ``.cache/explorers/`` under a digest of everything it depends
on (:func:`cached_precompute`): a rebuild with nothing changed, and the tests after a build,
read it instead of computing it again.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "book" / "_build" / "html"

CELL_START = re.compile(r'<div class="cell(?: [^"]*)? docutils container"[^>]*>')
CELL_INPUT = re.compile(r'<div class="cell_input(?: [^"]*)?"[^>]*>')
WIDGET_VIEW = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-view\+json">.*?</script>', re.S
)
DIV = re.compile(r"<div\b|</div>")


#: Precomputed grids, keyed by everything that can change them (see :func:`cached_precompute`):
#: the website build and the tests compute each chapter's grid once between them, not twice.
CACHE = ROOT / ".cache" / "explorers"


def inputs_digest() -> str:
    """A digest of what an explorer's outputs depend on: course_lib's code, the data files, and
    the versions of Python, NumPy and PyTorch."""
    import hashlib
    import platform

    import numpy
    import torch

    h = hashlib.sha256(
        f"{platform.python_version()} {numpy.__version__} {torch.__version__}".encode()
    )
    files = sorted((ROOT / "course_lib").rglob("*.py")) + sorted((ROOT / "data").rglob("*"))
    for path in files:
        if path.is_file():
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cached_precompute(chapter: str, ex, cache: Path | None = CACHE) -> dict:
    """:func:`course_lib.static_explorer.precompute`, kept in ``cache`` under a name that holds
    a digest of its inputs (:func:`inputs_digest`, the chapter, the explorer's controls), so a
    changed input never reads an old grid; ``cache=None`` always computes."""
    import hashlib
    import json
    import os

    from course_lib.static_explorer import precompute

    if cache is None:
        return precompute(ex)
    controls = repr(ex.controls)
    key = hashlib.sha256(f"{inputs_digest()} {chapter} {ex.key} {controls}".encode()).hexdigest()
    path = cache / f"{chapter}-{key[:20]}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    data = json.loads(json.dumps(precompute(ex)))  # as the file will give it back
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)  # whole or not at all: another process may be reading
    return data


class ExplorerPageError(ValueError):
    """A chapter page where the explorer cannot be placed (named in the message)."""


def _div_end(text: str, start: int) -> int:
    """The index just after the ``</div>`` that closes the ``<div`` at ``start``."""
    depth = 0
    for m in DIV.finditer(text, start):
        depth += 1 if m.group() == "<div" else -1
        if depth == 0:
            return m.end()
    raise ExplorerPageError(f"unbalanced <div> from offset {start}")


def _plain(fragment: str) -> str:
    """The text of highlighted HTML code: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def calls_in(code: str, call: str) -> bool:
    """Does ``code`` make ``call`` (not as the tail of a longer name: ``own_explorer()`` is not
    ``explorer()``)?

    >>> calls_in("own_explorer()", "explorer()"), calls_in("x = 1\\nexplorer()", "explorer()")
    (False, True)
    """
    return re.search(r"(?<![\w.])" + re.escape(call), code) is not None


def cells(page: str) -> list[tuple[int, int, str]]:
    """(start, end, source text) of every code cell of a built chapter page."""
    out = []
    for m in CELL_START.finditer(page):
        end = _div_end(page, m.start())
        inp = CELL_INPUT.search(page, m.start(), end)
        source = _plain(page[inp.start() : _div_end(page, inp.start())]) if inp else ""
        out.append((m.start(), end, source))
    return out


def marker(key: str) -> tuple[str, str]:
    return f"<!-- course-explorer:{key} -->", f"<!-- /course-explorer:{key} -->"


def widget_view_of_cell(page: str, shows, too_many: str, none: str, error=None) -> re.Match:
    """The last widget view of the one code cell of ``page`` whose source ``shows(source)``
    accepts; raises ``error`` (default :class:`ExplorerPageError`) with ``too_many`` (which
    may hold ``{found}``, the number of cells found) or ``none`` (the cell has no widget)."""
    error = error or ExplorerPageError
    found = [(s, e) for s, e, source in cells(page) if shows(source)]
    if len(found) != 1:
        raise error(too_many.format(found=len(found)))
    s, e = found[0]
    views = list(WIDGET_VIEW.finditer(page, s, e))
    if not views:
        raise error(none)
    return views[-1]


def place(page: str, chapter: str, call: str, key: str, fragment: str) -> str:
    """``page`` with the explorer ``fragment`` in place of the widget view of the cell that
    makes ``call``; raises :class:`ExplorerPageError` naming ``chapter`` if it cannot."""
    begin, end = marker(key)
    wrapped = f"{begin}\n{fragment}\n{end}"
    if begin in page:  # placed by an earlier run: replace it
        i, j = page.index(begin), page.index(end) + len(end)
        return page[:i] + wrapped + page[j:]
    view = widget_view_of_cell(
        page,
        lambda source: calls_in(source, call),
        f"{chapter}: expected exactly one code cell calling {call!r}, found {{found}}; "
        f"update CALL in its explorer module ({chapter} renamed, or its call changed?)",
        f"{chapter}: the cell calling {call!r} has no widget output; was the notebook "
        "executed with its widget state stored?",
    )
    return page[: view.start()] + wrapped + page[view.end() :]


def add_explorers(
    html_dir: Path = HTML, chapters: list[str] | None = None, *, verbose: bool = False
) -> dict[str, dict]:
    """Place every registered chapter's explorer on its page; returns sizes and timings
    (printed as each page is done if ``verbose``)."""
    import torch

    from course_lib.static_explorer import CHAPTERS

    threads = torch.get_num_threads()
    # Small models, one setting at a time: one thread. On a busy machine PyTorch's default
    # (a thread per core) made chapter 8's 18 generations take 530 s instead of about 35 s.
    torch.set_num_threads(1)
    try:
        return _add_explorers(html_dir, chapters or list(CHAPTERS), verbose)
    finally:
        torch.set_num_threads(threads)


def _add_explorers(html_dir: Path, chapters: list[str], verbose: bool) -> dict[str, dict]:
    from course_lib.static_explorer import chapter_explorer, explorer_html

    report = {}
    for chapter in chapters:
        path = html_dir / "notebooks" / f"{chapter}.html"
        if not path.is_file():
            raise ExplorerPageError(f"{chapter}: no built page at {path}")
        start = time.perf_counter()
        call, ex = chapter_explorer(chapter)
        data = cached_precompute(chapter, ex)
        fragment = explorer_html(ex, data)
        seconds = time.perf_counter() - start
        page = path.read_text(encoding="utf-8")
        path.write_text(place(page, chapter, call, ex.key, fragment), encoding="utf-8")
        report[chapter] = {
            "settings": ex.size,
            "outputs": len(data["outputs"]),
            "bytes": len(fragment.encode("utf-8")),
            "seconds": seconds,
        }
        if verbose:
            r = report[chapter]
            print(
                f"   explorer {chapter}: {r['settings']} settings, {r['outputs']} distinct "
                f"outputs, {r['bytes'] / 1024:.0f} KiB, {r['seconds']:.1f} s",
                flush=True,
            )
    return report


def print_total(report: dict[str, dict]) -> None:
    total_b = sum(r["bytes"] for r in report.values())
    total_s = sum(r["seconds"] for r in report.values())
    print(f"   explorers: {len(report)} pages, {total_b / 1024:.0f} KiB, {total_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="only these chapters (default: all)")
    args = parser.parse_args(argv)
    try:
        print_total(add_explorers(HTML, args.chapters or None, verbose=True))
    except ExplorerPageError as err:
        print(f"error: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
