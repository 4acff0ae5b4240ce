"""Chapter 13's checkers: every correct form the exercise texts allow passes, at least three typical
mistakes per exercise are named in a learner's words, and garbage gets a message, never a
traceback from inside the checker."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_lib.checker import check_prediction
from course_lib.peft import exercises as check
from course_lib.peft import reference as ref
from course_lib.peft.counting import qlora_budget
from course_lib.peft.spectrum import top_r_energy


def _raises(*args):
    raise RuntimeError("boom")


def _no_return(*args):
    args[0] + 1  # noqa: B018 (forgets to return)


def _generator(*args):
    yield from range(3)


GARBAGE = {
    "not a function": None,
    "raises": _raises,
    "no return": _no_return,
    "a string": lambda *a: "42",
    "bytes": lambda *a: b"42",
    "NaN": lambda *a: float("nan"),
    "NaN array": lambda *a: np.full((2, 2), np.nan),
    "a generator": _generator,
    "a dict": lambda *a: {"x": 1},
    "wrong signature": lambda x: x,
    "a list of strings": lambda *a: ["a", "b"],
}
CHECKERS = {
    "lora_merge": check.lora_merge,
    "dora_weight": check.dora_weight,
    "prefix_attention": check.prefix_attention,
    "prefix_share": check.prefix_share,
    "qlora_gb": check.qlora_gb,
    "top_r_energy": check.top_r_energy,
}


@pytest.mark.parametrize("garbage", GARBAGE, ids=str)
@pytest.mark.parametrize("name", CHECKERS)
def test_garbage_gets_a_message_not_a_traceback(name, garbage):
    outcome = CHECKERS[name](GARBAGE[garbage])
    assert not outcome.passed
    message = " ".join(outcome.details)
    assert message and "Traceback" not in message
    if garbage == "not a function":
        assert "expected a function" in message
    if garbage == "raises":
        assert "RuntimeError: boom" in message
    if garbage == "no return":
        assert "None" in message or "return" in message


def test_require_raises_an_assertion_with_the_message():
    with pytest.raises(AssertionError, match="expected a function"):
        check.lora_merge(None, require=True)


# ------------------------------------------------------------------- lora_merge (find the bug)
def test_merge_accepts_every_form():
    assert check.lora_merge(ref.lora_weight)
    assert check.lora_merge(lambda W, A, B, a: (W + a / len(A) * B @ A).tolist())
    assert check.lora_merge(
        lambda W, A, B, a: torch.tensor(W) + a / A.shape[0] * torch.tensor(B @ A)
    )
    assert check.lora_merge(lambda W, A, B, a: (W + a / A.shape[0] * B @ A).astype(np.float32))


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda W, A, B, a: W + a / A.shape[1] * B @ A, "divides by k"),
        (lambda W, A, B, a: W + B @ A, "not scaled"),
        (lambda W, A, B, a: W + A.shape[0] / a * B @ A, "upside down"),
        (lambda W, A, B, a: W + a * B @ A, "divide by the rank r too"),
        (lambda W, A, B, a: W + a / np.sqrt(A.shape[0]) * B @ A, "rsLoRA"),
        (lambda W, A, B, a: W - a / A.shape[0] * B @ A, "unmerges"),
        (lambda W, A, B, a: a / A.shape[0] * B @ A, "add W"),
        (lambda W, A, B, a: (W + a / A.shape[0] * B @ A).T, "transposed"),
    ],
)
def test_merge_names_the_mistake(wrong, named):
    outcome = check.lora_merge(wrong)
    assert not outcome.passed and named in str(outcome), str(outcome)


# ------------------------------------------------------------------------- dora_weight
def _dora(W, A, B, m, a, axis=1):
    V = W + a / A.shape[0] * B @ A
    return m[:, None] * V / np.linalg.norm(V, axis=axis, keepdims=True)


def test_dora_accepts_every_form():
    assert check.dora_weight(ref.dora_weight)
    assert check.dora_weight(_dora)
    assert check.dora_weight(lambda *a: _dora(*a).tolist())
    assert check.dora_weight(lambda *a: torch.from_numpy(_dora(*a)).float())


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda W, A, B, m, a: _dora(W, A, B, m, a, axis=0), "wrong axis"),
        (
            lambda W, A, B, m, a: (
                m[:, None] * (W + a / len(A) * B @ A) / np.linalg.norm(W, axis=1, keepdims=True)
            ),
            "norms of W",
        ),
        (lambda W, A, B, m, a: _dora(W, A, B, m, float(len(A))), "not scaled by alpha / r"),
        (
            lambda W, A, B, m, a: m[:, None] * (V := W + a / len(A) * B @ A) / np.linalg.norm(V),
            "whole matrix",
        ),
        (lambda W, A, B, m, a: _dora(W, A, B, np.ones_like(m), a), "not applied"),
        (lambda W, A, B, m, a: m[:, None] * (W + a / len(A) * B @ A), "not divided"),
    ],
)
def test_dora_names_the_mistake(wrong, named):
    outcome = check.dora_weight(wrong)
    assert not outcome.passed and named in str(outcome), str(outcome)


# ------------------------------------------------------------------- prefix_attention (debug)
def _prefix(q, k, v, pk, pv, offset=None, scale=True):
    T, dk = q.shape[-2:]
    P = pk.shape[-2]
    lead = q.shape[:-2]
    keys = np.concatenate([np.broadcast_to(pk, (*lead, P, dk)), k], -2)
    vals = np.concatenate([np.broadcast_to(pv, (*lead, P, dk)), v], -2)
    s = q @ np.swapaxes(keys, -1, -2) / (np.sqrt(dk) if scale else 1)
    s = np.where(np.tril(np.ones((T, P + T), bool), k=P if offset is None else offset), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True) @ vals


def test_prefix_attention_accepts_every_form():
    assert check.prefix_attention(_prefix)
    assert check.prefix_attention(lambda *a: _prefix(*a).astype(np.float32))
    assert check.prefix_attention(lambda *a: torch.from_numpy(_prefix(*a)))


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda *a: _prefix(*a, offset=0), "covers the prefix too"),
        (lambda *a: _prefix(*a, offset=a[3].shape[-2] - 1), "does not see itself"),
        (lambda *a: _prefix(*a, scale=False), "sqrt(d_head)"),
        (lambda q, k, v, pk, pv: _prefix(q, k, v, pk[:, :0], pv[:, :0]), "prefix is ignored"),
    ],
)
def test_prefix_attention_names_the_mistake(wrong, named):
    outcome = check.prefix_attention(wrong)
    assert not outcome.passed and named in str(outcome), str(outcome)


# ------------------------------------------------------------------- prefix_share (derive)
def test_prefix_share_accepts_every_form():
    assert check.prefix_share(check._share)
    assert check.prefix_share(lambda *a: check._share(*a).tolist())
    assert check.prefix_share(lambda *a: torch.from_numpy(check._share(*a)).float())


@pytest.mark.parametrize(
    "kw, named",
    [
        ({"causal": False}, "no causal mask"),
        ({"scale": False}, "sqrt(d_head)"),
        ({"counts": True}, "counts keys"),
        ({"prefix_only": True}, "prefix alone"),
        ({"maxes": True}, "log-sum-exp"),
    ],
)
def test_prefix_share_names_the_mistake(kw, named):
    outcome = check.prefix_share(lambda q, k, pk: check._share(q, k, pk, **kw))
    assert not outcome.passed and named in str(outcome), str(outcome)


def test_prefix_share_names_the_complement():
    outcome = check.prefix_share(lambda *a: 1 - check._share(*a))
    assert "tokens' share" in str(outcome)


# ------------------------------------------------------------------------- qlora_gb
def _budget(n, d, f, L, r, trained_bytes=16):
    b = qlora_budget(n, d, f, L, r)
    return (b["frozen"] + trained_bytes * b["trained"]) / 1e9


def test_qlora_gb_accepts_every_form_and_rounding():
    assert check.qlora_gb(_budget)
    assert check.qlora_gb(lambda *a: round(_budget(*a), 2))  # the text allows 0.01 GB
    assert check.qlora_gb(lambda *a: np.float32(_budget(*a)))
    assert check.qlora_gb(lambda *a: torch.tensor(_budget(*a), dtype=torch.float64))
    assert check.qlora_gb(lambda *a: np.array([_budget(*a)]))
    assert not check.qlora_gb(lambda *a: round(_budget(*a), 1))  # 0.1 GB is too coarse


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda n, d, f, L, r: n * 4 / 8 / 1e9 + 16 * qlora_budget(n, d, f, L, r)["trained"] / 1e9,
         "leaves out the block scales"),
        (lambda *a: _budget(*a, trained_bytes=4), "not 4"),
        (lambda *a: _budget(*a, trained_bytes=12), "you return"),
        (lambda n, d, f, L, r: _budget(n, d, f, L, r) * 1e9 / 2**30, "GiB"),
        (lambda n, d, f, L, r: (qlora_budget(n, d, f, L, r)["frozen"]
                                + 16 * r * (8 * d + 3 * (d + f))) / 1e9, "n_layers"),
    ],
)  # fmt: skip
def test_qlora_gb_names_the_mistake(wrong, named):
    outcome = check.qlora_gb(wrong)
    assert not outcome.passed and named in str(outcome), str(outcome)


# ------------------------------------------------------------------------- top_r_energy
def test_top_r_energy_accepts_every_form():
    assert check.top_r_energy(top_r_energy)
    assert check.top_r_energy(lambda D, r: np.float32(top_r_energy(D, r)))
    assert check.top_r_energy(lambda D, r: round(top_r_energy(D, r), 4))


@pytest.mark.parametrize(
    "wrong, named",
    [
        (lambda D, r: (s := np.linalg.svd(D)[1])[:r].sum() / s.sum(), "square the singular"),
        (lambda D, r: ((s := np.linalg.svd(D)[1])[: r + 1] ** 2).sum() / (s**2).sum(), "r + 1"),
        (
            lambda D, r: ((s := np.linalg.svd(D)[1])[:r] ** 2).sum() / s[0] ** 2,
            "not by the largest",
        ),
        (lambda D, r: 1 - top_r_energy(D, r), "other directions"),
    ],
)
def test_top_r_energy_names_the_mistake(wrong, named):
    outcome = check.top_r_energy(wrong)
    assert not outcome.passed and named in str(outcome), str(outcome)


# ------------------------------------------------------------------- predictions explain
def test_the_predictions_explain_a_wrong_answer():
    wrong = check_prediction(
        1 / 16, 0.25, what="the ratio", rtol=0.15, explanation=check.ALPHA_RATIO_EXPLANATION
    )
    assert not wrong.passed and "sqrt(r)" in " ".join(wrong.details)
    assert "1/16" in check.ALPHA_RATIO_EXPLANATION and "alpha = 2r" in check.ALPHA_RATIO_EXPLANATION
    text = check.written_code_explanation({1: 1.0, 3: 0.8, 5: 0.3, 8: 0.05})
    assert "1: 1.00" in text and "near 1" in text and "1/26" in text
    right = check_prediction(np.float64(0.3), 0.27, what="the share", rtol=0, atol=0.1)
    assert right.passed
    assert check_prediction(0.3, 0.27, what="the share", rtol=0, atol=0.1).passed
    assert not check_prediction(0.9, 0.27, what="the share", rtol=0, atol=0.1).passed
    assert math.isclose(0.25, 1 / math.sqrt(16))
