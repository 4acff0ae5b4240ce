"""Chapter 5, section 5.9: the encoder-decoder Transformer with cross-attention.

Parity with ``torch.nn.Transformer`` (weights copied in, eval mode, with masks) on both sides,
hand-derived properties of the decoder block, the module against the NumPy forward pass, the
task, decoding, the cross-attention maps, bad input, and a short training reproduction
(losses and accuracies with tolerances, never weights)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import course_lib.block.accelerated as fast
import course_lib.block.reference as ref
from course_lib.block import exercises as check
from course_lib.block.config import BlockConfig, EncoderDecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.encoder_decoder import (
    BOS,
    EOS,
    PAD,
    VOCAB,
    DecoderBlock,
    EncoderDecoderModel,
    reversal_pairs,
    torch_masks,
    train_reversal_seq2seq,
    transformer_parameters,
)
from course_lib.block.experiment import threads
from course_lib.block.params import (
    decoder_block_layout,
    flatten_parameters,
    init_decoder_block,
    init_parameters,
    layout,
    unflatten_parameters,
)

# nn.Transformer explains why it does not use its nested-tensor fast path; that is not our concern
pytestmark = [
    pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors"),
]


def _numpy(p):
    """A nested dict of tensors as float64 NumPy arrays."""
    return {
        k: [_numpy(b) for b in v] if isinstance(v, list) else v.detach().double().numpy()
        for k, v in p.items()
    }


def _padded_batch(B=3, Ls=7, Lt=5, d=16, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, Ls, d, dtype=dtype, generator=g)  # (B, L_s, d)
    y = torch.randn(B, Lt, d, dtype=dtype, generator=g)  # (B, L_t, d)
    keep = torch.ones(B, Ls, dtype=torch.bool)
    keep[1, 4:] = False  # the second source has 4 real tokens, the third 6
    keep[2, 6:] = False
    return x, y, keep


# ------------------------------------------------------------------ parity with nn.Transformer
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_matches_torch_transformer_with_masks(dtype, norm_first, act):
    torch.manual_seed(0)
    theirs = torch.nn.Transformer(
        16, 4, 2, 3, 32, dropout=0.1, activation=act, batch_first=True,
        norm_first=norm_first, dtype=dtype,
    ).eval()  # fmt: skip
    cfg, p = transformer_parameters(theirs)
    assert cfg.block.norm_position == ("pre" if norm_first else "post") and cfg.final_norm
    x, y, keep = _padded_batch(dtype=dtype)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    with torch.no_grad():
        want = theirs(x, y, **torch_masks(keep, 5))  # (B, L_t, d)
        got = fast.encoder_decoder_stack(
            x, y, p, cfg, keep[:, None, None], causal, keep[:, None, None]
        )
    torch.testing.assert_close(got, want)  # float32: rtol 1.3e-6, atol 1e-5
    numpy_out = ref.encoder_decoder_stack(
        x.double().numpy(), y.double().numpy(), _numpy(p), cfg,
        keep[:, None, None].numpy(), causal.numpy(), keep[:, None, None].numpy(),
    )  # fmt: skip
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(numpy_out, want.double().numpy(), atol=tol, rtol=tol)


def test_parity_error_in_float32_is_rounding_error():
    """The number the chapter reports: the largest |ours - nn.Transformer| in float32."""
    torch.manual_seed(1)
    theirs = torch.nn.Transformer(32, 4, 2, 2, 128, batch_first=True, norm_first=True).eval()
    cfg, p = transformer_parameters(theirs)
    x, y, keep = _padded_batch(d=32, dtype=torch.float32)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    with torch.no_grad():
        err = (
            (
                fast.encoder_decoder_stack(
                    x, y, p, cfg, keep[:, None, None], causal, keep[:, None, None]
                )
                - theirs(x, y, **torch_masks(keep, 5))
            )
            .abs()
            .max()
        )
    assert err < 1e-5


def test_parity_in_training_mode_gradients():
    """Without dropout, gradients agree too (the parameters of the cross-attention included)."""
    torch.manual_seed(2)
    theirs = torch.nn.Transformer(
        8, 2, 1, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64
    )
    cfg, p = transformer_parameters(theirs)
    p["decoder"][1]["cross_w_q"].requires_grad_(True)
    x, y, keep = _padded_batch(d=8)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    ours = fast.encoder_decoder_stack(
        x, y, p, cfg, keep[:, None, None], causal, keep[:, None, None]
    )
    want = theirs(x, y, **torch_masks(keep, 5))
    torch.testing.assert_close(ours, want)
    (g_ours,) = torch.autograd.grad(ours.square().sum(), p["decoder"][1]["cross_w_q"])
    (g_theirs,) = torch.autograd.grad(
        want.square().sum(), theirs.decoder.layers[1].multihead_attn.in_proj_weight
    )
    d, h = 8, 2
    g_theirs = g_theirs[:d].t().reshape(d, h, d // h).permute(1, 0, 2)  # our (h, d, d_k)
    torch.testing.assert_close(g_ours, g_theirs)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_count_equals_layout_and_torch(bias, norm_position):
    cfg = EncoderDecoderConfig(2, 3, BlockConfig(16, 4, 32, norm_position=norm_position, bias=bias))
    assert count_parameters(cfg) == sum(math.prod(s) for _, s in layout(cfg))
    theirs = torch.nn.Transformer(16, 4, 2, 3, 32, batch_first=True, bias=bias)
    full = EncoderDecoderConfig(2, 3, cfg.block, final_norm=True)
    assert count_parameters(full) == sum(q.numel() for q in theirs.parameters())


# --------------------------------------------------------------------- the decoder block by hand
@pytest.mark.parametrize("side", ["reference", "accelerated"])
def test_one_source_token_cross_attention_is_its_value(side):
    """With L_s = 1 every query gives the single key weight 1: the cross-attention's output is
    concat_i(m W_V^i + b_V^i) W_O + b_O for every target position, whatever the queries."""
    cfg = BlockConfig(d_model=6, n_heads=2, d_ff=12, norm_position="pre")
    rng = np.random.default_rng(0)
    p = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in init_decoder_block(cfg, rng).items()}
    y, m = rng.standard_normal((4, 6)), rng.standard_normal((1, 6))  # L_t = 4, L_s = 1

    def ln(i, z):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    value = np.concatenate([m @ p["cross_w_v"][i] + p["cross_b_v"][i] for i in range(2)], -1)
    cross_out = value @ p["cross_w_o"] + p["cross_b_o"]  # (1, d), the same for every query
    y1 = y + ref.multi_head_attention(
        ln(1, y), ln(1, y), ln(1, y), p["w_q"], p["w_k"], p["w_v"], p["w_o"],
        mask=np.tril(np.ones((4, 4), bool)), b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"], b_o=p["b_o"],
    )  # fmt: skip
    y2 = y1 + cross_out
    want = y2 + ref.feed_forward(ln(3, y2), p["w_1"], p["w_2"], p["b_1"], p["b_2"])
    mod = ref if side == "reference" else fast
    conv = (lambda a: a) if side == "reference" else torch.from_numpy
    got = mod.decoder_block(
        conv(y), conv(m), {k: conv(v) for k, v in p.items()}, cfg,
        self_mask=conv(np.tril(np.ones((4, 4), bool))),
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_decoder_block_is_causal_and_ignores_masked_memory():
    cfg = BlockConfig(d_model=6, n_heads=2, d_ff=12)
    rng = np.random.default_rng(1)
    p = init_decoder_block(cfg, rng)
    y, m = rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 4, 6))
    causal, keep = np.tril(np.ones((5, 5), bool)), np.array([True, True, False, False])
    out = ref.decoder_block(y, m, p, cfg, causal, keep)
    y2, m2 = y.copy(), m.copy()
    y2[:, -1] += 1.0  # a later target token
    m2[:, 2:] += 5.0  # source tokens the mask hides
    out2 = ref.decoder_block(y2, m2, p, cfg, causal, keep)
    np.testing.assert_allclose(out2[:, :-1], out[:, :-1], rtol=1e-12)
    m3 = m.copy()
    m3[:, 0] += 1.0  # a visible source token changes every position
    assert (np.abs(ref.decoder_block(y, m3, p, cfg, causal, keep) - out).max(axis=-1) > 1e-6).all()


def test_post_ln_decoder_block_rows_are_normalised():
    cfg = BlockConfig(d_model=6, n_heads=3, d_ff=12)  # post-LN, gains 1 and biases 0 at init
    rng = np.random.default_rng(2)
    out = ref.decoder_block(
        rng.standard_normal((5, 6)), rng.standard_normal((3, 6)), init_decoder_block(cfg, rng), cfg
    )
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-12)


def test_flat_and_nested_parameters_agree():
    cfg = EncoderDecoderConfig(
        1, 2, BlockConfig(4, 2, 8, norm_position="pre", gated=True, activation="swish")
    )
    theta = np.random.default_rng(3).standard_normal(count_parameters(cfg)) * 0.5
    nested = unflatten_parameters(theta, cfg)
    assert len(nested["encoder"]) == 1 and len(nested["decoder"]) == 2
    np.testing.assert_array_equal(flatten_parameters(nested, cfg), theta)
    x, y = np.ones((3, 4)) * [1, -1, 2, 0], np.eye(4)[:2]
    np.testing.assert_allclose(
        ref.encoder_decoder_stack(x, y, theta, cfg), ref.encoder_decoder_stack(x, y, nested, cfg)
    )
    assert init_parameters(cfg)["decoder"][1]["cross_b_q"].shape == (2, 2)


# ------------------------------------------------------------------------------------ the model
@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_model_matches_its_numpy_forward(norm_position):
    cfg = EncoderDecoderConfig(
        2, 2, BlockConfig(8, 2, 16, norm_position=norm_position, activation="gelu")
    )
    g = torch.Generator().manual_seed(0)
    model = EncoderDecoderModel(cfg, VOCAB, 9, pad_id=PAD, dtype=torch.float64, generator=g)
    src, tgt_in, _ = reversal_pairs(g, 4)
    logits = model(src, tgt_in)  # (B, L_t, V)
    np.testing.assert_allclose(
        logits.detach().numpy(), model.numpy_forward(src, tgt_in), rtol=1e-10, atol=1e-12
    )
    assert model.count_parameters() == count_parameters(cfg) + (VOCAB + 2 * 9) * 8
    # padding is invisible: a padded source gives the logits of the same digits unpadded
    for b in range(4):
        n = int((src[b] != PAD).sum())
        torch.testing.assert_close(model(src[b : b + 1, :n], tgt_in[b : b + 1]), logits[b : b + 1])


def test_decoder_block_module_matches_function():
    cfg = BlockConfig(8, 2, 16, norm_position="pre")
    blk = DecoderBlock(cfg, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y, m = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 4, 8, dtype=torch.float64)
    torch.testing.assert_close(blk(y, m), fast.decoder_block(y, m, blk.parameter_dict(), cfg))
    np.testing.assert_allclose(
        blk(y, m).detach().numpy(),
        ref.decoder_block(y.numpy(), m.numpy(), blk.numpy_parameters(), cfg),
    )
    assert sum(p.numel() for p in blk.parameters()) == sum(
        math.prod(s) for _, s in decoder_block_layout(cfg)
    )


def test_reversal_pairs_are_reversals():
    src, tgt_in, tgt_out = reversal_pairs(torch.Generator().manual_seed(5), 64, 3, 8)
    assert src.shape == (64, 8) and tgt_in.shape == tgt_out.shape == (64, 9)
    for s, ti, to in zip(src.tolist(), tgt_in.tolist(), tgt_out.tolist(), strict=True):
        digits = [t for t in s if t != PAD]
        assert 3 <= len(digits) <= 8 and s[len(digits) :] == [PAD] * (8 - len(digits))
        assert ti[0] == BOS and ti[1 : 1 + len(digits)] == digits[::-1]
        assert to[: len(digits) + 1] == digits[::-1] + [EOS]
        assert to[len(digits) + 1 :] == [-100] * (8 - len(digits))
    a = reversal_pairs(torch.Generator().manual_seed(5), 64, 3, 8)
    assert all(torch.equal(u, v) for u, v in zip(a, (src, tgt_in, tgt_out), strict=True))


def test_cross_attention_maps_are_distributions_with_zero_on_padding():
    cfg = EncoderDecoderConfig(1, 2, BlockConfig(8, 2, 16, norm_position="pre"))
    model = EncoderDecoderModel(
        cfg, VOCAB, 9, pad_id=PAD, generator=torch.Generator().manual_seed(0)
    )
    src, tgt_in, _ = reversal_pairs(torch.Generator().manual_seed(1), 5)
    A = model.cross_attention_maps(src, tgt_in)  # (layers, B, h, L_t, L_s)
    assert A.shape == (2, 5, 2, 9, 8)
    torch.testing.assert_close(A.sum(-1), torch.ones(2, 5, 2, 9))
    assert A.masked_select((src == PAD)[None, :, None, None, :]).abs().max() == 0
    # the maps are the weights the cross-attention used: recompute layer 0 with chapter 4's function
    from course_lib.attention.accelerated import multi_head_attention

    record = []
    with torch.no_grad():
        memory, _, keep = model._run(src, tgt_in, record)
        p = model.decoder[0].parameter_dict()
        out = multi_head_attention(
            record[0], memory, memory, p["cross_w_q"], p["cross_w_k"], p["cross_w_v"], p["cross_w_o"],
            mask=keep, b_q=p["cross_b_q"], b_k=p["cross_b_k"], b_v=p["cross_b_v"], b_o=p["cross_b_o"],
        )  # fmt: skip
        v = memory @ torch.cat(list(p["cross_w_v"]), dim=-1) + p["cross_b_v"].reshape(
            -1
        )  # (B, L_s, h*d_v)
        heads = [A[0, :, i] @ v[..., 4 * i : 4 * (i + 1)] for i in range(2)]
        torch.testing.assert_close(out, torch.cat(heads, -1) @ p["cross_w_o"] + p["cross_b_o"])


def test_greedy_decode_stops_at_eos():
    cfg = EncoderDecoderConfig(1, 1, BlockConfig(8, 2, 16, norm_position="pre"))
    model = EncoderDecoderModel(
        cfg, VOCAB, 9, pad_id=PAD, generator=torch.Generator().manual_seed(0)
    )
    src, _, _ = reversal_pairs(torch.Generator().manual_seed(1), 3)
    out = model.greedy_decode(src, 9)
    assert out.shape[0] == 3 and 1 <= out.shape[1] <= 9
    for row in out.tolist():  # after the first EOS, only EOS
        if EOS in row:
            assert set(row[row.index(EOS) :]) == {EOS}


# ------------------------------------------------------------------------------------ bad input
def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="norm_position must be 'post' or 'pre'"):
        EncoderDecoderConfig(1, 1, BlockConfig(8, 2, 16, norm_position="parallel"))
    with pytest.raises(ValueError, match="post-LN or pre-LN"):
        decoder_block_layout(BlockConfig(8, 2, 16, norm_position="parallel"))
    cfg = BlockConfig(4, 2, 8)
    p = init_decoder_block(cfg)
    for mod, conv in ((ref, np.asarray), (fast, torch.from_numpy)):
        with pytest.raises(ValueError, match="memory must have last dimension d_model = 4"):
            mod.decoder_block(
                conv(np.ones((3, 4))),
                conv(np.ones((2, 5))),
                {k: conv(v) for k, v in p.items()},
                cfg,
            )
        with pytest.raises(ValueError, match="params lacks 'cross_w_q'"):
            q = {k: conv(v) for k, v in p.items() if k != "cross_w_q"}
            mod.decoder_block(conv(np.ones((3, 4))), conv(np.ones((2, 4))), q, cfg)
        with pytest.raises(ValueError, match="does not use"):
            q = {**{k: conv(v) for k, v in p.items()}, "cross_w_x": conv(np.ones(2))}
            mod.decoder_block(conv(np.ones((3, 4))), conv(np.ones((2, 4))), q, cfg)
        with pytest.raises(TypeError, match="EncoderDecoderConfig"):
            mod.encoder_decoder_stack(conv(np.ones((3, 4))), conv(np.ones((2, 4))), p, cfg)
    with pytest.raises(TypeError, match="torch.nn.Transformer"):
        transformer_parameters(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="boolean"):
        torch_masks(torch.ones(2, 3), 4)
    ed = EncoderDecoderConfig(1, 1, BlockConfig(8, 2, 16, norm_position="pre"))
    model = EncoderDecoderModel(ed, VOCAB, 9, pad_id=PAD)
    with pytest.raises(ValueError, match="context_length = 9"):
        model(torch.zeros(1, 10, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 12\]"):
        model(torch.full((1, 3), 13), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="same batch size"):
        model(torch.zeros(2, 3, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="pad_id"):
        EncoderDecoderModel(ed, VOCAB, 9, pad_id=13)


# ------------------------------------------------------------------------------------ training
@pytest.mark.portability
def test_training_reproduces_the_chapter_numbers():
    """The notebook's run: losses and accuracies within tolerances (never the weights)."""
    out = train_reversal_seq2seq(seed=0)
    assert len(out["loss"]) == 300
    assert math.log(13) < out["loss"][0] < 3.5  # a little above uniform guessing at the start
    assert np.mean(out["loss"][-10:]) < 0.1
    # about 0.99 and 0.998 on AVX2/AVX-512 kernels, 0.89 on the portable ones: the claim is
    # "most sequences come out right", with room for another CPU's rounding
    assert out["sequence_accuracy"] > 0.8 and out["token_accuracy"] > 0.95


