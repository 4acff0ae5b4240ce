"""Chapter 13, part 2 (prompt and prefix tuning), and DoRA: SoftPrompt against the frozen model on
text and against AdaptedGPT (whose prompt and prefix tuning equal peft's), the secret-code task,
the study script on a tiny setting and its shipped results; DoRA's weight against peft."""

from __future__ import annotations

import json
import logging
import math
import warnings

import numpy as np
import pytest
import torch

from course_lib.gpt.config import GPTConfig
from course_lib.gpt.model import GPT
from course_lib.peft import accelerated as fast
from course_lib.peft import elicit, steer
from course_lib.peft import reference as ref


@pytest.fixture(autouse=True)
def one_thread():
    """These models are tiny: on a busy 2-core machine one thread is many times faster."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _gpt(positions: str) -> GPT:
    cfg = GPTConfig(
        vocab_size=11, context_length=24, n_layers=2, n_heads=2, d_model=8, positions=positions
    )
    return GPT(cfg, seed=0).eval()


@pytest.mark.parametrize("positions", ["learned", "rope"])
@pytest.mark.parametrize("method", steer.METHODS)
def test_a_soft_prompt_started_from_text_is_the_text(positions, method):
    model = _gpt(positions)
    text = torch.tensor([3, 1, 4, 1, 5])
    x = torch.tensor([[9, 2, 6], [5, 3, 5]])
    soft = steer.SoftPrompt(model, method, text)
    with torch.no_grad():
        want = model(torch.cat([text.expand(2, -1), x], dim=1))[:, 5:]
        torch.testing.assert_close(soft(x), want, atol=1e-6, rtol=1e-6)
    expected = 5 * 8 if method == "prompt" else 2 * 2 * 5 * 8
    assert soft.trainable_parameters() == expected
    assert all(not p.requires_grad for p in soft.model.parameters())
    assert all(p.requires_grad is True for p in model.parameters())  # the caller's model untouched


@pytest.mark.parametrize("method", steer.METHODS)
def test_gradients_reach_only_the_trained_vectors(method):
    soft = steer.SoftPrompt(_gpt("rope"), method, torch.tensor([1, 2, 3]))
    soft(torch.tensor([[4, 5]])).sum().backward()
    assert soft.vectors.grad is not None and soft.vectors.grad.abs().max() > 0
    assert all(p.grad is None for p in soft.model.parameters())


def test_soft_prompt_equals_adapted_gpt_on_the_shakespeare_model():
    from course_lib.gpt.pretrained import load_pretrained
    from course_lib.peft.model import AdaptedGPT
    from course_lib.peft.task import load_base, reverse_examples

    gpt, tok = load_pretrained()
    base, _ = load_base()
    text = torch.tensor(tok.encode(elicit.reverse_start(0)))
    x = reverse_examples(3, seed=0)
    for method, kw in (("prompt", {"prompt_tokens": 24}), ("prefix", {"prefix_tokens": 24})):
        soft = steer.SoftPrompt(gpt, method, text)
        theirs = AdaptedGPT(base, **kw)
        with torch.no_grad():
            getattr(theirs, method).copy_(soft.vectors)
            torch.testing.assert_close(soft(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_soft_prompt_refuses_bad_input():
    model = _gpt("rope")
    text = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="method must be one of"):
        steer.SoftPrompt(model, "infix", text)
    with pytest.raises(TypeError, match="chapter 8's GPT"):
        steer.SoftPrompt(torch.nn.Linear(2, 2), "prompt", text)
    with pytest.raises(TypeError, match="integers"):
        steer.SoftPrompt(model, "prompt", torch.zeros(3))
    with pytest.raises(ValueError, match="one sequence"):
        steer.SoftPrompt(model, "prompt", torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="token ids must lie"):
        steer.SoftPrompt(model, "prompt", torch.tensor([1, 99]))
    soft = steer.SoftPrompt(model, "prefix", text)
    with pytest.raises(ValueError, match="context_length"):
        soft(torch.zeros(1, 23, dtype=torch.long))  # 2 prefix positions + 23 > 24
    with pytest.raises(ValueError, match="a batch"):
        soft(torch.zeros(3, dtype=torch.long))


def test_the_code_task_helpers():
    from course_lib.gpt.incontext import INPUTS, OUTPUTS, load_incontext

    codes = steer.make_codes(3, seed=1313)
    assert codes == steer.make_codes(3, seed=1313) and codes != steer.make_codes(3, seed=1)
    assert all(len(c) == steer.CODE_LETTERS for c in codes)
    assert all(set(c) <= set(INPUTS) and set(c.values()) <= set(OUTPUTS) for c in codes)
    text = steer.written_code(codes[0], seed=0)
    lines = text.removeprefix("\n\n").rstrip("\n").split("\n")
    assert len(text) == 2 + 3 * 16 and sorted(ln[0] for ln in lines) == sorted(codes[0])
    assert all(codes[0][ln[0]] == ln[1] for ln in lines)
    assert steer.written_code(codes[0], seed=1) != text  # the order comes from the seed
    _, tok, _ = load_incontext()
    x, y = steer.code_queries(codes[0], tok)
    assert x.shape == (16, 1) and y.shape == (16,)
    assert tok.decode(y.tolist()) == "".join(codes[0][k] for k in sorted(codes[0]))
    start = steer.start_text("random", text, seed=3, tokenizer=tok)
    assert start.shape == (50,) and tok.decode(start.tolist()) != text
    assert torch.equal(steer.start_text("text", text, seed=3, tokenizer=tok),
                       torch.tensor(tok.encode(text)))  # fmt: skip
    with pytest.raises(ValueError, match="init must be one of"):
        steer.start_text("vocab", text, seed=0, tokenizer=tok)


def test_steering_learns_a_code_on_a_tiny_budget():
    """The in-context model, one code, prompt tuning from text: accuracy rises within 30 steps."""
    from course_lib.gpt.incontext import load_incontext

    model, tok, _ = load_incontext()
    code = steer.make_codes(1, seed=1313)[0]
    x, y = steer.code_queries(code, tok)
    start = steer.start_text("text", steer.written_code(code, seed=0), seed=0, tokenizer=tok)
    curve = steer.steer_code(steer.SoftPrompt(model, "prompt", start), x, y, steps=30, lr=3e-2)
    assert curve["steps"] == [0, 10, 20, 30]
    assert curve["accuracy"][-1] > curve["accuracy"][0] and curve["loss"][-1] < curve["loss"][0]


def test_study_helpers():
    assert len(elicit.code_runs()) == 2 * 2 * len(elicit.CODE_LRS) * 2 * elicit.N_CODES
    rev = elicit.reverse_runs()
    assert [r["method"] for r in rev].count("full") == 2
    assert {r["lr"] for r in rev if r["method"] != "full"} == set(elicit.REVERSE_LRS)
    run = {"method": "prompt", "init": "text", "lr": 0.1, "seed": 0, "steps": 5,
           "curve": {"steps": [0, 5], "loss": [2.0, 1.0], "accuracy": [0.0, 1.0]}}  # fmt: skip
    worse = {**run, "lr": 0.3, "curve": {**run["curve"], "loss": [2.0, 3.0]}}
    assert elicit.best_code_lr([run, worse], "prompt", "text") == 0.1
    assert elicit.grid_loss([run, worse], method="prompt") == pytest.approx(2.0)
    assert elicit.mean_curve_loss({"curve": {"loss": [1.0, None]}}) == math.inf
    held = {**run, "curve": {"held_out_loss": [4.0, 3.0, 2.0, 1.0]}}
    assert elicit.best_reverse_lr([held, {**held, "lr": 0.3, "curve": {"held_out_loss": [9.0] * 4}}],
                                  "prompt") == 0.1  # fmt: skip
    with pytest.raises(ValueError, match="no run matches"):
        elicit.code_curves([run], method="prefix")
    with pytest.raises(ValueError, match="part must be one of"):
        elicit.load_study("copy")


@pytest.mark.slow
def test_study_script_on_a_tiny_setting(tmp_path):
    out = tmp_path / "rev.json"
    assert elicit.main(["reverse", str(out), "--steps", "2", "--long-steps", "3"]) == 0
    rec = elicit.load_study("reverse", out)
    assert rec["complete"] and rec["command"].endswith("--steps 2 --long-steps 3")
    planned = len(elicit.reverse_runs()) + 2 * 2  # the grid, then seed 1 and a long run each
    assert len(rec["runs"]) == planned
    assert {r["steps"] for r in rec["runs"]} == {2, 3}
    for r in rec["runs"]:
        assert len(r["curve"]["held_out_loss"]) == len(r["curve"]["steps"])
        assert r["method"] == "full" or r["start"] == elicit.reverse_start(r["seed"])


@pytest.mark.parametrize("part", elicit.PARTS)
def test_shipped_study_has_its_command_budgets_seeds_and_interior_best_rates(part):
    rec = elicit.load_study(part)
    assert rec["command"] == f"python -m course_lib.peft.elicit {part} data/peft/elicit_{part}.json"
    assert rec["complete"]
    runs = rec["runs"]
    key = ("method", "init", "lr", "seed", "steps")
    if part == "code":
        grid = [r for r in runs if r["steps"] == elicit.CODE_STEPS]
        planned = {tuple(r[k] for k in (*key, "code")) for r in elicit.code_runs()}
        assert {tuple(r[k] for k in (*key, "code")) for r in grid} == planned
        for method in steer.METHODS:
            for init in steer.INITS:
                lr = elicit.best_code_lr(grid, method, init)
                assert min(elicit.CODE_LRS) < lr < max(elicit.CODE_LRS), (method, init, lr)
                long = [r for r in runs if (r["method"], r["init"], r["steps"]) ==
                        (method, init, elicit.CODE_LONG)]  # fmt: skip
                assert len(long) == 2 * elicit.N_CODES and {r["lr"] for r in long} == {lr}
        text_starts = [r["curve"]["accuracy"][0] for r in grid if r["init"] == "text"]
        assert 0.1 < np.mean(text_starts) < 0.6  # the written code is half-read
    else:
        planned = {tuple(r[k] for k in key) for r in elicit.reverse_runs()}
        assert planned <= {tuple(r[k] for k in key) for r in runs}
        grid = [r for r in runs if r["method"] != "full"]
        for method in steer.METHODS:
            lr = elicit.best_reverse_lr(grid, method)
            assert min(elicit.REVERSE_LRS) < lr < max(elicit.REVERSE_LRS), (method, lr)
            assert {(r["seed"], r["steps"]) for r in grid if r["method"] == method and r["lr"] == lr} == {
                (0, elicit.REVERSE_STEPS), (1, elicit.REVERSE_STEPS), (0, elicit.REVERSE_LONG)}  # fmt: skip
        full = [r for r in runs if r["method"] == "full"]
        assert len(full) == 2 and all(r["accuracy"] > 0.9 for r in full)  # learnable
    for r in runs:
        assert r["curve"]["steps"][-1] == r["steps"] and 0 <= r["accuracy"] <= 1
    json.dumps(rec)  # plain data


# ----------------------------------------------------------------------------- DoRA
def test_dora_weight_by_hand_and_its_twins():
    W = np.array([[3.0, 4.0], [0.0, 2.0]])
    A, B = np.array([[1.0, 0.0]]), np.array([[0.0], [1.0]])  # update: row 1 gains (alpha, 0)
    got = ref.dora_weight(W, A, B, np.array([10.0, 1.0]), alpha=2.0)
    np.testing.assert_allclose(got, [[6.0, 8.0], [2.0 / math.sqrt(8), 2.0 / math.sqrt(8)]])
    torch.testing.assert_close(
        fast.dora_weight(*map(torch.tensor, (W, A, B, np.array([10.0, 1.0]))), alpha=2.0),
        torch.tensor(got),
    )
    with pytest.raises(ValueError, match="one length per output unit"):
        ref.dora_weight(W, A, B, np.ones(3), alpha=1.0)
    with pytest.raises(ValueError, match="direction is undefined"):
        ref.dora_weight(np.zeros((2, 2)), A, np.zeros((2, 1)), np.ones(2), alpha=1.0)


def test_dora_weight_matches_peft():
    from peft import LoraConfig, get_peft_model

    lin = torch.nn.Linear(7, 5).double()
    W, b = lin.weight.detach().clone(), lin.bias.detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("peft").setLevel(logging.ERROR)
        model = get_peft_model(
            torch.nn.Sequential(torch.nn.ModuleDict({"lin": lin})["lin"]),
            LoraConfig(r=3, lora_alpha=5, target_modules=["0"], use_dora=True),
        )
    layer = model.base_model.model[0]
    m = layer.lora_magnitude_vector["default"].weight
    torch.testing.assert_close(m.detach(), W.norm(dim=1))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in (layer.lora_A["default"].weight, layer.lora_B["default"].weight, m):
            p.copy_(torch.rand(p.shape, generator=g, dtype=p.dtype) + 0.5)
        x = torch.randn(4, 7, generator=g, dtype=torch.float64)
        A, B = layer.lora_A["default"].weight, layer.lora_B["default"].weight
        ours = x @ fast.dora_weight(W, A, B, m, alpha=5.0).T + b
        torch.testing.assert_close(model(x), ours)
        np.testing.assert_allclose(
            ref.dora_weight(W.numpy(), A.numpy(), B.numpy(), m.numpy(), 5.0),
            fast.dora_weight(W, A, B, m, alpha=5.0).numpy(),
        )
