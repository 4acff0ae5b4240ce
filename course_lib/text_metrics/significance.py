"""Is a difference of corpus BLEU real? The paired bootstrap (Koehn 2004).

Corpus BLEU is computed from statistics summed over the sentences (eq. 7), so a resampled test
set is a resampled sum: draw the sentence indices with replacement, add up both systems' per-
sentence statistics on the *same* draw (that is what "paired" means: the two systems are always
compared on the same sentences), and take the difference of their BLEU. The spread of that
difference over many draws says how much of it the choice of test sentences alone could produce.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from course_lib.checks import check_int, check_real
from course_lib.text_metrics.bleu import BleuStats, bleu_from_stats

__all__ = ["PairedBootstrap", "paired_bootstrap"]


@dataclass(frozen=True)
class PairedBootstrap:
    """BLEU(a) - BLEU(b) on the whole test set, and a bootstrap interval around it."""

    difference: float
    low: float
    high: float
    confidence: float
    resamples: int

    def __str__(self) -> str:
        def show(x: float) -> str:  # -0.0004 reads "+0.000", not "-0.000"
            return f"{round(x, 3) + 0.0:+.3f}"

        percent = round(100 * self.confidence)
        return (
            f"{show(self.difference)} (a {percent}% interval from {self.resamples} resamples: "
            f"{show(self.low)} to {show(self.high)})"
        )


def _as_array(stats: Sequence[BleuStats], name: str) -> np.ndarray:
    if isinstance(stats, BleuStats) or not isinstance(stats, Sequence) or not stats:
        raise TypeError(
            f"{name} must be a non-empty list of per-sentence BleuStats "
            "(corpus_stats(..., per_sentence=True)), "
            f"got {type(stats).__name__}"
        )
    if not all(isinstance(s, BleuStats) for s in stats):
        raise TypeError(f"every element of {name} must be a BleuStats")
    orders = {s.max_n for s in stats}
    if len(orders) != 1:
        raise ValueError(f"{name} mixes statistics of maximum orders {sorted(orders)}")
    return np.array([(*s.matches, *s.totals, s.c, s.r) for s in stats], dtype=np.int64)


def _stats(row: np.ndarray, n: int) -> BleuStats:
    values = [int(v) for v in row]
    return BleuStats(tuple(values[:n]), tuple(values[n : 2 * n]), values[2 * n], values[2 * n + 1])


def paired_bootstrap(
    stats_a: Sequence[BleuStats],
    stats_b: Sequence[BleuStats],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedBootstrap:
    """Corpus BLEU of system a minus that of system b, with a paired bootstrap interval.

    ``stats_a[i]`` and ``stats_b[i]`` are the statistics of the two systems' outputs for sentence
    i (``corpus_stats(lines, refs, per_sentence=True)``). Each of ``resamples`` draws picks as
    many sentence indices as there are sentences, with replacement and the same for both systems
    (a NumPy generator seeded with ``seed``); the interval is the central ``confidence`` share of
    the resampled differences (percentiles). BLEU is :func:`bleu_from_stats` with its defaults.

    >>> a = [BleuStats((3, 2), (4, 3), 4, 4), BleuStats((2, 1), (3, 2), 3, 3)]
    >>> b = [BleuStats((2, 1), (4, 3), 4, 4), BleuStats((2, 1), (3, 2), 3, 3)]
    >>> r = paired_bootstrap(a, b, resamples=200)
    >>> round(r.difference, 4), r.low <= r.difference <= r.high
    (0.1766, True)
    """
    A, B = _as_array(stats_a, "stats_a"), _as_array(stats_b, "stats_b")
    if A.shape != B.shape:
        raise ValueError(
            f"stats_a and stats_b must cover the same sentences with the same orders, got "
            f"{len(stats_a)} sentences of order {stats_a[0].max_n} and {len(stats_b)} of order "
            f"{stats_b[0].max_n}"
        )
    check_int(resamples, "resamples", low=1)
    check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)
    check_int(seed, "seed", low=0)
    n = stats_a[0].max_n

    def bleu(rows: np.ndarray) -> float:
        return bleu_from_stats(_stats(rows, n)).score

    difference = bleu(A.sum(axis=0)) - bleu(B.sum(axis=0))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(A), size=(resamples, len(A)))
    diffs = [bleu(A[idx].sum(axis=0)) - bleu(B[idx].sum(axis=0)) for idx in draws]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return PairedBootstrap(float(difference), float(low), float(high), confidence, resamples)
