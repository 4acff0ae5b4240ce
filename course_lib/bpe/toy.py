"""The notes' BPE listing (Sennrich et al. 2016) on its toy vocabulary, as printed and repaired.

Listing 1 of Strabel's notes counts adjacent symbol pairs (``get_stats``), merges the most
frequent pair everywhere (``merge_vocab``) and repeats ten times on four words with their
counts, ``low`` 5, ``lower`` 2, ``newest`` 6, ``widest`` 3, each ending in ``</w>``.

As printed, ``merge_vocab`` never merges anything: its pattern starts with the look-ahead
``(?!\\S)`` where the original has the look-behind ``(?<!\\S)`` (the look-ahead demands a space
before a bigram that starts with a letter, which never happens), and it substitutes
``' '.join(pair)``, the bigram with its space, instead of ``''.join(pair)``. Either slip alone
makes every merge a no-op, so the printed loop reports the same pair ten times.

>>> [pair for pair, _, _ in trace(TOY_VOCAB, 3)]
[('e', 's'), ('es', 't'), ('est', '</w>')]
>>> [pair for pair, _, _ in trace(TOY_VOCAB, 3, as_printed=True)]
[('e', 's'), ('e', 's'), ('e', 's')]
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping

from course_lib.checks import check_choice, check_int

__all__ = ["TIE_RULES", "TOY_VOCAB", "get_stats", "merge_vocab", "trace"]

#: The listing's vocabulary: space-separated symbols with an end-of-word marker, and counts.
TOY_VOCAB: dict[str, int] = {
    "l o w </w>": 5,
    "l o w e r </w>": 2,
    "n e w e s t </w>": 6,
    "w i d e s t </w>": 3,
}


def get_stats(vocab: Mapping[str, int]) -> dict[tuple[str, str], int]:
    """Count every adjacent pair of symbols, weighted by the word's count (the listing's lines 3-9).

    >>> get_stats({"a b a b": 2})
    {('a', 'b'): 4, ('b', 'a'): 2}
    """
    pairs: dict[tuple[str, str], int] = defaultdict(int)
    for word, freq in vocab.items():
        symbols = word.split()
        for left, right in zip(symbols, symbols[1:], strict=False):
            pairs[left, right] += freq
    return dict(pairs)


def merge_vocab(
    pair: tuple[str, str], vocab: Mapping[str, int], as_printed: bool = False
) -> dict[str, int]:
    """Replace every occurrence of the two symbols ``pair`` by their concatenation.

    ``as_printed=True`` runs the listing's lines 11-18 exactly as the notes print them (which
    changes nothing).

    >>> merge_vocab(("a", "b"), {"a b c a b": 1})
    {'ab c ab': 1}
    >>> merge_vocab(("a", "b"), {"a b c a b": 1}, as_printed=True)
    {'a b c a b': 1}
    """
    bigram = re.escape(" ".join(pair))
    if as_printed:
        pattern, joined = re.compile(r"(?!\S)" + bigram + r"(?!\S)"), " ".join(pair)
    else:
        pattern, joined = re.compile(r"(?<!\S)" + bigram + r"(?!\S)"), "".join(pair)
    return {pattern.sub(joined, word): freq for word, freq in vocab.items()}


def _first(pairs: dict) -> tuple[str, str]:
    return max(pairs, key=pairs.get)  # the listing's rule: the first maximum in dict order


def _greatest(pairs: dict) -> tuple[str, str]:
    return max(pairs, key=lambda p: (pairs[p], p))  # ties: the lexicographically greatest


def _least(pairs: dict) -> tuple[str, str]:
    best = max(pairs.values())
    return min(p for p, c in pairs.items() if c == best)  # ties: the lexicographically least


#: How a tie between equally frequent pairs is broken.
TIE_RULES: dict[str, Callable[[dict], tuple[str, str]]] = {
    "first": _first,
    "greatest": _greatest,
    "least": _least,
}


def trace(
    vocab: Mapping[str, int],
    num_merges: int,
    *,
    tie_rule: str = "first",
    as_printed: bool = False,
) -> list[tuple[tuple[str, str], int, list[tuple[str, str]]]]:
    """Run the listing: for each step, (the merged pair, its count, every pair tied with it).

    ``tie_rule`` is ``"first"`` (the listing's ``max(pairs, key=pairs.get)``: the first maximum
    in the order pairs were first counted), ``"greatest"`` (the course's and CS336's rule) or
    ``"least"``.
    """
    check_int(num_merges, "num_merges", low=0)
    check_choice(tie_rule, "tie_rule", TIE_RULES)
    steps = []
    for _ in range(num_merges):
        pairs = get_stats(vocab)
        if not pairs:
            break
        best = TIE_RULES[tie_rule](pairs)
        tied = [p for p, c in pairs.items() if c == pairs[best]]
        steps.append((best, pairs[best], tied))
        vocab = merge_vocab(best, vocab, as_printed=as_printed)
    return steps
