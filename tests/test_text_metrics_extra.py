"""ROUGE-L, ROUGE-Lsum, chrF/chrF++ and the ``intl`` tokenizer (chapter 3), beyond
``test_text_metrics_lcs_chrf.py``: hand-derived tables, the LCS read-out against rouge-score's own,
every reference-combination variant, ROUGE-Lsum on multi-sentence documents made from the
chapter's data, chrF's options (epsilon smoothing, white space, orders, beta) and its n-gram
statistics against sacrebleu's, arbitrary Unicode, bad input, and the paired bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer
from sacrebleu.metrics import CHRF
from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International

from course_lib.text_metrics import (
    BigramLM,
    bleu_from_stats,
    corpus_bleu,
    corpus_chrf,
    corpus_rouge_l,
    corpus_stats,
    lcs_indices,
    lcs_length,
    paired_bootstrap,
    perplexity,
    rouge_l,
    rouge_lsum,
    sentence_chrf,
    tokenize,
    tokenize_many,
)
from course_lib.text_metrics.dataset import load_translation_eval

DATA = load_translation_eval()
STREAMS = [list(s) for s in zip(*DATA.references, strict=True)]  # sacrebleu's layout
SCORER = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"])
INTL = TokenizerV14International()

# Random text: words that share characters and stems, joined by separators that rouge-score's
# tokenizer, chrF++'s punctuation splitter and intl all treat differently; plus arbitrary Unicode.
WORDS = [
    "the",
    "The",
    "cat",
    "cats",
    "sat",
    "on",
    "mat",
    "a",
    "A",
    "(sat)",
    "mat.",
    "é",
    "!",
    "1,5",
]
SEPARATORS = [" ", "  ", ", ", " - ", "\t", "\u00a0", "\n"]
words = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12)
sentences = st.builds(
    lambda ws, seps: "".join(w + s for w, s in zip(ws, seps, strict=False)).strip(" "),
    words,
    st.lists(st.sampled_from(SEPARATORS[:-1]), min_size=12, max_size=12),
)
documents = st.builds(
    lambda ws, seps: "".join(w + s for w, s in zip(ws, seps, strict=False)),
    words,
    st.lists(st.sampled_from(SEPARATORS), min_size=12, max_size=12),
)
unicode_text = st.text(max_size=40)
any_text = st.one_of(documents, documents, unicode_text)


def _prf(score) -> tuple[float, float, float]:
    return (score.precision, score.recall, score.fmeasure)


# --- hand-derived values ---------------------------------------------------------------------


def test_lcs_table_by_hand():
    # c = a b c d (candidate), r = a c b d (reference). t[i][j] = LCS of r[:i] and c[:j]:
    #
    #          c:  -  a  b  c  d
    #     r:  -    0  0  0  0  0
    #         a    0  1  1  1  1
    #         c    0  1  1  2  2
    #         b    0  1  2  2  2
    #         d    0  1  2  2  3
    #
    # LCS = t[4][4] = 3 ("a b d" and "a c d" both have length 3), so P = R = F = 3/4.
    c, r = "a b c d".split(), "a c b d".split()
    assert lcs_length(c, r) == lcs_length(r, c) == 3
    s = rouge_l(c, [r])
    assert (s.matches, s.candidate_total, s.reference_total) == (3, 4, 4)
    assert _prf(s) == (0.75, 0.75, 0.75)
    # The read-out (rouge-score's rule) walks back from t[4][4]: d = d, r index 3. At t[3][3],
    # b != c and moving left (t[3][2] = 2) is not strictly better than moving up (t[2][3] = 2),
    # so it moves up; at t[2][3], c = c, r index 1; at t[1][2], a != b and left (t[1][1] = 1)
    # beats up (t[0][2] = 0); at t[1][1], a = a, r index 0. So "a c d" of r, at 0, 1, 3; with
    # the arguments swapped the same walk reads "a b d" of c.
    assert lcs_indices(r, c) == [0, 1, 3]
    assert [c[i] for i in lcs_indices(c, r)] == ["a", "b", "d"]
    assert _prf(SCORER.score("a c b d", "a b c d")["rougeL"]) == (0.75, 0.75, 0.75)


def test_rouge_l_variants_by_hand():
    # candidate a b c d; reference 1 a c b d: LCS 3 (P 3/4, R 3/4, F 3/4);
    # reference 2 a b: LCS 2 (P 2/4, R 2/2, F 2 * 1/2 * 1 / (3/2) = 2/3).
    cand, refs = "a b c d", ["a c b d", "a b"]
    best = rouge_l(cand, refs)
    assert (best.matches, best.reference_total) == (3, 4)  # reference 1 has the higher F
    assert _prf(best) == _prf(SCORER.score_multi(refs, cand)["rougeL"])
    assert rouge_l(cand, refs, variant="mean", measure="recall") == (3 / 4 + 1) / 2
    assert rouge_l(cand, refs, variant="max", measure="recall") == 1.0  # from reference 2
    assert rouge_l(cand, refs, variant="pooled", measure="recall") == 5 / 6  # (3 + 2) / (4 + 2)
    assert rouge_l(cand, refs, variant="pooled", measure="precision") == 5 / 8  # 5 / (2 * 4)
    assert corpus_rouge_l([cand, "x"], [refs, ["y"]], variant="max", measure="recall") == 0.5


def test_rouge_lsum_by_hand():
    # reference sentences "a b" / "c d", candidate sentences "a c" / "b d":
    # "a b" vs "a c": LCS a (ref index 0); vs "b d": LCS b (index 1); union {0, 1}: 2 hits.
    # "c d" vs "a c": c (index 0); vs "b d": d (index 1); union {0, 1}: 2 hits.
    # 4 hits of 4 words: P = R = F = 1, although no sentence pair shares more than one word.
    s = rouge_lsum("a c\nb d", ["a b\nc d"])
    assert (s.matches, s.candidate_total, s.reference_total) == (4, 4, 4)
    assert rouge_l("a c b d", ["a b c d"]).matches == 3  # one sentence: only a, c, d or a, b, d
    # each word counts at most as often as it occurs in both texts: "a" twice in the
    # candidate's sentences but once in the reference gives one hit
    s = rouge_lsum("a\na", ["a"])
    assert (s.matches, s.candidate_total, s.reference_total) == (1, 2, 1)
    assert _prf(s) == _prf(SCORER.score("a", "a\na")["rougeLsum"])


def test_chrf_by_hand():
    # "aa" vs "a": order 1: 2 candidate unigrams, 1 reference unigram, 1 match -> P 1/2, R 1;
    # order 2: the reference has no bigram, so the order is left out (effective order 1):
    # F_2 = 5 P R / (4 P + R) = 2.5 / 3
    r = sentence_chrf("aa", ["a"])
    assert r.stats[:2] == ((2, 1, 1), (0, 0, 0))
    assert r.score == pytest.approx(2.5 / 3, abs=1e-15)
    # corpus pooling (orders 1-2): "ab" vs "ab" gives (2, 2, 2), (1, 1, 1); "xy" vs "zz" gives
    # (2, 2, 0), (1, 1, 0); summed (4, 4, 2), (2, 2, 1): P = R = 1/2 at both orders, chrF 1/2
    r = corpus_chrf(["ab", "xy"], [["ab"], ["zz"]], char_order=2)
    assert r.stats == ((4, 4, 2), (2, 2, 1)) and r.score == 0.5
    # the reference whose chrF is highest is used: "abd" (2 unigrams, 1 bigram shared), not "xyz"
    r = sentence_chrf("abc", ["xyz", "abd"], char_order=2)
    assert r.stats == ((3, 3, 2), (2, 2, 1))
    # epsilon smoothing: the mean of per-order F over all orders; order 2 has no reference
    # bigram and P = 0/1 -> 0, R = eps: F = 5 * 0 * eps / (0 + eps) = 0; order 1 as above
    r = sentence_chrf("aa", ["a"], char_order=2, eps_smoothing=True)
    assert r.score == pytest.approx((2.5 / 3 + 0.0) / 2, abs=1e-15)
    want = sacrebleu.sentence_chrf("aa", ["a"], char_order=2, eps_smoothing=True).score
    assert 100 * r.score == pytest.approx(want, abs=1e-9)


def test_intl_by_hand():
    # punctuation splits off unless between digits; symbols always; a period after a number at
    # the very end of the line stays (mteval-v14's quirk, which sacrebleu keeps)
    assert tokenize("«Hi», 3,5 €. In 1995.", "intl") == [
        "«",
        "Hi",
        "»",
        ",",
        "3,5",
        "€",
        ".",
        "In",
        "1995.",
    ]
    assert tokenize("In 1995. Then", "intl") == ["In", "1995", ".", "Then"]
    assert tokenize("In 1995.", "13a") == ["In", "1995", "."]


# --- ROUGE-L and ROUGE-Lsum against rouge-score -----------------------------------------------


@settings(deadline=None, max_examples=100)
@given(
    ref=st.lists(st.sampled_from("abc"), max_size=12),
    cand=st.lists(st.sampled_from("abc"), max_size=12),
)
def test_lcs_and_its_read_out_equal_rouge_score(ref, cand):
    assert lcs_length(ref, cand) == rouge_scorer._lcs_table(ref, cand)[-1][-1]
    assert lcs_indices(ref, cand) == rouge_scorer.lcs_ind(ref, cand)


def test_rouge_l_every_measure_on_the_chapter_data():
    worst = 0.0
    for lines in DATA.systems.values():
        for cand, refs in zip(lines, DATA.references, strict=True):
            per_ref = [SCORER.score(r, cand)["rougeL"] for r in refs]
            best = SCORER.score_multi(refs, cand)["rougeL"]
            got = rouge_l(cand, refs)
            worst = max(worst, *(abs(a - b) for a, b in zip(_prf(got), _prf(best), strict=True)))
            for i, name in enumerate(("precision", "recall", "f")):
                mean = sum(_prf(s)[i] for s in per_ref) / len(per_ref)
                assert rouge_l(cand, refs, variant="mean", measure=name) == pytest.approx(
                    mean, abs=1e-12
                )
                assert rouge_l(cand, refs, variant="max", measure=name) == max(
                    _prf(s)[i] for s in per_ref
                )
    assert worst == 0.0  # the same operations in the same order: bit for bit


def test_rouge_lsum_on_multi_sentence_documents_from_the_chapter_data():
    # documents of five consecutive sentences, one per line, against the references' documents
    n = len(DATA.references)
    worst = 0.0
    for lines in DATA.systems.values():
        for start in range(0, n, 5):
            cand = "\n".join(lines[start : start + 5])
            refs = ["\n".join(s[start : start + 5]) for s in STREAMS]
            got = rouge_lsum(cand, refs)
            want = SCORER.score_multi(refs, cand)["rougeLsum"]
            worst = max(worst, *(abs(a - b) for a, b in zip(_prf(got), _prf(want), strict=True)))
    assert worst == 0.0


@settings(deadline=None, max_examples=100)
@given(cand=any_text, refs=st.lists(any_text, min_size=1, max_size=3))
def test_rouge_l_and_lsum_equal_rouge_score_on_arbitrary_text(cand, refs):
    want = SCORER.score_multi(refs, cand)
    assert _prf(rouge_l(cand, refs)) == pytest.approx(_prf(want["rougeL"]), abs=1e-12)
    assert _prf(rouge_lsum(cand, refs)) == pytest.approx(_prf(want["rougeLsum"]), abs=1e-12)


@settings(deadline=None, max_examples=100)
@given(cand=sentences, refs=st.lists(sentences, min_size=1, max_size=3))
def test_rouge_lsum_of_single_lines_is_rouge_l(cand, refs):
    assert rouge_lsum(cand, refs) == rouge_l(cand, refs)
    assert rouge_lsum(cand, refs, tokenize="none") == rouge_l(cand, refs, tokenize="none")


def test_corpus_rouge_l_every_variant_is_the_mean_of_sentence_scores():
    lines = DATA.systems["fair"]
    for variant in ("best-f", "mean", "max", "pooled"):
        for measure in ("precision", "recall", "f"):
            scores = [
                rouge_l(c, r, variant=variant, measure=measure)
                for c, r in zip(lines, DATA.references, strict=True)
            ]
            if variant == "best-f":
                scores = [s.measure(measure) for s in scores]
            got = corpus_rouge_l(lines, DATA.references, variant=variant, measure=measure)
            assert got == pytest.approx(sum(scores) / len(scores), abs=1e-15)


# --- chrF and chrF++ against sacrebleu ---------------------------------------------------------


def _sacrebleu_stats(metric: CHRF, cands: list[str], refs: list[list[str]]) -> tuple:
    """sacrebleu's summed per-order (hyp, ref, match) counts (from its statistics extractor)."""
    streams = [list(s) for s in zip(*refs, strict=True)]
    per_sentence = metric._extract_corpus_statistics(cands, streams)
    flat = [sum(col) for col in zip(*per_sentence, strict=True)]
    return tuple(tuple(flat[i : i + 3]) for i in range(0, len(flat), 3))


