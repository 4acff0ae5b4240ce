"""Chapter 8's speed-run section: Newton-Schulz and Muon, the new model fields, the race's new
options, the GPU-ready code paths exercised on the CPU, and the nanoGPT benchmark's pieces."""

from __future__ import annotations

import dataclasses
import json
import math
import pickle

import numpy as np
import pytest
import torch

from course_lib.gpt import accelerated as acc
from course_lib.gpt import reference as ref
from course_lib.gpt.config import RECIPES, GPTConfig, Recipe
from course_lib.gpt.model import GPT
from course_lib.gpt.optim import Muon
from course_lib.paths import data_path

A, B, C = ref.NS_COEFFICIENTS


def _quintic(s: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        s = A * s + B * s**3 + C * s**5
    return s


# ------------------------------------------------------------------------------ Newton-Schulz
@pytest.mark.parametrize("shape", [(5, 9), (9, 5), (6, 6)])
@pytest.mark.parametrize("steps", [0, 1, 5])
def test_newton_schulz_is_the_quintic_applied_to_the_singular_values(shape, steps):
    """Independent: from the SVD, G = U S V^T gives U p(...p(S / ||G||_F)) V^T."""
    G = np.random.default_rng(0).standard_normal(shape)
    U, S, Vt = np.linalg.svd(G, full_matrices=False)
    expected = U @ np.diag(_quintic(S / (np.linalg.norm(G) + 1e-7), steps)) @ Vt
    np.testing.assert_allclose(ref.newton_schulz(G, steps), expected, atol=1e-10)
    np.testing.assert_allclose(
        acc.newton_schulz(torch.tensor(G), steps).numpy(), expected, atol=1e-10
    )


def test_five_steps_land_the_singular_values_in_the_known_band():
    """The write-up's coefficients trade exactness for speed: about [0.7, 1.2], not exactly 1."""
    G = np.random.default_rng(1).standard_normal((32, 128))
    X = ref.newton_schulz(G)
    s = np.linalg.svd(X, compute_uv=False)
    assert 0.6 < s.min() and s.max() < 1.25
    # against the polar factor U V^T: the error is the largest |s - 1|, in the spectral norm
    U, _, Vt = np.linalg.svd(G, full_matrices=False)
    err = np.linalg.norm(X - U @ Vt, ord=2)
    assert err == pytest.approx(np.abs(s - 1).max(), rel=1e-6)
    assert err < 0.4


def test_newton_schulz_hand_values():
    # diag(3, 1): s = 3/sqrt(10) and 1/sqrt(10), each sent through the quintic 5 times
    s = _quintic(np.array([3.0, 1.0]) / (math.sqrt(10) + 1e-7), 5)
    np.testing.assert_allclose(np.diag(ref.newton_schulz(np.diag([3.0, 1.0]))), s)
    assert ref.newton_schulz(np.zeros((2, 3))).tolist() == np.zeros((2, 3)).tolist()


def test_muon_step_hand_values():
    W, G, M = np.zeros((3, 1)), np.array([[2.0], [0.0], [0.0]]), np.array([[1.0], [0.0], [0.0]])
    w, m = ref.muon_step(W, G, M, lr=0.5, beta=0.5, nesterov=False, steps=0)
    np.testing.assert_allclose(m, [[2.5], [0], [0]])  # 0.5 * 1 + 2
    # a tall (3, 1) matrix: update scaled by sqrt(3); direction M / ||M|| = e_1
    np.testing.assert_allclose(w, [[-0.5 * math.sqrt(3) * 2.5 / (2.5 + 1e-7)], [0], [0]])
    _, m2 = ref.muon_step(W, G, M, lr=0.5, beta=0.5, nesterov=True, steps=0)
    np.testing.assert_allclose(m2, m)  # Nesterov changes the direction, not the buffer


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda f: f.newton_schulz([1.0, 2.0]), ValueError, "grad"),
        (lambda f: f.newton_schulz(np.full((2, 2), np.nan)), ValueError, "finite"),
        (lambda f: f.newton_schulz(np.eye(2), steps=-1), ValueError, "steps"),
        (lambda f: f.muon_step(np.eye(2), np.eye(3), np.eye(2), 0.1), ValueError, "shape"),
        (lambda f: f.muon_step(np.eye(2), np.eye(2), np.eye(2), 0.1, beta=1.0), ValueError, "beta"),
        (lambda f: f.muon_step(np.eye(2), np.eye(2), np.eye(2), -0.1), ValueError, "lr"),
    ],
)
@pytest.mark.parametrize("side", ["reference", "accelerated"])
def test_muon_bad_input(call, error, words, side):
    f = ref if side == "reference" else acc
    with pytest.raises(error, match=words):
        call(f)


