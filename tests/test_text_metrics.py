"""Chapter 3 (n-grams, BLEU, ROUGE): hand-derived values, parity with sacrebleu and rouge-score,
independent computations of every ROUGE variant, bad input, the data set, widget and checkers."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import sacrebleu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer
from rouge_score import tokenize as rouge_tokenize
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_char import TokenizerChar

from course_lib.paths import data_path
from course_lib.text_metrics import (
    ROUGE_VARIANTS,
    BleuStats,
    bleu_from_stats,
    brevity_penalty,
    clipped_counts,
    closest_reference_length,
    corpus_bleu,
    corpus_rouge_n,
    corpus_stats,
    effective_reference_length,
    modified_precision,
    ngram_counts,
    ngrams,
    rouge_n,
    rouge_n_pairs,
    sentence_bleu,
    substring_count,
    substring_count_as_printed,
    tokenize,
    tokenize_many,
)
from course_lib.text_metrics import exercises as check
from course_lib.text_metrics import tokenizers as tokenize_module
from course_lib.text_metrics.dataset import (
    DATA_DIR,
    load_translation_eval,
    make_translation_eval,
    negate,
    synthetic_corpus,
    write_translation_eval,
)
from course_lib.text_metrics.widget import bleu_breakdown, bleu_explorer, render_html

DATA = load_translation_eval()
SMOOTHINGS = ("none", "floor", "add-k", "exp")
# Papineni et al. (2002), section 2.1: two candidates and three references, with the paper's
# modified precisions 17/18 and 8/14 (unigrams), 10/17 and 1/13 (bigrams).
PAPINENI_CANDIDATES = [
    "It is a guide to action which ensures that the military always obeys the commands of the "
    "party.",
    "It is to insure the troops forever hearing the activity guidebook that party direct.",
]
PAPINENI_REFERENCES = [
    "It is a guide to action that ensures that the military will forever heed Party commands.",
    "It is the guiding principle which guarantees the military forces always being under the "
    "command of the Party.",
    "It is the practical guide for the army always to heed the directions of the party.",
]


def sacre(cands, refs, tok="13a", smoothing="none", max_n=4, effective_order=False, lc=False):
    """sacrebleu's corpus BLEU for a corpus in the notes' layout (transposed to streams)."""
    n_refs = max(len(r) for r in refs)
    streams = [[rs[j] if j < len(rs) else None for rs in refs] for j in range(n_refs)]
    metric = sacrebleu.BLEU(
        tokenize=tok,
        smooth_method=smoothing,
        max_ngram_order=max_n,
        effective_order=effective_order,
        lowercase=lc,
    )
    return metric.corpus_score(list(cands), streams)


def assert_same_as_sacrebleu(ours, theirs):
    assert list(ours.matches) == [int(x) for x in theirs.counts[: len(ours.matches)]] or (
        ours.smoothing == "add-k"  # sacrebleu reports its add-k counts with k added
    )
    if ours.smoothing != "add-k":
        assert list(ours.totals) == list(theirs.totals)
    assert (ours.c, ours.r) == (theirs.sys_len, theirs.ref_len)
    assert abs(100 * ours.score - theirs.score) <= 1e-9, (100 * ours.score, theirs.score)
    assert abs(ours.bp - theirs.bp) <= 1e-12


# --- tokenizers ---------------------------------------------------------------------------

TRICKY = [
    "Hello, world!",
    "It costs 3.5 dollars, or 1,000 cents.",
    "a-b 3-4 x.y 5.z z.5 ,, .. ,.",
    "&amp;lt; &quot;quoted&quot; &amp;amp; <skipped> <skip<skipped>ped>",
    "line one-\nline two\nthree  ",
    "tabs\tand\u00a0non-breaking\u2028spaces ",
    "Ünïcödé — “quotes” … ",
    "",
    "   ",
    "end.",
    ".start",
]


def sacre_13a(line):
    return Tokenizer13a()(line.rstrip()).split()


@pytest.mark.parametrize("line", TRICKY)
def test_13a_matches_sacrebleu_on_tricky_lines(line):
    assert tokenize(line, "13a") == sacre_13a(line)
    assert tokenize(line, "char") == TokenizerChar()(line.rstrip()).split()
    assert tokenize(line, "none") == line.split()
    assert tokenize(line, "rouge") == rouge_tokenize.tokenize(line, None)


def test_13a_on_a_joined_corpus_matches_line_by_line():
    lines = TRICKY + [r for refs in DATA.references for r in refs]
    assert tokenize_many(lines, "13a") == [sacre_13a(x) for x in lines]
    no_newlines = [x for x in lines if "\n" not in x]
    assert tokenize_many(no_newlines, "13a") == [sacre_13a(x) for x in no_newlines]


TEXT = st.lists(
    st.sampled_from(list("ab1 .,-&;<>\"'()/:?!\n\t") + ["&amp;", "<skipped>", "é", "\u3000"]),
    max_size=20,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6))
def test_tokenizers_match_the_reference_tokenizers(lines):
    assert tokenize_many(lines, "13a") == [sacre_13a(x) for x in lines]
    assert tokenize_many(lines, "char") == [TokenizerChar()(x.rstrip()).split() for x in lines]
    assert tokenize_many(lines, "rouge") == [rouge_tokenize.tokenize(x, None) for x in lines]


def test_13a_padding_table_is_the_regular_expression():
    pattern = tokenize_module._PUNCT
    assert all(pattern.fullmatch(chr(c)) is None for c in range(128, 0x3100))
    for c in range(128):
        assert (c in tokenize_module._PAD) == bool(pattern.fullmatch(chr(c)))


# --- n-grams and substring counts (eqs. 5-6) -----------------------------------------------


def test_ngrams_is_a_set_and_counts_add_up():
    y = "the cat saw the cat".split()
    assert ngrams(y, 2) == {("the", "cat"), ("cat", "saw"), ("saw", "the")}
    assert ngrams(y, 6) == set() and ngram_counts(y, 6) == Counter()
    for n in range(1, 6):
        assert sum(ngram_counts(y, n).values()) == len(y) - n + 1


def test_substring_count_correct_bound_and_the_notes_bound():
    y = "the cat sat on the cat".split()
    assert substring_count(["the", "cat"], y) == 2
    assert substring_count_as_printed(["the", "cat"], y) == 1  # misses the last position
    assert substring_count(["a", "a"], ["a"] * 3) == 2  # overlaps count
    assert substring_count(y, y) == 1 and substring_count_as_printed(y, y) == 0
    # the literal window y_i .. y_{i+M} has M + 1 tokens: it never equals an M-token s
    M = 2
    assert all(len(y[i : i + M + 1]) != M for i in range(len(y) - M))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from("ab"), min_size=1, max_size=3),
    st.lists(st.sampled_from("ab"), max_size=8),
)
def test_substring_count_agrees_with_ngram_counts(s, y):
    assert substring_count(s, y) == ngram_counts(y, len(s))[tuple(s)]
    ends_with_s = len(y) >= len(s) and y[len(y) - len(s) :] == s
    assert substring_count(s, y) - substring_count_as_printed(s, y) == int(ends_with_s)


# --- BLEU: hand-derived values -----------------------------------------------------------


def test_papineni_modified_precisions():
    expected = {(0, 1): (17, 18), (0, 2): (10, 17), (1, 1): (8, 14), (1, 2): (1, 13)}
    for (i, n), want in expected.items():
        stats = corpus_stats([PAPINENI_CANDIDATES[i]], [PAPINENI_REFERENCES], n, tokenize="rouge")
        assert (stats.matches[n - 1], stats.totals[n - 1]) == want
    cand = "the the the the the the the".split()
    refs = ["the cat is on the mat".split(), "there is a cat on the mat".split()]
    assert clipped_counts(cand, refs, 1) == (2, 7)


def test_brevity_penalty_and_tie_rule():
    assert brevity_penalty(10, 10) == brevity_penalty(11, 10) == 1.0
    assert brevity_penalty(8, 10) == pytest.approx(math.exp(1 - 10 / 8))
    assert brevity_penalty(0, 3) == 0.0 and brevity_penalty(0, 0) == 1.0
    assert closest_reference_length(5, [4, 6]) == closest_reference_length(5, [6, 4]) == 4
    assert closest_reference_length(5, [9, 6, 3]) == 6
    assert effective_reference_length([5, 3], [[4, 6], [3, 10]]) == 7


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.lists(st.integers(0, 30), min_size=1, max_size=5))
def test_tie_rule_is_sacrebleus(c, refs):
    assert closest_reference_length(c, refs) == sacrebleu.BLEU()._get_closest_ref_len(c, refs)


def test_bleu_by_hand_with_weights():
    stats = BleuStats((6, 4), (6, 5), 6, 6)
    assert bleu_from_stats(stats).score == pytest.approx(math.sqrt(0.8))
    w = (0.7, 0.3)
    assert bleu_from_stats(stats, w).score == pytest.approx(math.exp(0.3 * math.log(0.8)))
    short = BleuStats((6, 4), (6, 5), 6, 8)
    assert bleu_from_stats(short).score == pytest.approx(math.exp(1 - 8 / 6) * math.sqrt(0.8))
    # a zero weight removes its order, even when that order has no match
    assert bleu_from_stats(BleuStats((3, 0), (4, 3), 4, 4), (1.0, 0.0)).score == 0.75


def test_corpus_bleu_is_not_the_mean_of_sentence_bleus():
    cands, refs = DATA.systems["good"], DATA.references
    sentences = [bleu_from_stats(s) for s in corpus_stats(cands, refs, per_sentence=True)]
    total = sum(
        corpus_stats(cands, refs, per_sentence=True)[1:], start=corpus_stats(cands[:1], refs[:1])
    )
    assert total == corpus_stats(cands, refs)
    mean = sum(s.score for s in sentences) / len(sentences)
    assert abs(mean - corpus_bleu(cands, refs).score) > 0.05


@pytest.mark.parametrize("tok", ["none", "char"])
def test_clipped_counts_agree_with_the_fast_path(tok):
    # words repeat a few n-grams (the list.count path), characters many (the occurrence path)
    cands, refs = synthetic_corpus(30, 3, seed=5)
    cands.append("a a a a a a a a a a b b b b b b b b b b c c c c c c c c c c d d d d d d d d d d")
    refs.append(["a a a b b c c c c", "a a a a a a a a a a a a", "d d d d d d d d d d d d d d d"])
    for cand, rs in zip(cands, refs, strict=True):
        c, r = tokenize(cand, tok), [tokenize(x, tok) for x in rs]
        stats = corpus_stats([c], [r], 4)
        for n in range(1, 5):
            assert clipped_counts(c, r, n) == (stats.matches[n - 1], stats.totals[n - 1])


# --- BLEU: parity with sacrebleu ---------------------------------------------------------


@pytest.mark.parametrize("system", list(DATA.systems))
@pytest.mark.parametrize("tok", ["13a", "none", "char"])
def test_parity_with_sacrebleu_on_the_chapter_data(system, tok):
    cands = DATA.systems[system]
    for smoothing in SMOOTHINGS:
        for eff in (False, True):
            ours = corpus_bleu(
                cands, DATA.references, tokenize=tok, smoothing=smoothing, effective_order=eff
            )
            assert_same_as_sacrebleu(ours, sacre(cands, DATA.references, tok, smoothing, 4, eff))


def test_parity_with_sacrebleu_sentence_by_sentence():
    for cand, refs in zip(DATA.systems["fair"], DATA.references, strict=True):
        for smoothing in SMOOTHINGS:
            ours = sentence_bleu(cand, refs, smoothing=smoothing, effective_order=True)
            theirs = sacrebleu.BLEU(smooth_method=smoothing, effective_order=True).sentence_score(
                cand, refs
            )
            assert abs(100 * ours.score - theirs.score) <= 1e-9


WORDS = st.sampled_from(["the", "cat", "sat", "on", "mat", "a", "dog", ".", "Cat", "3.5", "it's"])
SENTENCE = st.lists(WORDS, max_size=9).map(" ".join)
CORPUS = st.integers(1, 3).flatmap(
    lambda k: st.lists(
        st.tuples(SENTENCE, st.lists(SENTENCE, min_size=k, max_size=k)), min_size=1, max_size=8
    )
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    CORPUS,
    st.sampled_from(["13a", "none", "char"]),
    st.sampled_from(SMOOTHINGS),
    st.integers(1, 5),
    st.booleans(),
    st.booleans(),
)
def test_parity_with_sacrebleu_on_random_corpora(corpus, tok, smoothing, max_n, eff, lc):
    cands = [c for c, _ in corpus]
    refs = [r for _, r in corpus]
    ours = corpus_bleu(
        cands,
        refs,
        (1 / max_n,) * max_n,
        tokenize=tok,
        smoothing=smoothing,
        effective_order=eff,
        lowercase=lc,
    )
    assert_same_as_sacrebleu(ours, sacre(cands, refs, tok, smoothing, max_n, eff, lc))


@settings(max_examples=100, deadline=None)
@given(CORPUS, st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4))
def test_weighted_bleu_matches_its_formula(corpus, raw):
    weights = [x / sum(raw) for x in raw]
    weights[-1] = 1.0 - sum(weights[:-1])
    cands, refs = [c for c, _ in corpus], [r for _, r in corpus]
    stats = corpus_stats(cands, refs, len(weights))
    score = corpus_bleu(cands, refs, weights).score
    if min(stats.matches) == 0:
        assert score == 0.0
    else:
        logs = sum(
            w * math.log(m / t)
            for w, m, t in zip(weights, stats.matches, stats.totals, strict=True)
        )
        assert score == pytest.approx(brevity_penalty(stats.c, stats.r) * math.exp(logs), rel=1e-12)


# --- ROUGE ---------------------------------------------------------------------------------


def rouge_by_hand(cand, refs, n, variant, measure):
    """Every variant from eq. (12)'s ingredients, written independently of the library."""

    def grams(t):
        return [tuple(t[i : i + n]) for i in range(len(t) - n + 1)]

    c = tokenize(cand, "rouge")
    per = []
    for ref in refs:
        y = tokenize(ref, "rouge")
        overlap = sum(
            min(substring_count(list(s), c), substring_count(list(s), y)) for s in set(grams(y))
        )
        per.append((overlap, len(grams(c)), len(grams(y))))

    def div(a, b):
        return a / b if b else 0.0

    def f(p, r):
        return 2 * p * r / (p + r) if p + r else 0.0

    P = [div(m, ct) for m, ct, _ in per]
    R = [div(m, rt) for m, _, rt in per]
    F = [f(p, r) for p, r in zip(P, R, strict=True)]
    pick = {"precision": P, "recall": R, "f": F}[measure]
    if variant == "notes":
        return sum(R)
    if variant == "mean":
        return sum(pick) / len(pick)
    if variant == "max":
        return max(pick)
    if variant == "best-f":
        return pick[F.index(max(F))]
    m = sum(x for x, _, _ in per)
    rec, prec = div(m, sum(rt for _, _, rt in per)), div(m, len(per) * per[0][1])
    return {"recall": rec, "precision": prec, "f": f(prec, rec)}[measure]


