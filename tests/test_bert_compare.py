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
    rows = pretraining_chunks(20_000, 18, moby_dick_chars=20_000)  # 16 positions + 2
    small = BertConfig(vocab_size=1024, max_len=16, n_layers=1, block=bert_block(32, 2))
    model, losses = C.pretrain_causal(rows, config=small, steps=40, batch_size=16)
    assert abs(losses[0] - np.log(1024)) < 0.3 and np.mean(losses[-5:]) < losses[0] - 0.6
    assert not model.training


def test_causal_pre_training_trains_every_position_of_the_table():
    rows = pretraining_chunks(5_000, 14)  # 12 positions + 2
    small = BertConfig(vocab_size=1024, max_len=12, n_layers=1, block=bert_block(16, 2))
    before = Bert(small, seed=0).top["pos_emb"].detach().clone()
    model, _ = C.pretrain_causal(rows, config=small, steps=3, batch_size=4, dropout=0.0)
    moved = (model.bert.top["pos_emb"].detach() - before).norm(dim=-1)  # (12,)
    assert (moved > 1e-4).all()  # the last position too: it predicts a real next token


def test_classifier_reads_cls_the_last_real_token_or_the_mean():
    bert = Bert(TINY, seed=0)
    x = torch.tensor([[1, 5, 7, 0, 0], [1, 5, 7, 8, 9]])
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    last = C.Classifier(C.CausalBert(bert), 2, "last").eval()
    h = last.encoder(x, None, mask)
    want = last.out(torch.tanh(last.pooler(h[[0, 1], [2, 4]])))
    torch.testing.assert_close(last(x, None, mask), want)
    mean = C.Classifier(bert, 2, "mean").eval()
    h = bert(x, None, mask)
    v = torch.stack([h[0, :3].mean(0), h[1].mean(0)])  # padding left out of the mean
    torch.testing.assert_close(mean(x, None, mask), mean.out(torch.tanh(mean.pooler(v))))
    with pytest.raises(ValueError, match="read"):
        C.Classifier(bert, 2, "max")


def test_encode_pieces_cuts_every_text_to_the_same_tokens():
    pieces = [("We the people " * 20, 0, 1790), ("Short.", 1, 1901)]
    enc, dec = C.encode_pieces(pieces, 10, False), C.encode_pieces(pieces, 10, True)
    assert enc.ids.shape == (2, 12) and dec.ids.shape == (2, 11)
    np.testing.assert_array_equal(enc.ids[0, :11], dec.ids[0])  # the same text tokens
    assert enc.ids[0, -1] == SEP and dec.ids[0, -1] != SEP
    assert enc.targets[0].tolist() == [0, 1]


# ------------------------------------------------------------------------------ the comparison
def test_the_validation_split_shares_no_address_with_training_or_test():
    fit, val, test = C.era_splits(400, 100)
    years = [{y for _, _, y in part} for part in (fit, val, test)]
    assert not (years[0] & years[1]) and not (years[0] & years[2]) and not (years[1] & years[2])
    assert all(y % 10 == 0 for y in years[1]) and all(y % 2 == 1 for y in years[2])
    assert len(fit) + len(val) == 400 and len(test) == 100


