"""Chapter 5 (the Transformer block): hand-derived values, parity with PyTorch's own layers,
every block variant NumPy vs PyTorch, modules vs the NumPy forward pass, parameter counts, the
GPT-3 table, bad input, the widget, the exercise checkers and the training utilities."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import course_lib.block.accelerated as fast
import course_lib.block.reference as ref
from course_lib.attention.reference import multi_head_attention
from course_lib.block import exercises as check
from course_lib.block.config import ACTIVATIONS, NORM_POSITIONS, NORMS, BlockConfig, DecoderConfig
from course_lib.block.counting import (
    GPT3_SIZES,
    approx_parameters,
    count_parameters,
    gpt3_config,
    gpt3_table,
)
from course_lib.block.experiment import gradient_norms_at_init, reversal_batch, train_reversal
from course_lib.block.params import (
    flatten_parameters,
    init_parameters,
    layout,
    unflatten_parameters,
)
from course_lib.block.widget import explorer, parameter_breakdown, preset_config, render_html
from course_lib.models import DecoderOnlyModel, TransformerBlock, encoder_layer_parameters

VARIANTS = list(itertools.product(NORM_POSITIONS, NORMS, [False, True], [True, False], ACTIVATIONS))
VARIANT_IDS = [
    f"{p}-{n}-{'glu' if g else 'mlp'}-{'bias' if b else 'nobias'}-{a}" for p, n, g, b, a in VARIANTS
]


def _cfg(pos="post", norm="layer", gated=False, bias=True, act="relu", **kw) -> BlockConfig:
    base = {"d_model": 6, "n_heads": 2, "d_ff": 10}
    return BlockConfig(
        **{**base, **kw}, norm_position=pos, norm=norm, gated=gated, bias=bias, activation=act
    )


# ------------------------------------------------------------------------ hand-derived values
@pytest.mark.parametrize("side", ["reference", "accelerated"])
def test_norms_by_hand(side):
    mod = ref if side == "reference" else fast
    conv = np.asarray if side == "reference" else (lambda a: torch.tensor(a, dtype=torch.float64))
    # [1, 2, 3]: mu = 2, sigma^2 = 2/3, so (z - mu) / sigma = [-1, 0, 1] * sqrt(3/2)
    out = mod.layer_norm(conv([[1.0, 2.0, 3.0]]), eps=0.0)
    np.testing.assert_allclose(np.asarray(out), [[-math.sqrt(1.5), 0.0, math.sqrt(1.5)]])
    out = mod.layer_norm(conv([1.0, 3.0]), conv([2.0, 2.0]), conv([0.0, 10.0]), eps=0.0)
    np.testing.assert_allclose(np.asarray(out), [-2.0, 12.0])
    # RMS of [3, 4] is sqrt(12.5)
    out = mod.rms_norm(conv([[3.0, 4.0]]), eps=0.0)
    np.testing.assert_allclose(np.asarray(out), [[3 / math.sqrt(12.5), 4 / math.sqrt(12.5)]])
    # a constant token: LayerNorm returns the bias (the eps keeps 0/0 away)
    out = mod.layer_norm(conv([[5.0, 5.0]]), bias=conv([1.0, -1.0]))
    np.testing.assert_allclose(np.asarray(out), [[1.0, -1.0]])


@pytest.mark.parametrize("side", ["reference", "accelerated"])
def test_activations_by_hand(side):
    mod = ref if side == "reference" else fast
    x = np.array([-1.0, 0.0, 1.0, 2.0])
    xt = x if side == "reference" else torch.tensor(x)
    sig = 1 / (1 + np.exp(-x))
    phi = np.array([0.15865525393145707, 0.5, 0.8413447460685429, 0.9772498680518208])  # Phi(x)
    np.testing.assert_allclose(np.asarray(mod.activation(xt, "relu")), [0, 0, 1, 2])
    np.testing.assert_allclose(np.asarray(mod.activation(xt, "swish")), x * sig, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(mod.activation(xt, "gelu")), x * phi, rtol=1e-12)
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(np.asarray(mod.activation(xt, "gelu_tanh")), tanh_form, rtol=1e-12)
    np.testing.assert_allclose(tanh_form, x * phi, atol=1e-3)  # a close approximation


def test_feed_forward_by_hand():
    x = np.array([[1.0, -2.0]])
    w1 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # hidden = [1, -2, -1] + b1
    w2 = np.array([[1.0], [10.0], [100.0]])
    b1 = np.array([0.0, 3.0, 0.0])  # hidden = [1, 1, -1] -> relu [1, 1, 0]
    np.testing.assert_allclose(ref.feed_forward(x, w1, w2, b1, np.array([0.5])), [[11.5]])
    # gated: relu(x W1) * (x W2) with W2 = 2 W1: [1, 0, 0] * [2, -4, -2] = [2, 0, 0]
    out = ref.glu_feed_forward(x, w1, 2 * w1, w2, activation="relu")
    np.testing.assert_allclose(out, [[2.0]])
    torch.testing.assert_close(
        fast.glu_feed_forward(*(torch.tensor(a) for a in (x, w1, 2 * w1, w2)), activation="relu"),
        torch.tensor([[2.0]], dtype=torch.float64),
    )


def test_blocks_with_zero_parameters():
    """All-zero parameters: pre-LN and parallel blocks are the identity, post-LN gives zeros."""
    x = np.random.default_rng(0).standard_normal((2, 3, 6))
    for pos, expected in (("pre", x), ("parallel", x), ("post", np.zeros_like(x))):
        cfg = _cfg(pos)
        theta = np.zeros(count_parameters(cfg))
        np.testing.assert_allclose(ref.transformer_block(x, theta, cfg), expected, atol=1e-12)
        out = fast.transformer_block(torch.tensor(x), torch.tensor(theta), cfg)
        np.testing.assert_allclose(out.numpy(), expected, atol=1e-12)


def test_block_equations_written_out():
    """The three variants, written from their equations with Chapter 4's attention."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6))
    for pos in NORM_POSITIONS:
        cfg = _cfg(pos)
        p = init_parameters(cfg, rng)
        p = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in p.items()}

        def ln(i, z, p=p):
            return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

        def attn(z, p=p):
            return multi_head_attention(
                z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"],
                b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"], b_o=p["b_o"],
            )  # fmt: skip

        def ffn(z, p=p):
            return np.maximum(z @ p["w_1"] + p["b_1"], 0) @ p["w_2"] + p["b_2"]

        if pos == "post":
            x2 = ln(1, x + attn(x))
            want = ln(2, x2 + ffn(x2))
        elif pos == "pre":
            x1 = x + attn(ln(1, x))
            want = x1 + ffn(ln(2, x1))
        else:
            want = x + attn(ln(1, x)) + ffn(ln(1, x))
        np.testing.assert_allclose(ref.transformer_block(x, p, cfg), want, rtol=1e-12)


