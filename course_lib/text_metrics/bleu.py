"""BLEU (Chapter 3; notes ``002`` section 1.3, eqs. 7-11; Papineni et al. 2002).

For a candidate corpus ``candidates[i]`` with reference sets ``references[i]``:

* eq. (7), modified n-gram precision: ``p_n = sum_i sum_{s in G_n(c_i)} min(C(s, c_i),
  max_{y in S_i} C(s, y)) / sum_i (|c_i| - n + 1)``: each candidate n-gram counts at most as
  often as it occurs in the one reference that has it most ("clipping"), summed over the corpus;
* eq. (9) ``c = sum_i |c_i|``; eq. (10) ``r = sum_i |y*_i|``, y*_i the reference whose length is
  closest to ``|c_i|``: among equally close references, the *shorter* one (as sacrebleu);
* eq. (8) ``BP = exp(-(r/c - 1)^+)``; eq. (11) ``BLEU_w = BP * exp(sum_n w_n ln p_n)``.

Scores are in [0, 1] as in the notes; sacrebleu reports 100 times that. Everything is computed
from :class:`BleuStats` (matches and totals per order, c and r), which add up over sentences:
corpus BLEU is *not* the mean of sentence BLEUs.

Conventions where the notes leave a case open (all as sacrebleu 2.6 does, so that the scores
agree with ``sacrebleu.corpus_bleu`` to 1e-9):

* ``c = 0`` gives ``BP = 0``; if no n-gram of any order matches, BLEU is 0 for every smoothing;
* an order with no candidate n-gram at all (every sentence shorter than n) has an undefined
  ``p_n`` (0/0): BLEU is 0, unless ``effective_order=True``, which drops those orders and
  renormalises the remaining weights;
* a zero weight removes its order (``0 * ln 0`` is taken as 0);
* smoothing (Chen and Cherry 2014): ``floor`` gives a zero-match order ``p_n = eps / total_n``
  (eps = 0.1); ``add-k`` adds k (= 1) to matches and totals of every order n >= 2; ``exp``
  gives the k-th zero-match order ``p_n = 1 / (2^k total_n)`` (the NIST geometric rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from course_lib.checks import check_choice, check_int
from course_lib.text_metrics._inputs import check_weights
from course_lib.text_metrics.ngrams import ngram_counts
from course_lib.text_metrics.stats import BleuStats, corpus_stats

__all__ = [
    "SMOOTHING",
    "BleuResult",
    "BleuStats",
    "bleu_from_stats",
    "brevity_penalty",
    "clipped_counts",
    "closest_reference_length",
    "corpus_bleu",
    "corpus_stats",
    "effective_reference_length",
    "modified_precision",
    "sentence_bleu",
]

#: Smoothing methods and their default values (sacrebleu's names; Chen and Cherry 2014).
SMOOTHING: dict[str, float | None] = {"none": None, "floor": 0.1, "add-k": 1.0, "exp": None}
UNIFORM4 = (0.25, 0.25, 0.25, 0.25)


@dataclass(frozen=True)
class BleuResult:
    """A BLEU score in [0, 1] with everything it was computed from."""

    score: float
    precisions: tuple[float, ...]  # p_n as used in eq. (11), after smoothing (0.0 if undefined)
    bp: float
    stats: BleuStats
    weights: tuple[float, ...]
    smoothing: str = "none"

    @property
    def matches(self) -> tuple[int, ...]:
        return self.stats.matches

    @property
    def totals(self) -> tuple[int, ...]:
        return self.stats.totals

    @property
    def c(self) -> int:
        return self.stats.c

    @property
    def r(self) -> int:
        return self.stats.r

    def __str__(self) -> str:
        ps = "/".join(f"{p:.3f}" for p in self.precisions)
        return (
            f"BLEU = {self.score:.4f} (p_n = {ps}, BP = {self.bp:.3f}, c = {self.c}, r = {self.r})"
        )


def closest_reference_length(candidate_length: int, reference_lengths: Sequence[int]) -> int:
    """The length of the reference closest in length to the candidate, eq. (10)'s argmin.

    When two references are equally close (one shorter, one longer), the notes' argmin has two
    elements; we take the shorter one, as sacrebleu does.

    >>> closest_reference_length(5, [4, 6, 9])  # 4 and 6 are both 1 away: the shorter wins
    4
    >>> closest_reference_length(5, [])
    Traceback (most recent call last):
    ...
    ValueError: reference_lengths is empty: a candidate needs at least one reference
    """
    check_int(candidate_length, "candidate_length", low=0)
    if isinstance(reference_lengths, str) or not isinstance(reference_lengths, Sequence):
        raise TypeError(f"reference_lengths must be a list of int, got {reference_lengths!r}")
    if len(reference_lengths) == 0:
        raise ValueError("reference_lengths is empty: a candidate needs at least one reference")
    lengths = [
        check_int(r, f"reference_lengths[{i}]", low=0) for i, r in enumerate(reference_lengths)
    ]
    return min(lengths, key=lambda r: (abs(r - candidate_length), r))


def effective_reference_length(
    candidate_lengths: Sequence[int], reference_lengths: Sequence[Sequence[int]]
) -> int:
    """``r`` of eq. (10): the sum over sentences of the closest reference length.

    >>> effective_reference_length([5, 3], [[4, 6], [3, 10]])
    7
    """
    if len(candidate_lengths) != len(reference_lengths):
        raise ValueError(
            f"got {len(candidate_lengths)} candidate lengths but {len(reference_lengths)} "
            "lists of reference lengths"
        )
    return sum(
        closest_reference_length(c, rs)
        for c, rs in zip(candidate_lengths, reference_lengths, strict=True)
    )


def brevity_penalty(c: int, r: int) -> float:
    """Eq. (8): ``BP = exp(-(r/c - 1)^+)``, i.e. 1 if ``c >= r`` else ``exp(1 - r/c)``.

    Only a candidate corpus *shorter* than the references is penalised (a long one already loses
    precision). ``c = 0`` gives 0 (the limit of ``exp(1 - r/c)`` as c -> 0).

    >>> brevity_penalty(10, 10), brevity_penalty(12, 10), round(brevity_penalty(8, 10), 6)
    (1.0, 1.0, 0.778801)
    >>> brevity_penalty(0, 5)
    0.0
    """
    check_int(c, "c", low=0)
    check_int(r, "r", low=0)
    if c >= r:
        return 1.0
    return math.exp(1.0 - r / c) if c > 0 else 0.0


def clipped_counts(
    candidate: Sequence[str], references: Sequence[Sequence[str]], n: int
) -> tuple[int, int]:
    """One sentence's numerator and denominator of eq. (7), written as the equation reads.

    numerator = ``sum_{s in G_n(c)} min(C(s, c), max_{y in S} C(s, y))``, denominator =
    ``sum_{s in G_n(c)} C(s, c)`` (= ``len(c) - n + 1``, or 0). Tokens in, tokens out.

    >>> cand = "the the the the the the the".split()  # Papineni et al.'s example
    >>> refs = ["the cat is on the mat".split(), "there is a cat on the mat".split()]
    >>> clipped_counts(cand, refs, 1)  # "the" counts at most twice (reference 1 has it twice)
    (2, 7)
    """
    cand_counts = ngram_counts(candidate, n)
    if isinstance(references, str) or not isinstance(references, Sequence) or not references:
        raise ValueError("references must be a non-empty list of token lists")
    ref_counts = [ngram_counts(y, n) for y in references]
    numerator = sum(min(count, max(rc[s] for rc in ref_counts)) for s, count in cand_counts.items())
    return numerator, sum(cand_counts.values())


def modified_precision(
    candidates: Sequence,
    references: Sequence,
    n: int,
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
) -> float:
    """Eq. (7): the corpus-level modified n-gram precision ``p_n``.

    >>> modified_precision(["the the the the the the the"],
    ...                    [["the cat is on the mat", "there is a cat on the mat"]], 1)
    0.2857142857142857
    """
    check_int(n, "n", low=1)
    stats = corpus_stats(candidates, references, n, tokenize=tokenize, lowercase=lowercase)
    if stats.totals[n - 1] == 0:
        raise ValueError(
            f"p_{n} is 0/0: no candidate has {n} or more tokens, so there is no {n}-gram to "
            "score (eq. 7 is undefined)"
        )
    return stats.matches[n - 1] / stats.totals[n - 1]


def bleu_from_stats(
    stats: BleuStats,
    weights: Sequence[float] | None = None,
    *,
    smoothing: str = "none",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> BleuResult:
    """Eqs. (8) and (11) from the statistics: ``BP * exp(sum_n w_n ln p_n)``.

    ``weights`` default to uniform over ``stats.max_n`` orders; fewer weights than orders use the
    first ``len(weights)`` orders. See the module docstring for the conventions and smoothing.

    >>> s = BleuStats(matches=(5, 3), totals=(6, 5), c=6, r=6)
    >>> round(bleu_from_stats(s).score, 6)  # sqrt(5/6 * 3/5), BP = 1
    0.707107
    >>> bleu_from_stats(BleuStats((2, 0), (3, 2), 3, 4)).score  # p_2 = 0
    0.0
    >>> round(bleu_from_stats(BleuStats((2, 0), (3, 2), 3, 4), smoothing="floor").score, 6)  # p_2 = 0.1 / 2
    0.13082
    """
    if not isinstance(stats, BleuStats):
        raise TypeError(f"stats must be a BleuStats, got {type(stats).__name__}")
    w = check_weights(weights if weights is not None else [1 / stats.max_n] * stats.max_n)
    N = len(w)
    if N > stats.max_n:
        raise ValueError(
            f"got {N} weights but statistics for orders 1..{stats.max_n} only: compute them "
            f"with max_n={N}"
        )
    check_choice(smoothing, "smoothing", SMOOTHING)
    if not isinstance(effective_order, bool):
        raise TypeError(f"effective_order must be True or False, got {effective_order!r}")
    k = SMOOTHING[smoothing] if smooth_value is None else float(smooth_value)
    if k is not None and not (math.isfinite(k) and k > 0):
        raise ValueError(f"smooth_value must be a positive number, got {smooth_value!r}")
    bp = brevity_penalty(stats.c, stats.r)
    precisions = [0.0] * N
    if not any(stats.matches[:N]):
        return BleuResult(0.0, tuple(precisions), bp, stats, w, smoothing)
    used, zeros = N, 0
    for n in range(N):
        m, t = stats.matches[n], stats.totals[n]
        if smoothing == "add-k" and n > 0:
            m, t = m + k, t + k
        if t == 0:  # no candidate n-gram of this order: p_n is 0/0
            used = n
            break
        if m > 0:
            precisions[n] = m / t
        elif smoothing == "exp":
            zeros += 1
            precisions[n] = 1.0 / (2**zeros * t)
        elif smoothing == "floor":
            precisions[n] = k / t
    if used < N and not effective_order and any(w[used:]):
        return BleuResult(0.0, tuple(precisions), bp, stats, w, smoothing)
    norm = math.fsum(w[:used]) if effective_order else 1.0
    if any(w[n] > 0 and precisions[n] == 0.0 for n in range(used)):
        return BleuResult(0.0, tuple(precisions), bp, stats, w, smoothing)
    log_sum = sum(w[n] / norm * math.log(precisions[n]) for n in range(used) if w[n] > 0)
    return BleuResult(bp * math.exp(log_sum), tuple(precisions), bp, stats, w, smoothing)


def corpus_bleu(
    candidates: Sequence,
    references: Sequence,
    weights: Sequence[float] = UNIFORM4,
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
    smoothing: str = "none",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> BleuResult:
    """Corpus BLEU, eq. (11), with ``len(weights)`` n-gram orders (default BLEU-4, uniform).

    ``references[i]`` is the list of references of ``candidates[i]``; sentences are str
    (tokenized with ``tokenize``) or lists of tokens. No smoothing by default, as in the notes
    (``sacrebleu.corpus_bleu`` defaults to ``smooth_method="exp"``).

    >>> r = corpus_bleu(["the cat sat on the mat"], [["the cat is on the mat", "a cat sat"]],
    ...                 weights=(0.5, 0.5))
    >>> round(r.score, 6), r.matches, r.totals
    (0.894427, (6, 4), (6, 5))
    """
    w = check_weights(weights)
    stats = corpus_stats(candidates, references, len(w), tokenize=tokenize, lowercase=lowercase)
    return bleu_from_stats(
        stats, w, smoothing=smoothing, smooth_value=smooth_value, effective_order=effective_order
    )


def sentence_bleu(
    candidate: str | Sequence[str],
    references: Sequence,
    weights: Sequence[float] = UNIFORM4,
    **kwargs,
) -> BleuResult:
    """BLEU of one sentence: :func:`corpus_bleu` on a corpus of one (same keyword arguments).

    >>> sentence_bleu("the cat sat", ["the cat sat on the mat"]).score  # no 4-gram: 0
    0.0
    >>> round(sentence_bleu("the cat sat", ["the cat sat on the mat"],
    ...                     effective_order=True).score, 6)  # BP = exp(1 - 6/3)
    0.367879
    """
    if isinstance(references, str):
        raise TypeError("references must be a list of reference sentences, got a single str")
    return corpus_bleu([candidate], [references], weights, **kwargs)
