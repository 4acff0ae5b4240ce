"""ROUGE-n (Chapter 3; notes ``002`` section 1.3, eq. 12; Lin 2004).

For a candidate c and references y^(1..N), let ``m_i = sum_{s in G_n(y_i)} min(C(s, c), C(s, y_i))``
be the clipped n-gram overlap with reference i, ``|G(y_i)| = len(y_i) - n + 1`` and
``|G(c)| = len(c) - n + 1`` the numbers of n-gram positions. Per reference, recall is
``m_i / |G(y_i)|``, precision ``m_i / |G(c)|`` and F their harmonic mean. The sources disagree on how
to combine several references; :data:`ROUGE_VARIANTS` are the ones in use:

* ``notes``: eq. (12), the **sum** of the recalls ``sum_i m_i / |G(y_i)|`` (recall only; it can
  exceed 1 when there are several references);
* ``mean``: the mean over references of the chosen measure;
* ``max``: the maximum over references of the chosen measure (Lin's ROUGE-N_multi);
* ``pooled``: Lin's eq. (1), numerators and denominators summed over references:
  recall ``sum_i m_i / sum_i |G(y_i)|``, precision ``sum_i m_i / (N |G(c)|)``, F of the two;
* ``best-f``: the reference with the highest F (the first one on ties), then its measure; this is
  what ``rouge_score.RougeScorer.score_multi`` returns.

A ratio 0/0 (a sentence shorter than n) counts as 0, as in ``rouge-score``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from course_lib.checks import check_choice, check_int
from course_lib.text_metrics._inputs import tokenize_corpus

__all__ = ["MEASURES", "ROUGE_VARIANTS", "RougeScore", "corpus_rouge_n", "rouge_n", "rouge_n_pairs"]

ROUGE_VARIANTS = ("notes", "mean", "max", "pooled", "best-f")
MEASURES = ("recall", "precision", "f")


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 0.0


def _f(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


@dataclass(frozen=True)
class RougeScore:
    """The n-gram overlap of a candidate with one reference, and what follows from it."""

    matches: int  # m_i: clipped overlap
    candidate_total: int  # |G(c)|: n-gram positions of the candidate
    reference_total: int  # |G(y_i)|: n-gram positions of the reference

    @property
    def precision(self) -> float:
        return _ratio(self.matches, self.candidate_total)

    @property
    def recall(self) -> float:
        return _ratio(self.matches, self.reference_total)

    @property
    def fmeasure(self) -> float:
        return _f(self.precision, self.recall)

    def measure(self, name: str) -> float:
        return {"recall": self.recall, "precision": self.precision, "f": self.fmeasure}[name]


def _counts(tokens: list[str], n: int) -> Counter:
    return Counter(zip(*(islice(tokens, i, None) for i in range(n)), strict=False))


def _pairs(cand: list[str], refs: list[list[str]], n: int) -> list[RougeScore]:
    cc = _counts(cand, n)
    ct = max(len(cand) - n + 1, 0)
    out = []
    for ref in refs:
        rc = _counts(ref, n)
        m = sum((cc & rc).values())
        out.append(RougeScore(m, ct, max(len(ref) - n + 1, 0)))
    return out


def rouge_n_pairs(
    candidate: str | Sequence[str],
    references: Sequence,
    n: int = 1,
    *,
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> list[RougeScore]:
    """The overlap of ``candidate`` with each reference, one :class:`RougeScore` per reference.

    >>> [(s.matches, s.reference_total) for s in rouge_n_pairs("the cat sat",
    ...                                     ["the cat sat down", "a dog sat"], 1)]
    [(3, 4), (1, 3)]
    """
    check_int(n, "n", low=1)
    hyps, refs = tokenize_corpus([candidate], [references], tokenize, lowercase)
    return _pairs(hyps[0], refs[0], n)


def _combine(pairs: list[RougeScore], variant: str, measure: str) -> float:
    if variant == "notes":
        if measure != "recall":
            raise ValueError(
                f"eq. (12) defines recall only; for measure={measure!r} choose one of the "
                "variants 'mean', 'max', 'pooled' or 'best-f'"
            )
        return sum(p.recall for p in pairs)
    if variant == "mean":
        return sum(p.measure(measure) for p in pairs) / len(pairs)
    if variant == "max":
        return max(p.measure(measure) for p in pairs)
    if variant == "best-f":
        best = max(range(len(pairs)), key=lambda i: (pairs[i].fmeasure, -i))
        return pairs[best].measure(measure)
    m = sum(p.matches for p in pairs)
    recall = _ratio(m, sum(p.reference_total for p in pairs))
    precision = _ratio(m, len(pairs) * pairs[0].candidate_total)
    return {"recall": recall, "precision": precision, "f": _f(precision, recall)}[measure]


def rouge_n(
    candidate: str | Sequence[str],
    references: Sequence,
    n: int = 1,
    *,
    variant: str = "notes",
    measure: str = "recall",
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> float:
    """ROUGE-n of one candidate against its references (eq. (12) by default).

    >>> cand, refs = "the cat sat", ["the cat sat down", "a dog sat"]
    >>> rouge_n(cand, refs, 1)  # eq. (12): 3/4 + 1/3
    1.0833333333333333
    >>> rouge_n(cand, refs, 1, variant="pooled")  # (3 + 1) / (4 + 3)
    0.5714285714285714
    >>> rouge_n(cand, refs, 1, variant="max", measure="precision")
    1.0
    """
    check_choice(variant, "variant", ROUGE_VARIANTS)
    check_choice(measure, "measure", MEASURES)
    pairs = rouge_n_pairs(candidate, references, n, tokenize=tokenize, lowercase=lowercase)
    return _combine(pairs, variant, measure)


def corpus_rouge_n(
    candidates: Sequence,
    references: Sequence,
    n: int = 1,
    *,
    variant: str = "notes",
    measure: str = "recall",
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> float:
    """The mean over sentences of :func:`rouge_n` (how ROUGE is reported for a system).

    >>> corpus_rouge_n(["a b", "c"], [["a b"], ["d"]], 1)
    0.5
    """
    check_int(n, "n", low=1)
    check_choice(variant, "variant", ROUGE_VARIANTS)
    check_choice(measure, "measure", MEASURES)
    hyps, refs = tokenize_corpus(candidates, references, tokenize, lowercase)
    scores = [
        _combine(_pairs(h, rs, n), variant, measure) for h, rs in zip(hyps, refs, strict=True)
    ]
    return sum(scores) / len(scores)
