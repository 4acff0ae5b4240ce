"""Checkers for the exercises of Chapter 3 (n-grams, BLEU and ROUGE).

Each checker runs the learner's function on hand-made and random token lists, compares it with
the library (:mod:`course_lib.text_metrics`) and, when the answer is wrong, recognises the usual
mistakes: no clipping, clipping by the sum instead of the maximum, the notes' off-by-one bound,
the wrong tie rule, an arithmetic instead of a geometric mean, and so on.

>>> from course_lib.text_metrics import clipped_counts
>>> clipped_matches(clipped_counts).passed
True
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable

from course_lib.checker import Outcome, check_cases, diagnose_number
from course_lib.text_metrics import (
    brevity_penalty,
    clipped_counts,
    closest_reference_length,
    rouge_n,
    rouge_n_pairs,
)

__all__ = [
    "WHY_PERPLEXITY",
    "WHY_SHORT_BLEU",
    "clipped_matches",
    "corpus_brevity_penalty",
    "rouge_n_eq12",
]

#: Why the prediction of section 3.4 is what it is, and what the common wrong values mean.
WHY_SHORT_BLEU = (
    "both precisions are 1, so BLEU-2 is the brevity penalty alone: c = 3, r = 6, "
    "BP = exp(1 - r/c) = exp(-1) = 0.368. A prediction of 1 leaves the penalty out; 0.5 is the "
    "ratio c/r, not the penalty; 0.135 = exp(-2) is exp(-r/c), without the 1."
)
#: Why the prediction of section 3.10 is what it is, and what the common wrong values mean.
WHY_PERPLEXITY = (
    "every token gets probability 1/V, so the mean negative log-likelihood is log V and the "
    "perplexity exp(log V) = V: a uniform model is as unsure as a fair die with V faces. "
    "1/V is the probability, not the perplexity; log V (about 7.6 for V = 2000) is the "
    "cross-entropy in nats, before the exp."
)

_VOCAB = ("the", "cat", "sat", "on", "mat", "a", "dog")

_PAPINENI_REFS = [
    "the cat is on the mat".split(),
    "there is a cat on the mat".split(),
]


def _rng() -> random.Random:
    return random.Random(2024)


def _random_sentence(rng: random.Random, low: int = 0, high: int = 9) -> list[str]:
    return [rng.choice(_VOCAB) for _ in range(rng.randint(low, high))]


def _grams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _number(x: object) -> float | None:
    if isinstance(x, bool | str | bytes):
        return None
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


# --- Exercise 1: clipped counts (eq. 7 for one sentence) ------------------------------------


def _colleague(cand: list[str], refs: list[list[str]], n: int, short: bool, summed: bool) -> tuple:
    """Eq. (7) with the debugging exercise's bugs: windows that stop one n-gram early (``short``,
    eq. 6 as printed) and reference counts added instead of maximised (``summed``)."""
    stop = 0 if short else 1

    def grams(tokens: list[str]) -> Counter:
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + stop))

    counts = grams(cand)
    allowed: Counter = Counter()
    for r in refs:
        if summed:
            allowed.update(grams(r))
        else:
            allowed |= grams(r)
    return sum(min(c, allowed[g]) for g, c in counts.items()), sum(counts.values())


def _clipping_mistakes(cand: list[str], refs: list[list[str]], n: int) -> dict:
    colleague = {
        _colleague(cand, refs, n, True, True): (
            "both bugs are still there: every window loop stops one n-gram early (a sentence of "
            "K tokens has K - n + 1 n-grams), and the references' counts are added up instead "
            "of taking their maximum"
        ),
        _colleague(cand, refs, n, True, False): (
            "your windows stop one n-gram early: a sentence of K tokens has K - n + 1 n-grams, "
            "so the loop is range(len(tokens) - n + 1) (the off-by-one of the notes' eq. (6))"
        ),
        _colleague(cand, refs, n, False, True): (
            "you clip by the *sum* of the reference counts (Counter.update adds them); eq. (7) "
            "clips by their *maximum* (Counter's | operator keeps the larger count)"
        ),
    }
    grams = _grams(cand, n)
    counts = Counter(grams)
    ref_counts = [Counter(_grams(r, n)) for r in refs]
    in_any = {g for rc in ref_counts for g in rc}
    first = ref_counts[0]
    short = _grams(cand, n)[:-1] if grams else []
    short_counts = Counter(short)
    return {
        (sum(1 for g in grams if g in in_any), len(grams)): (
            "you count every candidate n-gram found in some reference without clipping: an "
            "n-gram may count at most as often as it occurs in a single reference"
        ),
        (sum(min(c, sum(rc[g] for rc in ref_counts)) for g, c in counts.items()), len(grams)): (
            "you clip by the *sum* of the reference counts; eq. (7) clips by their *maximum*"
        ),
        (len(set(grams) & in_any), len(set(grams))): (
            "you count distinct n-grams (the set G_n) instead of occurrences: the sums of eq. (7) "
            "weight each n-gram s by its count C(s, candidate)"
        ),
        (sum(min(c, first[g]) for g, c in counts.items()), len(grams)): (
            "you clip against the first reference only; take the maximum over all references"
        ),
        (
            sum(min(c, max(rc[g] for rc in ref_counts)) for g, c in short_counts.items()),
            len(short),
        ): (
            "you miss the last n-gram of the candidate: a sentence of K tokens has K - n + 1 "
            "n-grams (the off-by-one of the notes' eq. (6))"
        ),
    } | colleague  # the debugging exercise's bugs name themselves first


def clipped_matches(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 3.1: ``fn(candidate, references, n)`` returns ``(clipped matches, total)``.

    ``candidate`` is a list of tokens and ``references`` a list of token lists.
    """
    rng = _rng()
    cases = [
        (
            "Papineni et al.'s 'the the the the the the the' (n = 1)",
            ("the the the the the the the".split(), _PAPINENI_REFS, 1),
        ),
        (
            "'the cat the cat on the mat' (n = 2)",
            ("the cat the cat on the mat".split(), _PAPINENI_REFS, 2),
        ),
        ("a candidate shorter than n", (["the", "cat"], _PAPINENI_REFS, 3)),
    ]
    for k in range(6):
        refs = [_random_sentence(rng, 3) for _ in range(rng.randint(1, 3))]
        cases.append((f"random case {k + 1}", (_random_sentence(rng, 1), refs, rng.randint(1, 3))))

    def compare(got: object, args: tuple) -> str | None:
        want = clipped_counts(*args)
        if not isinstance(got, tuple | list) or len(got) != 2:
            return f"return a pair (matches, total), got {got!r}"
        pair = tuple(int(v) if _number(v) is not None and float(v).is_integer() else v for v in got)
        if pair == want:
            return None
        if not all(isinstance(v, int) for v in pair):
            return f"return two whole numbers (matches, total), got {got!r}"
        hint = _clipping_mistakes(*args).get(pair, "")
        return f"you return {pair}, the right answer is {want}" + (f": {hint}" if hint else "")

    return check_cases(
        "clipped n-gram counts",
        fn,
        [(d, a, a) for d, a in cases],
        compare=compare,
        require=require,
    )