# --------------------------------------------------------------- parity with torch.nn layers
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_matches_torch(dtype, bias):
    torch.manual_seed(0)
    m = torch.nn.LayerNorm(7, eps=1e-5, bias=bias, dtype=dtype)
    with torch.no_grad():
        m.weight.normal_()
        if bias:
            m.bias.normal_()
    x = torch.randn(3, 4, 7, dtype=dtype, requires_grad=True)
    ours = fast.layer_norm(x, m.weight, m.bias)
    torch.testing.assert_close(ours, m(x))
    g_ours = torch.autograd.grad(ours.square().sum(), (x, m.weight))
    g_theirs = torch.autograd.grad(m(x).square().sum(), (x, m.weight))
    for a, b in zip(g_ours, g_theirs, strict=True):
        torch.testing.assert_close(a, b)
    b_np = None if m.bias is None else m.bias.detach().double().numpy()
    np.testing.assert_allclose(
        ref.layer_norm(x.detach().double().numpy(), m.weight.detach().double().numpy(), b_np),
        m(x).detach().double().numpy(),
        rtol=1e-5 if dtype == torch.float32 else 1e-12,
        atol=1e-5 if dtype == torch.float32 else 1e-12,
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_rms_norm_matches_torch(dtype):
    torch.manual_seed(0)
    m = torch.nn.RMSNorm(7, eps=1e-6, dtype=dtype)
    with torch.no_grad():
        m.weight.normal_()
    x = torch.randn(3, 4, 7, dtype=dtype, requires_grad=True)
    ours = fast.rms_norm(x, m.weight)
    torch.testing.assert_close(ours, m(x))
    torch.testing.assert_close(
        torch.autograd.grad(ours.sum(), x)[0], torch.autograd.grad(m(x).sum(), x)[0]
    )
    np.testing.assert_allclose(
        ref.rms_norm(x.detach().double().numpy(), m.weight.detach().double().numpy()),
        m(x).detach().double().numpy(),
        rtol=1e-5 if dtype == torch.float32 else 1e-12,
        atol=1e-6 if dtype == torch.float32 else 1e-12,
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_block_matches_transformer_encoder_layer(dtype, norm_first, bias, act):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        16, 4, 40, dropout=0.0, activation=act, batch_first=True, norm_first=norm_first,
        bias=bias, dtype=dtype,
    )  # fmt: skip
    with torch.no_grad():  # non-trivial norms and biases
        for name, prm in layer.named_parameters():
            if "norm" in name or "bias" in name:
                prm.normal_(1.0 if name.endswith("weight") else 0.0, 0.3)
    cfg, params = encoder_layer_parameters(layer)
    assert cfg.norm_position == ("pre" if norm_first else "post") and cfg.activation == act
    block = TransformerBlock.from_parameters(cfg, params, dtype=dtype)
    x = torch.randn(3, 7, 16, dtype=dtype)
    mask = torch.ones(7, 7, dtype=torch.bool).tril()
    tol = {} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-5}
    for m in (None, mask):
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        theirs = layer(xb, src_mask=None if m is None else ~m)  # PyTorch: True = masked out
        ours = block(xa, m)
        torch.testing.assert_close(ours, theirs, **tol)
        # backward: the same input gradient and the same gradient for W_1
        w = torch.randn_like(ours)
        (ours * w).sum().backward()
        (theirs * w).sum().backward()
        torch.testing.assert_close(xa.grad, xb.grad, **tol)
        torch.testing.assert_close(block.w_1.grad, layer.linear1.weight.grad.t(), **tol)
        block.zero_grad()
        layer.zero_grad()
        # and the NumPy reference with the same weights
        np.testing.assert_allclose(
            ref.transformer_block(x.double().numpy(), block.numpy_parameters(), cfg,
                                  None if m is None else m.numpy()),
            theirs.detach().double().numpy(),
            rtol=1e-4 if dtype == torch.float32 else 1e-10,
            atol=1e-5 if dtype == torch.float32 else 1e-12,
        )  # fmt: skip


