"""ROUGE-L and ROUGE-Lsum: overlap measured by the longest common subsequence (Lin 2004, sec. 3).

ROUGE-n asks which n-grams a candidate shares with a reference; ROUGE-L asks for the longest
sequence of words that appears in both *in the same order*, not necessarily next to each other.
For a candidate c of m words and a reference r of n words with LCS length l:

    P = l / m,    R = l / n,    F = 2 P R / (P + R).

ROUGE-Lsum scores a multi-sentence summary (sentences separated by newlines): for each reference
sentence it takes the *union* of its LCS hits with every candidate sentence, counts each word at
most as often as it occurs on both sides, and sums over reference sentences. Both agree with
Google's ``rouge-score`` (``rougeL``, ``rougeLsum``), including which of several longest
subsequences is read out, which decides the union.

>>> lcs_length("the cat sat on the mat".split(), "the cat lay on a mat".split())  # the cat on mat
4
>>> s = rouge_l("the cat lay on a mat", ["the cat sat on the mat"])
>>> s.matches, s.candidate_total, s.reference_total, round(s.fmeasure, 4)
(4, 6, 6, 0.6667)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from course_lib.checks import check_choice
from course_lib.text_metrics._inputs import tokenize_corpus
from course_lib.text_metrics.rouge import MEASURES, ROUGE_VARIANTS, RougeScore, _combine
from course_lib.text_metrics.tokenizers import tokenize

__all__ = ["corpus_rouge_l", "lcs_indices", "lcs_length", "rouge_l", "rouge_lsum"]

#: How several references combine for ROUGE-L (eq. (12)'s sum of recalls has no LCS form).
LCS_VARIANTS = tuple(v for v in ROUGE_VARIANTS if v != "notes")


def _table(a: Sequence[str], b: Sequence[str]) -> list[list[int]]:
    """t[i][j] = LCS length of a[:i] and b[:j] (dynamic programming, O(len(a) len(b)))."""
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        row, above = t[i], t[i - 1]
        for j, y in enumerate(b, 1):
            row[j] = above[j - 1] + 1 if x == y else max(above[j], row[j - 1])
    return t


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (two rows of memory).

    >>> lcs_length(list("ABCBDAB"), list("BDCABA"))  # BCBA, a textbook example
    4
    """
    if len(b) > len(a):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def lcs_indices(ref: Sequence[str], cand: Sequence[str]) -> list[int]:
    """Positions in ``ref`` of one longest common subsequence with ``cand``.

    Read back from the end; on a tie it moves up in ``ref`` unless moving left in ``cand`` keeps
    a strictly longer subsequence (the choice rouge-score makes).

    >>> lcs_indices("a b c a".split(), "a c".split())
    [0, 2]
    """
    t = _table(ref, cand)
    i, j, out = len(ref), len(cand), []
    while i > 0 and j > 0:
        if ref[i - 1] == cand[j - 1]:
            out.append(i - 1)
            i, j = i - 1, j - 1
        elif t[i][j - 1] > t[i - 1][j]:
            j -= 1
        else:
            i -= 1
    return out[::-1]


def _lcs_score(cand: list[str], ref: list[str]) -> RougeScore:
    if not cand or not ref:
        return RougeScore(0, len(cand), len(ref))
    return RougeScore(lcs_length(cand, ref), len(cand), len(ref))


def rouge_l(
    candidate: str | Sequence[str],
    references: Sequence,
    *,
    variant: str = "best-f",
    measure: str = "f",
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> RougeScore | float:
    """ROUGE-L of one candidate: a :class:`RougeScore` (LCS length, candidate and reference
    lengths) for the best reference by F, as ``rouge_score`` does, or, for another ``variant``
    (``mean``, ``max``, ``pooled``), the combined ``measure``.

    >>> rouge_l("a b c", ["a c", "b"]).matches
    2
    >>> round(rouge_l("a b c", ["a c", "b"], variant="mean", measure="recall"), 4)
    1.0
    """
    check_choice(variant, "variant", LCS_VARIANTS)
    check_choice(measure, "measure", MEASURES)
    hyps, refs = tokenize_corpus([candidate], [references], tokenize, lowercase)
    pairs = [_lcs_score(hyps[0], r) for r in refs[0]]
    if variant == "best-f":
        return pairs[max(range(len(pairs)), key=lambda i: (pairs[i].fmeasure, -i))]
    return _combine(pairs, variant, measure)


def corpus_rouge_l(
    candidates: Sequence,
    references: Sequence,
    *,
    measure: str = "f",
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> float:
    """The mean over sentences of ROUGE-L (best reference by F), as ROUGE is reported.

    >>> corpus_rouge_l(["a b", "c"], [["a b"], ["d"]])
    0.5
    """
    check_choice(measure, "measure", MEASURES)
    hyps, refs = tokenize_corpus(candidates, references, tokenize, lowercase)
    scores = []
    for h, rs in zip(hyps, refs, strict=True):
        pairs = [_lcs_score(h, r) for r in rs]
        scores.append(_combine(pairs, "best-f", measure))
    return sum(scores) / len(scores)


def _sentences(text: str, name: str) -> list[list[str]]:
    if not isinstance(text, str):
        raise TypeError(
            f"{name} must be a str with one sentence per line, got {type(text).__name__}"
        )
    return [tokenize(s, "rouge") for s in text.split("\n") if s]


def rouge_lsum(candidate: str, references: Sequence[str]) -> RougeScore:
    """Summary-level ROUGE-L (rouge-score's ``rougeLsum``), best reference by F.

    Sentences are the lines of each text. ``matches`` counts the union-LCS hits, each word at
    most as often as it occurs in both texts.

    >>> s = rouge_lsum("the cat sat\\non the mat", ["the cat\\nsat on the mat"])
    >>> s.matches, s.candidate_total, s.reference_total
    (6, 6, 6)
    """
    if isinstance(references, str) or not isinstance(references, Sequence) or not references:
        raise TypeError("references must be a non-empty list of reference texts")
    cand = _sentences(candidate, "candidate")
    scores = [
        _summary_lcs(_sentences(r, f"references[{i}]"), cand) for i, r in enumerate(references)
    ]
    return scores[max(range(len(scores)), key=lambda i: (scores[i].fmeasure, -i))]


def _summary_lcs(ref_sents: list[list[str]], cand_sents: list[list[str]]) -> RougeScore:
    n_ref, n_cand = sum(map(len, ref_sents)), sum(map(len, cand_sents))
    if not ref_sents or not cand_sents or not n_ref or not n_cand:
        return RougeScore(0, n_cand, n_ref)
    left_ref = Counter(t for s in ref_sents for t in s)
    left_cand = Counter(t for s in cand_sents for t in s)
    hits = 0
    for r in ref_sents:
        union = sorted(set().union(*(lcs_indices(r, c) for c in cand_sents)))
        for token in (r[i] for i in union):
            if left_cand[token] > 0 and left_ref[token] > 0:  # no word counted twice
                hits += 1
                left_cand[token] -= 1
                left_ref[token] -= 1
    return RougeScore(hits, n_cand, n_ref)
