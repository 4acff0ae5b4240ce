"""Chapter 9's fused encoder (one QKV product, PyTorch's SDPA kernel) equals the explicit one.

``course_lib.bert.accelerated.encode`` runs the blocks with ``fused=True``; ``fused=False`` is
chapter 5's explicit multi-head attention, checked against the NumPy reference by the
conformance suite. Here the two are held equal, forward and backward, over padding masks, odd
lengths, padded queries, a sequence with no real token (the core only: the public functions
refuse it), dropout, float32 and float64, on the CPU and, where there is one, on CUDA; and the
shipped checkpoints and Hugging Face's ``BertModel`` with SDPA attention agree with the fused
path; and the fused core traces under ``torch.compile(fullgraph=True)`` (no host
synchronisation). ``benchmarks/bert_encoder.py`` times the two paths and Hugging Face's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.attention.accelerated import multi_head_attention
from course_lib.bert import accelerated as A
from course_lib.bert.config import BertConfig, bert_block, flatten, init_parameters, unflatten
from course_lib.bert.hf import to_hf
from course_lib.bert.model import Bert
from course_lib.block.accelerated import fused_qkv, fused_self_attention
from course_lib.paths import data_dir

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TOL = {torch.float64: {"rtol": 1e-10, "atol": 1e-11}, torch.float32: {"rtol": 1e-4, "atol": 1e-5}}
CFG = BertConfig(vocab_size=40, max_len=24, n_layers=2, block=bert_block(24, 3, 40))


def _model(dtype=torch.float64, device="cpu", dropout=0.0) -> Bert:
    """Gains and biases away from 1 and 0, so that every parameter matters."""
    theta = flatten(init_parameters(CFG, 0), CFG)
    theta = theta + 0.1 * np.random.default_rng(3).standard_normal(theta.shape)
    return Bert(CFG, unflatten(theta, CFG), dropout=dropout, dtype=dtype).to(device)


def _batch(B: int, L: int, seed: int, device="cpu"):
    """Tokens, segments and a padding mask with a different real length per row (>= 1)."""
    rng = np.random.default_rng(seed)
    tokens = torch.from_numpy(rng.integers(0, CFG.vocab_size, (B, L))).to(device)
    segments = torch.from_numpy((rng.random((B, L)) < 0.5).astype(np.int64)).to(device)
    lengths = rng.integers(1, L + 1, B)
    lengths[0] = L  # one row without padding
    mask = torch.from_numpy(np.arange(L) < lengths[:, None]).to(device)
    return tokens, segments, mask


def _both(model: Bert, t, s, m, backward: bool):
    """The encoder's output and every parameter's gradient, fused and explicit."""
    p = model.parameter_dict()
    out = {}
    for fused in (True, False):
        model.zero_grad()
        h = A.encode(t, s, m, p, CFG, fused=fused)  # (B, L, d)
        grads = {}
        if backward:
            g = torch.linspace(-1, 1, h.numel(), dtype=h.dtype, device=h.device).reshape(h.shape)
            (h * g).sum().backward()
            grads = {n: q.grad.clone() for n, q in model.named_parameters() if q.grad is not None}
        out[fused] = (h.detach(), grads)
    return out[True], out[False]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("B", "L"), [(1, 1), (3, 7), (2, 13), (4, 24)])
def test_the_fused_encoder_equals_the_explicit_one_forward_and_backward(device, dtype, B, L):
    model = _model(dtype, device)
    t, s, m = _batch(B, L, seed=B * 100 + L, device=device)
    (h_f, g_f), (h_e, g_e) = _both(model, t, s, m, backward=True)
    torch.testing.assert_close(h_f, h_e, **TOL[dtype])  # padded queries included
    encoder = {n for n, _ in model.named_parameters() if ".mlm" not in n}  # the head is not run
    assert set(g_f) == set(g_e) == encoder
    for name, g in g_f.items():
        torch.testing.assert_close(g, g_e[name], **TOL[dtype], msg=name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_without_a_mask_and_with_more_batch_dimensions(dtype):
    model = _model(dtype)
    t, s, m = _batch(6, 9, seed=5)
    t, s, m = t.reshape(2, 3, 9), s.reshape(2, 3, 9), m.reshape(2, 3, 9)  # (2, 3, L)
    p = model.parameter_dict()
    for mask in (None, m):
        fused = A.encode(t, s, mask, p, CFG)
        torch.testing.assert_close(fused, A.encode(t, s, mask, p, CFG, fused=False), **TOL[dtype])
        assert fused.shape == (2, 3, 9, CFG.d_model)


def test_a_sequence_with_no_real_token_gives_the_same_numbers_in_the_core():
    """The public functions refuse it; the core must not turn it into NaN on one path only."""
    model = _model()
    t, s, m = _batch(3, 8, seed=2)
    m[1] = False  # every key of row 1 is padding: both paths give its attention rows zeros
    (h_f, g_f), (h_e, g_e) = _both(model, t, s, m, backward=True)
    assert torch.isfinite(h_f).all() and torch.isfinite(h_e).all()
    torch.testing.assert_close(h_f, h_e, **TOL[torch.float64])
    for name, g in g_f.items():
        torch.testing.assert_close(g, g_e[name], **TOL[torch.float64], msg=name)
    with pytest.raises(ValueError, match="at least one real token in every sequence"):
        model(t, s, m)


def test_padding_never_reaches_a_real_token():
    """Changing the tokens behind the mask leaves every real position's state unchanged."""
    model = _model()
    t, s, m = _batch(3, 11, seed=4)
    t2 = t.clone()
    t2[~m] = (t2[~m] + 7) % CFG.vocab_size
    with torch.no_grad():
        a, b = model(t, s, m), model(t2, s, m)
    torch.testing.assert_close(a[m], b[m], rtol=0, atol=1e-13)