def test_muon_optimiser_equals_muon_step_on_every_kind_of_matrix():
    from course_lib.gpt.train import make_optimizer

    r = dataclasses.replace(RECIPES["modern"], optimizer="muon", n_layers=2, d_model=16)
    model = GPT(r.model_config(11), seed=0)
    opt = make_optimizer(model, r)
    g = torch.Generator().manual_seed(0)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for group in opt.param_groups:
        group["lr"] = group["base_lr"]
    opt.step()

    def view(t, name):
        if name.endswith(("w_q", "w_k", "w_v")):
            return t.permute(1, 0, 2).reshape(t.shape[1], -1)
        return t.reshape(-1, t.shape[-1])

    params = dict(model.named_parameters())
    for name in ("blocks.0.w_q", "blocks.1.w_v", "blocks.0.w_o", "blocks.1.w_1", "blocks.0.w_2"):
        W, G = view(before[name], name), view(params[name].grad, name)
        expected, _ = acc.muon_step(W, G, torch.zeros_like(W), r.muon_lr, r.muon_momentum)
        torch.testing.assert_close(view(params[name].detach(), name), expected)
    assert not torch.equal(params["tok_emb"], before["tok_emb"])  # AdamW moved the embedding


def test_muon_rejects_vectors():
    with pytest.raises(ValueError, match="matrices"):
        Muon([torch.nn.Parameter(torch.zeros(3))])