# --- Exercise 2: the corpus brevity penalty (eqs. 8-10) -------------------------------------


def _reference_bp(cand_lengths: list[int], ref_lengths: list[list[int]]) -> float:
    r = sum(
        closest_reference_length(c, rs) for c, rs in zip(cand_lengths, ref_lengths, strict=True)
    )
    return brevity_penalty(sum(cand_lengths), r)


def _bp_mistakes(cand_lengths: list[int], ref_lengths: list[list[int]]) -> dict[str, float]:
    c = sum(cand_lengths)

    def closest(pick_longer: bool) -> int:
        total = 0
        for cl, rs in zip(cand_lengths, ref_lengths, strict=True):
            total += min(rs, key=lambda r: (abs(r - cl), -r if pick_longer else r))
        return total

    r = closest(False)

    def bp(cc: int, rr: int) -> float:
        return 1.0 if cc >= rr else (math.exp(1 - rr / cc) if cc else 0.0)

    per_sentence = [
        bp(cl, closest_reference_length(cl, rs))
        for cl, rs in zip(cand_lengths, ref_lengths, strict=True)
    ]
    return {
        "on a tie (two references equally close) you pick the longer one; the convention "
        "(sacrebleu's) is the shorter one": bp(c, closest(True)),
        "you use the shortest reference of each sentence, not the one closest in length": bp(
            c, sum(min(rs) for rs in ref_lengths)
        ),
        "you use the first reference of each sentence, not the one closest in length": bp(
            c, sum(rs[0] for rs in ref_lengths)
        ),
        "you average the reference lengths; eq. (10) picks the closest one": bp(
            c, round(sum(sum(rs) / len(rs) for rs in ref_lengths))
        ),
        "you average a per-sentence penalty; eq. (8) is one penalty for the whole corpus, "
        "from the corpus totals c and r": sum(per_sentence) / len(per_sentence),
        "the ratio is upside down: the penalty is exp(1 - r/c) for c < r": (
            math.exp(1 - c / r) if 0 < c < r else 1.0
        ),
        "you also penalise candidates that are too long; only c < r is penalised": (
            math.exp(-abs(r / c - 1)) if c else 0.0
        ),
    }