# ------------------------------------------------------------------ the exercise and helpers
def _post_ln_decoder_block(y, memory, p):
    L = y.shape[-2]
    return ref.decoder_block(
        y, memory, p, check.DECODER_CONFIG, self_mask=np.tril(np.ones((L, L), bool))
    )


def test_decoder_block_checker_accepts_the_solution_and_names_mistakes():
    assert check.decoder_block(_post_ln_decoder_block).passed
    pre = BlockConfig(**{**check.DECODER_CONFIG.__dict__, "norm_position": "pre"})
    wrong = {
        "not masked": lambda y, m, p: ref.decoder_block(y, m, p, check.DECODER_CONFIG),
        "pre-LN decoder block": lambda y, m, p: ref.decoder_block(
            y, m, p, pre, self_mask=np.tril(np.ones((y.shape[-2],) * 2, bool))
        ),
        "keys and values must come": lambda y, m, p: _post_ln_decoder_block(y, y, p),
    }
    for words, fn in wrong.items():
        outcome = check.decoder_block(fn)
        assert not outcome.passed and words in str(outcome), (words, str(outcome))
    with pytest.raises(AssertionError):
        check.decoder_block(lambda y, m, p: y, require=True)


def test_threads_restores_the_setting():
    before = torch.get_num_threads()
    with threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        with threads(0):
            pass