# ------------------------------------------------------------------------------ model fields
@pytest.mark.parametrize(
    "change",
    [
        {"qk_norm": True},
        {"activation": "relu2"},
        {"tie_head": False},
        {"qk_norm": True, "positions": "rope"},
    ],
)
def test_new_fields_agree_with_the_numpy_reference(change):
    cfg = dataclasses.replace(GPTConfig(13, 9, 2, 2, 8), **change)
    model = GPT(cfg, seed=0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    tokens = torch.randint(0, 13, (2, 9), generator=torch.Generator().manual_seed(0))
    expected = ref.gpt_forward(tokens.numpy(), model.numpy_parameters(), cfg)
    np.testing.assert_allclose(model(tokens).double().detach().numpy(), expected, atol=1e-4)


def test_untied_head_adds_one_matrix_and_zero_init_starts_blocks_at_identity():
    tied, untied = GPTConfig(13, 9, 2, 2, 8), GPTConfig(13, 9, 2, 2, 8, tie_head=False)
    assert GPT(untied).count_parameters() - GPT(tied).count_parameters() == 13 * 8
    model = GPT(GPTConfig(13, 9, 2, 2, 8, zero_init=True), seed=0)
    assert all(
        float(b.w_o.abs().sum()) == 0 and float(b.w_2.abs().sum()) == 0 for b in model.blocks
    )
    tokens = torch.tensor([[1, 2, 3]])
    h = torch.nn.functional.layer_norm(
        model.tok_emb[tokens] + model.pos_emb[:3],
        (8,),
        model.final_norm_gain,
        model.final_norm_bias,
    )
    torch.testing.assert_close(model.hidden(tokens), h)  # every block adds zero at the start


def test_relu2_is_only_for_the_plain_feed_forward():
    with pytest.raises(ValueError, match="relu2"):
        GPTConfig(13, 9, 1, 2, 8, activation="relu2", gated=True)


def test_recipe_fields_round_trip_and_old_files_still_load(tmp_path):
    r = dataclasses.replace(RECIPES["modern"], optimizer="muon", qk_norm=True, tie_head=False)
    assert Recipe.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    old = {k: v for k, v in RECIPES["baseline"].to_dict().items() if k in ("name", "lr", "betas")}
    assert Recipe.from_dict(old).optimizer == "adamw"
    with pytest.raises(ValueError, match="unknown recipe fields"):
        Recipe.from_dict({"name": "x", "flux": 1})
    with pytest.raises(ValueError, match="optimizer"):
        Recipe(name="x", optimizer="sgd")
    from course_lib.gpt.train import load_model

    model, _ = load_model(data_path("gpt", "shakespeare_char.pt"))  # written before the fields
    assert model.config.tie_head and not model.config.qk_norm
    race = json.loads(data_path("gpt", "race.json").read_text())
    assert race["rows"][0]["recipe"] == "baseline"


# ------------------------------------------------------------------------------ GPU-ready paths
def _tiny_trainer(**recipe_change):
    from course_lib.gpt.train import Trainer

    r = dataclasses.replace(
        RECIPES["modern"], n_layers=1, d_model=16, batch_size=2, context_length=8, **recipe_change
    )
    ids = torch.randint(0, 11, (400,), generator=torch.Generator().manual_seed(0))
    return r, ids, Trainer, GPT(r.model_config(11), seed=0)


def test_bfloat16_autocast_runs_on_the_cpu_and_stays_close():
    r, ids, Trainer, model = _tiny_trainer()
    t32 = Trainer(model, r, ids[:300], ids[300:])
    t16 = Trainer(GPT(r.model_config(11), seed=0), r, ids[:300], ids[300:], autocast="bfloat16")
    assert abs(t16.evaluate() - t32.evaluate()) < 0.05  # bfloat16 keeps 8 bits of mantissa
    loss = t16.step()
    assert math.isfinite(loss)
    assert t16.model.tok_emb.dtype == torch.float32  # autocast leaves the master weights alone
    with pytest.raises(ValueError, match="autocast"):
        Trainer(model, r, ids[:300], ids[300:], autocast="int8")


def test_fused_attention_equals_the_readable_loop():
    """The model's attention is PyTorch's scaled_dot_product_attention (the flash kernel on CUDA);
    the reference is the per-head loop with an explicit mask."""
    cfg = GPTConfig(11, 8, 1, 2, 8, positions="rope", qk_norm=True)
    model = GPT(cfg, seed=0)
    tokens = torch.randint(0, 11, (3, 8), generator=torch.Generator().manual_seed(1))
    readable = ref.gpt_forward(tokens.numpy(), model.numpy_parameters(), cfg)
    np.testing.assert_allclose(model(tokens).detach().double().numpy(), readable, atol=1e-5)


@pytest.mark.slow  # torch.compile builds C++ kernels on the CPU: a minute or more
def test_compiled_training_step_matches_eager():
    from course_lib.gpt.train import compiler_missing

    reason = compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    r, ids, Trainer, model = _tiny_trainer(compile=True)
    eager = Trainer(
        GPT(r.model_config(11), seed=0), dataclasses.replace(r, compile=False), ids[:300], ids[300:]
    )
    compiled = Trainer(model, r, ids[:300], ids[300:])
    a = [eager.step() for _ in range(2)]
    b = [compiled.step() for _ in range(2)]
    np.testing.assert_allclose(a, b, rtol=1e-4)


# ------------------------------------------------------------------------------ the race
def test_race_to_a_fixed_target_with_the_speedrun_recipes():
    from course_lib.gpt.race import race, speedrun_recipes

    tiny = {"n_layers": 1, "d_model": 16, "batch_size": 2, "context_length": 8, "decay_steps": 6}
    recipes = [dataclasses.replace(r, **tiny) for r in speedrun_recipes()[:3]]
    text = "to be or not to be, that is the question. " * 40
    out = race(text, recipes, provisional_target=0.0, target=100.0, chunk=2, max_steps=4)
    assert out["target"] == 100.0
    assert all(row["reached_at_step"] == 2 for row in out["rows"])  # any loss is below 100
    assert out["rows"][1]["recipe_fields"]["optimizer"] == "muon"


def test_the_race_command_races_only_the_named_recipes(tmp_path, capsys):
    from course_lib.gpt.race import main

    out = tmp_path / "s.json"
    assert main([str(out), "--quick", "--speedrun", "--only", "modern", "fast"]) == 0
    assert [r["recipe"] for r in json.loads(out.read_text())["rows"]] == ["modern", "fast"]
    with pytest.raises(SystemExit):
        main([str(out), "--speedrun", "--only", "fastest"])
    assert "no recipes named ['fastest']" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the nanoGPT race
def test_export_corpus_writes_nanogpts_format(tmp_path):
    from benchmarks.nanogpt_race import export_corpus

    text = "hello world, " * 50
    out = export_corpus(text, tmp_path)
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    assert train.tolist() == out["train_ids"].tolist() and val.tolist() == out["val_ids"].tolist()
    assert len(train) + len(val) == len(text)
    meta = pickle.loads((tmp_path / "meta.pkl").read_bytes())
    assert meta["vocab_size"] == len(set(text))
    assert "".join(meta["itos"][int(i)] for i in train[:13]) == text[:13]
    assert meta["stoi"]["h"] == out["tokenizer"].encode("h")[0]


def test_parse_log_excludes_the_evaluation_and_names_missing_lines():
    from benchmarks.nanogpt_race import parse_log

    lines = ["step 0: train loss 4.1, val loss 4.1"]
    lines += [
        f"iter {i}: loss 2.1, time {5000.0 if i == 0 else 10.0 + i}ms, mfu 1.0%" for i in range(6)
    ]
    out = parse_log("\n".join(lines), 5)  # steps 0..4; 0 ran the evaluation
    assert out["seconds"] == pytest.approx((11 + 12 + 13 + 14 + 12.5) / 1000, abs=1e-3)
    with pytest.raises(ValueError, match="log_interval=1"):
        parse_log("\n".join(lines), 9)


def test_table_and_flops():
    from benchmarks.nanogpt_race import flops_per_token, table

    assert flops_per_token(100, 1, 2, 3) == 600 + 72
    result = {
        "peak_flops": 2e9,
        "nanogpt": {"seconds": 90.0, "steps": 2000, "tokens_per_s": 1000.0, "flops_per_token": 1e6},
        "ours": {
            "fast": {
                "flops_per_token": 1e6,
                "runs": [
                    {"seconds": 20.0, "steps": 400, "tokens_per_s": 1000.0, "reached": True},
                    {"seconds": 40.0, "steps": 600, "tokens_per_s": 1000.0, "reached": True},
                ],
            }
        },
    }
    rows = table(result)
    assert rows[1]["time_to_target_s"] == "30.0 ± 10.0" and rows[1]["speed_up"] == 3.0
    assert rows[0]["mfu_percent"] == 50.0


def test_nanogpt_checkpoint_is_measured_by_our_evaluator(tmp_path):
    """A stand-in nanoGPT checkout whose model predicts uniformly: our evaluator gives log V."""
    from benchmarks.nanogpt_race import nanogpt_val_loss

    (tmp_path / "model.py").write_text(
        "import torch\n"
        "class GPTConfig:\n"
        "    def __init__(self, vocab_size, block_size): self.v = vocab_size\n"
        "class _Wpe(torch.nn.Module):\n"
        "    def __init__(self): super().__init__(); self.weight = torch.nn.Parameter(torch.zeros(4, 2))\n"
        "class _T(torch.nn.Module):\n"
        "    def __init__(self): super().__init__(); self.wpe = _Wpe()\n"
        "class GPT(torch.nn.Module):\n"
        "    def __init__(self, c):\n"
        "        super().__init__(); self.v = c.v; self.transformer = _T()\n"
        "        self.w = torch.nn.Parameter(torch.zeros(3))\n"
        "    def forward(self, idx, targets=None):\n"
        "        return torch.zeros(*idx.shape, self.v), None\n"
    )
    model_state = {"transformer.wpe.weight": torch.zeros(4, 2), "w": torch.zeros(3)}
    torch.save(
        {"model": model_state, "model_args": {"vocab_size": 5, "block_size": 4}, "iter_num": 7},
        tmp_path / "ckpt.pt",
    )
    out = nanogpt_val_loss(tmp_path, tmp_path / "ckpt.pt", torch.arange(40) % 5, 4)
    assert out["val_loss"] == pytest.approx(math.log(5))
    assert out["iter_num"] == 7 and out["params_no_pos"] == 3


def test_train_to_target_counts_every_eager_cpu_step_and_evaluates_in_float32():
    from benchmarks.nanogpt_race import train_to_target
    from course_lib.gpt.train import make_tokenizer

    text = "to be or not to be, that is the question. " * 40
    tok = make_tokenizer("char", text)
    ids = torch.tensor(tok.encode(text))
    tiny = {"n_layers": 1, "d_model": 16, "batch_size": 2, "context_length": 8}
    recipe = dataclasses.replace(RECIPES["fast"], **tiny)
    out = train_to_target(recipe, tok, ids[:1500], ids[1500:], 100.0, 0, eval_every=3)
    assert out["reached"] and out["steps"] == 3 and out["warmup_s"] == 0.0
    # tokens over the counted seconds (which the result rounds to milliseconds)
    assert out["tokens_per_s"] * out["seconds"] == pytest.approx(3 * 2 * 8, rel=0.1)
    half = train_to_target(recipe, tok, ids[:1500], ids[1500:], 100.0, 0, 3, autocast="bfloat16")
    assert half["val_loss"] == pytest.approx(out["val_loss"], abs=0.05)  # a float32 evaluation


@pytest.mark.slow  # torch.compile builds C++ kernels on the CPU
def test_train_to_target_counts_the_compiled_first_step_at_the_median():
    from benchmarks.nanogpt_race import train_to_target
    from course_lib.gpt.train import compiler_missing, make_tokenizer

    if compiler_missing() is not None:
        pytest.skip(compiler_missing())
    text = "to be or not to be, that is the question. " * 40
    tok = make_tokenizer("char", text)
    ids = torch.tensor(tok.encode(text))
    tiny = {"n_layers": 1, "d_model": 16, "batch_size": 2, "context_length": 8, "compile": True}
    recipe = dataclasses.replace(RECIPES["modern"], **tiny)
    out = train_to_target(recipe, tok, ids[:1500], ids[1500:], 100.0, 0, eval_every=4)
    assert out["warmup_s"] > 0.05  # the compilation, taken out of the race's time
    assert out["seconds"] < out["warmup_s"]


def test_nanogpt_runs_on_the_device_and_in_the_dtype_asked_for():
    from benchmarks.nanogpt_race import main, nanogpt_settings, table

    gpu = nanogpt_settings(100, "cuda", "bfloat16", True)
    assert (gpu["device"], gpu["dtype"], gpu["compile"]) == ("cuda", "bfloat16", "True")
    assert gpu["lr_decay_iters"] == gpu["max_iters"] == gpu["eval_interval"] == "100"
    assert nanogpt_settings()["device"] == "cpu" and nanogpt_settings()["compile"] == "False"
    result = {
        "peak_flops": 1e12, "device": "cuda", "autocast": "bfloat16", "compile": True,
        "nanogpt": {"seconds": 9.0, "steps": 2000, "tokens_per_s": 1e5, "flops_per_token": 1e6},
        "ours": {},
    }  # fmt: skip
    assert table(result)[0]["recipe"] == "nanoGPT (README, cuda, bfloat16, compiled)"
    with pytest.raises(SystemExit):
        main(["--nanogpt", "x", "--autocast", "float16"])  # bfloat16 only: no loss scaling


def test_without_a_checkout_the_benchmark_says_how_to_get_one(capsys, monkeypatch):
    from benchmarks import nanogpt_race

    monkeypatch.delenv("NANOGPT", raising=False)
    assert nanogpt_race.main([]) == 2
    assert "git clone https://github.com/karpathy/nanoGPT" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="nanoGPT checkout"):
        nanogpt_race.run(quick=True)


