"""ROUGE-L, ROUGE-Lsum and chrF/chrF++ (chapter 3): hand-derived values, parity with rouge-score
and sacrebleu, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer
from sacrebleu.metrics import CHRF

from course_lib.text_metrics import (
    corpus_chrf,
    corpus_rouge_l,
    lcs_indices,
    lcs_length,
    rouge_l,
    rouge_lsum,
    sentence_chrf,
)
from course_lib.text_metrics.dataset import load_translation_eval

DATA = load_translation_eval()
SCORER = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"])
WORDS = ["the", "cat", "cats", "sat", "on", "mat", "a", "dog", "(sat)", "mat.", "é", "!"]
sentences = st.lists(st.sampled_from(WORDS), min_size=0, max_size=9).map(" ".join)
texts = st.lists(sentences, min_size=1, max_size=3).map("\n".join)


def test_lcs_by_hand():
    # "the cat sat on the mat" vs "the cat lay on a mat": the, cat, on, mat -> 4
    assert lcs_length("the cat sat on the mat".split(), "the cat lay on a mat".split()) == 4
    assert lcs_length([], ["a"]) == 0 and lcs_length(list("AB"), list("BA")) == 1
    s = rouge_l("the cat lay on a mat", ["the cat sat on the mat"])
    assert (s.matches, s.precision, s.recall) == (4, 4 / 6, 4 / 6)
    # two LCS of "a b" in "b a b": the read-out takes the later one, as rouge-score does
    assert lcs_indices("b a b".split(), "a b".split()) == [1, 2]


def test_rouge_l_equals_rouge_score_on_the_chapter_data():
    for lines in DATA.systems.values():
        for cand, refs in zip(lines, DATA.references, strict=True):
            want = SCORER.score_multi(refs, cand)["rougeL"]
            got = rouge_l(cand, refs)
            assert (got.precision, got.recall, got.fmeasure) == pytest.approx(
                (want.precision, want.recall, want.fmeasure), abs=1e-12
            )


@settings(max_examples=150)
@given(cand=texts, refs=st.lists(texts, min_size=1, max_size=3))
def test_rouge_l_and_lsum_equal_rouge_score(cand, refs):
    want = SCORER.score_multi(refs, cand)
    got_l = rouge_l(cand.replace("\n", " "), [r.replace("\n", " ") for r in refs])
    want_l = SCORER.score_multi([r.replace("\n", " ") for r in refs], cand.replace("\n", " "))
    assert got_l.fmeasure == pytest.approx(want_l["rougeL"].fmeasure, abs=1e-12)
    got = rouge_lsum(cand, refs)
    w = want["rougeLsum"]
    assert (got.precision, got.recall, got.fmeasure) == pytest.approx(
        (w.precision, w.recall, w.fmeasure), abs=1e-12
    )


def test_corpus_rouge_l_is_the_mean_of_sentence_scores():
    lines = DATA.systems["good"]
    want = sum(
        SCORER.score_multi(r, c)["rougeL"].fmeasure
        for c, r in zip(lines, DATA.references, strict=True)
    )
    assert corpus_rouge_l(lines, DATA.references) == pytest.approx(want / len(lines), abs=1e-12)


@pytest.mark.parametrize("word_order", [0, 2], ids=["chrF", "chrF++"])
def test_chrf_equals_sacrebleu_on_the_chapter_data(word_order):
    streams = [list(s) for s in zip(*DATA.references, strict=True)]
    metric = CHRF(word_order=word_order)
    for lines in DATA.systems.values():
        ours = corpus_chrf(lines, DATA.references, word_order=word_order).score
        assert ours == pytest.approx(metric.corpus_score(lines, streams).score / 100, abs=1e-9)
        for cand, refs in zip(lines, DATA.references, strict=True):
            got = sentence_chrf(cand, refs, word_order=word_order).score
            assert got == pytest.approx(metric.sentence_score(cand, refs).score / 100, abs=1e-9)


@settings(max_examples=150)
@given(
    corpus=st.lists(
        st.tuples(sentences, st.lists(sentences, min_size=1, max_size=3)), min_size=1, max_size=4
    ),
    word_order=st.sampled_from([0, 1, 2]),
    lowercase=st.booleans(),
)
def test_chrf_equals_sacrebleu_on_random_corpora(corpus, word_order, lowercase):
    n_refs = max(len(r) for _, r in corpus)
    corpus = [(c, (r * n_refs)[:n_refs]) for c, r in corpus]  # sacrebleu: same count per line
    cands = [c for c, _ in corpus]
    refs = [r for _, r in corpus]
    ours = corpus_chrf(cands, refs, word_order=word_order, lowercase=lowercase).score
    metric = CHRF(word_order=word_order, lowercase=lowercase)
    theirs = metric.corpus_score(cands, [list(s) for s in zip(*refs, strict=True)]).score / 100
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_chrf_by_hand():
    # identical sentences: every precision and recall is 1
    assert sentence_chrf("a cat", ["a cat"]).score == 1.0
    # no character in common: 0
    assert sentence_chrf("xyz", ["abc"]).score == 0.0
    # "ab" vs "abc": orders 1-2 match fully in precision; recall 2/3 and 1/2; orders 3-6: no
    # candidate n-grams, left out (effective order 2): P = 1, R = (2/3 + 1/2)/2 = 7/12
    p, r = 1.0, 7 / 12
    assert sentence_chrf("ab", ["abc"]).score == pytest.approx(5 * p * r / (4 * p + r))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: corpus_chrf("a b", [["a"]]), TypeError, "candidates must be a list"),
        (
            lambda: corpus_chrf(["a"], [["a"], ["b"]]),
            ValueError,
            "1 candidates but 2 reference sets",
        ),
        (lambda: corpus_chrf([], []), ValueError, "candidates is empty"),
        (lambda: corpus_chrf(["a"], [[["a"]]]), TypeError, "chrF works on str sentences"),
        (
            lambda: corpus_chrf(["a"], [["a"]], char_order=0),
            ValueError,
            "char_order must be at least 1",
        ),
        (lambda: corpus_chrf(["a"], [["a"]], beta=0), ValueError, "beta must be a positive number"),
        (
            lambda: corpus_chrf(["a"], [["a"]], lowercase="yes"),
            TypeError,
            "lowercase must be True or False",
        ),
        (lambda: sentence_chrf("a", "a"), TypeError, "got a single str"),
        (lambda: rouge_l("a", ["a"], variant="notes"), ValueError, "variant must be one of"),
        (lambda: rouge_lsum("a", "a"), TypeError, "references must be a non-empty list"),
        (lambda: rouge_lsum(["a"], ["a"]), TypeError, "candidate must be a str"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
