"""ROUGE-L and ROUGE-Lsum: overlap measured by the longest common subsequence (Lin 2004, sec. 3).

ROUGE-n asks which n-grams a candidate shares with a reference; ROUGE-L asks for the longest
sequence of words that appears in both *in the same order*, not necessarily next to each other.
For a candidate c of m words and a reference r of n words with LCS length l:

    P = l / m,    R = l / n,    F = 2 P R / (P + R).

ROUGE-Lsum scores a multi-sentence summary (sentences separated by newlines): for each reference
sentence it takes the *union* of its LCS hits with every candidate sentence, counts each word at
most as often as it occurs on both sides, and sums over reference sentences. Both agree with
Google's ``rouge-score`` (``rougeL``, ``rougeLsum``), including which of several longest
subsequences is read out, which decides the union. With several references, the reference with
the highest F is kept (``RougeScorer.score_multi``); the other variants of
:data:`~course_lib.text_metrics.rouge.ROUGE_VARIANTS` are available too, except eq. (12)'s sum of
recalls, which has no LCS form.

>>> lcs_length("the cat sat on the mat".split(), "the cat lay on a mat".split())  # the cat on mat
4
>>> s = rouge_l("the cat lay on a mat", ["the cat sat on the mat"])
>>> s.matches, s.candidate_total, s.reference_total, round(s.fmeasure, 4)
(4, 6, 6, 0.6667)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from course_lib.checks import check_bool, check_choice
from course_lib.text_metrics._inputs import tokenize_corpus
from course_lib.text_metrics.ngrams import _check_tokens
from course_lib.text_metrics.rouge import MEASURES, ROUGE_VARIANTS, RougeScore, _combine
from course_lib.text_metrics.tokenizers import TOKENIZERS, tokenize_many

__all__ = ["LCS_VARIANTS", "corpus_rouge_l", "lcs_indices", "lcs_length", "rouge_l", "rouge_lsum"]

#: How several references combine for ROUGE-L (eq. (12)'s sum of recalls has no LCS form).
LCS_VARIANTS = tuple(v for v in ROUGE_VARIANTS if v != "notes")


def _next_row(x: str, b: Sequence[str], prev: list[int]) -> list[int]:
    """Row i of the LCS table from row i - 1: ``t[i][j] = t[i-1][j-1] + 1`` if ``a_i = b_j``,
    else ``max(t[i-1][j], t[i][j-1])``. ``left`` is t[i][j-1], ``diag`` t[i-1][j-1], ``up``
    t[i-1][j]; comparing instead of calling max() halves the time of this, the hot loop."""
    row = [0]
    left = 0
    for y, diag, up in zip(b, prev, prev[1:], strict=False):
        left = diag + 1 if x == y else (up if up > left else left)
        row.append(left)
    return row


def _lcs_len(a: Sequence[str], b: Sequence[str]) -> int:
    if len(b) > len(a):  # the row runs over the shorter list: O(min(m, n)) memory
        a, b = b, a
    row = [0] * (len(b) + 1)
    for x in a:
        row = _next_row(x, b, row)
    return row[-1]


def _table(a: Sequence[str], b: Sequence[str]) -> list[list[int]]:
    """The whole table, ``t[i][j]`` = LCS length of ``a[:i]`` and ``b[:j]`` (for the read-out)."""
    t = [[0] * (len(b) + 1)]
    for x in a:
        t.append(_next_row(x, b, t[-1]))
    return t


def _backtrack(ref: Sequence[str], cand: Sequence[str]) -> list[int]:
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


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists.

    Dynamic programming over the table ``t[i][j]`` (LCS of the first i tokens of ``a`` and the
    first j of ``b``), kept one row at a time: O(len(a) len(b)) time, O(min) memory.

    >>> lcs_length(list("ABCBDAB"), list("BDCABA"))  # BCBA, a textbook example
    4
    >>> lcs_length([], ["a"])
    0
    """
    a = _check_tokens(a, "a")
    b = _check_tokens(b, "b")
    return _lcs_len(a, b)


def lcs_indices(ref: Sequence[str], cand: Sequence[str]) -> list[int]:
    """Positions in ``ref`` of one longest common subsequence with ``cand``.

    Read back from the end of the full table; on a tie it moves up in ``ref`` unless moving left
    in ``cand`` keeps a strictly longer subsequence (the choice rouge-score makes, which decides
    ROUGE-Lsum's union when there are several longest subsequences).

    >>> lcs_indices("a b c a".split(), "a c".split())
    [0, 2]
    >>> lcs_indices("b a b".split(), "a b".split())  # "a b" is ref[1:3]; "b" alone is shorter
    [1, 2]
    """
    ref = _check_tokens(ref, "ref")
    cand = _check_tokens(cand, "cand")
    return _backtrack(ref, cand)


def _lcs_score(cand: list[str], ref: list[str]) -> RougeScore:
    if not cand or not ref:
        return RougeScore(0, len(cand), len(ref))
    return RougeScore(_lcs_len(cand, ref), len(cand), len(ref))