# ------------------------------------------------------------------------------ the exercise
def _scale(g):
    return math.sqrt(max(1, g.shape[0] / g.shape[1]))


def _ema_right(g, m, beta):
    """The exercise solved from its text: the reference implementation's two lerps."""
    m2 = m + (1 - beta) * (g - m)  # momentum.lerp_(grad, 1 - beta)
    d = g + beta * (m2 - g)  # grad.lerp_(momentum, beta)
    return _scale(g) * ref.newton_schulz(d), m2


def _ema_torch(g, m, beta):
    """The same with torch's own lerp, returning tensors (float64)."""
    G, M = torch.as_tensor(g), torch.as_tensor(m).clone()
    M.lerp_(G, 1 - beta)
    D = G.clone().lerp_(M, beta)
    return _scale(g) * acc.newton_schulz(D), M


def test_muon_checker_accepts_the_derivation_in_numpy_and_in_torch():
    from course_lib.gpt import exercises as check

    assert check.muon_ema(_ema_right) and check.muon_ema(_ema_torch)
    assert "running-sum Muon's" in str(check.muon_ema(_ema_right))


def _running_sum(g, m, beta):
    w, m2 = ref.muon_step(np.zeros_like(g), g, m, 1.0, beta)
    return -w, m2


def _swapped(g, m, beta):
    m2 = (1 - beta) * m + beta * g
    return _scale(g) * ref.newton_schulz(beta * g + (1 - beta) * m2), m2


