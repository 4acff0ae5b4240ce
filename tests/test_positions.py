"""Chapter 6 (positional encodings): hand-derived values, the notes' errors, parity with PyTorch,
bad input, the extrapolation models and their shipped checkpoint, widget, exercises."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import course_lib.attention.accelerated as fast_attention
import course_lib.positions.accelerated as fast
import course_lib.positions.reference as ref
from benchmarks import positions as bench
from course_lib.paths import data_path
from course_lib.positions import exercises as check
from course_lib.positions import experiment as pm
from course_lib.positions.as_printed import (
    algorithm1_steps,
    printed_case_counts,
    sinusoidal_as_printed,
)
from course_lib.positions.indices import alibi_slopes, binary_table, relative_offsets
from course_lib.positions.widget import encoding_view, explorer, render_html

F64 = torch.float64
ROOT = Path(__file__).resolve().parent.parent
SIDES = ["reference", "accelerated"]


def _t(x):
    return torch.as_tensor(np.asarray(x), dtype=F64)


def _call(side, name, *args, **kwargs):
    """Call a function on one side with float64 inputs; return a NumPy array."""
    if side == "reference":
        return getattr(ref, name)(*args, **kwargs)
    conv = [_t(a) if isinstance(a, np.ndarray | list) else a for a in args]
    return getattr(fast, name)(*conv, **kwargs).numpy()


# ----------------------------------------------------------------------------- sinusoidal
@pytest.mark.parametrize("side", SIDES)
def test_sinusoidal_by_hand(side):
    # pos = 1, d = 4: w_0 = 1, w_1 = 10000^(-1/2) = 0.01
    out = _call(side, "sinusoidal_encoding", [1.0], 4)
    np.testing.assert_allclose(out, [[math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]])
    # position 0 is [0, 1, 0, 1, ...]; the concatenated layout is [0, 0, 1, 1]
    np.testing.assert_array_equal(_call(side, "sinusoidal_encoding", [0.0], 4), [[0, 1, 0, 1]])
    np.testing.assert_array_equal(
        _call(side, "sinusoidal_encoding", [0.0], 4, layout="concatenated"), [[0, 0, 1, 1]]
    )


def test_sinusoidal_matches_the_annotated_transformer_formulation():
    # the widely copied exp/log form: div_term = exp(-log(10000) * 2i / d)
    L, d = 50, 128
    pos = torch.arange(L, dtype=F64)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=F64) * -(math.log(10000.0) / d))
    pe = torch.zeros(L, d, dtype=F64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    torch.testing.assert_close(fast.sinusoidal_encoding(torch.arange(L, dtype=F64), d), pe)
    np.testing.assert_allclose(ref.sinusoidal_encoding(L, d), pe.numpy(), atol=1e-12)


def test_layouts_are_a_column_permutation():
    inter = ref.sinusoidal_encoding(20, 8)
    concat = ref.sinusoidal_encoding(20, 8, layout="concatenated")
    perm = [0, 2, 4, 6, 1, 3, 5, 7]  # sines, then cosines
    np.testing.assert_array_equal(concat, inter[:, perm])


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_shift_is_a_fixed_rotation(side, layout):
    rng = np.random.default_rng(0)
    pos = rng.uniform(0, 100, 30)
    for k in (1.0, 7.0, -3.0, 250.5):
        M = _call(side, "sinusoidal_shift_matrix", np.array(k), 16, layout=layout)
        np.testing.assert_allclose(M @ M.T, np.eye(16), atol=1e-12)  # a rotation
        pe = _call(side, "sinusoidal_encoding", pos, 16, layout=layout)
        shifted = _call(side, "sinusoidal_encoding", pos + k, 16, layout=layout)
        np.testing.assert_allclose(pe @ M, shifted, atol=1e-10)  # the same M for every pos
    M3, M4 = (ref.sinusoidal_shift_matrix(k, 6, layout=layout) for k in (3, 4))
    np.testing.assert_allclose(M3 @ M4, ref.sinusoidal_shift_matrix(7, 6, layout=layout))
    np.testing.assert_allclose(ref.sinusoidal_shift_matrix(-3, 6, layout=layout), M3.T)


def test_dot_product_of_encodings_depends_on_offset_only():
    pe = ref.sinusoidal_encoding(60, 32)
    sim = pe @ pe.T
    for off in range(-5, 6):
        diag = np.diagonal(sim, off)
        np.testing.assert_allclose(diag, diag[0], atol=1e-12)


def test_accelerated_dtypes_and_devices():
    p16 = torch.arange(10, dtype=torch.float16)
    assert fast.sinusoidal_encoding(p16, 8).dtype == torch.float16
    assert fast.sinusoidal_encoding(torch.arange(10), 8).dtype == torch.get_default_dtype()
    assert fast.sinusoidal_encoding(10, 8).dtype == torch.get_default_dtype()
    # angles in float32: float16 output is within float16 rounding of the float64 value at pos 1000
    big = torch.tensor([1000.0, 2047.0], dtype=torch.float16)
    np.testing.assert_allclose(
        fast.sinusoidal_encoding(big, 8).double().numpy(),
        ref.sinusoidal_encoding([1000.0, 2047.0], 8),
        atol=1e-3,
    )
    x = torch.randn(2, 5, 8, dtype=torch.bfloat16)
    assert fast.rotary_embedding(x).dtype == torch.bfloat16


# ----------------------------------------------------------------------------- absolute
@pytest.mark.parametrize("side", SIDES)
def test_one_hot_concatenation_and_table(side):
    x = np.array([[5.0, 6.0], [7.0, 8.0]])
    out = _call(side, "concat_one_hot_positions", x, 3)
    np.testing.assert_array_equal(out, [[5, 6, 1, 0, 0], [7, 8, 0, 1, 0]])
    table = np.arange(10.0).reshape(5, 2)
    np.testing.assert_array_equal(_call(side, "add_position_table", x, table, 3), x + table[3:5])


@pytest.mark.parametrize("side", SIDES)
def test_positions_beyond_a_table_are_an_error(side):
    x, table = np.ones((4, 2)), np.ones((3, 2))
    with pytest.raises(ValueError, match=r"positions 0..3 are needed .* rows for positions 0..2"):
        _call(side, "add_position_table", x, table)
    with pytest.raises(ValueError, match="offset must be at least 0"):
        _call(side, "add_position_table", x[:2], table, -1)
    with pytest.raises(ValueError, match="positions 3..3 have no one-hot vector"):
        _call(side, "concat_one_hot_positions", x, 3)


# ----------------------------------------------------------------------------- relative
def test_relative_offsets_and_alibi_slopes():
    np.testing.assert_array_equal(relative_offsets(3), [[0, 1, 2], [-1, 0, 1], [-2, -1, 0]])
    np.testing.assert_array_equal(relative_offsets(3, 0), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="max_offset must be at least 0"):
        relative_offsets(3, -2)
    assert alibi_slopes(8) == [2.0**-k for k in range(1, 9)]  # Press et al.: 1/2 ... 1/256
    assert alibi_slopes(1) == [2.0**-8]
    assert alibi_slopes(12)[:8] == alibi_slopes(8)
    assert alibi_slopes(12)[8:] == alibi_slopes(16)[0::2][:4]


@pytest.mark.parametrize("side", SIDES)
def test_relative_bias_clips_offsets(side):
    values = np.array([10.0, 20.0, 30.0, 40.0, 50.0])  # offsets -2..2
    out = _call(side, "relative_bias", values, 6)
    np.testing.assert_array_equal(out, values[relative_offsets(6, 2) + 2])
    assert out[5, 0] == 10.0 and out[0, 5] == 50.0  # offsets -5 and +5 clipped to -2 and +2


@pytest.mark.parametrize("side", SIDES)
def test_alibi_by_hand(side):
    out = _call(side, "alibi_bias", np.array([1.0, 0.25]), 3)
    np.testing.assert_array_equal(out[0], [[0, 1, 2], [-1, 0, 1], [-2, -1, 0]])
    np.testing.assert_array_equal(out[1], 0.25 * out[0])
    sym = _call(side, "alibi_bias", np.array([1.0]), 3, True)
    np.testing.assert_array_equal(sym[0], [[0, -1, -2], [-1, 0, -1], [-2, -1, 0]])


def test_linear_offset_bias_is_a_key_position_bias_under_softmax():
    """Variant (iii) of 001, lambda (i - j): lambda i is the same for a whole row and cancels."""
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 7, 4))
    lam = 0.7
    i, j = np.indices((7, 7))
    w1 = fast_attention.attention_weights(_t(q), _t(k), bias=_t(lam * (i - j)))
    w2 = fast_attention.attention_weights(_t(q), _t(k), bias=_t(-lam * j))
    torch.testing.assert_close(w1, w2)


def _shaw_explicit(q, k, v, aK, aV):
    """Shaw et al. eqs. (3)-(4) with explicit (L, L, d) tensors a^K_ij, a^V_ij."""
    L, d = q.shape
    K = (aK.shape[0] - 1) // 2
    idx = relative_offsets(L, K) + K
    AK, AV = aK[idx], aV[idx]  # (L, L, d)
    e = np.einsum("id,ijd->ij", q, k[None, :, :] + AK) / math.sqrt(d)
    alpha = np.exp(e - e.max(1, keepdims=True))
    alpha /= alpha.sum(1, keepdims=True)
    return np.einsum("ij,ijd->id", alpha, v[None, :, :] + AV)


@pytest.mark.parametrize("side", SIDES)
def test_shaw_attention_from_the_pieces(side):
    rng = np.random.default_rng(2)
    L, d, K = 9, 4, 2
    q, k, v = rng.standard_normal((3, L, d))
    aK, aV = rng.standard_normal((2, 2 * K + 1, d))
    want = _shaw_explicit(q, k, v, aK, aV)
    bias = _call(side, "relative_key_logits", q, aK) / math.sqrt(d)
    if side == "reference":
        import course_lib.attention.reference as ref_attention

        w = ref_attention.attention_weights(q, k, bias=bias)
        out = w @ v + ref.relative_value_term(w, aV)
    else:
        w = fast_attention.attention_weights(_t(q), _t(k), bias=_t(bias))
        out = (w @ _t(v) + fast.relative_value_term(w, _t(aV))).numpy()
    np.testing.assert_allclose(out, want, atol=1e-12)


def test_relative_bias_and_alibi_match_torch_sdpa_float_masks():
    """Chapter 4's attention with ``bias`` equals PyTorch's fused attention with a float mask."""
    torch.manual_seed(0)
    B, h, L, d = 2, 4, 10, 8
    q, k, v = torch.randn(3, B, h, L, d, dtype=F64)
    causal = fast_attention.causal_mask(L)
    alibi = fast.alibi_bias(torch.tensor(alibi_slopes(h), dtype=F64), L)  # (h, L, L)
    rel = fast.relative_bias(torch.randn(h, 7, dtype=F64), L)  # (h, L, L), K = 3
    for bias in (alibi, rel):
        ours = fast_attention.scaled_dot_product_attention(q, k, v, mask=causal, bias=bias)
        float_mask = bias.masked_fill(~causal, float("-inf"))
        theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask)
        torch.testing.assert_close(ours, theirs)


def test_attention_without_positions_is_permutation_equivariant_not_invariant():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 8))
    perm = rng.permutation(6)
    w = [rng.standard_normal((2, 8, 4)) for _ in range(3)] + [rng.standard_normal((8, 8))]
    import course_lib.attention.reference as ref_attention

    out = ref_attention.multi_head_attention(x, x, x, *w)
    out_p = ref_attention.multi_head_attention(x[perm], x[perm], x[perm], *w)
    np.testing.assert_allclose(out_p, out[perm], atol=1e-12)  # equivariant
    assert not np.allclose(out_p, out)  # not invariant
    xp = x + ref.sinusoidal_encoding(6, 8)
    xpp = x[perm] + ref.sinusoidal_encoding(6, 8)
    out_pos = ref_attention.multi_head_attention(xp, xp, xp, *w)
    out_pos_p = ref_attention.multi_head_attention(xpp, xpp, xpp, *w)
    assert not np.allclose(out_pos_p, out_pos[perm])  # positions break the symmetry


# ----------------------------------------------------------------------------- skewing
@pytest.mark.parametrize("side", SIDES)
def test_skewing_equals_the_naive_gather_exactly(side):
    rng = np.random.default_rng(4)
    for L in range(1, 40, 3):
        for d in (1, 2, 5, 16):
            # integer-valued float64 inputs: every dot product is exact, so any difference
            # would be an indexing error, not rounding
            q = rng.integers(-9, 10, (L, d)).astype(float)
            E = rng.integers(-9, 10, (L, d)).astype(float)
            naive = _call(side, "relative_logits_naive", q, E)
            skewed = _call(side, "relative_logits_skewed", q, E)
            np.testing.assert_array_equal(skewed, naive)
            assert not np.any(np.triu(skewed, 1))  # zeros above the diagonal
    q, E = rng.standard_normal((2, 2, 3, 64, 16))  # random reals, batched: rounding only
    np.testing.assert_allclose(
        _call(side, "relative_logits_skewed", q, E),
        _call(side, "relative_logits_naive", q, E),
        rtol=1e-13,
        atol=1e-13,
    )


def test_skew_is_pure_data_movement():
    torch.manual_seed(0)
    for L in (1, 2, 7, 64):
        A = torch.randn(3, L, L, dtype=torch.float32)
        D = fast.skew(A)
        i, j = np.tril_indices(L)
        assert torch.equal(D[:, i, j], A[:, i, j - i + L - 1])  # bit for bit


def test_music_transformer_is_shaw_variant_one_restricted_to_the_past():
    rng = np.random.default_rng(5)
    L, d = 7, 3
    q, E = rng.standard_normal((2, L, d))
    table = np.concatenate([E, np.zeros((L - 1, d))])  # offsets -(L-1)..L-1, future = 0
    np.testing.assert_allclose(
        np.tril(ref.relative_key_logits(q, table)), ref.relative_logits_naive(q, E), atol=1e-12
    )


def test_longer_E_r_uses_its_last_rows():
    rng = np.random.default_rng(6)
    q, E = rng.standard_normal((5, 4)), rng.standard_normal((9, 4))
    np.testing.assert_allclose(
        ref.relative_logits_skewed(q, E), ref.relative_logits_naive(q, E[-5:]), atol=1e-12
    )


def test_algorithm1_as_printed_is_wrong_and_the_correction_is_right():
    rng = np.random.default_rng(7)
    for L in (2, 3, 6):
        X = rng.integers(-5, 6, (L, 3)).astype(float)
        E = rng.integers(-5, 6, (L, 3)).astype(float)
        want = ref.relative_logits_naive(X, E)
        steps = algorithm1_steps(X, E)
        np.testing.assert_array_equal(steps["D"], want)
        assert steps["V"].size == L * (L + 1) == steps["C"].shape[0] * L  # L+1 rows in step 6
        printed = algorithm1_steps(X, E, mask="as printed")["D"]
        assert not np.array_equal(np.tril(printed), want)
        # with E_r in the other order (offset 0 first) the printed mask is still wrong
        flipped = algorithm1_steps(X, E[::-1], mask="as printed")["D"]
        lookback = np.array(
            [[X[i] @ E[i - j] if j <= i else 0 for j in range(L)] for i in range(L)]
        )
        assert not np.array_equal(np.tril(flipped), lookback)
    # for L = 1 there is nothing to mask and both agree
    X = np.array([[2.0]])
    assert algorithm1_steps(X, X, mask="as printed")["D"] == algorithm1_steps(X, X)["D"]


def test_skewed_gradients_equal_naive_gradients():
    torch.manual_seed(0)
    q = torch.randn(2, 6, 4, dtype=F64, requires_grad=True)
    E = torch.randn(6, 4, dtype=F64, requires_grad=True)
    w = torch.randn(2, 6, 6, dtype=F64)
    g1 = torch.autograd.grad((fast.relative_logits_skewed(q, E) * w).sum(), (q, E))
    g2 = torch.autograd.grad((fast.relative_logits_naive(q, E) * w).sum(), (q, E))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b)


# ----------------------------------------------------------------------------- rotary
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_rotary_scores_depend_on_the_offset_only(side, layout):
    rng = np.random.default_rng(8)
    q, k = rng.standard_normal((2, 1, 16))
    for m, n in ((3, 1), (10, 2), (0, 5)):
        scores = []
        for shift in (0, 1, 17, 1000):
            rq = _call(side, "rotary_embedding", q, np.array([m + shift]), layout=layout)
            rk = _call(side, "rotary_embedding", k, np.array([n + shift]), layout=layout)
            scores.append(float(rq[0] @ rk[0]))
        np.testing.assert_allclose(scores, scores[0], rtol=1e-10)


def test_rotary_parity_with_complex_and_rotate_half_formulations():
    torch.manual_seed(0)
    B, h, L, d = 2, 3, 10, 8
    x = torch.randn(B, h, L, d, dtype=F64)
    pos = torch.arange(L, dtype=F64)
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    angles = pos[:, None] * inv  # (L, d/2)
    # LLaMA's reference code: pairs (2i, 2i+1) as complex numbers times e^{i m w}
    xc = torch.view_as_complex(x.reshape(B, h, L, d // 2, 2))
    llama = torch.view_as_real(xc * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
    torch.testing.assert_close(fast.rotary_embedding(x), llama)
    # GPT-NeoX: x cos + rotate_half(x) sin with the angles repeated over both halves
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    rotate_half = torch.cat((-x[..., d // 2 :], x[..., : d // 2]), -1)
    neox = x * cos + rotate_half * sin
    torch.testing.assert_close(fast.rotary_embedding(x, layout="concatenated"), neox)


def test_rotary_keeps_norms_and_position_zero():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 10))
    r = ref.rotary_embedding(x)
    np.testing.assert_allclose(np.linalg.norm(r, axis=1), np.linalg.norm(x, axis=1))
    np.testing.assert_allclose(r[0], x[0])


def test_rotary_of_a_fixed_pair_is_the_sinusoidal_table():
    # rotating (1, 0) by m w gives (cos m w, sin m w): eq. (19) with sin and cos swapped
    L, d = 12, 8
    r = ref.rotary_embedding(np.tile([1.0, 0.0], (L, d // 2)))
    swap = np.arange(d) ^ 1
    np.testing.assert_allclose(r[:, swap], ref.sinusoidal_encoding(L, d), atol=1e-12)


# ----------------------------------------------------------------------------- the notes' errors
def test_notes_004_formula_as_printed():
    np.testing.assert_array_equal(printed_case_counts(8), [1, 0, 2, 0, 2, 0, 2, 0])
    printed = sinusoidal_as_printed(np.arange(5), 8)
    assert np.isnan(printed[:, 1::2]).all() and not np.isnan(printed[:, 0::2]).any()
    outside = sinusoidal_as_printed(np.arange(5), 8, cos_index="2k+1")
    np.testing.assert_allclose(outside, np.arange(5)[:, None] * outside[1])  # collinear rows
    assert np.linalg.matrix_rank(outside) == 1
    assert not np.any(outside[0])  # p_0 = 0: no linear map sends it to p_k
    # the correct table has full rank: its rows are not multiples of one vector
    assert np.linalg.matrix_rank(ref.sinusoidal_encoding(50, 8)) == 8


def test_binary_counter_table():
    table = binary_table(16, 4)
    np.testing.assert_array_equal(table[11], [1, 0, 1, 1])
    assert (table @ [8, 4, 2, 1] == np.arange(16)).all()
    with pytest.raises(ValueError, match="count up to 7"):
        binary_table(9, 3)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("side", SIDES)
def test_bad_inputs(side):
    T = (
        (lambda a: a)
        if side == "reference"
        else (lambda a: torch.as_tensor(np.asarray(a), dtype=F64))
    )
    m = ref if side == "reference" else fast
    with pytest.raises(ValueError, match="d_model must be even"):
        m.sinusoidal_encoding(T([1.0]), 5)
    with pytest.raises(ValueError, match="last dimension of x must be even"):
        m.rotary_embedding(T(np.ones((3, 5))))
    with pytest.raises(ValueError, match="layout must be one of"):
        m.sinusoidal_encoding(T([1.0]), 4, layout="halves")
    with pytest.raises(ValueError, match=r"base must be in \(0.0, inf\)"):
        m.sinusoidal_encoding(T([1.0]), 4, base=-1.0)
    with pytest.raises(ValueError, match="positions must be finite"):
        m.sinusoidal_encoding(T([np.nan]), 4)
    with pytest.raises(ValueError, match="positions of shape"):
        m.rotary_embedding(T(np.ones((3, 4))), T(np.arange(4.0)))
    with pytest.raises(ValueError, match="odd number 2K\\+1"):
        m.relative_bias(T([1.0, 2.0]), 3)
    with pytest.raises(ValueError, match="odd number 2K\\+1"):
        m.relative_key_logits(T(np.ones((3, 2))), T(np.ones((4, 2))))
    with pytest.raises(ValueError, match="needs offsets -3..0"):
        m.relative_logits_skewed(T(np.ones((4, 2))), T(np.ones((3, 2))))
    with pytest.raises(ValueError, match="same last dimension"):
        m.relative_logits_naive(T(np.ones((4, 2))), T(np.ones((4, 3))))
    with pytest.raises(ValueError, match="A must be square"):
        m.skew(T(np.ones((3, 4))))
    with pytest.raises(ValueError, match="table of shape"):
        m.add_position_table(T(np.ones((2, 3))), T(np.ones((5, 2))))
    with pytest.raises(TypeError, match="symmetric must be True or False"):
        m.alibi_bias(T([1.0]), 3, "yes")
    with pytest.raises(ValueError, match="length must be at least 1"):
        m.alibi_bias(T([1.0]), 0)
    with pytest.raises(ValueError, match="positions \\(a sequence length\\) must be at least 1"):
        m.sinusoidal_encoding(0, 4)


def test_accelerated_type_errors():
    with pytest.raises(TypeError, match="floating-point tensor"):
        fast.rotary_embedding(torch.ones(3, 4, dtype=torch.int64))
    with pytest.raises(TypeError, match="same dtype"):
        fast.relative_logits_skewed(torch.ones(3, 2), torch.ones(3, 2, dtype=F64))
    with pytest.raises(TypeError, match="real numbers"):
        fast.sinusoidal_encoding(torch.tensor([True]), 4)


# ----------------------------------------------------------------------------- models
def test_tasks_by_hand():
    cfg = pm.ExperimentConfig()
    g = torch.Generator().manual_seed(0)
    x, y = pm.make_batch("lag", 4, 20, cfg, g)
    assert (y[:, :3] == -100).all() and (y[:, 3:] == x[:, :-3]).all()
    x, y = pm.make_batch("recent", 64, 40, cfg, g)
    for b in range(4):
        last = None
        for t in range(40):
            if x[b, t] < cfg.n_markers:
                last = int(x[b, t])
            assert int(y[b, t]) == (-100 if last is None else last)
    with pytest.raises(ValueError, match="task must be one of"):
        pm.make_batch("copy", 1, 4, cfg, g)


def test_models_run_and_learned_tables_refuse_longer_inputs():
    tokens = torch.zeros(2, 9, dtype=torch.long)
    for scheme in pm.SCHEMES:
        m = pm.TinyPositionLM(scheme, 8, 8, 2, 1, 16, max_len=12)
        assert m(tokens).shape == (2, 9, 8)
    with pytest.raises(ValueError, match="cannot encode positions it has no row for"):
        pm.TinyPositionLM("learned", 8, 8, 2, 1, 16, max_len=8)(tokens)
    with pytest.raises(ValueError, match="scheme must be one of"):
        pm.TinyPositionLM("relative", 8, 8, 2, 1, 16, max_len=8)


@pytest.mark.portability
def test_shipped_models_reproduce_the_shipped_evaluation():
    cfg, models, results = pm.load_experiment()
    assert set(models) == {f"{t}/{s}" for t in cfg.tasks for s in cfg.schemes}
    first = str(cfg.seeds[0])  # the shipped weights are the first seed's
    for key, model in models.items():
        acc = pm.evaluate(model, key.split("/")[0], cfg)
        summary = pm.summarise(acc, cfg)
        for n, a in summary.items():
            assert abs(a - results["runs"][key]["by_seed"][first]["summary"][str(n)]) < 1e-3, key


@pytest.mark.slow
@pytest.mark.portability
def test_training_script_reproduces_a_shipped_model():
    """The fast subset: retrain one (task, scheme) with the shipped recipe and compare what is
    meaningful: the loss curve, the accuracies and the predictions. Never individual weights:
    the key bias gets gradients of ~1e-8 (it cancels in the softmax), Adam turns that rounding
    noise into full-size steps, and those weights wander differently on every CPU."""
    cfg, models, results = pm.load_experiment()
    lr = results["runs"]["recent/alibi"]["lr"]  # the rate the study chose for it
    model, losses = pm.train_one("recent", "alibi", cfg, lr=lr, seed=cfg.seeds[0])
    run = results["runs"]["recent/alibi"]["by_seed"][str(cfg.seeds[0])]
    assert abs(sum(losses[-50:]) / 50 - run["final_loss"]) < 0.02
    summary = pm.summarise(pm.evaluate(model, "recent", cfg), cfg)
    for n, a in summary.items():
        assert abs(a - run["summary"][str(n)]) < 0.02, n
    x, y = pm.eval_batch("recent", cfg)
    with torch.no_grad():
        ours, shipped = model(x).argmax(-1), models["recent/alibi"](x).argmax(-1)  # (B, L)
    scored = y != -100
    agree = float(((ours == shipped) & scored).sum() / scored.sum())
    assert agree > 0.97, f"the retrained model predicts like the shipped one on {agree:.1%}"


def test_closing_note_table_matches_the_shipped_results():
    """The table typed into the notebook's closing note is the seeds' mean the script recorded."""
    results = json.loads(data_path(pm.RESULTS_FILE).read_text())
    means = {
        key: {str(n): m for n, (m, _, _) in v.items()} for key, v in pm.seed_spread(results).items()
    }
    source = (ROOT / "notebooks" / "06_positional_encodings.py").read_text()
    rows = [line for line in source.splitlines() if line.startswith(("# | lag", "# | recent"))]
    assert len(rows) == 6
    for line in rows:
        cells = [c.strip() for c in line[2:].strip().strip("|").split("|")]
        task = cells[0].split(",")[0]
        n = cells[0].split("=")[-1].strip()
        for scheme, cell in zip(pm.SCHEMES, cells[1:], strict=True):
            assert abs(float(cell) - means[f"{task}/{scheme}"][n]) <= 6e-4, line


def test_shipped_results_file_is_consistent():
    results = json.loads(data_path(pm.RESULTS_FILE).read_text())
    cfg = results["config"]
    assert cfg["train_len"] == 32 and cfg["eval_lens"] == [32, 64, 128]
    assert data_path(pm.WEIGHTS_FILE).stat().st_size < 400_000  # "a few hundred KB at most"
    for run in results["runs"].values():
        assert len(run["by_seed"]) == len(cfg["seeds"]) >= 3
        assert all(len(r["per_position"]) == 128 for r in run["by_seed"].values())
        lrs = sorted(float(k) for k in run["lr_search"])
        assert lrs[0] < run["lr"] < lrs[-1], (
            "the chosen rate lies inside the grid it was chosen from"
        )


def test_sanity_ranges_of_the_shipped_study():
    """Section 6.9's reading, as sanity ranges on every seed (not the ranking of close pairs)."""
    runs = json.loads(data_path(pm.RESULTS_FILE).read_text())["runs"]

    def acc(key, n):
        return [r["summary"][str(n)] for r in runs[key]["by_seed"].values()]

    assert min(acc("lag/learned", 32)) > 0.99 and max(acc("lag/learned", 128)) < 0.35
    assert all(a > 0.95 for a in acc("recent/alibi", 128))  # ALiBi holds on 'recent'
    assert all(0.25 < a < 0.7 for a in acc("lag/alibi", 32))  # well above 1/16, far from 1
    assert max(acc("lag/none", 64)) < 0.3


