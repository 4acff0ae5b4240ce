"""n-grams and substring counts (Chapter 3; notes ``002`` section 1.3, eqs. 5-6).

A sentence is a sequence of tokens ``y = y_1 ... y_K`` (a list of str; pass a str through
:func:`~course_lib.text_metrics.tokenizers.tokenize` first). An n-gram is a tuple of n tokens.

* eq. (5): ``G_n(y)`` is the *set* of distinct n-grams of y (:func:`ngrams`);
* eq. (6): ``C(s, y)`` counts where the M-token string s occurs in y (:func:`substring_count`),
  at the start positions ``i = 1, ..., K - M + 1``. The notes print the bound as ``i + M <= K``
  (and the window as ``y_i ... y_{i+M}``, which has M + 1 tokens); :func:`substring_count_as_printed`
  keeps the printed bound so the chapter can show what it loses: the last position.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from course_lib.checks import check_int

__all__ = [
    "ngram_counts",
    "ngrams",
    "substring_count",
    "substring_count_as_printed",
]

Tokens = Sequence[str]


def _check_tokens(tokens: object, name: str) -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(
            f"{name} must be a list of tokens, got the str {tokens[:30]!r}: "
            "split it first, e.g. tokenize(text) or text.split()"
        )
    if not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of tokens (str), got {type(tokens).__name__}")
    for i, t in enumerate(tokens):
        if not isinstance(t, str):
            raise TypeError(f"{name}[{i}] must be a str token, got {type(t).__name__}")
    return list(tokens)


def _windows(tokens: list[str], n: int):
    """All n-token windows of ``tokens`` as tuples, left to right (K - n + 1 of them)."""
    return zip(*(tokens[i:] for i in range(n)), strict=False)


def ngrams(tokens: Tokens, n: int) -> set[tuple[str, ...]]:
    """The set ``G_n(y)`` of distinct n-grams of a token sequence, eq. (5).

    A sentence of K tokens has K - n + 1 n-gram *positions*; the set keeps each n-gram once. If
    ``n > K`` the set is empty (eq. (5) lists no element).

    >>> sorted(ngrams("the cat saw the cat".split(), 2))
    [('cat', 'saw'), ('saw', 'the'), ('the', 'cat')]
    >>> ngrams(["a", "b"], 3)
    set()
    """
    tokens = _check_tokens(tokens, "tokens")
    check_int(n, "n", low=1)
    return set(_windows(tokens, n))


def ngram_counts(tokens: Tokens, n: int) -> Counter[tuple[str, ...]]:
    """``{s: C(s, y) for s in G_n(y)}``: every n-gram of y with its number of occurrences.

    The counts add up to K - n + 1 (zero when n > K): the denominator of eq. (7) for one
    sentence.

    >>> ngram_counts("the cat saw the cat".split(), 2)
    Counter({('the', 'cat'): 2, ('cat', 'saw'): 1, ('saw', 'the'): 1})
    """
    tokens = _check_tokens(tokens, "tokens")
    check_int(n, "n", low=1)
    return Counter(_windows(tokens, n))


def substring_count(s: Tokens, y: Tokens) -> int:
    """``C(s, y)``, eq. (6) with the correct bound: the number of i in ``1 .. K - M + 1`` with
    ``y_i ... y_{i+M-1} = s``, for s of M tokens and y of K tokens. Occurrences may overlap.

    >>> substring_count(["the", "cat"], "the cat sat on the cat".split())
    2
    >>> substring_count(["a", "a"], ["a", "a", "a"])  # overlapping: positions 1 and 2
    2
    >>> substring_count(["mat"], "the cat sat on the mat".split())
    1
    """
    s = _check_tokens(s, "s")
    y = _check_tokens(y, "y")
    M, K = len(s), len(y)
    if M == 0:
        raise ValueError("s is empty: C(s, y) needs a substring of at least one token")
    return sum(1 for i in range(K - M + 1) if y[i : i + M] == s)


def substring_count_as_printed(s: Tokens, y: Tokens) -> int:
    """``C(s, y)`` with the bound of eq. (6) as the notes print it, ``i > 0`` and ``i + M <= K``.

    The printed window ``y_i ... y_{i+M}`` has M + 1 tokens and can never equal an M-token s, so
    read literally the count is always 0. With the window the notes intend (M tokens), the bound
    stops at ``i = K - M`` and misses the last start position ``i = K - M + 1``: an n-gram that
    ends the sentence is not counted. This function keeps the M-token window and the printed
    bound, to show that loss.

    >>> y = "the cat sat on the mat".split()
    >>> substring_count(["mat"], y), substring_count_as_printed(["mat"], y)
    (1, 0)
    """
    s = _check_tokens(s, "s")
    y = _check_tokens(y, "y")
    M, K = len(s), len(y)
    if M == 0:
        raise ValueError("s is empty: C(s, y) needs a substring of at least one token")
    # 1-based i with i + M <= K is 0-based j = i - 1 in 0 .. K - M - 1
    return sum(1 for j in range(K - M) if y[j : j + M] == s)