@pytest.mark.parametrize("eps_smoothing", [False, True], ids=["effective-order", "eps"])
@pytest.mark.parametrize("word_order", [0, 2], ids=["chrF", "chrF++"])
def test_chrf_equals_sacrebleu_functions_on_the_chapter_data(word_order, eps_smoothing):
    kw = {"word_order": word_order, "eps_smoothing": eps_smoothing}
    worst = 0.0
    for lines in DATA.systems.values():
        ours = corpus_chrf(lines, DATA.references, **kw)
        theirs = sacrebleu.corpus_chrf(lines, STREAMS, **kw).score
        worst = max(worst, abs(100 * ours.score - theirs))
        assert ours.stats == _sacrebleu_stats(CHRF(**kw), lines, DATA.references)
        for cand, refs in zip(lines, DATA.references, strict=True):
            theirs = sacrebleu.sentence_chrf(cand, refs, **kw).score
            worst = max(worst, abs(100 * sentence_chrf(cand, refs, **kw).score - theirs))
    assert worst <= 1e-9  # on sacrebleu's 0-100 scale


@settings(deadline=None, max_examples=100)
@given(
    corpus=st.lists(
        st.tuples(any_text, st.lists(any_text, min_size=1, max_size=3)), min_size=1, max_size=5
    ),
    char_order=st.sampled_from([1, 3, 6]),
    word_order=st.sampled_from([0, 1, 2, 3]),
    beta=st.sampled_from([1, 2, 3, 0.5]),
    lowercase=st.booleans(),
    whitespace=st.booleans(),
    eps_smoothing=st.booleans(),
)
def test_chrf_equals_sacrebleu_with_every_option(
    corpus, char_order, word_order, beta, lowercase, whitespace, eps_smoothing
):
    n_refs = max(len(r) for _, r in corpus)
    corpus = [(c, (r * n_refs)[:n_refs]) for c, r in corpus]  # sacrebleu: same count per line
    cands = [c for c, _ in corpus]
    refs = [r for _, r in corpus]
    kw = {
        "char_order": char_order,
        "word_order": word_order,
        "beta": beta,
        "lowercase": lowercase,
        "whitespace": whitespace,
        "eps_smoothing": eps_smoothing,
    }
    metric = CHRF(**kw)
    ours = corpus_chrf(cands, refs, **kw)
    theirs = metric.corpus_score(cands, [list(s) for s in zip(*refs, strict=True)]).score
    assert 100 * ours.score == pytest.approx(theirs, abs=1e-9)
    assert ours.stats == _sacrebleu_stats(metric, cands, refs)
    got = 100 * sentence_chrf(cands[0], refs[0], **kw).score
    assert got == pytest.approx(metric.sentence_score(cands[0], refs[0]).score, abs=1e-9)


