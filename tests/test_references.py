"""book/references.bib: each key once (a repeated entry is a warning, and the strict website
build fails on it), and every key a page cites is there."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "book" / "references.bib"


def bib_keys() -> list[str]:
    return re.findall(r"^@\w+\{([^,\s]+),", BIB.read_text(encoding="utf-8"), re.M)


def cited_keys() -> set[str]:
    keys = set()
    sources = [*(ROOT / "notebooks").glob("[0-9][0-9]_*.py"), *(ROOT / "book").glob("*.md")]
    for path in sources:
        text = re.sub(r"``.*?``", "", path.read_text(encoding="utf-8"))  # syntax shown as code
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            keys |= {k.strip() for k in group.split(",")}
    return keys


def test_every_bibliography_key_is_there_once():
    repeated = [k for k, n in Counter(bib_keys()).items() if n > 1]
    assert not repeated, f"book/references.bib repeats {repeated}"


def test_every_cited_key_is_in_the_bibliography():
    missing = sorted(cited_keys() - set(bib_keys()))
    assert not missing, f"cited but not in book/references.bib: {missing}"
