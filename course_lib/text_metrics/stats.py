"""BLEU's sufficient statistics, counted fast (Chapter 3; notes ``002`` eqs. 7, 9, 10).

:func:`corpus_stats` tokenizes a corpus and counts, per sentence, the clipped n-gram matches and
the n-gram totals of eq. (7), the candidate length (eq. 9) and the closest reference length
(eq. 10, ties to the shorter reference). :func:`~course_lib.text_metrics.bleu.clipped_counts`
computes the same numbers the way the equation reads; this module computes them the way a
computer likes: plain Python whose inner loops run in C (set algebra, ``map``, ``Counter``).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat

from course_lib.checks import check_int
from course_lib.text_metrics._inputs import tokenize_corpus

__all__ = ["BleuStats", "corpus_stats"]


@dataclass(frozen=True)
class BleuStats:
    """Sufficient statistics of BLEU: clipped matches and totals per order, c and r.

    ``matches[n-1]`` and ``totals[n-1]`` are the numerator and denominator of eq. (7) for order n,
    ``c`` is eq. (9) and ``r`` eq. (10). Statistics of sentences add up to those of the corpus.

    >>> BleuStats((3, 1), (4, 3), 4, 5) + BleuStats((2, 0), (2, 1), 2, 2)
    BleuStats(matches=(5, 1), totals=(6, 4), c=6, r=7)
    """

    matches: tuple[int, ...]
    totals: tuple[int, ...]
    c: int
    r: int

    @property
    def max_n(self) -> int:
        return len(self.matches)

    def __add__(self, other: BleuStats) -> BleuStats:
        if not isinstance(other, BleuStats) or other.max_n != self.max_n:
            raise TypeError("only BleuStats of the same maximum order can be added")
        return BleuStats(
            tuple(a + b for a, b in zip(self.matches, other.matches, strict=True)),
            tuple(a + b for a, b in zip(self.totals, other.totals, strict=True)),
            self.c + other.c,
            self.r + other.r,
        )


def _all_ngrams(tokens: list[str], max_n: int) -> list:
    """Unigrams as str, higher orders as tuples, in one list (str and tuples never collide)."""
    if max_n == 4:  # the common case, spelled out: no generator overhead
        t1, t2, t3 = tokens[1:], tokens[2:], tokens[3:]
        return [
            *tokens,
            *zip(tokens, t1, strict=False),
            *zip(tokens, t1, t2, strict=False),
            *zip(tokens, t1, t2, t3, strict=False),
        ]
    return list(
        chain(
            tokens,
            *(zip(*(tokens[i:] for i in range(n)), strict=False) for n in range(2, max_n + 1)),
        )
    )


def _order(g: str | tuple) -> int:
    return 1 if g.__class__ is str else len(g)


def _segment_stats(hyp: list[str], refs: list[list[str]], max_n: int) -> list[int]:
    """[c_i, r_i, matches_1..N, totals_1..N] of one sentence, fast.

    When the candidate repeats no n-gram, the clipped count of eq. (7) for one order is the
    number of elements of that order in ``cand & (ref_1 | ref_2 | ...)`` (sets of n-grams).
    Three paths, by how often the candidate repeats n-grams:

    * none repeated (most sentences): plain sets, computed with C-level set operations;
    * a few repeated (a word like "the"): plain sets, plus the clipped count of each repeated
      n-gram from ``list.count`` on the references;
    * many repeated (character tokens): reference counts looked up for every candidate n-gram,
      ``min(count, max over references)`` mapped in C.
    """
    lh = len(hyp)
    best_d = best_len = -1
    for ref in refs:
        ln = len(ref)
        d = ln - lh if ln >= lh else lh - ln
        if best_d < 0 or d < best_d or (d == best_d and ln < best_len):
            best_d, best_len = d, ln
    out = [lh, best_len] + [0] * max_n + [lh - n if lh > n else 0 for n in range(max_n)]
    if lh == 0:
        return out
    hyp_grams = _all_ngrams(hyp, max_n)
    hyp_set = set(hyp_grams)
    matched: set = set()
    if len(hyp_set) == len(hyp_grams):  # no repeated candidate n-gram
        for ref in refs:
            matched |= hyp_set.intersection(_all_ngrams(ref, max_n))
        for g in matched:
            out[1 + _order(g)] += 1
        return out
    hyp_counts = Counter(hyp_grams)
    repeated = [(g, c) for g, c in hyp_counts.items() if c > 1]
    if len(repeated) <= 8:
        best = dict.fromkeys([g for g, _ in repeated], 0)
        for ref in refs:
            ref_grams = _all_ngrams(ref, max_n)
            common = hyp_set.intersection(ref_grams)
            matched |= common
            for g, _ in repeated:
                if g in common:
                    v = ref_grams.count(g)
                    if v > best[g]:
                        best[g] = v
        for g in matched:
            out[1 + _order(g)] += 1
        for g, c in repeated:  # matched counted each repeated n-gram once; add the rest
            extra = (c if c < best[g] else best[g]) - 1
            if extra > 0:
                out[1 + _order(g)] += extra
        return out
    # Many repeated n-grams: clip with dictionary look-ups mapped in C. The candidate's counter
    # lists its n-grams by order (all unigrams first, then bigrams, ...), so slices of it give
    # the orders; its number of distinct n-grams of order n marks where each slice ends.
    keys = list(hyp_counts)
    per_ref = [list(map(Counter(_all_ngrams(ref, max_n)).get, keys, repeat(0))) for ref in refs]
    ref_max = map(max, *per_ref) if len(per_ref) > 1 else per_ref[0]
    clipped = list(map(min, hyp_counts.values(), ref_max))
    start = 0
    for n in range(1, max_n + 1):
        distinct = (
            len(set(zip(*(hyp[i:] for i in range(n)), strict=False))) if n > 1 else len(set(hyp))
        )
        out[1 + n] = sum(clipped[start : start + distinct])
        start += distinct
    return out


def corpus_stats(
    candidates: Sequence,
    references: Sequence,
    max_n: int = 4,
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
    per_sentence: bool = False,
) -> BleuStats | list[BleuStats]:
    """The statistics of eqs. (7), (9) and (10) for a corpus (or, with ``per_sentence=True``, a
    list with one :class:`BleuStats` per sentence).

    >>> corpus_stats(["the cat sat on the mat"], [["the cat is on the mat", "a cat sat"]], 2)
    BleuStats(matches=(6, 4), totals=(6, 5), c=6, r=6)
    """
    check_int(max_n, "max_n", low=1)
    # Counting allocates millions of short-lived tuples and no reference cycles; pausing the
    # cyclic garbage collector meanwhile saves its repeated scans (10-20% of the time).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        hyps, refs = tokenize_corpus(candidates, references, tokenize, lowercase)
        rows = [_segment_stats(h, rs, max_n) for h, rs in zip(hyps, refs, strict=True)]
    finally:
        if was_enabled:
            gc.enable()
    if per_sentence:
        return [BleuStats(tuple(s[2 : 2 + max_n]), tuple(s[2 + max_n :]), s[0], s[1]) for s in rows]
    sums = [sum(col) for col in zip(*rows, strict=True)]
    return BleuStats(tuple(sums[2 : 2 + max_n]), tuple(sums[2 + max_n :]), sums[0], sums[1])