def test_chrf_drops_the_candidates_ngrams_of_orders_its_reference_lacks():
    # sentence 2's reference "a" has no bigram, so the candidate's bigram "ab" is not counted
    # (precision of order 2 stays 1); this is sacrebleu's behaviour, not an oversight here
    r = corpus_chrf(["abc", "ab"], [["abc"], ["a"]], char_order=2)
    assert r.stats == ((5, 4, 4), (2, 2, 2))
    theirs = sacrebleu.corpus_chrf(["abc", "ab"], [["abc", "a"]], char_order=2).score
    assert 100 * r.score == pytest.approx(theirs, abs=1e-9)


# --- the intl tokenizer against sacrebleu -------------------------------------------------------


@settings(deadline=None, max_examples=100)
@given(lines=st.lists(st.text(max_size=30), min_size=1, max_size=5), lowercase=st.booleans())
def test_intl_equals_sacrebleu_on_arbitrary_unicode(lines, lowercase):
    # with and without newlines inside a line (the corpus is joined by newlines when it can be)
    for batch in (lines, [line.replace("\n", " ") for line in lines]):
        want = [INTL((x.lower() if lowercase else x).rstrip()).split() for x in batch]
        assert tokenize_many(batch, "intl", lowercase=lowercase) == want


def test_bleu_with_intl_equals_sacrebleu_on_the_chapter_data():
    for lines in DATA.systems.values():
        ours = corpus_bleu(lines, DATA.references, tokenize="intl")
        theirs = sacrebleu.corpus_bleu(lines, STREAMS, tokenize="intl", smooth_method="none")
        assert (list(ours.matches), list(ours.totals)) == (theirs.counts, theirs.totals)
        assert (ours.c, ours.r) == (theirs.sys_len, theirs.ref_len)
        assert 100 * ours.score == pytest.approx(theirs.score, abs=1e-9)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: lcs_length("abc", ["a"]), TypeError, "a must be a list of tokens"),
        (lambda: lcs_length(["a"], ["b", 1]), TypeError, r"b\[1\] must be a str token"),
        (lambda: lcs_indices(None, ["a"]), TypeError, "ref must be a list of tokens"),
        (lambda: lcs_indices(["a"], "a"), TypeError, "cand must be a list of tokens"),
        (lambda: rouge_l(3, ["a"]), TypeError, r"candidates\[0\] must be a sentence"),
        (lambda: rouge_l("a", []), ValueError, r"references\[0\] is empty"),
        (lambda: rouge_l("a", "a"), TypeError, "got a single str"),
        (lambda: rouge_l("a", ["a"], measure="fscore"), ValueError, "measure must be one of"),
        (lambda: rouge_l("a", ["a"], tokenize="bpe"), ValueError, "tokenize must be one of"),
        (lambda: corpus_rouge_l([], []), ValueError, "candidates is empty"),
        (
            lambda: corpus_rouge_l(["a"], [["a"], ["b"]]),
            ValueError,
            "1 candidates but 2 reference sets",
        ),
        (lambda: corpus_rouge_l("a", [["a"]]), TypeError, "candidates must be a list"),
        (
            lambda: corpus_rouge_l(["a"], [["a"]], variant="notes"),
            ValueError,
            "variant must be one of",
        ),
        (lambda: rouge_lsum("a", []), ValueError, "references is empty"),
        (lambda: rouge_lsum("a", ["a", 3]), TypeError, r"references\[1\] must be a str"),
        (lambda: rouge_lsum("a", 3), TypeError, "references must be a non-empty list"),
        (lambda: rouge_lsum("a", ["a"], lowercase="no"), TypeError, "lowercase must be True"),
        (lambda: rouge_lsum("a", ["a"], tokenize="x"), ValueError, "tokenize must be one of"),
        (lambda: corpus_chrf([], []), ValueError, "candidates is empty"),
        (lambda: corpus_chrf(["a"], [[]]), ValueError, r"references\[0\] is empty"),
        (lambda: corpus_chrf(["a", "b"], [["a"]]), ValueError, "2 candidates but 1 reference"),
        (lambda: corpus_chrf(["a"], ["a"]), TypeError, r"references\[0\] must be a list"),
        (lambda: corpus_chrf([["a"]], [["a"]]), TypeError, r"candidates\[0\] is list"),
        (lambda: corpus_chrf(["a"], [[None]]), TypeError, r"references\[0\]\[0\] must be"),
        (lambda: corpus_chrf(["a"], [["a"]], word_order=-1), ValueError, "word_order must be"),
        (lambda: corpus_chrf(["a"], [["a"]], char_order=2.5), TypeError, "char_order must be"),
        (lambda: corpus_chrf(["a"], [["a"]], beta="2"), TypeError, "beta must be a positive"),
        (
            lambda: corpus_chrf(["a"], [["a"]], beta=float("inf")),
            ValueError,
            "beta must be a positive",
        ),
        (
            lambda: corpus_chrf(["a"], [["a"]], eps_smoothing=1),
            TypeError,
            "eps_smoothing must be True or False",
        ),
        (lambda: sentence_chrf(["a"], ["a"]), TypeError, "candidate must be a str"),
        (lambda: sentence_chrf("a", []), ValueError, "references is empty"),
        (lambda: sentence_chrf("a", 5), TypeError, "references must be a list"),
        (lambda: tokenize("a", "intl2"), ValueError, "'rouge', 'intl'; got 'intl2'"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- the paired bootstrap (section 3.8) ----------------------------------------------------


def _bootstrap_by_hand(a, b, resamples, seed, confidence=0.95):
    """The same resampling written as plainly as possible: BleuStats summed one by one."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(a), size=(resamples, len(a)))
    diffs = []
    for idx in draws:
        sa = sum((a[i] for i in idx[1:]), a[idx[0]])
        sb = sum((b[i] for i in idx[1:]), b[idx[0]])
        diffs.append(bleu_from_stats(sa).score - bleu_from_stats(sb).score)
    tail = 100 * (1 - confidence) / 2
    return np.percentile(diffs, [tail, 100 - tail])


def test_paired_bootstrap_equals_a_plain_resampling_and_the_corpus_difference():
    H = [refs[1:] for refs in DATA.references]
    a = corpus_stats(DATA.systems["human"], H, per_sentence=True)
    b = corpus_stats(DATA.systems["good"], H, per_sentence=True)
    result = paired_bootstrap(a, b, resamples=60, seed=3, confidence=0.9)
    whole = corpus_bleu(DATA.systems["human"], H).score - corpus_bleu(DATA.systems["good"], H).score
    assert math.isclose(result.difference, whole, rel_tol=1e-12)
    np.testing.assert_allclose((result.low, result.high), _bootstrap_by_hand(a, b, 60, 3, 0.9))
    assert result.low <= result.high and "90% interval from 60 resamples" in str(result)
    same = paired_bootstrap(a, a, resamples=20)
    assert same.difference == same.low == same.high == 0.0  # paired: identical systems never differ


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s: paired_bootstrap(s[0], s), TypeError, "stats_a must be a non-empty list"),
        (lambda s: paired_bootstrap([], s), TypeError, "stats_a must be a non-empty list"),
        (lambda s: paired_bootstrap(s, [1, 2]), TypeError, "every element of stats_b"),
        (lambda s: paired_bootstrap(s, s[:1]), ValueError, "the same sentences"),
        (lambda s: paired_bootstrap(s, s, resamples=0), ValueError, "resamples"),
        (lambda s: paired_bootstrap(s, s, confidence=1.0), ValueError, "confidence"),
        (lambda s: paired_bootstrap(s, s, seed=-1), ValueError, "seed"),
    ],
)
def test_paired_bootstrap_bad_input(call, error, match):
    stats = corpus_stats(["a b c", "a b"], [["a b c"], ["a c"]], per_sentence=True)
    with pytest.raises(error, match=match):
        call(stats)


# --- perplexity and the bigram model (section 3.9) -----------------------------------------


def test_bigram_model_is_a_distribution_and_equals_a_count_by_hand():
    train = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat"]]
    lm = BigramLM(train, k=0.5)
    assert lm.V == 7  # the, cat, sat, dog, a, </s>, <unk>
    for context in ("<s>", "the", "cat", "sat", "zebra"):
        assert math.isclose(sum(lm.prob(context, w) for w in lm.vocabulary), 1.0, rel_tol=1e-12)
    # "the cat": C(the cat) = 1, C(the) = 2, so (1 + 0.5) / (2 + 0.5 * 7)
    assert math.isclose(lm.prob("the", "cat"), 1.5 / 5.5)
    assert lm.prob("the", "zebra") == lm.prob("the", "<unk>") == 0.5 / 5.5
    logp = lm.log_probs(["the", "cat"])  # <s> the, the cat, cat </s>
    assert len(logp) == 3 and math.isclose(logp[1], math.log(1.5 / 5.5))
    assert math.isclose(perplexity(logp), math.exp(-sum(logp) / 3))


def test_perplexity_of_a_uniform_model_is_its_vocabulary_size():
    assert math.isclose(perplexity([math.log(1 / 2000)] * 17), 2000.0, rel_tol=1e-12)
    lm = BigramLM([["x"]], k=1e9)  # huge k: every next token equally likely
    assert math.isclose(perplexity(lm.log_probs(["x", "x", "y"])), lm.V, rel_tol=1e-6)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: perplexity([]), ValueError, "empty"),
        (lambda: perplexity([0.5]), ValueError, "logarithms of probabilities"),
        (lambda: perplexity([float("nan")]), ValueError, "logarithms of probabilities"),
        (lambda: BigramLM([]), ValueError, "no training sentences"),
        (lambda: BigramLM(["a b"]), TypeError, "list of str tokens"),
        (lambda: BigramLM([["a"]], k=0), ValueError, "k must be"),
    ],
)
def test_perplexity_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