@pytest.mark.slow
def test_the_comparison_runs_on_a_tiny_setting_resumes_and_spares_the_shipped_checkpoint(tmp_path):
    work = tmp_path / "work"
    res = C.main([str(tmp_path / "c.json"), "--tiny", "--jobs", "2", "--work", str(work),
                  "--checkpoint", str(tmp_path / "m.pt")])  # fmt: skip
    assert res["command"].endswith("--tiny") and not res["missing_runs"]
    assert {r["variant"] for r in res["runs"]} == set(C.VARIANTS)
    s = res["finetuning"]
    n = sum(len(g) for g in res["lrs_tried"].values())
    confirm = len(s["seeds"]) - len(s["tune_seeds"])
    assert len(res["runs"]) == len(C.PRETRAIN_SEEDS) * (
        n * len(s["tune_seeds"]) + len(C.VARIANTS) * confirm
    )
    for v, lr in res["chosen_lr"].items():  # every seed at the chosen rate
        assert {r["seed"] for r in res["runs"] if r["variant"] == v and r["lr"] == lr} == set(
            s["seeds"]
        )
    for v, grid in res["lrs_tried"].items():
        assert set(s["lrs"]) <= set(grid) <= set(s["lr_grid"]) | set(s["lrs"])
        lr = res["chosen_lr"][v]  # interior, unless the grid ran out of values on that side
        assert min(grid) < lr < max(grid) or lr in (min(s["lr_grid"]), max(s["lr_grid"]))
    for r in res["runs"]:
        assert 0 <= r["test_accuracy"] <= 1 and len(r["correct"]) == res["task"]["n_test"]
        assert r["correct"].count("1") / res["task"]["n_test"] == pytest.approx(
            r["test_accuracy"], abs=1e-4
        )
    assert res["variants"]["causal-last"]["readout"] == "last"
    ckpt = torch.load(tmp_path / "m.pt", weights_only=True)
    assert ckpt["recipe"]["length"] == C.RECIPE["length"] and ckpt["command"] == res["command"]
    json.dumps(res)  # JSON-ready
    # a second call with the same work folder reads every run back and runs none
    again = C.run(tiny=True, jobs=1, work=work, log=lambda m: pytest.fail(f"ran again: {m}"))[0]
    assert again["runs"] == res["runs"] and again["chosen_lr"] == res["chosen_lr"]
    # the shipped checkpoint is never a target
    with pytest.raises(SystemExit, match="shipped checkpoint"):
        C.main([str(tmp_path / "d.json"), "--tiny", "--checkpoint", "data/bert/small_mlm.pt"])


def test_the_learning_rate_grid_grows_on_the_side_of_its_best_value():
    grid = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    assert C._extend([3e-4, 1e-3, 3e-3], 3e-3, grid) == 1e-2
    assert C._extend([3e-4, 1e-3, 3e-3], 3e-4, grid) == 1e-4
    assert C._extend([3e-4, 1e-3, 3e-3], 1e-3, grid) is None
    assert C._extend([1e-2, 3e-2], 3e-2, grid) is None  # the grid has nothing larger
    results = {f"finetune/v/{p}/{lr:g}/0": {"val_accuracy": acc}
               for p in (0, 1) for lr, acc in ((1e-4, 0.7), (3e-4, 0.8), (1e-3, 0.8))}  # fmt: skip
    assert C._best_lr(results, "v", [1e-4, 3e-4, 1e-3]) == 3e-4  # a tie goes to the smaller


def test_length_schedule_draws_one_step_in_k_from_the_long_rows():
    from course_lib.bert.train import _row_schedule, is_long_step

    short, long = np.zeros((10, 4), int), np.ones((3, 9), int)
    rows_at, n_at = _row_schedule(short, long, 3)
    assert [n_at(s) for s in range(6)] == [10, 10, 3, 10, 10, 3]
    assert rows_at(2) is long and rows_at(0) is short and not is_long_step(5, 0)
    with pytest.raises(ValueError, match="long_chunks"):
        _row_schedule(short, None, 2)


def test_mlm_pre_training_with_long_rows_trains_every_position():
    from course_lib.bert.train import pretrain_mlm

    small = BertConfig(vocab_size=1024, max_len=12, n_layers=1, block=bert_block(16, 2))
    short, long = pretraining_chunks(5_000, 6), pretraining_chunks(5_000, 12)
    before = Bert(small, seed=0).top["pos_emb"].detach().clone()
    only_short, _ = pretrain_mlm(short, config=small, steps=4, batch_size=8, dropout=0.0)
    mixed, _ = pretrain_mlm(short, config=small, steps=4, batch_size=8, dropout=0.0,
                            long_chunks=long, long_every=2)  # fmt: skip
    moved = (mixed.top["pos_emb"].detach() - before).norm(dim=-1)  # (12,)
    unmoved = (only_short.top["pos_emb"].detach() - before).norm(dim=-1)
    assert (moved[6:] > 1e-4).all() and (unmoved[6:] < 1e-3).all()  # weight decay only


