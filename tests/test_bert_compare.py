"""Chapter 9: the Moby-Dick text, the mixed tokenizer, the causal variant and the encoder-vs-decoder comparison."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from course_lib.bert import compare as C
from course_lib.bert import datasets
from course_lib.bert.config import BertConfig, bert_block
from course_lib.bert.data import CLS, PAD, SEP, pretraining_chunks, text_rows, tokenizer
from course_lib.bert.model import Bert
from course_lib.paths import data_path

TINY = BertConfig(vocab_size=30, max_len=12, n_layers=2, block=bert_block(16, 4))


# ------------------------------------------------------------------------------- Moby-Dick
def test_moby_dick_comes_whole_and_in_order_from_the_pinned_tarball():
    parts = datasets.moby_dick_chapters()
    assert len(parts) == 138  # etymology, extracts, 135 chapters, epilogue
    assert parts[0][1].startswith("ETYMOLOGY.") and parts[1][1].startswith("EXTRACTS.")
    assert parts[2] == ("Loomings.", parts[2][1]) and parts[2][1].startswith("Call me Ishmael.")
    assert parts[-1][1].startswith("Epilogue") and parts[-1][1].rstrip().endswith("orphan.")
    text = datasets.moby_dick()
    assert 1_150_000 < len(text) < 1_250_000 and "CONTENTS" not in text[:100]
    assert datasets.PACKAGE["integrity"].startswith("sha512-")
    assert datasets.tarball_path().name == "datasets-moby-dick-0.2.3.tgz"


def test_a_missing_tarball_names_the_set_up_command(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "tarball_path", lambda: tmp_path / "none.tgz")
    datasets.moby_dick_chapters.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match=r"course setup.*course_lib\.bert\.datasets"):
            datasets.moby_dick()
    finally:
        datasets.moby_dick_chapters.cache_clear()


def test_the_tokenizer_covers_both_pre_training_texts():
    tok = tokenizer()
    shakespeare_held_out = pretraining_chunks(2_300_000, 32, tok)[-500:]  # after 2,000,000
    moby_held_out = datasets.moby_dick()[1_100_000:1_200_000]
    chars_per_token = len(moby_held_out) / len(tok.encode(moby_held_out))
    assert chars_per_token > 2.45  # a Shakespeare-only tokenizer gets about 2.35
    assert tok.decode(shakespeare_held_out[0, 1:-1].tolist())  # decodes
    assert tok.decode(tok.encode(moby_held_out)) == moby_held_out  # byte-level: lossless


def test_pre_training_rows_mix_the_two_texts():
    only = pretraining_chunks(30_000, 16)
    mixed = pretraining_chunks(30_000, 16, moby_dick_chars=30_000)
    np.testing.assert_array_equal(mixed[: len(only)], only)  # Shakespeare's rows first
    np.testing.assert_array_equal(mixed[len(only) :], text_rows(datasets.moby_dick()[:30_000], 16))
    assert (mixed[:, 0] == CLS).all() and (mixed[:, -1] == SEP).all() and PAD not in mixed
    with pytest.raises(ValueError, match="both 0"):
        pretraining_chunks(0, 16)


# ---------------------------------------------------------------------------- causal variant
def test_the_causal_variant_hides_the_future_and_shares_the_parameters():
    bert = Bert(TINY, seed=1)
    causal = C.CausalBert(bert).eval()
    x = torch.tensor([[1, 5, 7, 2, 9, 4, 3]])
    later = x.clone()
    later[0, 4] = 11  # change token 4
    h, h2 = causal(x), causal(later)
    torch.testing.assert_close(h[0, :4], h2[0, :4], rtol=0, atol=0)  # earlier states: unchanged
    assert (h[0, 4:] - h2[0, 4:]).abs().max() > 1e-4  # this and later states move
    assert (bert(x)[0, :4] - bert(later)[0, :4]).abs().max() > 1e-4  # BERT's earlier ones move
    # padding on the right changes nothing, with the attention mask
    padded = torch.cat([x, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.arange(10)[None] < 7
    torch.testing.assert_close(causal(padded, None, mask)[:, :7], h)
    # one block: the last position sees the whole input, as in BERT
    one = Bert(BertConfig(vocab_size=30, max_len=12, n_layers=1, block=bert_block(16, 4)), seed=2)
    torch.testing.assert_close(C.CausalBert(one)(x)[0, -1], one(x)[0, -1])
    assert set(map(id, causal.parameters())) == set(map(id, bert.parameters()))


def test_causal_pre_training_predicts_the_next_token_and_learns():
    chunks = pretraining_chunks(20_000, 16, moby_dick_chars=20_000)
    small = BertConfig(vocab_size=1024, max_len=16, n_layers=1, block=bert_block(32, 2))
    model, losses = C.pretrain_causal(chunks, config=small, steps=40, batch_size=16)
    assert abs(losses[0] - np.log(1024)) < 0.3 and np.mean(losses[-5:]) < losses[0] - 0.6
    assert not model.training


def test_classifier_reads_cls_or_the_last_real_token():
    bert = Bert(TINY, seed=0)
    x = torch.tensor([[1, 5, 7, 0, 0], [1, 5, 7, 8, 9]])
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    last = C.Classifier(C.CausalBert(bert), 2, "last").eval()
    h = last.encoder(x, None, mask)
    want = last.out(torch.tanh(last.pooler(h[[0, 1], [2, 4]])))
    torch.testing.assert_close(last(x, None, mask), want)
    with pytest.raises(ValueError, match="read"):
        C.Classifier(bert, 2, "mean")


def test_encode_pieces_cuts_every_text_to_the_same_tokens():
    pieces = [("We the people " * 20, 0, 1790), ("Short.", 1, 1901)]
    enc, dec = C.encode_pieces(pieces, 10, False), C.encode_pieces(pieces, 10, True)
    assert enc.ids.shape == (2, 12) and dec.ids.shape == (2, 11)
    np.testing.assert_array_equal(enc.ids[0, :11], dec.ids[0])  # the same text tokens
    assert enc.ids[0, -1] == SEP and dec.ids[0, -1] != SEP
    assert enc.targets[0].tolist() == [0, 1]


# ------------------------------------------------------------------------------ the comparison
@pytest.mark.slow
def test_the_comparison_runs_on_a_tiny_setting():
    recipe = {"n_chars": 20_000, "moby_dick_chars": 20_000, "length": 16, "steps": 3,
              "batch_size": 8, "lr": 2e-3, "seed": 0}  # fmt: skip
    settings = {"n_train": 32, "n_test": 16, "text_tokens": 14, "steps": 4, "eval_every": 2,
                "seeds": [0]}  # fmt: skip
    res = C.run(recipe, settings, log=lambda m: None)
    assert [v["name"] for v in res["variants"]] == list(C.VARIANTS)
    assert res["command"] == C.COMMAND and res["pretraining"]["recipe"] == recipe
    assert res["pretraining"]["mlm"]["source"] == "pre-trained by this run"  # not the shipped one
    for v in res["variants"]:
        assert 0 <= v["accuracy"] <= 1 and v["curve"]["step"] == [0, 2, 4]
        assert v["correct"].count("1") / 16 == pytest.approx(v["accuracy"])
        assert len(v["train_loss"]) == 4
    json.dumps(res)  # JSON-ready


def test_the_shipped_comparison_has_every_variant_and_its_command():
    from course_lib.bert.pretrain_long import RECIPE

    res = json.loads(data_path("bert", "comparison.json").read_text(encoding="utf-8"))
    assert res["command"] == "python -m course_lib.bert.compare data/bert/comparison.json"
    assert res["pretraining"]["recipe"] == RECIPE
    assert res["pretraining"]["mlm"]["source"] == "small_mlm.pt"
    assert len(res["pretraining"]["causal"]["losses"]) == RECIPE["steps"]
    s = res["finetuning"]
    assert s["n_train"] == 4000 and s["n_test"] == 1000 and res["threads"] == 1
    names = [v["name"] for v in res["variants"]]
    assert set(names) == set(C.VARIANTS) and len(s["seeds"]) >= 2
    assert all(names.count(n) == len(s["seeds"]) for n in C.VARIANTS)  # every seed of every one
    for v in res["variants"]:
        assert len(v["train_loss"]) == s["steps"] and v["curve"]["step"][-1] == s["steps"]
        assert v["accuracy"] == v["curve"]["test_accuracy"][-1]
        assert len(v["correct"]) == s["n_test"] and set(v["correct"]) <= {"0", "1"}
        assert v["correct"].count("1") / s["n_test"] == pytest.approx(v["accuracy"])
        assert 0.4 < v["accuracy"] < 1.0
    assert 0.5 < res["bag_of_words_accuracy"] < 1.0
