"""Exercise checkers of Chapter 7: ``from course_lib.bpe import exercises as check``.

>>> count_pairs(lambda words: {}).passed
False
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from course_lib.bpe.readable import merge_word
from course_lib.bpe.tokenizer import Tokenizer
from course_lib.checker import Outcome, call, check_cases

__all__ = ["count_pairs", "encode_word", "merge_pair"]


def _pairs(words: dict) -> dict:
    out: Counter = Counter()
    for word, freq in words.items():
        for pair in zip(word, word[1:], strict=False):
            out[pair] += freq
    return dict(out)


def count_pairs(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 7.1: ``fn(words)`` counts adjacent pairs; ``words`` maps tuples of symbols to counts."""
    cases = [
        ("the notes' toy words", {tuple("low") + ("</w>",): 5, tuple("lower") + ("</w>",): 2}),
        ("a repeated pair in one word", {("a", "a", "a"): 3}),
        ("a one-symbol word", {("x",): 4, ("x", "y"): 1}),
    ]

    def compare(got: object, words: dict) -> str | None:
        want = _pairs(words)
        if not isinstance(got, dict):
            return f"return a dict from pair to count, got {type(got).__name__}"
        got = {k: v for k, v in got.items() if v}
        if got == want:
            return None
        unweighted = dict(Counter(p for w in words for p in zip(w, w[1:], strict=False)))
        if got == unweighted:
            return "every word counts as often as it occurs: add the word's count, not 1"
        if ("a", "a") in want and got.get(("a", "a")) == 3:
            return "'a a a' holds the pair (a, a) twice (overlapping): count every position"
        return f"you return {got}, the right counts are {want}"

    return check_cases(
        "counting adjacent pairs",
        fn,
        [(d, (w,), w) for d, w in cases],
        compare=compare,
        require=require,
    )


def merge_pair(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 7.2: ``fn(ids, pair, new_id)`` replaces each occurrence of ``pair``, left to right."""
    cases = [
        ("minbpe's example", ([1, 2, 3, 1, 2], (1, 2), 4)),
        ("three in a row", ([7, 7, 7], (7, 7), 9)),
        ("no occurrence", ([1, 3, 2], (1, 2), 4)),
        ("the pair at the end", ([5, 1, 2], (1, 2), 8)),
    ]

    def compare(got: object, args: tuple) -> str | None:
        ids, pair, new = args
        want = list(merge_word(tuple(ids), pair, new))
        if isinstance(got, tuple):
            got = list(got)
        if got == want:
            return None
        if ids == [7, 7, 7] and got == [9, 9]:
            return "(7, 7, 7) holds only one non-overlapping (7, 7): merge left to right and skip the merged pair"
        return f"you return {got}, expected {want}"

    return check_cases(
        "applying one merge",
        fn,
        [(d, a, a) for d, a in cases],
        compare=compare,
        require=require,
    )


def encode_word(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 7.3: ``fn(word, merges)`` encodes a word (bytes) with learned merges, returning
    the list of byte-string tokens."""
    merges = [(b"s", b"t"), (b"e", b"st"), (b"o", b"w"), (b"l", b"ow"), (b"n", b"e")]
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in merges:
        vocab[len(vocab)] = a + b
    tok = Tokenizer(vocab, merges)
    words = [b"lowest", b"newest", b"slow", b"best", b"x"]

    def compare(got: object, word: bytes) -> str | None:
        want = [tok.vocab[i] for i in tok._encode_piece(word)]
        if got == want:
            return None
        greedy, _ = call(_by_frequency_order, word, merges[::-1])
        if got == greedy:
            return (
                "apply the merges in the order they were learned (earliest first), not the reverse"
            )
        return f"you return {got}, expected {want}"

    return check_cases(
        "encoding a word with merges",
        fn,
        [(f"{w!r}", (w, merges), w) for w in words],
        compare=compare,
        require=require,
    )


def _by_frequency_order(word: bytes, merges: list) -> list[bytes]:
    parts = [word[i : i + 1] for i in range(len(word))]
    for a, b in merges:
        parts = list(merge_word(tuple(parts), (a, b), a + b))
    return parts