def test_pretrain_long_and_the_comparison_run_the_same_pre_training():
    from course_lib.bert import pretrain_long as P

    recipe = {**P.RECIPE, "n_chars": 8_000, "moby_dick_chars": 8_000, "steps": 6, "batch_size": 4}
    _, a = P.pretrain(recipe)  # what python -m course_lib.bert.pretrain_long runs, seed 0
    out = C._work({"kind": "pretrain", "objective": "mlm", "seed": 0, "device": "cpu",
                   "recipe": {k: v for k, v in recipe.items() if k != "seed"}})  # fmt: skip
    assert out["losses"] == a  # the comparison's mlm run of seed 0 is the checkpoint's run
    assert set(out["held_out"]) == {"loss", "loss_positions_1_31", "loss_positions_32_on",
                                    "token_frequencies"}  # fmt: skip


def test_summaries_and_paired_differences_of_hand_made_runs():
    runs = [{"variant": v, "lr": 0.1, "pretrain_seed": p, "seed": 0, "correct": c}
            for v, p, c in (("a", 0, "1111"), ("a", 1, "1100"), ("b", 0, "1000"), ("b", 1, "1000"))]  # fmt: skip
    s = C.summarise(runs, "a", 0.1)
    assert s["mean"] == pytest.approx(0.75)
    per_item = np.array([1, 1, 0.5, 0.5])
    assert s["se_items"] == pytest.approx(per_item.std(ddof=1) / 2)
    assert s["se_seeds"] == pytest.approx(np.std([1.0, 0.5], ddof=1) / np.sqrt(2))
    d = C.difference(runs, ("a", 0.1), ("b", 0.1))
    assert d["mean"] == pytest.approx(0.5)
    assert d["se_seeds"] == pytest.approx(np.std([0.75, 0.25], ddof=1) / np.sqrt(2))
    with pytest.raises(ValueError, match="no runs"):
        C.summarise(runs, "c", 0.1)


def test_the_shipped_comparison_is_complete_and_says_where_it_ran():
    """The shipped file is the run of commit 748029c (data/README.md): an earlier pre-training
    recipe, rows of 80 tokens only, that section 9.15 reads with its limits. It must hold every
    run of its own settings, and each chosen rate must be the best on validation."""
    res = json.loads(data_path("bert", "comparison.json").read_text(encoding="utf-8"))
    assert res["command"].startswith("python -m course_lib.bert.compare data/bert/comparison.json")
    assert not res["missing_runs"] and res["where"]["torch"].startswith("2.")
    recipe = res["pretraining"]["recipe"]
    assert recipe["length"] == 80 and "long_every" not in recipe  # the earlier recipe, as said
    assert recipe != C.RECIPE
    seeds, s = res["pretraining"]["seeds"], res["finetuning"]
    assert len(seeds) >= 2 and len(s["seeds"]) >= 2
    assert set(res["pretraining"]["runs"]) == {f"pretrain/{o}/{p}" for o in ("mlm", "causal")
                                               for p in seeds} | {f"dapt/{p}" for p in seeds}  # fmt: skip
    variants, lrs = list(res["variants"]), s["lrs"]
    assert set(res["chosen_lr"]) == set(variants)
    assert len(res["runs"]) == len(variants) * len(lrs) * len(seeds) * len(s["seeds"])
    for r in res["runs"]:
        assert len(r["correct"]) == res["task"]["n_test"] and set(r["correct"]) <= {"0", "1"}
        assert r["correct"].count("1") / res["task"]["n_test"] == pytest.approx(
            r["test_accuracy"], abs=1e-4
        )
        assert 0.4 < r["test_accuracy"] < 1.0 and 0.4 < r["val_accuracy"] < 1.0  # sanity only
    for v, lr in res["chosen_lr"].items():  # the best mean validation accuracy of its 4 runs
        val = {x: np.mean([r["val_accuracy"] for r in res["runs"]
                           if r["variant"] == v and r["lr"] == x]) for x in lrs}  # fmt: skip
        assert val[lr] == max(val.values()), v
    for name, run in res["pretraining"]["runs"].items():  # sanity: below a uniform guess
        held = run["held_out"]
        assert held["loss"] < held["token_frequencies"] < 7.0, name
    # the shipped checkpoint is the current recipe's (sections 9.8-9.14 load it)
    from course_lib.bert.pretrain_long import CHECKPOINT

    ckpt = torch.load(CHECKPOINT, weights_only=True)
    assert ckpt["recipe"] == {**C.RECIPE, "seed": 0}
    assert not data_path("bert").joinpath("comparison_mlm.pt").exists()  # one checkpoint ships