# ----------------------------------------------------------------------------- widget
@pytest.mark.parametrize("kind", ["sinusoidal", "rotary"])
def test_widget_similarity_is_a_function_of_the_offset(kind):
    v = encoding_view(kind, d_model=16, base=100.0, n_positions=20, position=4)
    assert v["table"].shape == (20, 16) and v["similarity"].shape == (20, 20)
    for off in range(-19, 20):
        diag = np.diagonal(v["similarity"], off)
        np.testing.assert_allclose(diag, diag[0], atol=1e-12)
    np.testing.assert_allclose(v["row"], v["similarity"][4])
    np.testing.assert_allclose(v["wavelengths"][0], 2 * np.pi)


@pytest.mark.slow
def test_widget_checks_and_builds():
    with pytest.raises(ValueError, match="d_model must be even"):
        encoding_view(d_model=7)
    with pytest.raises(ValueError, match="position must be at most 9"):
        encoding_view(n_positions=10, position=10)
    assert "<img" in render_html(encoding_view("rotary", 8, 1e4, 10, 2))
    w = explorer(d_model=8, n_positions=10)
    kind, _, (n_slider, p_slider), out = (
        w.children[0],
        w.children[1],
        w.children[2].children,
        w.children[3],
    )
    kind.value = "rotary"
    assert "rot(q, m)" in out.value
    n_slider.value = 5
    assert p_slider.max == 4