@pytest.mark.parametrize("variant", ROUGE_VARIANTS)
@pytest.mark.parametrize("measure", ["recall", "precision", "f"])
def test_every_rouge_variant_matches_an_independent_computation(variant, measure):
    if variant == "notes" and measure != "recall":
        with pytest.raises(ValueError, match="recall only"):
            rouge_n("a b", ["a b"], 1, variant=variant, measure=measure)
        return
    for system in ("good", "scrambled"):
        for cand, refs in zip(DATA.systems[system], DATA.references, strict=True):
            for n in (1, 2, 3):
                got = rouge_n(cand, refs, n, variant=variant, measure=measure)
                assert got == pytest.approx(
                    rouge_by_hand(cand, refs, n, variant, measure), abs=1e-12
                )


def test_rouge_worked_example_where_definitions_disagree():
    cand, refs = "the cat sat", ["the cat sat down", "a dog sat"]
    assert rouge_n(cand, refs, 1) == pytest.approx(3 / 4 + 1 / 3)  # eq. (12): above 1
    assert rouge_n(cand, refs, 1, variant="mean") == pytest.approx((3 / 4 + 1 / 3) / 2)
    assert rouge_n(cand, refs, 1, variant="max") == pytest.approx(3 / 4)
    assert rouge_n(cand, refs, 1, variant="pooled") == pytest.approx(4 / 7)


SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rouge3"])


@pytest.mark.parametrize("system", list(DATA.systems))
def test_rouge_matches_rouge_score(system):
    for cand, refs in zip(DATA.systems[system], DATA.references, strict=True):
        for n in (1, 2, 3):
            key = f"rouge{n}"
            for pair, ref in zip(rouge_n_pairs(cand, refs, n), refs, strict=True):
                theirs = SCORER.score(ref, cand)[key]
                assert (pair.precision, pair.recall) == pytest.approx(
                    (theirs.precision, theirs.recall), abs=1e-12
                )
                assert pair.fmeasure == pytest.approx(theirs.fmeasure, abs=1e-12)
            multi = SCORER.score_multi(refs, cand)[key]
            for measure, value in (("recall", multi.recall), ("f", multi.fmeasure)):
                got = rouge_n(cand, refs, n, variant="best-f", measure=measure)
                assert got == pytest.approx(value, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(SENTENCE, st.lists(SENTENCE, min_size=1, max_size=3), st.integers(1, 3))
def test_rouge_matches_rouge_score_on_random_sentences(cand, refs, n):
    key = f"rouge{n}"
    scorer = rouge_scorer.RougeScorer([key])
    for pair, ref in zip(rouge_n_pairs(cand, refs, n), refs, strict=True):
        theirs = scorer.score(ref, cand)[key]
        assert pair.fmeasure == pytest.approx(theirs.fmeasure, abs=1e-12)
        assert pair.recall == pytest.approx(theirs.recall, abs=1e-12)
    assert rouge_n(cand, refs, n, variant="best-f", measure="f") == pytest.approx(
        scorer.score_multi(refs, cand)[key].fmeasure, abs=1e-12
    )


def test_corpus_rouge_is_the_mean_of_sentence_rouge():
    cands, refs = DATA.systems["fair"][:10], DATA.references[:10]
    want = sum(rouge_n(c, r, 2, variant="max") for c, r in zip(cands, refs, strict=True)) / 10
    assert corpus_rouge_n(cands, refs, 2, variant="max") == pytest.approx(want)


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: corpus_bleu(["a", "b"], [["a"]]), ValueError, "2 candidates but 1 reference"),
        (lambda: corpus_bleu(["a"], [[]]), ValueError, "has no reference"),
        (lambda: corpus_bleu([], []), ValueError, "candidates is empty"),
        (lambda: corpus_bleu("a b", [["a b"]]), TypeError, "single str"),
        (lambda: corpus_bleu(["a"], ["a"]), TypeError, "wrap it in a list"),
        (lambda: corpus_bleu([3], [["a"]]), TypeError, r"candidates\[0\] must be a sentence"),
        (lambda: corpus_bleu(["a"], [["a", None]]), TypeError, r"references\[0\]\[1\]"),
        (lambda: corpus_bleu(["a"], [["a"]], (0.5, 0.6)), ValueError, "must sum to 1"),
        (lambda: corpus_bleu(["a"], [["a"]], (1.5, -0.5)), ValueError, "outside"),
        (lambda: corpus_bleu(["a"], [["a"]], ()), ValueError, "weights is empty"),
        (lambda: corpus_bleu(["a"], [["a"]], (float("nan"),)), ValueError, "finite"),
        (lambda: corpus_bleu(["a"], [["a"]], ("x",)), TypeError, "must be a number"),
        (lambda: corpus_bleu(["a"], [["a"]], tokenize="spm"), ValueError, "tokenize must be one"),
        (lambda: corpus_bleu(["a"], [["a"]], smoothing="add-1"), ValueError, "smoothing must"),
        (
            lambda: corpus_bleu(["a"], [["a"]], smoothing="floor", smooth_value=-1),
            ValueError,
            "positive",
        ),
        (lambda: modified_precision(["a b"], [["a b"]], 3), ValueError, "0/0"),
        (lambda: modified_precision(["a b"], [["a b"]], 0), ValueError, "n must be at least 1"),
        (lambda: ngrams("a b", 1), TypeError, "split it first"),
        (lambda: ngrams(["a"], 0), ValueError, "n must be at least 1"),
        (lambda: substring_count([], ["a"]), ValueError, "s is empty"),
        (lambda: brevity_penalty(-1, 2), ValueError, "c must be at least 0"),
        (lambda: closest_reference_length(3, []), ValueError, "empty"),
        (lambda: rouge_n("a", [], 1), ValueError, "has no reference"),
        (lambda: rouge_n("a", ["a"], 1, variant="min"), ValueError, "variant must be one of"),
        (lambda: rouge_n("a", ["a"], 1, measure="f1"), ValueError, "measure must be one of"),
        (lambda: bleu_from_stats(BleuStats((1,), (1,), 1, 1), (0.5, 0.5)), ValueError, "max_n=2"),
        (lambda: tokenize(3), TypeError, "text must be a str"),
    ],
)
def test_bad_input_gives_a_clear_error(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_documented_results_for_degenerate_input():
    # an empty candidate: c = 0, BP = 0, BLEU 0 (no error)
    r = corpus_bleu([""], [["a b c"]])
    assert (r.score, r.bp, r.c) == (0.0, 0.0, 0)
    # empty references are allowed (length 0); an empty candidate against them gives BP = 1
    assert corpus_bleu(["a b"], [[""]]).score == 0.0
    # n larger than every candidate: p_n undefined -> BLEU 0, unless effective_order
    assert corpus_bleu(["a b"], [["a b"]]).score == 0.0
    assert corpus_bleu(["a b"], [["a b"]], effective_order=True).score == 1.0
    # ROUGE: a reference shorter than n has no n-gram: its recall counts as 0
    assert rouge_n("a b", ["a"], 2) == 0.0
    # the notes' layout is required; sacrebleu's stream layout is explained when lengths differ
    with pytest.raises(ValueError, match="list\\(zip\\(\\*streams\\)\\)"):
        corpus_bleu(["a", "b", "c"], [["a", "b", "c"], ["a", "b", "c"]])


# --- data set ------------------------------------------------------------------------------


def test_data_set_is_reproducible_and_large_enough(tmp_path):
    written = write_translation_eval(tmp_path)
    for path in written:
        assert path.read_bytes() == data_path(DATA_DIR, path.name).read_bytes(), path.name
    assert len(DATA.sources) >= 50
    assert all(len(refs) >= 2 for refs in DATA.references)
    assert len(DATA.systems) >= 3
    assert make_translation_eval() == DATA
    assert all(
        neg != refs[0] for neg, refs in zip(DATA.systems["negated"], DATA.references, strict=True)
    )


def _word_edits(a: str, b: str) -> int:
    """Levenshtein distance between two sentences, counted in words."""
    x, y = a.split(), b.split()
    row = list(range(len(y) + 1))
    for i, u in enumerate(x, 1):
        prev, row[0] = row[0], i
        for j, v in enumerate(y, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (u != v))
    return row[-1]


def test_the_control_and_the_negated_system_are_one_word_from_reference_1():
    """Section 3.8 compares a meaning-reversing edit with a meaning-preserving one: both must be
    exactly one word (inserted, removed or replaced) away from reference 1."""
    assert len(DATA.paraphrased) == len(DATA.sources)
    for system in (DATA.paraphrased, DATA.systems["negated"]):
        for line, refs in zip(system, DATA.references, strict=True):
            assert _word_edits(line, refs[0]) == 1, (line, refs[0])
    assert _word_edits("a b c", "a x c") == _word_edits("a b", "a b c") == 1
    assert _word_edits("a b c", "c b a") == 2


def test_negate_rules():
    assert negate("We do not have chairs.") == "We do have chairs."
    assert negate("He cannot cook.") == "He can cook."
    assert negate("Can you pass the salt?") == "Can you not pass the salt?"
    with pytest.raises(ValueError, match="no rule"):
        negate("Hello there.")


def test_metrics_rank_the_noise_ladder_in_order():
    ladder = ["human", "good", "fair", "poor"]
    bleu = [corpus_bleu(DATA.systems[s], DATA.references).score for s in ladder]
    rouge = [corpus_rouge_n(DATA.systems[s], DATA.references, 2, variant="max") for s in ladder]
    assert bleu == sorted(bleu, reverse=True) and rouge == sorted(rouge, reverse=True)


# --- widget and exercises --------------------------------------------------------------------


def test_widget_breakdown_agrees_with_the_library():
    cand, refs = DATA.systems["fair"][3], DATA.references[3]
    b = bleu_breakdown(cand, refs)
    r = sentence_bleu(cand, refs)
    assert b["bleu"] == r.score and (b["c"], b["r"]) == (r.c, r.r)
    assert [o["matches"] for o in b["orders"]] == list(r.matches)
    b = bleu_breakdown("the the the cat", ["the cat sat", "the the dog"], 2)
    assert b["orders"][0]["positions"] == ["match", "match", "clipped", "match"]
    assert b["orders"][1]["positions"] == ["match", "clipped", "match"]  # "the the" twice


def test_widget_html_and_errors():
    html = render_html("the cat", ["the cat sat", ""], 2, smoothing="exp")
    assert "BLEU-2" in html and "clipped matches" in html
    assert "at least one non-empty reference" in render_html("a", ["", " "])
    assert "undefined (0/0)" in render_html("a", ["a"], 2)
    with pytest.raises(ValueError, match="max_n must be at most 9"):
        bleu_breakdown("a", ["a"], 10)
    box = bleu_explorer("the cat", ["the cat sat"])
    cand, refs, controls, out = box.children
    cand.value = "the cat sat"
    assert "BLEU-4 = 0.0000" in out.value  # no 4-gram
    controls.children[0].value = 3
    assert "BLEU-3 = 1.0000" in out.value  # identical to the reference


def _grams(t, n):
    return [tuple(t[i : i + n]) for i in range(len(t) - n + 1)]


def clipped_solution(cand, refs, n):
    cc = Counter(_grams(cand, n))
    rcs = [Counter(_grams(r, n)) for r in refs]
    return sum(min(v, max(rc[g] for rc in rcs)) for g, v in cc.items()), sum(cc.values())


def bp_solution(cand_lengths, ref_lengths):
    r = sum(
        min(rs, key=lambda x, c=c: (abs(x - c), x))
        for c, rs in zip(cand_lengths, ref_lengths, strict=True)
    )
    c = sum(cand_lengths)
    return 1.0 if c >= r else math.exp(1 - r / c)


def rouge_solution(cand, refs, n):
    cc = Counter(_grams(cand, n))
    total = 0.0
    for ref in refs:
        rc = Counter(_grams(ref, n))
        if rc:
            total += sum(min(v, cc[g]) for g, v in rc.items()) / sum(rc.values())
    return total


def colleague_clipped(cand, refs, n, *, short=True, summed=True):
    """The debugging exercise's function, with either or both of its bugs."""
    cc = Counter(_grams(cand, n)[:-1] if short else _grams(cand, n))
    allowed = Counter()
    for r in refs:
        grams = Counter(_grams(r, n)[:-1] if short else _grams(r, n))
        if summed:
            allowed.update(grams)
        else:
            allowed |= grams
    return sum(min(v, allowed[g]) for g, v in cc.items()), sum(cc.values())


@pytest.mark.parametrize(
    ("checker", "solution"),
    [
        (check.clipped_matches, clipped_solution),
        (check.corpus_brevity_penalty, bp_solution),
        (check.rouge_n_eq12, rouge_solution),
        (
            check.clipped_matches,
            lambda c, rs, n: colleague_clipped(c, rs, n, short=False, summed=False),
        ),
        (
            check.clipped_matches,
            lambda c, rs, n: tuple(np.int64(v) for v in clipped_solution(c, rs, n)),
        ),
        (check.clipped_matches, lambda c, rs, n: list(clipped_solution(c, rs, n))),
        (
            check.clipped_matches,
            lambda c, rs, n: tuple(float(v) for v in clipped_solution(c, rs, n)),
        ),
    ],
)
def test_checkers_accept_the_solutions(checker, solution):
    assert checker(solution, require=True).passed


@pytest.mark.parametrize(
    ("checker", "wrong", "words"),
    [
        (
            check.clipped_matches,
            lambda c, rs, n: (len(_grams(c, n)), len(_grams(c, n))),
            "clipping",
        ),
        (
            check.clipped_matches,
            lambda c, rs, n: clipped_solution(c[:-1] if len(c) >= n else c, rs, n),
            "one n-gram early",
        ),
        (
            check.clipped_matches,
            lambda c, rs, n: (
                sum(
                    min(v, sum(Counter(_grams(r, n))[g] for r in rs))
                    for g, v in Counter(_grams(c, n)).items()
                ),
                len(_grams(c, n)),
            ),
            "maximum",
        ),
        (check.clipped_matches, lambda c, rs, n: 0.5, "pair"),
        (
            check.corpus_brevity_penalty,
            lambda cl, rl: bp_solution(cl, [[rs[0]] for rs in rl]),
            "first reference",
        ),
        (
            check.corpus_brevity_penalty,
            lambda cl, rl: (
                sum(bp_solution([c], [rs]) for c, rs in zip(cl, rl, strict=True)) / len(cl)
            ),
            "one penalty for the whole corpus",
        ),
        (check.corpus_brevity_penalty, lambda cl, rl: "1", "number"),
        (
            check.rouge_n_eq12,
            lambda c, rs, n: rouge_solution(c, rs, n) / len(rs),
            "sums the recalls",
        ),
        (
            check.rouge_n_eq12,
            lambda c, rs, n: rouge_n(c, rs, n, variant="pooled", tokenize="none"),
            "pool",
        ),
        (check.clipped_matches, colleague_clipped, "both bugs are still there"),
        (
            check.clipped_matches,
            lambda c, rs, n: colleague_clipped(c, rs, n, summed=False),
            "one n-gram early",
        ),
        (
            check.clipped_matches,
            lambda c, rs, n: colleague_clipped(c, rs, n, short=False),
            "Counter.update adds them",
        ),
        (check.clipped_matches, lambda c, rs, n: None, "return a pair"),
        (check.clipped_matches, lambda c, rs, n: (x for x in (1, 2)), "return a pair"),
        (check.clipped_matches, lambda c, rs, n: b"12", "return a pair"),
        (check.clipped_matches, lambda c, rs, n: ([1], 2), "two whole numbers"),
        (check.clipped_matches, lambda c, rs, n: (float("nan"), 7), "two whole numbers"),
        (check.clipped_matches, lambda c, rs: (2, 7), "takes 2 positional arguments"),
        (check.clipped_matches, lambda c, rs, n: 1 / 0, "ZeroDivisionError"),
        (check.clipped_matches, "not a function", "expected a function"),
    ],
)
def test_checkers_explain_typical_mistakes(checker, wrong, words):
    outcome = checker(wrong)
    assert not outcome.passed
    assert words in str(outcome)
    with pytest.raises(AssertionError):
        checker(wrong, require=True)


def test_loader_explains_a_missing_data_set(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m course_lib.text_metrics.dataset"):
        load_translation_eval(tmp_path)


@pytest.mark.slow
def test_benchmark_runs_and_agrees_on_its_quick_size():
    from benchmarks import text_metrics as bench

    rows = bench.run(quick=True)
    assert [r["metric"] for r in rows] == [
        "BLEU, tokenize=13a",
        "BLEU, tokenize=none",
        "BLEU, tokenize=char",
        "chrF",
        "chrF++",
    ]
    assert all(r["abs_diff"] <= 1e-9 and r["same_counts"] in (True, "n/a") for r in rows)
    assert "target (at least as fast as sacrebleu" in bench.summary(rows)  # speed not asserted
