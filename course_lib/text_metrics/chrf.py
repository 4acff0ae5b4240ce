"""chrF and chrF++: F-scores of character n-grams (Popović 2015, 2017), as sacrebleu computes them.

BLEU and ROUGE count word n-grams, so "cat" and "cats" share nothing. chrF counts *character*
n-grams of orders 1..6 (spaces removed), which rewards a word with the right stem and the wrong
ending; chrF++ adds word unigrams and bigrams. For each order, precision P_n and recall R_n are
pooled over the corpus (matches, candidate n-grams and reference n-grams summed over sentences),
averaged over the orders that occur (sacrebleu's *effective order*), and combined as

    chrF_beta = (1 + beta^2) P R / (beta^2 P + R),    beta = 2 (recall counts twice as much).

With several references, each sentence uses the reference that gives it the highest chrF.
Scores are in [0, 1] here (sacrebleu prints 100 times that), like this package's BLEU.

Two conventions of sacrebleu 2.x that are easy to miss, both reproduced here:

* an order counts towards the averages only if the candidate *and* the reference side have
  n-grams of that order (pooled over the corpus); the other orders are left out, not counted
  as zero. A 3-letter sentence is scored on orders 1 to 3 only;
* when a sentence's chosen reference has no n-gram of some order (it is too short), the
  candidate's n-grams of that order are not counted either, so they do not lower the corpus
  precision.

``eps_smoothing=True`` is sacrebleu's other option (as chrF++.py, Moses and NLTK do): the mean
over *all* orders of the per-order F-scores, an order without n-grams counting a tiny epsilon.

>>> round(sentence_chrf("the cat sat", ["the cats sat"]).score, 6)
0.686606
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from course_lib.checks import check_bool, check_int
from course_lib.text_metrics._inputs import check_corpus

__all__ = ["ChrfResult", "corpus_chrf", "sentence_chrf"]

#: Punctuation that chrF++'s word tokenizer splits off the start or end of a word.
PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: What sacrebleu's epsilon smoothing puts in for a precision or recall with a zero denominator.
EPS = 1e-16


@dataclass(frozen=True)
class ChrfResult:
    """A chrF score and its statistics: per order, (candidate n-grams, reference n-grams, matches).

    ``stats`` lists the character orders 1..char_order, then the word orders 1..word_order.
    """

    score: float
    stats: tuple[tuple[int, int, int], ...]
    beta: float
    char_order: int
    word_order: int
    eps_smoothing: bool = False


def _char_ngrams(text: str, order: int, whitespace: bool) -> list[Counter]:
    """Counts of the character n-grams ``text[i : i + n]``, n = 1..order (white space removed
    unless ``whitespace``). Counter counts a list faster than a generator."""
    if not whitespace:
        text = "".join(text.split())
    return [
        Counter([text[i : i + n] for i in range(len(text) - n + 1)]) for n in range(1, order + 1)
    ]


def _words(text: str) -> list[str]:
    """chrF++'s words: split on white space, one punctuation mark split off an end (the end
    first: "(hi)" gives "(hi" and ")", as in Popović's chrF++.py)."""
    out = []
    for w in text.split():
        if len(w) > 1 and w[-1] in PUNCTUATION:
            out += [w[:-1], w[-1]]
        elif len(w) > 1 and w[0] in PUNCTUATION:
            out += [w[0], w[1:]]
        else:
            out.append(w)
    return out


def _word_ngrams(text: str, order: int) -> list[Counter]:
    if order == 0:
        return []
    words = _words(text)
    return [
        Counter([" ".join(words[i : i + n]) for i in range(len(words) - n + 1)])
        for n in range(1, order + 1)
    ]


def _ngrams(text: str, char_order: int, word_order: int, whitespace: bool) -> list[Counter]:
    return _char_ngrams(text, char_order, whitespace) + _word_ngrams(text, word_order)


def _match(cand: Counter, cand_total: int, ref: Counter) -> tuple[int, int, int]:
    """(candidate n-grams, reference n-grams, clipped matches) of one order."""
    if not ref:  # no reference n-gram of this order: the candidate's do not count either
        return (0, 0, 0)
    matches = sum(min(c, ref[g]) for g, c in cand.items() if g in ref)
    return (cand_total, sum(ref.values()), matches)


def _f_beta(p: float, r: float, b2: float) -> float:
    return (1 + b2) * p * r / (b2 * p + r)


def _f_score(stats: Sequence[tuple[int, int, int]], beta: float, eps_smoothing: bool) -> float:
    """chrF in [0, 1] from per-order statistics."""
    b2 = beta**2
    if eps_smoothing:  # the mean of the per-order F-scores; a ratio over 0 reads as EPS
        total = 0.0
        for n_cand, n_ref, n_match in stats:
            p = n_match / n_cand if n_cand > 0 else EPS
            r = n_match / n_ref if n_ref > 0 else EPS
            total += _f_beta(p, r, b2) if b2 * p + r > 0 else EPS
        return total / len(stats)
    # effective order: average P and R over the orders present on both sides, then F_beta
    precisions, recalls = [], []
    for n_cand, n_ref, n_match in stats:
        if n_cand > 0 and n_ref > 0:
            precisions.append(n_match / n_cand)
            recalls.append(n_match / n_ref)
    if not precisions:
        return 0.0
    p = sum(precisions) / len(precisions)
    r = sum(recalls) / len(recalls)
    return _f_beta(p, r, b2) if p + r > 0 else 0.0