def _plain(g, m, beta):
    m2 = beta * m + (1 - beta) * g
    return _scale(g) * ref.newton_schulz(m2), m2


def _svd(g, m, beta):
    m2 = beta * m + (1 - beta) * g
    U, _, Vt = np.linalg.svd((1 - beta) * g + beta * m2, full_matrices=False)
    return _scale(g) * U @ Vt, m2


def _no_scale(g, m, beta):
    u, m2 = _ema_right(g, m, beta)
    return u / _scale(g), m2


def _sign(g, m, beta):
    u, m2 = _ema_right(g, m, beta)
    return -u, m2


def _old(g, m, beta):
    return _ema_right(g, m, beta)[0], m


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (_running_sum, "running sum"),
        (_swapped, "lerp weights are the wrong way round"),
        (_plain, "plain momentum"),
        (_svd, "polar factor"),
        (_no_scale, "shape factor"),
        (_sign, "wrong sign"),
        (_old, "*new* momentum"),
        (lambda g, m, beta: g, "pair"),
        (lambda g, m, beta: None, "forget a `return`"),
        (lambda g, m, beta: 1 / 0, "ZeroDivisionError"),
        (lambda g, m: (g, m), "must be my_muon(grad, momentum, beta)"),
        (lambda g, m, beta: (g[:1], m), "the gradient's shape"),
        (lambda g, m, beta: (g * np.nan, m), "NaN"),
        (lambda g, m, beta: ("u", "m"), "arrays of numbers"),
        (None, "pass your function"),
    ],
)
def test_muon_checker_names_the_mistake_and_answers_garbage(fn, words):
    from course_lib.gpt import exercises as check

    outcome = check.muon_ema(fn)
    assert not outcome.passed and words in str(outcome), str(outcome)


