"""Chapter 7's tokenizers as tables for the website's live views (``tools/live_pages.py``).

The page tokenises the reader's text in JavaScript with the same two steps as
:class:`~course_lib.bpe.tokenizer.Tokenizer`: GPT-2's pre-tokenisation pattern, then the merges
in the order they were learned. Nothing is re-derived in the browser; the page gets tables:

* :func:`tokenizer_table`: the id of each byte, and each merge as three ids (left, right, the
  merged token), in rank order, plus the special tokens. Merging ids is merging byte strings:
  each id names one byte string, so the pair of ids names the pair of strings.
* :func:`js_pattern`: GPT-2's pattern with ``\\s``, ``\\p{L}`` and ``\\p{N}`` spelt out as the
  code-point ranges that the ``regex`` module running here matches, so that the browser's
  regular expressions (another Unicode version, JavaScript's own ``\\s``) cannot differ.

The browser test (``tests/test_live.py``) checks the page's tokens against
:meth:`Tokenizer.encode` on many texts.

>>> from course_lib.bpe.analysis import tokenizer_from_merges
>>> table = tokenizer_table(tokenizer_from_merges([(b"a", b"b"), (b"ab", b"c")]))
>>> table["merges"], table["bytes"][97], table["vocab_size"]
([97, 98, 256, 256, 99, 257], 97, 258)
>>> js_pattern("a\\\\s+(?!\\\\S)")  # doctest: +ELLIPSIS
'a[\\\\u{9}-\\\\u{d}\\\\u{20}...]+(?![^\\\\u{9}-\\\\u{d}\\\\u{20}...])'
"""

from __future__ import annotations

import functools
import re
from typing import Any

from course_lib.bpe.tokenizer import Tokenizer

__all__ = ["js_pattern", "tokenizer_table"]


def tokenizer_table(tok: Tokenizer) -> dict[str, Any]:
    """What the page needs to encode and decode as ``tok`` does (JSON-serialisable).

    ``bytes``: the id of each byte value; ``merges``: ``[a0, b0, c0, a1, b1, c1, ...]``, merge r
    joins the tokens a_r and b_r into c_r; ``specials``: ``{text: id}``; ``extra``: ids that
    are neither a byte, a merge nor a special, with their bytes; ``pattern``: the
    pre-tokenisation pattern for JavaScript (:func:`js_pattern`).
    """
    if not isinstance(tok, Tokenizer):
        raise TypeError(
            f"tok must be a course_lib.bpe.tokenizer.Tokenizer, got {type(tok).__name__}"
        )
    ids = tok.ids
    ranked = sorted(tok.ranks.items(), key=lambda kv: kv[1])  # each pair once, first rank kept
    merges: list[int] = []
    for (a, b), _rank in ranked:
        merges += [ids[a], ids[b], ids[a + b]]
    specials = {s: ids[s.encode("utf-8")] for s in tok.special_tokens}
    made = {ids[bytes([b])] for b in range(256)} | set(merges[2::3]) | set(specials.values())
    extra = {str(i): list(t) for i, t in tok.vocab.items() if i not in made and ids.get(t) == i}
    from course_lib.bpe.train import GPT2_PATTERN

    return {
        "kind": "bpe",
        "bytes": [ids[bytes([b])] for b in range(256)],
        "merges": merges,
        "specials": specials,
        "extra": extra,
        "vocab_size": max(tok.vocab) + 1,
        "pattern": js_pattern(GPT2_PATTERN),
    }


@functools.cache
def _every() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


@functools.cache
def _ranges(escape: str) -> str:
    """The code points ``regex`` matches with ``escape`` (``\\s``, ``\\p{L}``, ``\\p{N}``), as
    the inside of a JavaScript character class with the ``u`` flag."""
    import regex

    # every code point but the surrogates (no letter, number or space in either engine), in
    # order: each run of matches is a range, split where the string skips the surrogates
    out = []
    for m in regex.finditer(f"(?:{escape})+", _every()):
        run = m.group()
        start = prev = ord(run[0])
        for ch in run[1:]:
            cp = ord(ch)
            if cp != prev + 1:
                out.append((start, prev))
                start = cp
            prev = cp
        out.append((start, prev))
    return "".join(f"\\u{{{a:x}}}" if a == b else f"\\u{{{a:x}}}-\\u{{{b:x}}}" for a, b in out)


_ESCAPE = re.compile(r"\\[sS]|\\p\{[LN]\}|\[\^?|\]")


def js_pattern(pattern: str) -> str:
    """``pattern`` (a ``regex`` pattern using ``\\s``, ``\\S``, ``\\p{L}``, ``\\p{N}``) for
    JavaScript's ``RegExp(..., "gu")``, with those classes as explicit code-point ranges.

    Inside a bracket class the ranges are spliced in; outside, each becomes a class of its own
    (``\\S`` the negated class). Other escapes and characters are kept as they are.
    """
    out, pos, in_class = [], 0, False
    for m in _ESCAPE.finditer(pattern):
        out.append(pattern[pos : m.start()])
        tok = m.group()
        if tok.startswith("["):
            in_class = True
            out.append(tok)
        elif tok == "]":
            in_class = False
            out.append(tok)
        elif tok == "\\S":
            if in_class:
                raise ValueError(r"\S inside a character class is not supported")
            out.append(f"[^{_ranges(chr(92) + 's')}]")
        else:
            inner = _ranges(tok)
            out.append(inner if in_class else f"[{inner}]")
        pos = m.end()
    out.append(pattern[pos:])
    return "".join(out)