def _check_options(
    char_order: object, word_order: object, beta: object, lowercase: object, whitespace: object
) -> float:
    check_int(char_order, "char_order", low=1)
    check_int(word_order, "word_order", low=0)
    check_bool(lowercase, "lowercase")
    check_bool(whitespace, "whitespace")
    if isinstance(beta, bool) or not isinstance(beta, int | float):
        raise TypeError(
            f"beta must be a positive number, got {beta!r} of type {type(beta).__name__}"
        )
    if not 0 < beta < math.inf:
        raise ValueError(f"beta must be a positive number, got {beta!r}")
    return float(beta)


def corpus_chrf(
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    char_order: int = 6,
    word_order: int = 0,
    beta: float = 2,
    lowercase: bool = False,
    whitespace: bool = False,
    eps_smoothing: bool = False,
) -> ChrfResult:
    """chrF (``word_order=0``) or chrF++ (``word_order=2``) of a corpus, in [0, 1].

    ``references[i]`` is the list of references of ``candidates[i]`` (the notes' layout, as
    :func:`~course_lib.text_metrics.corpus_bleu`; sacrebleu's layout is its transpose); sentences
    are str. ``100 * corpus_chrf(c, refs).score`` is ``sacrebleu.corpus_chrf(c, streams).score``,
    with the same keyword arguments.

    >>> r = corpus_chrf(["the cat sat on the mat"], [["the cat is on the mat"]], word_order=2)
    >>> round(r.score, 6), len(r.stats)
    (0.663607, 8)
    >>> r.stats[6]  # word unigrams: 6 in the candidate, 6 in the reference, 5 shared
    (6, 6, 5)
    """
    check_corpus(candidates, references)
    beta = _check_options(char_order, word_order, beta, lowercase, whitespace)
    check_bool(eps_smoothing, "eps_smoothing")
    for i, cand in enumerate(candidates):
        if not isinstance(cand, str):
            raise TypeError(
                f"chrF works on str sentences: candidates[{i}] is {type(cand).__name__}"
            )
    for i, refs in enumerate(references):
        for j, ref in enumerate(refs):
            if not isinstance(ref, str):
                raise TypeError(
                    f"chrF works on str sentences: references[{i}][{j}] is {type(ref).__name__}"
                )
    totals = [[0, 0, 0] for _ in range(char_order + word_order)]
    for cand, refs in zip(candidates, references, strict=True):
        if lowercase:
            cand, refs = cand.lower(), [r.lower() for r in refs]
        cand_ngrams = _ngrams(cand, char_order, word_order, whitespace)
        cand_totals = [sum(c.values()) for c in cand_ngrams]
        best, best_f = None, -1.0
        for ref in refs:
            ref_ngrams = _ngrams(ref, char_order, word_order, whitespace)
            stats = list(map(_match, cand_ngrams, cand_totals, ref_ngrams))
            f = _f_score(stats, beta, eps_smoothing)
            if f > best_f:  # the first reference wins a tie
                best, best_f = stats, f
        for total, s in zip(totals, best, strict=True):
            total[0] += s[0]
            total[1] += s[1]
            total[2] += s[2]
    stats = tuple((a, b, c) for a, b, c in totals)
    return ChrfResult(
        _f_score(stats, beta, eps_smoothing), stats, beta, char_order, word_order, eps_smoothing
    )


def sentence_chrf(
    candidate: str,
    references: Sequence[str],
    *,
    char_order: int = 6,
    word_order: int = 0,
    beta: float = 2,
    lowercase: bool = False,
    whitespace: bool = False,
    eps_smoothing: bool = False,
) -> ChrfResult:
    """chrF of one sentence against its references: :func:`corpus_chrf` on a corpus of one
    (sacrebleu's ``sentence_chrf`` / ``CHRF.sentence_score``).

    >>> round(sentence_chrf("kitten", ["sitting"]).score, 4)
    0.1903
    >>> sentence_chrf("a cat", ["a cat", "a dog"], word_order=2).score
    1.0
    """
    if not isinstance(candidate, str):
        raise TypeError(f"candidate must be a str, got {type(candidate).__name__}")
    if isinstance(references, str):
        raise TypeError(
            f"references must be a list of reference sentences, got a single str "
            f"{references[:40]!r}: wrap it in a list"
        )
    if not isinstance(references, Sequence):
        raise TypeError(
            f"references must be a list of reference sentences, got {type(references).__name__}"
        )
    if len(references) == 0:
        raise ValueError("references is empty: the candidate has no reference to be compared with")
    return corpus_chrf(
        [candidate],
        [references],
        char_order=char_order,
        word_order=word_order,
        beta=beta,
        lowercase=lowercase,
        whitespace=whitespace,
        eps_smoothing=eps_smoothing,
    )