def test_encoder_layer_conversion_rejects_what_it_cannot_represent():
    with pytest.raises(TypeError, match="TransformerEncoderLayer"):
        encoder_layer_parameters(torch.nn.Linear(2, 2))
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=False)
    with pytest.raises(ValueError, match="batch_first"):
        encoder_layer_parameters(layer)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation=torch.tanh)
    with pytest.raises(ValueError, match="ReLU and GELU"):
        encoder_layer_parameters(layer)


# ------------------------------------------------------------------- NumPy vs PyTorch, all
@pytest.mark.parametrize(("pos", "norm", "gated", "bias", "act"), VARIANTS, ids=VARIANT_IDS)
def test_every_block_variant_numpy_vs_pytorch_and_module(pos, norm, gated, bias, act):
    cfg = _cfg(pos, norm, gated, bias, act)
    rng = np.random.default_rng(hash((pos, norm, gated, bias, act)) % 2**32)
    theta = 0.5 * rng.standard_normal(count_parameters(cfg))
    x = rng.standard_normal((2, 5, 6))
    mask = np.tril(np.ones((5, 5), dtype=bool))
    want = ref.transformer_block(x, theta, cfg, mask)
    got = fast.transformer_block(torch.tensor(x), torch.tensor(theta), cfg, torch.tensor(mask))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    block = TransformerBlock.from_parameters(cfg, theta, dtype=torch.float64)
    out = block(torch.tensor(x), torch.tensor(mask))
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    out.square().sum().backward()  # every parameter the variant has receives a gradient
    assert all(p.grad is not None for p in block.parameters())
    assert sum(p.numel() for p in block.parameters()) == count_parameters(cfg)


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("pos", NORM_POSITIONS)
@pytest.mark.parametrize("norm", NORMS)
def test_decoder_module_matches_numpy_forward(tie, pos, norm):
    cfg = DecoderConfig(
        vocab_size=9, context_length=6, n_layers=2, tie_embeddings=tie,
        block=_cfg(pos, norm, gated=norm == "rms", act="swish" if norm == "rms" else "gelu"),
    )  # fmt: skip
    model = DecoderOnlyModel(cfg, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert model.count_parameters() == count_parameters(cfg)
    tokens = torch.randint(0, 9, (3, 5), generator=torch.Generator().manual_seed(4))
    want = ref.decoder_forward(tokens.numpy(), model.numpy_parameters(), cfg)
    got = model(tokens)
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    theta = flatten_parameters(model.numpy_parameters(), cfg)
    np.testing.assert_allclose(ref.decoder_forward(tokens.numpy(), theta, cfg), want)
    clone = DecoderOnlyModel.from_parameters(cfg, theta, dtype=torch.float64)
    torch.testing.assert_close(clone(tokens), got)
    # causal: the logits at position i do not depend on later tokens
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 9
    torch.testing.assert_close(model(changed)[:, :-1], got[:, :-1])


def test_decoder_loss_dropout_and_device_dtype():
    cfg = DecoderConfig(7, 5, 1, _cfg("pre"))
    model = DecoderOnlyModel(cfg, dropout=0.5, generator=torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 7, (4, 5))
    model.eval()
    a, b = model(tokens), model(tokens)
    torch.testing.assert_close(a, b)  # no dropout in eval mode
    assert a.dtype == torch.float32
    model.train()
    assert not torch.allclose(model(tokens), a)  # dropout acts in training mode
    model.eval()
    loss = model.loss(tokens, tokens)
    want = torch.nn.functional.cross_entropy(a.reshape(-1, 7), tokens.reshape(-1))
    torch.testing.assert_close(loss, want)
    with pytest.raises(ValueError, match="targets"):
        model.loss(tokens, tokens[:, :2])
    with pytest.raises(ValueError, match="dropout"):
        DecoderOnlyModel(cfg, dropout=1.0)


def test_stack_is_repeated_blocks_on_both_sides():
    cfg = _cfg("pre")
    rng = np.random.default_rng(5)
    thetas = 0.5 * rng.standard_normal((3, count_parameters(cfg)))
    x = rng.standard_normal((4, 6))
    z = x
    for t in thetas:
        z = ref.transformer_block(z, t, cfg)
    np.testing.assert_allclose(ref.transformer_stack(x, thetas, cfg), z)
    np.testing.assert_allclose(
        ref.transformer_stack(x, [unflatten_parameters(t, cfg) for t in thetas], cfg), z
    )
    np.testing.assert_allclose(
        fast.transformer_stack(torch.tensor(x), torch.tensor(thetas), cfg).numpy(), z, rtol=1e-10
    )


def test_accelerated_keeps_dtype_and_device_and_differentiates():
    cfg = _cfg("parallel", gated=True, act="swish")
    block = TransformerBlock(cfg, dtype=torch.bfloat16)
    out = block(torch.randn(2, 3, 6, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16
    x = torch.randn(2, 3, 6, requires_grad=True)
    theta = torch.randn(count_parameters(cfg), requires_grad=True)
    fast.transformer_block(x, theta, cfg).sum().backward()
    assert x.grad.shape == x.shape and theta.grad.shape == theta.shape


# ------------------------------------------------------------------------ parameter counts
@pytest.mark.parametrize(("pos", "norm", "gated", "bias", "act"), VARIANTS[::3])
def test_count_equals_layout_and_module(pos, norm, gated, bias, act):
    cfg = _cfg(pos, norm, gated, bias, act, d_head=5, d_ff=7)  # d_attn = 10 != d_model
    by_layout = sum(math.prod(s) for _, s in layout(cfg))
    assert (
        count_parameters(cfg)
        == by_layout
        == sum(p.numel() for p in TransformerBlock(cfg).parameters())
    )
    for tie in (True, False):
        dec = DecoderConfig(11, 5, 3, cfg, tie_embeddings=tie)
        model = DecoderOnlyModel(dec)
        assert count_parameters(dec) == sum(math.prod(s) for _, s in layout(dec))
        assert count_parameters(dec) == sum(p.numel() for p in model.parameters())


def test_exact_count_versus_rule_of_thumb():
    # a GPT block (d_ff = 4d, biases, two LayerNorms) has exactly 12 d^2 + 13 d parameters
    for d in (8, 64, 768):
        assert count_parameters(BlockConfig(d, 4, 4 * d)) == 12 * d * d + 13 * d
    n, d, V, C = 12, 768, 50257, 1024
    exact = count_parameters(gpt3_config(n, d, 12, vocab_size=V, context_length=C))
    assert exact == 124_439_808  # GPT-2 small, as published
    assert exact - approx_parameters(n, d, V, C) == n * 13 * d + 2 * d
    # gating with three matrices of width d_ff: 3 d d_ff instead of 2 d d_ff
    assert (
        count_parameters(BlockConfig(8, 2, 12, gated=True, bias=False))
        == 4 * 64 + 3 * 8 * 12 + 2 * 8
    )
    # the parallel block has one norm
    assert (
        count_parameters(BlockConfig(8, 2, 32, norm_position="parallel")) == 12 * 64 + 13 * 8 - 16
    )


def test_gpt3_table_reproduced_within_two_percent():
    rows = {r["name"]: r for r in gpt3_table()}
    assert len(rows) == len(GPT3_SIZES) == 8
    for r in rows.values():
        assert abs(r["exact_error"]) < 0.02, r["name"]
        assert abs(r["approx_error"]) < 0.02, r["name"]
    inconsistent = {n for n, r in rows.items() if not r["consistent"]}
    assert inconsistent == {"GPT-3 XL", "GPT-3 13B"}
    assert rows["GPT-3 13B"]["heads_x_dhead"] == 5120 != rows["GPT-3 13B"]["d_model"] == 5140
    assert rows["GPT-3 XL"]["heads_x_dhead"] == 3072
    assert rows["GPT-3 XL"]["exact_as_printed_error"] > 0.15  # 24 x 128 heads: 1.52B, not 1.3B
    assert round(rows["GPT-3 175B"]["exact"] / 1e9, 1) == 174.6


def test_flatten_and_unflatten_roundtrip_for_numpy_and_torch():
    dec = DecoderConfig(5, 4, 2, _cfg("pre", bias=False), tie_embeddings=False)
    theta = np.arange(count_parameters(dec), dtype=float)
    p = unflatten_parameters(theta, dec)
    assert len(p["blocks"]) == 2 and p["w_out"].shape == (6, 5)
    np.testing.assert_array_equal(flatten_parameters(p, dec), theta)
    t = torch.arange(count_parameters(dec), dtype=torch.float32)
    torch.testing.assert_close(flatten_parameters(unflatten_parameters(t, dec), dec), t)


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("mod", [ref, fast], ids=["reference", "accelerated"])
def test_mismatched_widths_are_named(mod):
    conv = np.asarray if mod is ref else torch.tensor
    x = conv(np.ones((2, 8)))
    with pytest.raises(ValueError, match=r"gain must have shape \(8,\).*got \(6,\)"):
        mod.layer_norm(x, conv(np.ones(6)))
    with pytest.raises(ValueError, match=r"gain must have shape \(8,\)"):
        mod.rms_norm(x, conv(np.ones(3)))
    with pytest.raises(ValueError, match=r"w1 must have 8 rows.*got shape \(6, 32\)"):
        mod.feed_forward(x, conv(np.ones((6, 32))), conv(np.ones((32, 8))))
    with pytest.raises(ValueError, match=r"w2 must have 32 rows"):
        mod.feed_forward(x, conv(np.ones((8, 32))), conv(np.ones((16, 8))))
    with pytest.raises(ValueError, match="w1 and w2 must have the same shape"):
        mod.glu_feed_forward(x, conv(np.ones((8, 4))), conv(np.ones((8, 5))), conv(np.ones((4, 8))))
    cfg = BlockConfig(d_model=6, n_heads=2, d_ff=4)
    theta = conv(np.zeros(count_parameters(cfg)))
    with pytest.raises(
        ValueError, match=r"x must have last dimension d_model = 6, got shape \(2, 8\)"
    ):
        mod.transformer_block(x, theta, cfg)
    with pytest.raises(ValueError, match=r"flat parameter vector must have shape \(250,\)"):
        mod.transformer_block(conv(np.ones((2, 6))), conv(np.zeros(10)), cfg)


@pytest.mark.parametrize("mod", [ref, fast], ids=["reference", "accelerated"])
def test_unknown_activation_and_bad_configs(mod):
    conv = np.asarray if mod is ref else torch.tensor
    with pytest.raises(
        ValueError,
        match="activation must be one of 'relu', 'gelu', 'gelu_tanh', 'swish'; got 'tanh'",
    ):
        mod.activation(conv(np.ones(3)), "tanh")
    with pytest.raises(ValueError, match="activation must be one of"):
        mod.feed_forward(
            conv(np.ones((1, 2))),
            conv(np.ones((2, 2))),
            conv(np.ones((2, 2))),
            activation="sigmoid",
        )
    with pytest.raises(TypeError, match="config must be a BlockConfig, got dict"):
        mod.transformer_block(conv(np.ones((2, 4))), conv(np.ones(3)), {"d_model": 4})
    with pytest.raises(TypeError, match="config must be a DecoderConfig"):
        mod.decoder_forward([[1]], conv(np.ones(3)), BlockConfig(4, 1, 4))


def test_config_errors():
    with pytest.raises(ValueError, match="d_ff must be at least 1, got 0"):
        BlockConfig(d_model=8, n_heads=2, d_ff=0)
    with pytest.raises(ValueError, match="activation must be one of"):
        BlockConfig(d_model=8, n_heads=2, d_ff=8, activation="swiglu")
    with pytest.raises(ValueError, match="norm_position must be one of 'post', 'pre', 'parallel'"):
        BlockConfig(d_model=8, n_heads=2, d_ff=8, norm_position="middle")
    with pytest.raises(ValueError, match="does not divide d_model"):
        BlockConfig(d_model=10, n_heads=4, d_ff=8)
    with pytest.raises(TypeError, match="gated must be True or False"):
        BlockConfig(d_model=8, n_heads=2, d_ff=8, gated="yes")
    with pytest.raises(TypeError, match="block must be a BlockConfig"):
        DecoderConfig(10, 4, 2, block=None)
    with pytest.raises(ValueError, match="n_layers must be at least 1"):
        DecoderConfig(10, 4, 0, block=BlockConfig(8, 2, 8))


@pytest.mark.parametrize("mod", [ref, fast], ids=["reference", "accelerated"])
def test_params_dict_errors(mod):
    cfg = BlockConfig(d_model=4, n_heads=2, d_ff=8)
    conv = (lambda a: a) if mod is ref else torch.tensor
    p = {k: conv(v) for k, v in init_parameters(cfg).items()}
    x = conv(np.ones((3, 4)))
    missing = {k: v for k, v in p.items() if k != "b_1"}
    with pytest.raises(ValueError, match="params lacks 'b_1'"):
        mod.transformer_block(x, missing, cfg)
    with pytest.raises(ValueError, match="names this configuration does not use: \\['b_3'\\]"):
        mod.transformer_block(x, {**p, "b_3": p["b_2"]}, cfg)
    with pytest.raises(ValueError, match=r"params\['w_1'\] must have shape \(4, 8\)"):
        mod.transformer_block(x, {**p, "w_1": p["w_2"]}, cfg)


@pytest.mark.parametrize("mod", [ref, fast], ids=["reference", "accelerated"])
def test_bad_tokens(mod):
    cfg = DecoderConfig(5, 3, 1, BlockConfig(4, 2, 8))
    theta = np.zeros(count_parameters(cfg))
    theta = theta if mod is ref else torch.tensor(theta)
    tok = (lambda a: np.asarray(a)) if mod is ref else torch.tensor
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 4\]"):
        mod.decoder_forward(tok([[0, 5]]), theta, cfg)
    with pytest.raises(ValueError, match="only context_length = 3 positions"):
        mod.decoder_forward(tok([[0, 1, 2, 3]]), theta, cfg)
    with pytest.raises(TypeError, match="tokens must be integers"):
        mod.decoder_forward(tok([[0.0, 1.0]]), theta, cfg)


def test_module_input_errors():
    block = TransformerBlock(BlockConfig(4, 2, 8))
    with pytest.raises(ValueError, match="x must have last dimension d_model = 4"):
        block(torch.ones(2, 3, 5))
    with pytest.raises(TypeError, match="config must be a BlockConfig"):
        TransformerBlock(DecoderConfig(5, 3, 1, BlockConfig(4, 2, 8)))
    model = DecoderOnlyModel(DecoderConfig(5, 3, 1, BlockConfig(4, 2, 8)))
    with pytest.raises(ValueError, match="context_length = 3"):
        model(torch.zeros(1, 4, dtype=torch.long))


# ---------------------------------------------------------------------------------- widget
def test_widget_breakdown_and_html():
    cfg = preset_config("GPT-3 Small")
    parts = parameter_breakdown(cfg)
    assert sum(parts.values()) == count_parameters(cfg)
    assert parts["output projection"] == 0 and parts["position embedding"] == 2048 * 768
    assert parts["feed-forward (all blocks)"] == 12 * (8 * 768**2 + 5 * 768)
    html = render_html(preset_config("GPT-3 XL"), nominal=1.3e9)
    assert "3072" in html and "2048" in html and "nominal size" in html
    assert "≠" not in render_html(cfg)
    with pytest.raises(ValueError, match="name must be one of"):
        preset_config("GPT-4")
    with pytest.raises(TypeError, match="DecoderConfig"):
        parameter_breakdown(BlockConfig(4, 2, 8))
    w = explorer("GPT-3 Small")
    dropdown, out = w.children[0], w.children[-1]
    assert "125" in out.value
    dropdown.value = "GPT-3 13B"
    assert "5140" in out.value and "≠" in out.value
    w.children[1].children[0].value = 2  # n_layers: no longer the preset, no nominal size
    assert "nominal size" not in out.value


# ---------------------------------------------------------------------------- exercises
def _pre_ln_solution(x, p):
    def ln(i, z):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    u = ln(1, x)
    x1 = x + multi_head_attention(
        u, u, u, p["w_q"], p["w_k"], p["w_v"], p["w_o"],
        b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"], b_o=p["b_o"],
    )  # fmt: skip
    return x1 + ref.feed_forward(ln(2, x1), p["w_1"], p["w_2"], p["b_1"], p["b_2"])


def _ln_solution(x, gain, bias, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return bias + gain * (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)


def _ln_grad_solution(x, gain, grad_out, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    sigma = np.sqrt(x.var(-1, keepdims=True) + eps)
    x_hat, g_hat = (x - mu) / sigma, grad_out * gain
    return (
        g_hat - g_hat.mean(-1, keepdims=True) - x_hat * (g_hat * x_hat).mean(-1, keepdims=True)
    ) / sigma


def test_layer_norm_grad_checker_accepts_the_derivation_and_names_missing_paths():
    assert check.layer_norm_backward(_ln_grad_solution, require=True)

    def constants(x, gain, grad_out, eps=1e-5):  # mu and sigma treated as constants
        return grad_out * gain / np.sqrt(x.var(-1, keepdims=True) + eps)

    def no_sigma_path(x, gain, grad_out, eps=1e-5):
        gh = grad_out * gain
        return (gh - gh.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)

    assert "constants" in str(check.layer_norm_backward(constants))
    assert "through sigma is missing" in str(check.layer_norm_backward(no_sigma_path))
    assert not check.layer_norm_backward(lambda x, g, dy, eps=1e-5: dy).passed
    zeros = str(check.layer_norm_backward(lambda x, g, dy, eps=1e-5: np.zeros_like(x)))
    assert "all zeros" in zeros and "stub" in zeros  # a stub that returns zeros


def _ln_grad_variant(axis=-1, ddof=0, times_sigma=False, gain=True):
    def fn(x, gain_, grad_out, eps=1e-5):
        mu = x.mean(axis, keepdims=True)
        sigma = np.sqrt(x.var(axis, keepdims=True, ddof=ddof) + eps)
        x_hat, g_hat = (x - mu) / sigma, grad_out * (gain_ if gain else 1)
        inner = (
            g_hat
            - g_hat.mean(axis, keepdims=True)
            - x_hat * (g_hat * x_hat).mean(axis, keepdims=True)
        )
        return inner if times_sigma else inner / sigma

    return fn


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (_ln_grad_variant(axis=0), "axis 0"),
        (_ln_grad_variant(ddof=1), "unbiased variance"),
        (_ln_grad_variant(times_sigma=True), "final division by sigma"),
        (_ln_grad_variant(gain=False), "multiply grad_out by the gain"),
    ],
)
def test_layer_norm_grad_checker_names_the_typical_mistakes(wrong, words):
    outcome = check.layer_norm_backward(wrong)
    assert not outcome and words in str(outcome), str(outcome)


def test_checkers_accept_solutions():
    assert check.layer_norm(_ln_solution, require=True)
    assert check.pre_ln_block(_pre_ln_solution, require=True)
    assert check.pre_ln_block(
        lambda x, p: ref.transformer_block(x, p, check.PRE_LN_CONFIG), require=True
    )
    exact = lambda n, d, V, C: n * (12 * d * d + 13 * d) + (V + C) * d + 2 * d  # noqa: E731
    assert check.gpt_parameters(exact, require=True)


def _ln_no_gain(x, g, b, eps=1e-5):
    return _ln_solution(x, 1.0, b, eps)


def _ln_no_eps(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    with np.errstate(all="ignore"):
        return b + g * (x - mu) / x.std(-1, keepdims=True)


def _ln_ddof(x, g, b, eps=1e-5):
    return b + g * (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps)


def _ln_axis0(x, g, b, eps=1e-5):
    return b + g * (x - x.mean(0, keepdims=True)) / np.sqrt(x.var(0, keepdims=True) + eps)


def _ln_eps_outside(x, g, b, eps=1e-5):
    return b + g * (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps)


def _post(x, p):
    return ref.transformer_block(
        x, p, BlockConfig(**{**check.PRE_LN_CONFIG.__dict__, "norm_position": "post"})
    )


def _parallel(x, p):
    def ln(z):
        return ref.layer_norm(z, p["norm1_gain"], p["norm1_bias"])

    u = ln(x)
    a = multi_head_attention(
        u, u, u, p["w_q"], p["w_k"], p["w_v"], p["w_o"],
        b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"], b_o=p["b_o"],
    )  # fmt: skip
    return x + a + ref.feed_forward(u, p["w_1"], p["w_2"], p["b_1"], p["b_2"])


def _notes_formula(x, p):
    a = multi_head_attention(
        x, x, x, p["w_q"], p["w_k"], p["w_v"], p["w_o"],
        b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"], b_o=p["b_o"],
    )  # fmt: skip
    u = ref.layer_norm(x + a, p["norm2_gain"], p["norm2_bias"])
    return x + ref.feed_forward(u, p["w_1"], p["w_2"], p["b_1"], p["b_2"])


@pytest.mark.parametrize(
    ("checker", "wrong", "words"),
    [
        (check.layer_norm, _ln_no_gain, "gain"),
        (check.layer_norm, _ln_no_eps, "eps inside the square root"),
        (check.layer_norm, _ln_ddof, "not d - 1"),
        (check.layer_norm, _ln_axis0, "last axis"),
        (check.layer_norm, _ln_eps_outside, "sqrt(var + eps)"),
        (check.layer_norm, lambda x, g, b, eps=1e-5: None, "return"),
        (check.pre_ln_block, _post, "post-LN"),
        (check.pre_ln_block, _parallel, "parallel block"),
        (check.pre_ln_block, _notes_formula, "handwritten notes"),
        (check.pre_ln_block, lambda x, p: x, "wrong values"),
        (check.gpt_parameters, lambda n, d, V, C: 12 * n * d * d + (V + C) * d, "rule of thumb"),
        (
            check.gpt_parameters,
            lambda n, d, V, C: n * (12 * d * d + 13 * d) + (V + C) * d,
            "final LayerNorm",
        ),
        (
            check.gpt_parameters,
            lambda n, d, V, C: n * (12 * d * d + 13 * d) + (2 * V + C) * d + 2 * d,
            "tied",
        ),
        (
            check.gpt_parameters,
            lambda n, d, V, C: n * (12 * d * d + 4 * d) + (V + C) * d + 2 * d,
            "biases",
        ),
        (check.gpt_parameters, lambda n, d, V, C: "lots", "int"),
    ],
)
def test_checkers_explain_mistakes(checker, wrong, words):
    outcome = checker(wrong)
    assert not outcome and words in str(outcome), str(outcome)
    with pytest.raises(AssertionError):
        checker(wrong, require=True)


# ---------------------------------------------------------------------- training utilities
@pytest.mark.portability
def test_reversal_batch_and_short_training():
    x, y = reversal_batch(torch.Generator().manual_seed(0), 3, n_digits=4)
    assert x.shape == y.shape == (3, 8)
    assert (x[:, 4] == 10).all() and (y[:, :4] == -100).all()
    torch.testing.assert_close(y[:, 4:], x[:, :4].flip(1))
    out = train_reversal("pre", 1, 1e-2, 20, d_model=8, batch_size=8)
    assert len(out["loss"]) == 20 and out["loss"][-1] < out["loss"][0]
    with pytest.raises(ValueError, match=r"lr must be in \(0.0, inf\), got -1.0"):
        train_reversal("pre", 1, -1.0, 2)
    with pytest.raises(TypeError, match="lr must be a real number, got True"):
        train_reversal("pre", 1, True, 2)
    with pytest.raises(ValueError, match="norm_position must be one of"):
        train_reversal("middle", 1, 1e-3, 2)


def test_gradient_norms_at_init_shapes_and_depth_trend():
    pre = [
        gradient_norms_at_init("pre", R, d_model=16, length=8, batch_size=4)[-1] for R in (2, 16)
    ]
    assert pre[1] < pre[0]  # pre-LN: the last block's gradient shrinks with depth
    g = gradient_norms_at_init("post", 3, d_model=16, length=8, batch_size=4, names=("w_q", "w_1"))
    assert g.shape == (3,) and np.all(g > 0)


def test_benchmark_quick_run():
    from benchmarks import block as bench

    rows = bench.run(quick=True)
    assert {r["block"] for r in rows} >= {"ours post-LN", "torch TransformerEncoderLayer post-LN"}
    assert all(r["tokens_per_s"] > 0 for r in rows)
    assert "target" in bench.summary(rows)


@pytest.mark.slow
@pytest.mark.parametrize("norm_position", ["post", "pre", "parallel"])
def test_decoder_compiles_to_one_graph_without_host_synchronisation(norm_position):
    """Validation at the boundary only: no .item()/bool(tensor) in the model's forward or loss,
    so the whole step traces as one graph (a host sync would break it: fullgraph=True raises)."""
    block = BlockConfig(d_model=16, n_heads=2, d_ff=32, norm_position=norm_position, gated=True)
    cfg = DecoderConfig(vocab_size=11, context_length=8, n_layers=2, block=block)
    model = DecoderOnlyModel(cfg, generator=torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 11, (3, 8), generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(tokens), model(tokens))
    loss = torch.compile(model.loss, backend="eager", fullgraph=True)(tokens, tokens)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    torch.testing.assert_close(loss, model.loss(tokens, tokens))


# ----------------------------------------------------------------- the residual explorer (5.3)
def test_chain_gradients_against_autograd_and_hand_values():
    """The hand-written backward pass of course_lib.block.residual equals autograd's."""
    from course_lib.block.residual import chain_gradients

    depth, gain, d = 5, 0.7, 16
    g = chain_gradients(depth, gain, d=d, seed=3)
    rng = np.random.default_rng(3)
    weights = torch.from_numpy(rng.standard_normal((depth, d, d)) * gain / np.sqrt(d))
    x0 = torch.from_numpy(rng.standard_normal(d))
    for name, residual in (("plain", False), ("residual", True)):
        hs = [x0.clone().requires_grad_(True)]
        for W in weights:
            h = hs[-1]
            out = h + torch.tanh(h @ W) if residual else torch.tanh(h @ W)
            out.retain_grad()
            hs.append(out)
        hs[-1].sum().backward()
        norms = [h.grad.norm().item() for h in hs]
        np.testing.assert_allclose(g[name], norms, rtol=1e-10)
    assert g["plain"][-1] == g["residual"][-1] == 4.0  # sqrt(16) at the output


def test_chain_gradients_vanish_without_residuals_and_check_input():
    from course_lib.block.residual import chain_gradients, render_html

    g = chain_gradients(24, 0.25)
    assert g["plain"][0] < 1e-10 < 1 < g["residual"][0]
    with pytest.raises(ValueError, match="depth"):
        chain_gradients(0, 0.5)
    with pytest.raises(ValueError, match="gain"):
        chain_gradients(4, -1.0)
    assert "plain" in render_html(4, 1.0)