def _pick(pairs: list[RougeScore], variant: str, measure: str) -> RougeScore | float:
    if variant == "best-f":  # the first reference wins a tie, as numpy.argmax in rouge-score
        return pairs[max(range(len(pairs)), key=lambda i: (pairs[i].fmeasure, -i))]
    return _combine(pairs, variant, measure)


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

    Sentences are str (tokenized with ``tokenize``, by default rouge-score's tokenizer) or lists
    of str tokens.

    >>> rouge_l("a b c", ["a c", "b"]).matches
    2
    >>> round(rouge_l("a b c", ["a c", "b"], variant="mean", measure="recall"), 4)
    1.0
    """
    check_choice(variant, "variant", LCS_VARIANTS)
    check_choice(measure, "measure", MEASURES)
    hyps, refs = tokenize_corpus([candidate], [references], tokenize, lowercase)
    return _pick([_lcs_score(hyps[0], r) for r in refs[0]], variant, measure)


def corpus_rouge_l(
    candidates: Sequence,
    references: Sequence,
    *,
    variant: str = "best-f",
    measure: str = "f",
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> float:
    """The mean over sentences of ROUGE-L's ``measure`` (best reference by F unless another
    ``variant``), as ROUGE is reported for a system.

    >>> corpus_rouge_l(["a b", "c"], [["a b"], ["d"]])
    0.5
    >>> corpus_rouge_l(["a b"], [["a b", "a c d"]], variant="mean", measure="recall")  # (1 + 1/3)/2
    0.6666666666666666
    """
    check_choice(variant, "variant", LCS_VARIANTS)
    check_choice(measure, "measure", MEASURES)
    hyps, refs = tokenize_corpus(candidates, references, tokenize, lowercase)
    scores = [
        _combine([_lcs_score(h, r) for r in rs], variant, measure)
        for h, rs in zip(hyps, refs, strict=True)
    ]
    return sum(scores) / len(scores)


def _check_texts(candidate: object, references: object) -> None:
    if not isinstance(candidate, str):
        raise TypeError(
            f"candidate must be a str with one sentence per line, got {type(candidate).__name__}"
        )
    if isinstance(references, str):
        raise TypeError(
            f"references must be a non-empty list of reference texts, got a single str "
            f"{references[:40]!r}: wrap it in a list"
        )
    if not isinstance(references, Sequence):
        raise TypeError(
            f"references must be a non-empty list of reference texts, "
            f"got {type(references).__name__}"
        )
    if len(references) == 0:
        raise ValueError("references is empty: the candidate has no reference to be compared with")
    for i, ref in enumerate(references):
        if not isinstance(ref, str):
            raise TypeError(
                f"references[{i}] must be a str with one sentence per line, "
                f"got {type(ref).__name__}"
            )


def rouge_lsum(
    candidate: str,
    references: Sequence[str],
    *,
    variant: str = "best-f",
    measure: str = "f",
    tokenize: str = "rouge",
    lowercase: bool = False,
) -> RougeScore | float:
    """Summary-level ROUGE-L (rouge-score's ``rougeLsum``): a :class:`RougeScore` for the best
    reference by F, or, for another ``variant``, the combined ``measure`` (as :func:`rouge_l`).

    Sentences are the non-empty lines of each text. ``matches`` counts the union-LCS hits, each
    word at most as often as it occurs in both texts.

    >>> s = rouge_lsum("the cat sat\\non the mat", ["the cat\\nsat on the mat"])
    >>> s.matches, s.candidate_total, s.reference_total
    (6, 6, 6)
    >>> rouge_lsum("a b\\nc", ["a b c", "c\\nb a"], variant="max", measure="recall")
    1.0
    """
    _check_texts(candidate, references)
    check_choice(variant, "variant", LCS_VARIANTS)
    check_choice(measure, "measure", MEASURES)
    check_choice(tokenize, "tokenize", TOKENIZERS)
    check_bool(lowercase, "lowercase")

    def sentences(text: str) -> list[list[str]]:
        return tokenize_many([s for s in text.split("\n") if s], tokenize, lowercase=lowercase)

    cand = sentences(candidate)
    pairs = [_summary_lcs(sentences(r), cand) for r in references]
    return _pick(pairs, variant, measure)


def _summary_lcs(ref_sents: list[list[str]], cand_sents: list[list[str]]) -> RougeScore:
    n_ref, n_cand = sum(map(len, ref_sents)), sum(map(len, cand_sents))
    if not n_ref or not n_cand:
        return RougeScore(0, n_cand, n_ref)
    left_ref = Counter(t for s in ref_sents for t in s)
    left_cand = Counter(t for s in cand_sents for t in s)
    hits = 0
    for r in ref_sents:
        union = sorted(set().union(*(_backtrack(r, c) for c in cand_sents)))
        for token in (r[i] for i in union):
            if left_cand[token] > 0 and left_ref[token] > 0:  # no word counted twice
                hits += 1
                left_cand[token] -= 1
                left_ref[token] -= 1
    return RougeScore(hits, n_cand, n_ref)