# ----------------------------------------------------------------------------- benchmark
def test_benchmark_summary_and_theory():
    assert bench.theory_mb("naive", 1024) == 1024 * 1024 * 64 * 4 / 2**20
    rows = [
        {"L": 1024, "method": "naive", "peak_MB": 260.0, "ms": 50.0},
        {"L": 1024, "method": "skewed", "peak_MB": 8.0, "ms": 5.0},
    ]
    assert "target met" in bench.summary(rows)
    rows[1]["ms"] = 80.0
    assert "NOT met" in bench.summary(rows)


# ----------------------------------------------------------------------------- exercises
SOLUTIONS = {
    "sinusoidal": lambda n, d: ref.sinusoidal_encoding(n, d),
    "rotary": lambda x, p: ref.rotary_embedding(x, p),
    "skew": lambda A: ref.skew(A),
    "rotary_half": lambda x, p: ref.rotary_embedding(x, p, layout="concatenated"),
}


def _half_per_column(x, p):  # every column its own frequency: the usual rotate_half slip
    d = x.shape[1]
    angle = np.asarray(p, dtype=float)[:, None] * 10000.0 ** (-np.arange(d) / d)
    rotated = np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], axis=1)
    return x * np.cos(angle) + rotated * np.sin(angle)


def test_checkers_accept_solutions():
    assert check.sinusoidal_table(SOLUTIONS["sinusoidal"], require=True)
    assert check.rotary(SOLUTIONS["rotary"], require=True)
    assert check.skew_step(SOLUTIONS["skew"], require=True)
    assert check.rotary_half(SOLUTIONS["rotary_half"], require=True)

    def half_torch(x, p):  # a float32 tensor counts too
        return torch.from_numpy(SOLUTIONS["rotary_half"](x, p)).float()

    assert check.rotary_half(half_torch, require=True)
    for spelling in ("ALiBi", "alibi", " Alibi "):
        assert check.scheme_prediction(spelling, "alibi").passed