def test_dropout_draws_the_same_masks_on_both_paths():
    model = _model(dropout=0.2).train()
    t, s, m = _batch(3, 10, seed=6)
    p = model.parameter_dict()
    torch.manual_seed(11)
    fused = A.encode(t, s, m, p, CFG, model._drop())
    torch.manual_seed(11)
    explicit = A.encode(t, s, m, p, CFG, model._drop(), fused=False)
    torch.testing.assert_close(fused, explicit, **TOL[torch.float64])
    with torch.no_grad():
        assert not torch.allclose(fused, model.eval()(t, s, m))  # dropout did act


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_self_attention_equals_multi_head_attention(dtype):
    g = torch.Generator().manual_seed(0)
    h, d, d_k = 3, 12, 5  # d_attn = 15 != d: the fused width is 3 h d_k
    p = {n: torch.randn(h, d, d_k, generator=g, dtype=dtype) for n in ("w_q", "w_k", "w_v")}
    p |= {n: torch.randn(h, d_k, generator=g, dtype=dtype) for n in ("b_q", "b_k", "b_v")}
    p |= {"w_o": torch.randn(h * d_k, 7, generator=g, dtype=dtype)}
    z = torch.randn(2, 9, d, generator=g, dtype=dtype)
    mask = torch.rand(2, 1, 9, 9, generator=g) < 0.7
    mask[..., 0] = True  # every query keeps a key
    want = multi_head_attention(
        z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"], mask=mask,
        b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"],
    )  # fmt: skip
    torch.testing.assert_close(fused_self_attention(z, p, mask), want, **TOL[dtype])
    w, b = fused_qkv(p)
    assert w.shape == (d, 3 * h * d_k) and b.shape == (3 * h * d_k,)
    torch.testing.assert_close(w[:, h * d_k + d_k : h * d_k + 2 * d_k], p["w_k"][1])  # K, head 1
    torch.testing.assert_close(b[2 * h * d_k :], p["b_v"].flatten())


@pytest.mark.parametrize("name", ["small_mlm.pt"])
def test_the_shipped_checkpoints_load_and_run_on_both_paths(name):
    from course_lib.bert.pretrain_long import load_checkpoint

    model, _ = load_checkpoint(data_dir() / "bert" / name)  # the stored per-head layout
    c = model.config
    rng = np.random.default_rng(9)
    t = torch.from_numpy(rng.integers(4, c.vocab_size, (4, 31)))
    s = torch.zeros_like(t)
    m = torch.from_numpy(np.arange(31) < np.array([31, 17, 5, 1])[:, None])
    p = model.parameter_dict()
    with torch.no_grad():
        fused = A.encode(t, s, m, p, c)
        torch.testing.assert_close(
            fused, A.encode(t, s, m, p, c, fused=False), **TOL[torch.float32]
        )


def test_hugging_face_bert_with_sdpa_attention_equals_the_fused_encoder():
    model = _model(torch.float64)
    t, s, m = _batch(3, 15, seed=8)
    theirs = to_hf(model.numpy_parameters(), CFG, "model", attn_implementation="sdpa")
    with torch.no_grad():
        ours = model(t, s, m)
        out = theirs(input_ids=t, token_type_ids=s, attention_mask=m.long()).last_hidden_state
    torch.testing.assert_close(ours[m], out[m], rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="attn_implementation must be 'eager' or 'sdpa'"):
        to_hf(model.numpy_parameters(), CFG, "model", attn_implementation="flash")


def test_the_fused_encoder_traces_as_one_graph():
    """No host synchronisation in the fused core: ``torch.compile(fullgraph=True)`` traces it."""
    model = _model(torch.float32)
    t, s, m = _batch(2, 9, seed=10)
    p = model.parameter_dict()
    compiled = torch.compile(
        lambda t, s, m: A.encode(t, s, m, p, CFG), fullgraph=True, backend="aot_eager"
    )
    out = compiled(t, s, m)
    torch.testing.assert_close(out, A.encode(t, s, m, p, CFG), **TOL[torch.float32])
    out.sum().backward()
    assert model.blocks[0]["w_q"].grad is not None
