"""Chapter 2 (softmax): hand-derived values, parity with PyTorch and SciPy, masking, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import torch

import course_lib.softmax.accelerated as fast
import course_lib.softmax.reference as ref
from course_lib.softmax import exercises as check
from course_lib.softmax.widget import (
    distribution,
    entropy_curve,
    parse_logits,
    render_html,
    temperature_explorer,
)

INF = math.inf
SIDES = [ref, fast]
SIDE_IDS = ["reference", "accelerated"]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# (rtol, atol) against torch's own kernels in the same dtype
PARITY_TOL = {
    torch.float64: (1e-12, 1e-14),
    torch.float32: (1e-6, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
}


def as_np(out) -> np.ndarray:
    if isinstance(out, torch.Tensor):
        return out.detach().to(torch.float64).numpy()
    return np.asarray(out)


def call(module, name, x, **kw):
    """Call ``module.name`` with x as a NumPy array (reference) or a float64 tensor (PyTorch)."""
    fn = getattr(module, name)
    arg = torch.as_tensor(np.asarray(x, dtype=np.float64)) if module is fast else x
    return as_np(fn(arg, **kw))


# ----------------------------------------------------------------------------- hand values
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_notes_example(module):
    # softmax([2, 4, 4]) = [1, e^2, e^2] / (1 + 2 e^2)
    e2 = math.exp(2)
    want = np.array([1, e2, e2]) / (1 + 2 * e2)
    got = call(module, "softmax", [2.0, 4.0, 4.0])
    np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_allclose(got.round(3), [0.063, 0.468, 0.468])


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_log_forms_by_hand(module):
    np.testing.assert_allclose(call(module, "logsumexp", [0.0, 0.0, 0.0, 0.0]), math.log(4))
    np.testing.assert_allclose(
        call(module, "log_softmax", [1.0, 0.0]), [-math.log1p(math.exp(-1)), -math.log1p(math.e)]
    )
    # huge logits: the naive formula overflows in float64 beyond about 709.78
    np.testing.assert_allclose(call(module, "logsumexp", [800.0, 800.0]), 800 + math.log(2))
    np.testing.assert_allclose(call(module, "softmax", [800.0, 800.0 + math.log(3)]), [0.25, 0.75])


# ----------------------------------------------------------------------------- masking
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_masking_and_fully_masked_rows(module):
    x = np.array([[1.0, -INF, 1.0], [-INF, -INF, -INF], [3.0, -INF, -INF]])
    np.testing.assert_array_equal(
        call(module, "softmax", x), [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    )
    lsm = call(module, "log_softmax", x)
    np.testing.assert_allclose(lsm[0], [-math.log(2), -INF, -math.log(2)])
    np.testing.assert_array_equal(lsm[1:], [[-INF] * 3, [0.0, -INF, -INF]])
    np.testing.assert_allclose(call(module, "logsumexp", x), [1 + math.log(2), -INF, 3.0])
    # along axis 0 the columns are the slices: column 1 is fully masked
    np.testing.assert_array_equal(call(module, "softmax", x, axis=0)[:, 1], [0.0, 0.0, 0.0])


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_nan_and_plus_inf_give_nan_slices(module):
    x = np.array([[INF, 0.0], [np.nan, 0.0], [1.0, 2.0]])
    for name in ("softmax", "log_softmax", "online_softmax", "softmax_jacobian"):
        out = call(module, name, x)
        assert np.isnan(out[:2]).all(), name
        assert np.isfinite(out[2]).all(), name
    lse = call(module, "logsumexp", x)
    assert lse[0] == INF and np.isnan(lse[1]) and np.isfinite(lse[2])


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_fully_masked_rows_have_zero_gradient(name):
    x = torch.tensor([[0.5, -INF, 2.0], [-INF, -INF, -INF]], dtype=torch.float64)
    x.requires_grad_(True)
    out = getattr(fast, name)(x)
    weights = torch.ones_like(out).masked_fill(out.isinf(), 0.0)  # ignore the -inf outputs
    (torch.where(out.isinf(), 0.0, out) * weights).sum().backward()
    assert torch.isfinite(x.grad).all()
    torch.testing.assert_close(x.grad[1], torch.zeros(3, dtype=torch.float64))


# ----------------------------------------------------------------------------- parity
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_parity_with_torch(dtype, axis):
    g = torch.Generator().manual_seed(0)
    x = (4 * torch.randn(3, 5, 7, generator=g, dtype=torch.float64)).to(dtype)
    x[0, 1, 2] = -INF  # masked entries are part of the contract
    rtol, atol = PARITY_TOL[dtype]
    torch.testing.assert_close(
        fast.softmax(x, axis=axis), torch.softmax(x, axis), rtol=rtol, atol=atol
    )
    torch.testing.assert_close(
        fast.log_softmax(x, axis=axis), torch.log_softmax(x, axis), rtol=rtol, atol=atol
    )
    torch.testing.assert_close(
        fast.logsumexp(x, axis=axis), torch.logsumexp(x, axis), rtol=rtol, atol=atol
    )
    assert fast.softmax(x, axis=axis).dtype == dtype


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
def test_parity_with_scipy(axis):
    rng = np.random.default_rng(1)
    x = 10 * rng.standard_normal((2, 3, 4))
    x[1, 2, 3] = -INF
    np.testing.assert_allclose(ref.softmax(x, axis), scipy.special.softmax(x, axis), rtol=1e-13)
    np.testing.assert_allclose(
        ref.log_softmax(x, axis), scipy.special.log_softmax(x, axis), rtol=1e-13
    )
    np.testing.assert_allclose(ref.logsumexp(x, axis), scipy.special.logsumexp(x, axis), rtol=1e-13)


# ----------------------------------------------------------------------------- properties
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_properties_sum_to_one_shift_invariance_monotone(module):
    rng = np.random.default_rng(2)
    x = 3 * rng.standard_normal((6, 9))
    s = call(module, "softmax", x)
    np.testing.assert_allclose(s.sum(axis=-1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(call(module, "softmax", x + 123.4), s, rtol=1e-12)
    order = np.argsort(x, axis=-1)
    assert (np.diff(np.take_along_axis(s, order, axis=-1), axis=-1) >= 0).all()
    np.testing.assert_allclose(np.exp(call(module, "log_softmax", x)), s, rtol=1e-13)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
@pytest.mark.parametrize(
    ("x", "axis", "error", "words"),
    [
        (np.zeros((2, 0)), -1, ValueError, "empty"),
        (np.float64(1.0), -1, ValueError, "at least 1 dimensions"),
        (np.ones((2, 3)), 2, ValueError, r"axis=2 is out of range .* 2 dimensions"),
        (np.ones((2, 3)), 1.0, TypeError, "axis must be an int"),
        (np.array(["a", "b"]), -1, TypeError, "real numbers"),
        (np.ones(2, dtype=complex), -1, TypeError, "real numbers"),
    ],
)
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_bad_input(module, name, x, axis, error, words):
    with pytest.raises(error, match=words):
        getattr(module, name)(x, axis=axis)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_integers_promoted_by_reference_rejected_as_tensors(name):
    np.testing.assert_allclose(
        getattr(ref, name)(np.array([1, 2, 3])), getattr(ref, name)(np.array([1.0, 2.0, 3.0]))
    )
    with pytest.raises(TypeError, match="floating-point tensor, got dtype torch.int64"):
        getattr(fast, name)(torch.tensor([1, 2, 3]))
    # a plain list is converted by NumPy's rules (float64), on both sides
    assert getattr(fast, name)([1, 2, 3]).dtype == torch.float64


def test_masking_agrees_across_sides_for_log_forms_and_stats():
    rng = np.random.default_rng(3)
    x = 5 * rng.standard_normal((4, 6))
    x[rng.random(x.shape) < 0.4] = -INF
    x[2] = -INF
    xt = torch.from_numpy(x)
    for name in ("log_softmax", "logsumexp", "softmax", "softmax_jacobian"):
        np.testing.assert_allclose(
            as_np(getattr(fast, name)(xt)), getattr(ref, name)(x), rtol=1e-12, atol=1e-15
        )
    for chunk in (1, 4, 100):
        m_r, l_r = ref.online_softmax_stats(x, chunk)
        m_f, l_f = fast.online_softmax_stats(xt, chunk)
        np.testing.assert_array_equal(as_np(m_f), m_r)
        np.testing.assert_allclose(as_np(l_f), l_r, rtol=1e-12)
        assert m_r[2] == -INF and l_r[2] == 0.0  # the empty state
        with np.errstate(divide="ignore"):  # log(0) = -inf for the empty slice
            np.testing.assert_allclose(m_r + np.log(l_r), ref.logsumexp(x), rtol=1e-12)


# ----------------------------------------------------------------------------- two classes, temperature
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_sigmoid_is_the_two_class_softmax(module):
    z = np.linspace(-30, 30, 13)
    two = np.stack([z, np.zeros_like(z)], axis=-1)  # logits (z, 0)
    np.testing.assert_allclose(call(module, "sigmoid", z), call(module, "softmax", two)[:, 0])
    np.testing.assert_allclose(call(module, "sigmoid", z), scipy.special.expit(z), rtol=1e-14)
    assert call(module, "sigmoid", np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_temperature_limits(module):
    x = np.array([[1.0, 3.0, 3.0, -INF], [0.0, -1.0, 2.0, 1.0], [-INF] * 4])
    t0 = call(module, "softmax_with_temperature", x, temperature=0)
    np.testing.assert_array_equal(t0, [[0, 0.5, 0.5, 0], [0, 0, 1, 0], [0, 0, 0, 0]])
    tinf = call(module, "softmax_with_temperature", x, temperature=INF)
    np.testing.assert_allclose(tinf, [[1 / 3, 1 / 3, 1 / 3, 0], [0.25] * 4, [0] * 4])
    # T = 2 is the softmax of x / 2; small and large T approach the limits
    np.testing.assert_allclose(
        call(module, "softmax_with_temperature", x, temperature=2.0), ref.softmax(x / 2)
    )
    np.testing.assert_allclose(
        call(module, "softmax_with_temperature", x, temperature=1e-3), t0, atol=1e-12
    )
    np.testing.assert_allclose(
        call(module, "softmax_with_temperature", x, temperature=1e6), tinf, atol=1e-5
    )
    nan_row = call(module, "softmax_with_temperature", np.array([np.nan, 0.0]), temperature=0)
    assert np.isnan(nan_row).all()


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_top_k_by_hand(module):
    x = np.array([[1.0, 3.0, 2.0, 0.0], [2.0, 2.0, 1.0, -INF]])
    np.testing.assert_array_equal(
        call(module, "top_k_filter", x, k=2), [[-INF, 3.0, 2.0, -INF], [2.0, 2.0, -INF, -INF]]
    )
    np.testing.assert_array_equal(
        call(module, "top_k_filter", x, k=1)[1], [2.0, 2.0, -INF, -INF]
    )  # ties kept
    np.testing.assert_array_equal(call(module, "top_k_filter", x, k=10), x)
    np.testing.assert_array_equal(
        call(module, "top_k_filter", x, k=1, axis=0),
        [[-INF, 3.0, 2.0, 0.0], [2.0, -INF, -INF, -INF]],
    )


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_top_p_by_hand(module):
    probs = np.array([0.05, 0.5, 0.15, 0.3])
    x = np.log(probs)
    kept = {
        p: np.isfinite(call(module, "top_p_filter", x, p=p)) for p in (0.3, 0.75, 0.85, 0.97, 1.0)
    }
    assert kept[0.3].tolist() == [False, True, False, False]  # 0.5 alone is enough
    assert kept[0.75].tolist() == [False, True, False, True]  # 0.5 + 0.3
    assert kept[0.85].tolist() == [False, True, True, True]  # + 0.15 = 0.95
    assert kept[0.97].tolist() == [True, True, True, True]
    assert kept[1.0].all()
    # ties at the boundary are kept; a fully masked slice stays masked
    np.testing.assert_array_equal(
        np.isfinite(call(module, "top_p_filter", np.array([1.0, 1.0, 0.0]), p=0.2)),
        [True, True, False],
    )
    assert np.isneginf(call(module, "top_p_filter", np.array([-INF, -INF]), p=0.5)).all()


def test_top_p_matches_the_nucleus_definition_on_random_logits():
    """The smallest set of top entries whose probability reaches p (Holtzman et al.)."""
    rng = np.random.default_rng(4)
    for _ in range(50):
        x = 2 * rng.standard_normal(8)
        p = rng.uniform(0.05, 0.99)
        probs = ref.softmax(x)
        order = np.argsort(-probs)
        n = int(np.searchsorted(np.cumsum(probs[order]), p)) + 1
        want = np.zeros(8, dtype=bool)
        want[order[:n]] = True
        for module in SIDES:
            assert (np.isfinite(call(module, "top_p_filter", x, p=p)) == want).all()


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_sampling_probs_composes_the_filters(module):
    x = np.array([2.0, 1.0, 0.0, -1.0])
    np.testing.assert_allclose(call(module, "sampling_probs", x), ref.softmax(x))
    np.testing.assert_allclose(
        call(module, "sampling_probs", x, top_k=2), ref.softmax([2.0, 1.0, -INF, -INF])
    )
    # T = 0.5: probabilities (0.867, 0.117, 0.016, 0.002); top-p 0.9 keeps two
    np.testing.assert_allclose(
        call(module, "sampling_probs", x, temperature=0.5, top_p=0.9),
        ref.softmax([4.0, 2.0, -INF, -INF]),
    )
    np.testing.assert_array_equal(call(module, "sampling_probs", x, temperature=0), [1, 0, 0, 0])


def test_sampling_probs_keeps_16_bit_dtypes():
    x = torch.tensor([2.0, 1.0, 0.0, -1.0], dtype=torch.bfloat16)
    out = fast.sampling_probs(x, temperature=0.7, top_k=3, top_p=0.9)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(
        out.double(),
        torch.from_numpy(ref.sampling_probs(x.double().numpy(), 0.7, 3, 0.9)),
        atol=1e-2,
        rtol=1e-2,
    )


# ----------------------------------------------------------------------------- Jacobian
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_jacobian_matches_autograd(dtype):
    x = torch.randn(3, 5, dtype=dtype, generator=torch.Generator().manual_seed(5))
    J = fast.softmax_jacobian(x)  # (3, 5, 5)
    for b in range(3):
        auto = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, -1), x[b])
        torch.testing.assert_close(J[b], auto)
    np.testing.assert_allclose(
        ref.softmax_jacobian(x.double().numpy()), J.double().numpy(), atol=1e-6
    )
    torch.testing.assert_close(J, J.transpose(-1, -2))  # symmetric
    torch.testing.assert_close(J.sum(-1), torch.zeros(3, 5, dtype=dtype))  # rows sum to 0


def test_a_zero_jacobian_is_not_called_the_logits_mistake():
    """At x = 0, diag(x) - x x^T is 0 too: a placeholder of zeros is not told it used x."""
    outcome = check.softmax_jacobian(lambda x: np.zeros((len(x), len(x))))
    assert not outcome and "logits" not in str(outcome)


def test_jacobian_axis_and_hand_value():
    x = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])  # softmax along axis 0 is uniform
    J = ref.softmax_jacobian(x, axis=0)  # (2, 3, 3): one Jacobian per column
    assert J.shape == (2, 3, 3)
    np.testing.assert_allclose(J[0], np.diag([1 / 3] * 3) - np.full((3, 3), 1 / 9))
    J2 = fast.softmax_jacobian(torch.from_numpy(x), axis=0)
    np.testing.assert_allclose(J2.numpy(), J)


@pytest.mark.parametrize("axis", [-1, 0])
def test_vjp_matches_autograd_and_the_jacobian(axis):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 6, dtype=torch.float64, generator=g, requires_grad=True)
    up = torch.randn(4, 6, dtype=torch.float64, generator=g)
    (auto,) = torch.autograd.grad(torch.softmax(x, axis), x, up)
    torch.testing.assert_close(fast.softmax_vjp(x.detach(), up, axis=axis), auto)
    np.testing.assert_allclose(
        ref.softmax_vjp(x.detach().numpy(), up.numpy(), axis=axis), auto.numpy(), rtol=1e-12
    )
    if axis == -1:
        J = ref.softmax_jacobian(x.detach().numpy())
        np.testing.assert_allclose(np.einsum("bij,bi->bj", J, up.numpy()), auto.numpy(), rtol=1e-12)


# ----------------------------------------------------------------------------- online softmax
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
@pytest.mark.parametrize("chunk", [1, 3, 64, 1000])
def test_online_softmax_equals_softmax(module, chunk):
    rng = np.random.default_rng(7)
    x = 20 * rng.standard_normal((3, 257))
    x[0, :100] = -INF
    x[1] = -INF
    for axis in (-1, 0):
        np.testing.assert_allclose(
            call(module, "online_softmax", x, chunk_size=chunk, axis=axis),
            ref.softmax(x, axis),
            rtol=1e-12,
            atol=1e-300,
        )


def test_online_softmax_float32_large_vector_and_autograd():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(200_003, generator=g)  # float32, an uneven last chunk
    out = fast.online_softmax(x, chunk_size=4096)
    # within 1e-6 of the exact softmax of these float32 numbers (computed in float64); the
    # error left is the rounding of x - m to float32 before exp, as in torch.softmax
    exact = torch.softmax(x.double(), -1)
    torch.testing.assert_close(out.double(), exact, rtol=1e-6, atol=0)
    torch.testing.assert_close(out, torch.softmax(x, -1), rtol=5e-6, atol=0)
    xg = torch.randn(2, 10, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: fast.online_softmax(v, chunk_size=3), (xg,))
    with torch.no_grad():
        y = fast.online_softmax(x.half(), chunk_size=1000)
    assert y.dtype == torch.float16
    torch.testing.assert_close(y.float(), torch.softmax(x.half().float(), -1), rtol=1e-2, atol=1e-6)


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_merge_is_associative_and_matches_the_whole(module):
    rng = np.random.default_rng(9)
    parts = [4 * rng.standard_normal(n) for n in (3, 5, 2)]

    def stats(v):
        return v.max(), np.exp(v - v.max()).sum()

    def merge(a, b):
        args = [np.asarray(v) for v in (*a, *b)]
        if module is fast:
            args = [torch.from_numpy(v) for v in args]
        return tuple(float(as_np(v)) for v in module.merge_softmax_stats(*args))

    s1, s2, s3 = (stats(v) for v in parts)
    left, right = merge(merge(s1, s2), s3), merge(s1, merge(s2, s3))
    whole = stats(np.concatenate(parts))
    np.testing.assert_allclose(left, whole, rtol=1e-13)
    np.testing.assert_allclose(right, whole, rtol=1e-13)
    np.testing.assert_allclose(merge((-INF, 0.0), s1), s1)  # the empty state is neutral
    np.testing.assert_allclose(merge((-INF, 0.0), (-INF, 0.0)), (-INF, 0.0))


# ----------------------------------------------------------------------------- cross-entropy
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_cross_entropy_matches_torch(reduction, dtype):
    g = torch.Generator().manual_seed(10)
    logits = (3 * torch.randn(2, 5, 7, generator=g)).to(dtype)  # (B, L, C)
    t = torch.randint(0, 7, (2, 5), generator=g)
    t[0, 1] = -100
    ours = fast.cross_entropy(logits, t, reduction=reduction)
    theirs = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), t, reduction=reduction
    )  # classes on dim 1
    rtol, atol = PARITY_TOL[dtype]
    torch.testing.assert_close(ours, theirs, rtol=max(rtol, 1e-6), atol=max(atol, 1e-6))
    np.testing.assert_allclose(
        ref.cross_entropy(logits.double().numpy(), t.numpy(), reduction=reduction),
        as_np(theirs.double())
        if dtype == torch.float64
        else as_np(fast.cross_entropy(logits.double(), t, reduction=reduction)),
        rtol=1e-12,
    )
    # classes on another axis
    torch.testing.assert_close(
        fast.cross_entropy(logits.transpose(1, 2), t, axis=1, reduction=reduction), ours
    )


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 5, 2, 2])
    fast.cross_entropy(x, t, reduction="sum").backward()
    want = torch.softmax(x.detach(), -1) - torch.nn.functional.one_hot(t, 6).double()
    torch.testing.assert_close(x.grad, want)


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_cross_entropy_large_margins_and_all_ignored(module):
    x = np.array([[1000.0, 0.0], [0.0, 1000.0]])
    t = np.array([1, 1])
    got = call(
        module,
        "cross_entropy",
        x,
        targets=torch.from_numpy(t) if module is fast else t,
        reduction="none",
    )
    np.testing.assert_allclose(got, [1000.0, 0.0])
    all_ignored = np.array([-100, -100])
    arg = torch.from_numpy(all_ignored) if module is fast else all_ignored
    assert np.isnan(call(module, "cross_entropy", x, targets=arg))  # mean over nothing


# ----------------------------------------------------------------------------- more bad input
@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
@pytest.mark.parametrize(
    ("name", "kwargs", "error", "words"),
    [
        ("softmax_with_temperature", {"temperature": -1.0}, ValueError, "temperature must be in"),
        ("softmax_with_temperature", {"temperature": float("nan")}, ValueError, "temperature"),
        ("softmax_with_temperature", {"temperature": "hot"}, TypeError, "real number"),
        ("top_k_filter", {"k": 0}, ValueError, "k must be at least 1"),
        ("top_k_filter", {"k": 1.5}, TypeError, "k must be an int"),
        ("top_p_filter", {"p": 0.0}, ValueError, r"p must be in \(0.0, 1.0\]"),
        ("top_p_filter", {"p": 1.5}, ValueError, "p must be in"),
        ("sampling_probs", {"top_k": 0}, ValueError, "top_k must be at least 1"),
        ("sampling_probs", {"top_p": -0.1}, ValueError, "top_p must be in"),
        ("online_softmax", {"chunk_size": 0}, ValueError, "chunk_size must be at least 1"),
        ("online_softmax_stats", {"chunk_size": True}, TypeError, "chunk_size must be an int"),
    ],
)
def test_bad_parameters(module, name, kwargs, error, words):
    x = np.array([1.0, 2.0, 3.0])
    arg = torch.from_numpy(x) if module is fast else x
    with pytest.raises(error, match=words):
        getattr(module, name)(arg, **kwargs)


@pytest.mark.parametrize("module", SIDES, ids=SIDE_IDS)
def test_bad_targets_grads_and_states(module):
    def t(a):
        return torch.as_tensor(np.asarray(a)) if module is fast else np.asarray(a)

    logits = t(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"class indices in 0..2 .* got 3"):
        module.cross_entropy(logits, t([0, 3]))
    with pytest.raises(TypeError, match="integer class indices"):
        module.cross_entropy(logits, t([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"without the class axis \(2,\), got \(3,\)"):
        module.cross_entropy(logits, t([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        module.cross_entropy(logits, t([0, 1]), reduction="avg")
    with pytest.raises(ValueError, match=r"grad must have the shape of x \(2, 3\), got \(3,\)"):
        module.softmax_vjp(logits, t(np.ones(3)))
    with pytest.raises(ValueError, match="l1 is a sum of exponentials"):
        module.merge_softmax_stats(t(0.0), t(-1.0), t(0.0), t(1.0))
    with pytest.raises(ValueError, match="l2 must have the shape of m1"):
        module.merge_softmax_stats(t([0.0]), t([1.0]), t([0.0]), t([1.0, 2.0]))


def test_pytorch_side_rejects_mixed_devices_and_dtypes():
    x = torch.zeros(2, 3)
    with pytest.raises(TypeError, match="same dtype"):
        fast.softmax_vjp(x, torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="floating-point tensor"):
        fast.top_k_filter(torch.tensor([1, 2]), 1)


def test_naive_softmax_overflows_where_the_stable_one_does_not():
    for dtype, limit in ((torch.float32, 88.72), (torch.float16, 11.09)):
        ok = torch.tensor([limit - 0.1, 0.0], dtype=dtype)
        bad = torch.tensor([limit + 0.1, 0.0], dtype=dtype)
        assert torch.isfinite(fast.naive_softmax(ok)).all()
        assert torch.isnan(fast.naive_softmax(bad)).any()
        assert torch.isfinite(fast.softmax(bad)).all()
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(ref.naive_softmax([710.0, 0.0])).any()
    assert np.isfinite(ref.naive_softmax([709.0, 0.0])).all()


# ----------------------------------------------------------------------------- widget
def test_widget_parse_and_distribution():
    np.testing.assert_array_equal(parse_logits(" 1,2  -inf "), [1.0, 2.0, -INF])
    for bad, words in (("", "at least one number"), ("1, nan", "NaN"), ("1, inf", "finite")):
        with pytest.raises(ValueError, match=words):
            parse_logits(bad)
    d = distribution([2.0, 4.0, 4.0])
    np.testing.assert_allclose(d["probs"], ref.softmax([2.0, 4.0, 4.0]))
    cold, hot = distribution([1.0, 2.0, 3.0], 0.0), distribution([1.0, 2.0, 3.0], float("inf"))
    assert cold["entropy_bits"] == 0.0 and cold["effective_choices"] == 1.0
    assert hot["entropy_bits"] == pytest.approx(math.log2(3))
    assert distribution([1.0, 2.0, 3.0], top_k=2)["kept"].tolist() == [False, True, True]
    assert distribution([1.0, 2.0, 3.0], top_p=0.5)["kept"].tolist() == [False, False, True]
    with pytest.raises(ValueError, match="top_p must be in"):
        distribution([1.0], top_p=0.0)
    curve = entropy_curve([0.0, 1.0, 2.0], [0.0, 0.5, 1.0, 5.0, float("inf")])
    assert (np.diff(curve) > 0).all() and curve[-1] == pytest.approx(math.log2(3))


def test_widget_html_and_controls():
    html_text = render_html([1.0, 2.0], 1.0, labels=["cat", "dog"])
    assert "cat" in html_text and "dog" in html_text and "entropy" in html_text
    with pytest.raises(ValueError, match="one name per logit"):
        render_html([1.0, 2.0], labels=["cat"])
    box = temperature_explorer("1, 2, 3")
    text, sliders, out = box.children
    temp, k, p = sliders.children
    assert "0.665" in out.value  # softmax([1, 2, 3]) at T = 1
    temp.value = 100.0
    assert "0.337" in out.value  # nearly uniform: softmax([1, 2, 3] / 100)
    k.value = 1
    assert "1.000" in out.value
    text.value = "1, two"
    assert "not a number" in out.value  # an error message, not an exception


# ----------------------------------------------------------------------------- exercise checkers
def _sm(x):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _jac(x):
    s = _sm(x)
    return np.diag(s) - np.outer(s, s)


def _smoothed_grad(z, t, eps):
    q = np.full(len(z), eps / len(z))
    q[t] += 1 - eps
    return _sm(z) - q


def _top_p_keep(probs, p):
    probs = np.asarray(probs, dtype=float)
    ranked = np.sort(probs)[::-1]
    n = int(np.searchsorted(np.cumsum(ranked), p)) + 1
    return probs >= ranked[min(n, len(ranked)) - 1]


def test_checkers_accept_solutions():
    assert check.stable_softmax(_sm, require=True)
    assert check.smoothed_ce_gradient(_smoothed_grad, require=True)
    assert check.top_p(_top_p_keep, require=True)
    assert check.softmax_jacobian(_jac, require=True)
    # the library's own functions pass too
    assert check.stable_softmax(ref.softmax)
    assert check.top_p(lambda pr, p: np.isfinite(ref.top_p_filter(np.log(pr), p)))
    # every form the exercise texts allow: tensors, lists, float32, 0/1 masks
    assert check.smoothed_ce_gradient(lambda z, t, e: torch.from_numpy(_smoothed_grad(z, t, e)))
    assert check.smoothed_ce_gradient(lambda z, t, e: _smoothed_grad(z, t, e).astype(np.float32))
    assert check.top_p(lambda pr, p: _top_p_keep(pr, p).tolist())
    assert check.top_p(lambda pr, p: torch.from_numpy(_top_p_keep(pr, p)))
    assert check.top_p(lambda pr, p: _top_p_keep(pr, p).astype(int))


def test_the_smoothed_gradient_is_autograds():
    """The exercise's answer, softmax(z) - q, against PyTorch's label_smoothing cross-entropy."""
    z = torch.tensor([1.5, -0.3, 0.2, 2.0], dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(z[None], torch.tensor([2]), label_smoothing=0.1)
    loss.backward()
    np.testing.assert_allclose(z.grad.numpy(), _smoothed_grad(z.detach().numpy(), 2, 0.1))


def _ranked_keep(probs, p, count):
    probs = np.asarray(probs, dtype=float)
    ranked = np.sort(probs)[::-1]
    return probs >= ranked[max(1, min(count, len(ranked))) - 1]


def _naive(x):
    e = np.exp(np.asarray(x, dtype=float))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(
    ("checker", "wrong", "words"),
    [
        (check.stable_softmax, _naive, "subtract the maximum"),
        (check.stable_softmax, lambda x: _naive(x - np.max(x)), "each row's own maximum"),
        (
            check.stable_softmax,
            lambda x: _sm(np.asarray(x).T).T if np.ndim(x) == 2 else _sm(x),
            "column",
        ),
        (check.stable_softmax, lambda x: None, "return"),
        (check.stable_softmax, lambda x: 1 / 0, "ZeroDivisionError"),
        (check.stable_softmax, lambda: 0, "positional argument"),
        (check.stable_softmax, lambda x: (v for v in x), "generator"),
        (check.stable_softmax, lambda x: b"x", "bytes"),
        (
            check.smoothed_ce_gradient,
            lambda z, t, e: _sm(z) - np.eye(len(z))[t],
            "left out the smoothing",
        ),
        (check.smoothed_ce_gradient, lambda z, t, e: -_smoothed_grad(z, t, e), "sign is flipped"),
        (
            check.smoothed_ce_gradient,
            lambda z, t, e: _sm(z) - np.where(np.arange(len(z)) == t, 1 - e, e / (len(z) - 1)),
            "K - 1 wrong classes",
        ),
        (
            check.smoothed_ce_gradient,
            lambda z, t, e: _naive(z) - (_sm(z) - _smoothed_grad(z, t, e)),
            "stable way",
        ),
        (check.smoothed_ce_gradient, lambda z, t, e: None, "return"),
        (check.smoothed_ce_gradient, lambda z, t: 0, "positional argument"),
        (check.smoothed_ce_gradient, lambda z, t, e: "grad", "not an array"),
        (
            check.top_p,
            lambda pr, p: _ranked_keep(pr, p, int(np.sum(np.cumsum(np.sort(pr)[::-1]) <= p)) + 1),
            "not > p",
        ),
        (
            check.top_p,
            lambda pr, p: _ranked_keep(pr, p, int(np.sum(np.cumsum(np.sort(pr)[::-1]) < p))),
            "brings the total to p",
        ),
        (
            check.top_p,
            lambda pr, p: np.isin(
                np.arange(len(pr)),
                np.argsort(-np.asarray(pr), kind="stable")[
                    : int(np.searchsorted(np.cumsum(np.sort(pr)[::-1]), p)) + 1
                ],
            ),
            "tied with the last one kept",
        ),
        (
            check.top_p,
            lambda pr, p: np.arange(len(pr)) <= min(int(np.sum(np.cumsum(pr) < p)), len(pr) - 1),
            "in the order given",
        ),
        (check.top_p, lambda pr, p: np.nonzero(_top_p_keep(pr, p))[0], "indices"),
        (check.top_p, lambda pr, p: pr, "True/False"),
        (check.top_p, lambda pr, p: None, "return"),
        (check.top_p, lambda pr, p: "keep", "boolean array"),
        (check.top_p, "top-p", "expected a function"),
        (check.softmax_jacobian, lambda x: -np.outer(_sm(x), _sm(x)), "diagonal"),
        (check.softmax_jacobian, lambda x: np.diag(_sm(x)) - _sm(x), "outer product"),
        (check.softmax_jacobian, lambda x: np.outer(_sm(x), _sm(x)) - np.diag(_sm(x)), "flipped"),
        (check.softmax_jacobian, lambda x: np.diag(_sm(x)) + np.outer(_sm(x), _sm(x)), "not add"),
        (check.softmax_jacobian, lambda x: np.diag(x) - np.outer(x, x), "used the logits"),
        (check.softmax_jacobian, lambda x: np.eye(len(x)) - _sm(x)[None, :], "log-softmax"),
        (check.softmax_jacobian, lambda x: _sm(x) * (1 - _sm(x)), "only the diagonal"),
    ],
)
def test_checkers_explain_mistakes(checker, wrong, words):
    outcome = checker(wrong)
    assert not outcome and words in str(outcome), str(outcome)
    with pytest.raises(AssertionError):
        checker(wrong, require=True)


def test_softmax_jacobian_names_subtracting_the_vector():
    out = check.softmax_jacobian(lambda x: np.diag(_sm(x)) - _sm(x)[None, :])
    assert not out and "not the vector s" in str(out)
    out = check.softmax_jacobian(lambda x: np.diag(_sm(x)))
    assert not out and "s s^T is missing" in str(out)