def _rotary_exponent(x, p, k):  # pair i turns at 10000^(k i / d): k = -2 is right
    d = x.shape[1]
    angle = np.asarray(p, dtype=float)[:, None] * 10000.0 ** (k * np.arange(d // 2) / d)
    out = np.empty(x.shape)
    out[:, 0::2] = x[:, 0::2] * np.cos(angle) - x[:, 1::2] * np.sin(angle)
    out[:, 1::2] = x[:, 0::2] * np.sin(angle) + x[:, 1::2] * np.cos(angle)
    return out


def _skew_masked(A):
    L = len(A)
    return np.asarray(A) * (np.add.outer(np.arange(L), np.arange(L)) >= L - 1)


def _skew_keeping_the_first_row(A):
    L = len(A)
    return np.pad(_skew_masked(A), ((0, 0), (1, 0))).reshape(L + 1, L)[:-1]


def _skew_padded_right(A):
    L = len(A)
    return np.pad(_skew_masked(A), ((0, 0), (0, 1))).reshape(L + 1, L)[1:]


def _no_mask_skew(A):
    L = len(A)
    return np.pad(A, ((0, 0), (1, 0))).reshape(L + 1, L)[1:]


@pytest.mark.parametrize(
    ("checker", "wrong", "words"),
    [
        (
            check.sinusoidal_table,
            lambda n, d: sinusoidal_as_printed(np.arange(n), d, cos_index="2k+1"),
            "multiplies the sine",
        ),
        (
            check.sinusoidal_table,
            lambda n, d: ref.sinusoidal_encoding(n, d, layout="concatenated"),
            "interleaves",
        ),
        (check.sinusoidal_table, lambda n, d: ref.sinusoidal_encoding(n, d)[:, ::-1], "wrong"),
        (
            check.sinusoidal_table,
            lambda n, d: ref.sinusoidal_encoding(np.arange(1, n + 1), d),
            "start at 1",
        ),
        (check.sinusoidal_table, lambda n, d: None, "return"),
        (check.rotary, lambda x, p: ref.rotary_embedding(x, -np.asarray(p)), "clockwise"),
        (check.rotary, lambda x, p: x, "forget to use the positions"),
        (
            check.rotary,
            lambda x, p: ref.rotary_embedding(x, p, layout="concatenated"),
            "i + d/2",
        ),
        (
            check.rotary,
            lambda x, p: ref.rotary_embedding(x, np.arange(len(p))),
            "row index 0..L-1",
        ),
        (check.rotary, lambda x, p: ref.rotary_embedding(x, np.asarray(p) + 1), "one position"),
        (check.rotary, lambda x, p: _rotary_exponent(x, p, -1.0), "you used -i/d"),
        (check.rotary, lambda x, p: _rotary_exponent(x, p, -4.0), "column index 2i"),
        (check.rotary, lambda x, p: _rotary_exponent(x, p, 2.0), "sign is flipped"),
        (check.skew_step, _no_mask_skew, "apply the mask"),
        (check.skew_step, _skew_keeping_the_first_row, "drop the first one"),
        (check.skew_step, lambda A: ref.skew(A).T, "transposed"),
        (check.skew_step, lambda A: ref.skew(np.asarray(A)[:, ::-1]), "offsets backwards"),
        (check.skew_step, _skew_padded_right, "on the left of A"),
        (
            check.skew_step,
            lambda A: algorithm1_steps(np.eye(len(A)), np.transpose(A), "as printed")["D"],
            "as printed",
        ),
        (check.skew_step, lambda A: np.asarray(A)[:, ::-1], "wrong values"),
        (check.rotary_half, lambda x, p: ref.rotary_embedding(x, p), "RoFormer's layout"),
        (
            check.rotary_half,
            lambda x, p: ref.rotary_embedding(x, -np.asarray(p), layout="concatenated"),
            "clockwise",
        ),
        (check.rotary_half, _half_per_column, "share the frequency"),
        (check.rotary_half, lambda x, p: x, "forget to use the positions"),
        (
            check.rotary_half,
            lambda x, p: ref.rotary_embedding(x, np.arange(len(p)), layout="concatenated"),
            "row index",
        ),
    ],
)
def test_checkers_explain_mistakes(checker, wrong, words):
    outcome = checker(wrong)
    assert not outcome and words in str(outcome), str(outcome)
    with pytest.raises(AssertionError):
        checker(wrong, require=True)


@pytest.mark.parametrize("scheme", pm.SCHEMES)
def test_model_and_attention_maps_follow_the_models_device(scheme):
    """Every tensor the model makes (positions, masks, biases) is made on its device: on the
    meta device (shapes only, like a GPU that is not there) a CPU-made tensor or a value read
    would fail."""
    model = pm.TinyPositionLM(scheme, 8, 8, 2, 2, 16, max_len=6).to("meta")
    tokens = torch.zeros(2, 5, dtype=torch.long, device="meta")
    assert model(tokens).device.type == "meta"
    maps = pm.attention_maps(model, tokens)
    assert len(maps) == 2 and maps[0].shape == (2, 2, 5, 5) and maps[0].device.type == "meta"


def test_tensor2tensor_table_differs_from_the_paper_by_more_than_a_permutation():
    from course_lib.positions.variants import tensor2tensor_encoding, tensor2tensor_frequencies

    d = 8
    w = tensor2tensor_frequencies(d)  # 10000^(-i/3), i = 0..3
    np.testing.assert_allclose(w, [1.0, 10000 ** (-1 / 3), 10000 ** (-2 / 3), 1e-4])
    table = tensor2tensor_encoding(5, d)
    for pos in range(5):  # an independent loop over the formula
        for i in range(d // 2):
            assert math.isclose(table[pos, i], math.sin(pos * w[i]), abs_tol=1e-15)
            assert math.isclose(table[pos, d // 2 + i], math.cos(pos * w[i]), abs_tol=1e-15)
    paper = ref.sinusoidal_encoding(5, d, layout="concatenated")
    assert not np.allclose(np.sort(table, axis=1), np.sort(paper, axis=1))
    with pytest.raises(ValueError, match="d_model must be even"):
        tensor2tensor_encoding(3, 5)


@pytest.mark.parametrize(
    ("garbage", "words"),
    [
        (None, "expected a function"),
        (lambda x, p: None, "returned None"),
        (lambda x, p: (v for v in x), "generator"),
        (lambda x, p: np.full_like(x, np.nan), "NaN"),
        (lambda x: x, "TypeError"),
        (lambda x, p: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_rotary_half_answers_garbage_with_a_message(garbage, words):
    outcome = check.rotary_half(garbage)
    assert not outcome.passed and words in str(outcome), str(outcome)


@pytest.mark.parametrize(
    ("prediction", "words"),
    [
        (None, "replace None"),
        (3, "as a string"),
        ("relative", "not one of the schemes"),
        ("learned", "ALiBi's bias depends only on the distance"),  # wrong, and told why
    ],
)
def test_scheme_prediction_names_what_is_wrong(prediction, words):
    outcome = check.scheme_prediction(prediction, "alibi")
    assert not outcome.passed and words in str(outcome), str(outcome)