def _post_ln_decoder_by_hand(cross_residual=True, ffn_residual=True, kv="memory"):
    """A post-LN decoder block written out, with one typical mistake switched on."""

    def block(y, m, p):
        L = y.shape[-2]

        def ln(i, z):
            return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

        def att(x_q, x_kv, pre="", mask=None):
            w = [p[pre + n] for n in ("w_q", "w_k", "w_v", "w_o")]
            b = {n: p[pre + n] for n in ("b_q", "b_k", "b_v", "b_o")}
            return ref.multi_head_attention(x_q, x_kv, x_kv, *w, mask=mask, **b)

        y1 = ln(1, y + att(y, y, mask=np.tril(np.ones((L, L), bool))))
        y2 = ln(2, (y1 if cross_residual else 0) + att(y1, {"memory": m, "y": y}[kv], "cross_"))
        ffn = ref.feed_forward(y2, p["w_1"], p["w_2"], p["b_1"], p["b_2"])
        return ln(3, (y2 if ffn_residual else 0) + ffn)

    return block


@pytest.mark.parametrize(
    ("wrong", "words"),
    [
        (_post_ln_decoder_by_hand(cross_residual=False), "cross-attention has no residual"),
        (_post_ln_decoder_by_hand(kv="y"), "come from the block's input y"),
        (_post_ln_decoder_by_hand(ffn_residual=False), "feed-forward network has no residual"),
    ],
)
def test_decoder_block_checker_names_a_missing_residual_and_the_wrong_stream(wrong, words):
    assert check.decoder_block(_post_ln_decoder_by_hand()).passed
    outcome = check.decoder_block(wrong)
    assert not outcome.passed and words in str(outcome), str(outcome)
