"""chrF and chrF++: F-scores of character n-grams (Popović 2015, 2017), as sacrebleu computes them.

BLEU and ROUGE count word n-grams, so "cat" and "cats" share nothing. chrF counts *character*
n-grams of orders 1..6 (spaces removed), which rewards a word with the right stem and the wrong
ending; chrF++ adds word unigrams and bigrams. For each order, precision P_n and recall R_n are
pooled over the corpus (matches, candidate n-grams and reference n-grams summed over sentences),
averaged over the orders that occur (sacrebleu's *effective order*), and combined as

    chrF_beta = (1 + beta^2) P R / (beta^2 P + R),    beta = 2 (recall counts twice as much).

With several references, each sentence uses the reference that gives it the highest chrF.
Scores are in [0, 1] here (sacrebleu prints 100 times that), like this package's BLEU.

>>> round(sentence_chrf("the cat sat", ["the cats sat"]).score, 6)
0.686606
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from course_lib.checks import check_bool, check_int
from course_lib.text_metrics._inputs import check_corpus

__all__ = ["ChrfResult", "corpus_chrf", "sentence_chrf"]

#: Punctuation that chrF++'s word tokenizer splits off the start or end of a word.
PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


@dataclass(frozen=True)
class ChrfResult:
    """A chrF score and its statistics: per order, (candidate n-grams, reference n-grams, matches)."""

    score: float
    stats: tuple[tuple[int, int, int], ...]
    beta: float
    char_order: int
    word_order: int


def _char_ngrams(text: str, order: int, whitespace: bool) -> list[Counter]:
    if not whitespace:
        text = "".join(text.split())
    return [Counter(text[i : i + n] for i in range(len(text) - n + 1)) for n in range(1, order + 1)]


def _words(text: str) -> list[str]:
    """chrF++'s words: split on white space, one punctuation mark split off an end."""
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
    words = _words(text)
    return [
        Counter(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
        for n in range(1, order + 1)
    ]


def _ngrams(text: str, char_order: int, word_order: int, whitespace: bool) -> list[Counter]:
    return _char_ngrams(text, char_order, whitespace) + _word_ngrams(text, word_order)


def _match(cand: Counter, ref: Counter) -> tuple[int, int, int]:
    total = sum(cand.values())
    matches = sum(min(c, ref[g]) for g, c in cand.items() if g in ref)
    # a candidate n-gram of an order the reference does not have counts as nothing
    return (total if ref else 0, sum(ref.values()), matches)


def _f_score(stats: Sequence[tuple[int, int, int]], beta: float) -> float:
    """chrF from per-order statistics: effective-order averages of P and R, then F_beta."""
    b2 = beta * beta
    precisions, recalls = [], []
    for n_cand, n_ref, n_match in stats:
        if n_cand > 0 and n_ref > 0:
            precisions.append(n_match / n_cand)
            recalls.append(n_match / n_ref)
    if not precisions:
        return 0.0
    p = sum(precisions) / len(precisions)
    r = sum(recalls) / len(recalls)
    return (1 + b2) * p * r / (b2 * p + r) if p + r > 0 else 0.0


def _check_orders(char_order: int, word_order: int, beta: float) -> None:
    check_int(char_order, "char_order", low=1)
    check_int(word_order, "word_order", low=0)
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not beta > 0:
        raise ValueError(f"beta must be a positive number, got {beta!r}")


def corpus_chrf(
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    char_order: int = 6,
    word_order: int = 0,
    beta: float = 2,
    lowercase: bool = False,
    whitespace: bool = False,
) -> ChrfResult:
    """chrF (``word_order=0``) or chrF++ (``word_order=2``) of a corpus.

    ``references[i]`` is the list of references of ``candidates[i]`` (the notes' layout, as
    :func:`~course_lib.text_metrics.corpus_bleu`); sentences are str.

    >>> r = corpus_chrf(["the cat sat on the mat"], [["the cat is on the mat"]], word_order=2)
    >>> round(r.score, 6), len(r.stats)
    (0.663607, 8)
    """
    check_corpus(candidates, references)
    _check_orders(char_order, word_order, beta)
    check_bool(lowercase, "lowercase")
    check_bool(whitespace, "whitespace")
    for i, sentence in enumerate([*candidates, *(r for refs in references for r in refs)]):
        if not isinstance(sentence, str):
            raise TypeError(f"chrF works on str sentences, got {type(sentence).__name__} ({i})")
    order = char_order + word_order
    totals = [[0, 0, 0] for _ in range(order)]
    for cand, refs in zip(candidates, references, strict=True):
        if lowercase:
            cand, refs = cand.lower(), [r.lower() for r in refs]
        cand_ngrams = _ngrams(cand, char_order, word_order, whitespace)
        best, best_f = None, -1.0
        for ref in refs:
            ref_ngrams = _ngrams(ref, char_order, word_order, whitespace)
            stats = [_match(c, r) for c, r in zip(cand_ngrams, ref_ngrams, strict=True)]
            f = _f_score(stats, beta)
            if f > best_f:  # the first reference wins a tie
                best, best_f = stats, f
        for total, s in zip(totals, best or [], strict=False):
            for k in range(3):
                total[k] += s[k]
    stats = tuple((a, b, c) for a, b, c in totals)
    return ChrfResult(_f_score(stats, beta), stats, float(beta), char_order, word_order)


def sentence_chrf(
    candidate: str,
    references: Sequence[str],
    **kwargs,
) -> ChrfResult:
    """chrF of one sentence: :func:`corpus_chrf` on a corpus of one (same keyword arguments).

    >>> round(sentence_chrf("kitten", ["sitting"]).score, 4)
    0.1903
    """
    if isinstance(references, str):
        raise TypeError("references must be a list of reference sentences, got a single str")
    return corpus_chrf([candidate], [references], **kwargs)