def test_a_stopped_race_is_rebuilt_from_its_log_and_timed_to_any_target(tmp_path):
    from course_lib.gpt.race import merge

    for seed, (a, b) in enumerate(((2.5, 2.1), (2.4, 2.2))):
        lines = [
            json.dumps({"recipe": "x", "step": 100, "seconds": 10.0, "val_loss": a}),
            json.dumps({"recipe": "x", "step": 200, "seconds": 20.0, "val_loss": b}),
            "a line that is not a record",
        ]
        (tmp_path / f"s{seed}.log").write_text("\n".join(lines))
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps({"x": 0.1}))
    logs = [str(tmp_path / "s0.log"), str(tmp_path / "s1.log")]
    out = merge(str(tmp_path / "m.json"), logs, target=2.3, costs=str(costs))
    row = out["summary"][0]
    # seed 0 crosses 2.3 halfway from 100 to 200 (2.5 -> 2.1); seed 1 at 150 (2.4 -> 2.2)
    assert row["reached"] == 2 and row["steps"] == 200
    assert row["interpolated_steps"] == 150.0 and row["interpolated_spread"] == 0.0
    assert row["estimated_seconds"] == 15.0
    with pytest.raises(ValueError, match="target"):
        merge(str(tmp_path / "m.json"), logs)