def corpus_brevity_penalty(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 3.2: ``fn(candidate_lengths, reference_lengths)`` returns BP of eq. (8).

    ``candidate_lengths[i]`` is ``|c_i|`` and ``reference_lengths[i]`` the list of the lengths of
    the references of sentence i.
    """
    cases = [
        ("one sentence, references of lengths 4 and 6, candidate of 5 (a tie)", ([5], [[4, 6]])),
        ("a corpus with a tie", ([5, 7, 3], [[4, 6], [9, 12], [3, 3]])),
        ("a corpus longer than its references", ([10, 12], [[8, 9], [11, 14]])),
        ("a corpus shorter than its references", ([3, 4, 2], [[6, 9], [5, 4], [4]])),
        ("a short first reference", ([6, 6], [[3, 7], [2, 6]])),
        ("sentences that need a per-corpus penalty", ([2, 9], [[5], [8]])),
    ]

    def compare(got: object, args: tuple) -> str | None:
        return diagnose_number(got, _reference_bp(*args), _bp_mistakes(*args))

    return check_cases(
        "the corpus brevity penalty",
        fn,
        [(d, a, a) for d, a in cases],
        compare=compare,
        require=require,
    )


# --- Exercise 3: ROUGE-n as eq. (12) defines it ---------------------------------------------


def _rouge_mistakes(cand: list[str], refs: list[list[str]], n: int) -> dict[str, float]:
    def pooled() -> float:
        return rouge_n(cand, refs, n, variant="pooled", tokenize="none")

    cc = Counter(_grams(cand, n))
    no_clip = 0.0
    for r in refs:
        g = _grams(r, n)
        no_clip += sum(1 for s in g if s in cc) / len(g) if g else 0.0
    return {
        "you average over the references; eq. (12) sums the recalls": rouge_n(
            cand, refs, n, variant="mean", tokenize="none"
        ),
        "you take the best reference; eq. (12) sums the recalls over all of them": rouge_n(
            cand, refs, n, variant="max", tokenize="none"
        ),
        "you pool the counts (Lin's formula); eq. (12) sums one recall per reference": pooled(),
        "you divide by the candidate's n-grams (precision); eq. (12) divides by each "
        "reference's n-grams (recall)": sum(
            s.precision for s in rouge_n_pairs(cand, refs, n, tokenize="none")
        ),
        "you do not clip: a reference n-gram counts at most as often as it occurs in the "
        "candidate, min(C(s, c), C(s, y))": no_clip,
    }


def rouge_n_eq12(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise 3.3: ``fn(candidate, references, n)`` returns ROUGE-n of eq. (12) (token lists)."""
    rng = _rng()
    cases = [
        (
            "the chapter's example",
            (
                "the cat sat on the mat".split(),
                ["the cat sat".split(), "a cat on a mat".split()],
                1,
            ),
        ),
        ("repeated n-grams", ("the the cat".split(), ["the the the cat".split()], 1)),
        ("bigrams, two references", ("the cat sat on the mat".split(), _PAPINENI_REFS, 2)),
    ]
    for k in range(5):
        refs = [_random_sentence(rng, 3) for _ in range(rng.randint(2, 3))]
        cases.append((f"random case {k + 1}", (_random_sentence(rng, 2), refs, rng.randint(1, 2))))

    def compare(got: object, args: tuple) -> str | None:
        return diagnose_number(got, rouge_n(*args, tokenize="none"), _rouge_mistakes(*args))

    return check_cases(
        "ROUGE-n as eq. (12) defines it",
        fn,
        [(d, a, a) for d, a in cases],
        compare=compare,
        require=require,
    )
