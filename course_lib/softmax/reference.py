"""Softmax and its relatives, written to be read next to the equations (Chapter 2).

The notes define the softmax of a vector z in R^K ({cite}`strabel2023transformers`, Definition 1.1,
eq. 4) as ``sigma(z)_i = exp(z_i) / sum_j exp(z_j)``. Every function here applies it along one
``axis`` of an array (default: the last), computes in float64 and follows these conventions, the
same as the PyTorch twins in :mod:`course_lib.softmax.accelerated`:

* **Stable.** The maximum of each slice is subtracted before ``exp``: the result is unchanged
  (the factor ``exp(-max)`` cancels) and no ``exp`` can overflow.
* **Masking.** An entry equal to ``-inf`` gets probability exactly 0. A slice whose entries are
  *all* ``-inf`` gets all zeros from :func:`softmax` (``-inf`` from :func:`log_softmax` and
  :func:`logsumexp`), not NaN: in attention such a slice is a query with nothing it may attend
  to, so it should contribute nothing; a NaN would spread into every later sum and gradient.
* **Bad values are loud.** A slice containing NaN or ``+inf`` gives NaN in every entry of
  :func:`softmax` and :func:`log_softmax`, as ``torch.softmax`` does (:func:`logsumexp` returns
  NaN or ``+inf``, its correct value). They are not valid logits; a finite answer would hide a bug.
* **Input.** Anything array-like of real numbers, at least 1-D, not empty. Integers and booleans
  are *promoted* to float64, like everything the references touch.

Equation numbers (2.x) are those of the chapter's notebook, ``notebooks/02_softmax.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from course_lib.checks import as_array, check_axis, check_int, check_real, check_same_shape
from course_lib.softmax.checks import (
    bad_target_error,
    check_reduction,
    check_target_kind,
    check_target_shape,
)

__all__ = [
    "cross_entropy",
    "log_softmax",
    "logsumexp",
    "merge_softmax_stats",
    "naive_softmax",
    "online_softmax",
    "online_softmax_stats",
    "sampling_probs",
    "sigmoid",
    "softmax",
    "softmax_jacobian",
    "softmax_vjp",
    "softmax_with_temperature",
    "top_k_filter",
    "top_p_filter",
]

#: Default chunk length of the online (streaming) softmax.
CHUNK = 4096


# ----------------------------------------------------------------------------- input checks
def _logits(x: Any, axis: int, name: str = "x") -> tuple[np.ndarray, int]:
    """Check and convert the logits; return them (float64) and the axis as 0..ndim-1."""
    arr = as_array(x, name, min_ndim=1)
    return arr, check_axis(axis, arr.ndim)


def _shift(x: np.ndarray, axis: int) -> np.ndarray:
    """The maximum of each slice (keepdims), with fully masked slices (max = -inf) shifted by 0."""
    m = np.max(x, axis=axis, keepdims=True)
    return np.where(m == -np.inf, 0.0, m)


# ----------------------------------------------------------------------------- the definition
def naive_softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Eq. (4) exactly as printed, ``exp(x_i) / sum_j exp(x_j)``: for showing how it fails.

    ``exp`` overflows to ``inf`` beyond about 709.78 in float64 (88.72 in float32, 11.09 in
    float16) and ``inf / inf`` is NaN. Use :func:`softmax`.

    >>> naive_softmax([2, 4, 4]).round(3)
    array([0.063, 0.468, 0.468])
    >>> naive_softmax([1000.0, 0.0])  # exp(1000) = inf, and inf / inf = nan
    array([nan,  0.])
    """
    x, ax = _logits(x, axis)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / np.sum(e, axis=ax, keepdims=True)


def softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``, eq. (4) in the stable form (2.3): ``exp(x_i - m) / sum_j exp(x_j - m)``.

    m is the maximum of the slice. Subtracting it changes nothing mathematically (it cancels
    between numerator and denominator) but keeps every ``exp`` in [0, 1]. ``-inf`` entries get 0;
    a slice of only ``-inf`` returns zeros (see the module docstring for why); NaN or ``+inf``
    gives NaN.

    >>> softmax([2, 4, 4]).round(3)  # the notes' example; integers are promoted to float64
    array([0.063, 0.468, 0.468])
    >>> softmax([[1000.0, 1000.0], [0.0, -np.inf]])  # no overflow; -inf is masked out
    array([[0.5, 0.5],
           [1. , 0. ]])
    >>> softmax([-np.inf, -np.inf])  # nothing to attend to: zeros, not NaN
    array([0., 0.])
    """
    x, ax = _logits(x, axis)
    with np.errstate(invalid="ignore"):  # +inf - +inf: the slice becomes NaN, as documented
        e = np.exp(x - _shift(x, ax))  # each entry in [0, 1]; the max becomes exactly 1
    total = np.sum(e, axis=ax, keepdims=True)  # >= 1 unless the slice is fully masked (0)
    return e / np.where(total == 0.0, 1.0, total)


def logsumexp(x: Any, axis: int = -1) -> np.ndarray:
    """``log sum_j exp(x_j)`` along ``axis`` (removed), as ``m + log sum_j exp(x_j - m)``, eq. (2.4).

    It is the log of the softmax denominator, and ``max(x) <= logsumexp(x) <= max(x) + log K``.
    A slice of only ``-inf`` gives ``-inf`` (the log of an empty sum); ``+inf`` gives ``+inf``.

    >>> float(logsumexp([1000.0, 1000.0]))  # 1000 + log 2, no overflow
    1000.6931471805599
    >>> logsumexp([[0.0, 0.0, 0.0], [-np.inf, -np.inf, -np.inf]])  # log 3, and an empty row
    array([1.09861229,       -inf])
    """
    x, ax = _logits(x, axis)
    m = np.max(x, axis=ax, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)  # -inf or +inf: no shift (the sum is 0 or inf anyway)
    with np.errstate(divide="ignore", over="ignore"):  # log(0) = -inf for an empty slice
        out = m + np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True))
    return np.squeeze(out, axis=ax)


def log_softmax(x: Any, axis: int = -1) -> np.ndarray:
    """``log softmax(x)_i = (x_i - m) - log sum_j exp(x_j - m)`` along ``axis``, eq. (2.5).

    Exact where softmax underflows to 0. A fully masked slice gives ``-inf`` everywhere (the log
    of softmax's zeros); a slice with NaN or ``+inf`` gives NaN everywhere, as :func:`softmax`.

    >>> log_softmax([0.0, 0.0]).round(4)  # log(1/2)
    array([-0.6931, -0.6931])
    >>> log_softmax([0.0, -1000.0])  # softmax would underflow to 0 and log(0) = -inf
    array([    0., -1000.])
    >>> log_softmax([-np.inf, -np.inf])
    array([-inf, -inf])
    """
    x, ax = _logits(x, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = x - _shift(x, ax)  # (x - m) first: subtracting logsumexp from x directly loses digits
        out = z - np.log(np.sum(np.exp(z), axis=ax, keepdims=True))  # NaN if the slice had +inf
    fully_masked = np.max(x, axis=ax, keepdims=True) == -np.inf
    return np.where(fully_masked, -np.inf, out)  # -inf - (-inf) would be NaN


def sigmoid(x: Any) -> np.ndarray:
    """The logistic function ``1 / (1 + exp(-x))``, elementwise: the two-class softmax, eq. (2.2).

    ``sigmoid(x) = softmax([x, 0])[0]``. Computed without overflow for either sign of x.

    >>> sigmoid([0.0, 2.0, -1000.0]).round(4)
    array([0.5   , 0.8808, 0.    ])
    """
    x = as_array(x, "x")
    e = np.exp(-np.abs(x))  # in (0, 1]: never overflows
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# ----------------------------------------------------------------------------- temperature, sampling
def _temper(x: np.ndarray, temperature: float, ax: int) -> np.ndarray:
    """Logits whose softmax is ``softmax(x / T)``, including the limits T = 0 and T = inf."""
    if temperature == 0.0:  # the argmax, ties shared: 0 at the maxima, -inf elsewhere
        m = np.max(x, axis=ax, keepdims=True)
        hard = np.where(x == m, 0.0, -np.inf)
        return np.where(np.isfinite(m), hard, m)  # keep the masked / NaN / +inf rules
    if temperature == math.inf:  # uniform over the unmasked entries
        return np.where(np.isfinite(x), 0.0, x)
    return x / temperature


def softmax_with_temperature(x: Any, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    """``softmax(x / T)`` along ``axis``, eq. (2.7), with the limits T = 0 and T = inf included.

    ``temperature=0`` returns the limit T -> 0: all probability on the largest entry (shared
    equally between ties); ``temperature=inf`` the limit T -> inf: uniform over the entries that
    are not ``-inf``.

    >>> softmax_with_temperature([1.0, 2.0, 2.0, -np.inf], 0).tolist()
    [0.0, 0.5, 0.5, 0.0]
    >>> softmax_with_temperature([1.0, 2.0, 3.0, -np.inf], float("inf")).round(3)
    array([0.333, 0.333, 0.333, 0.   ])
    >>> softmax_with_temperature([0.0, np.log(2)], 0.5).round(3)  # squares the odds: 1:4
    array([0.2, 0.8])
    """
    x, ax = _logits(x, axis)
    t = check_real(temperature, "temperature", low=0.0)
    return softmax(_temper(x, t, ax), axis=ax)


def _top_k(x: np.ndarray, k: int, ax: int) -> np.ndarray:
    kth = -np.sort(-x, axis=ax).take([min(k, x.shape[ax]) - 1], axis=ax)  # k-th largest
    with np.errstate(invalid="ignore"):
        out = np.where(x >= kth, x, -np.inf)
    return np.where(np.isnan(x).any(axis=ax, keepdims=True), np.nan, out)


def top_k_filter(x: Any, k: int, axis: int = -1) -> np.ndarray:
    """Keep the ``k`` largest logits of each slice and set the others to ``-inf`` (top-k).

    Entries tied with the k-th largest are all kept, so a slice may keep more than ``k``.
    ``k`` larger than the slice keeps everything. A slice containing NaN comes back all NaN.
    Apply :func:`softmax` afterwards to get the truncated distribution.

    >>> top_k_filter([1.0, 3.0, 2.0, 0.0], 2)
    array([-inf,   3.,   2., -inf])
    >>> top_k_filter([1.0, 2.0, 2.0, 0.0], 1)  # a tie with the first is kept
    array([-inf,   2.,   2., -inf])
    """
    x, ax = _logits(x, axis)
    k = check_int(k, "k", low=1)
    return _top_k(x, k, ax)


def _top_p(x: np.ndarray, p: float, ax: int) -> np.ndarray:
    if p == 1.0:
        return x.copy()
    xs = np.moveaxis(x, ax, -1)
    desc = -np.sort(-xs, axis=-1)  # logits, largest first
    cum = np.cumsum(softmax(desc), axis=-1)  # probability of the top 1, 2, ... entries
    n = np.minimum(np.sum(cum < p, axis=-1, keepdims=True) + 1, xs.shape[-1])  # entries needed
    threshold = np.take_along_axis(desc, n - 1, axis=-1)  # the logit of the last one needed
    with np.errstate(invalid="ignore"):
        out = np.where(xs >= threshold, xs, -np.inf)  # ties with it are kept too
    out = np.where(np.isnan(xs).any(axis=-1, keepdims=True), np.nan, out)
    return np.moveaxis(out, -1, ax)


def top_p_filter(x: Any, p: float, axis: int = -1) -> np.ndarray:
    """Nucleus (top-p) truncation, eq. (2.8): keep the fewest most probable entries with total
    probability at least ``p``; set the others to ``-inf``.

    Entries tied with the last one needed are kept too; ``p=1`` keeps everything (also the
    entries whose probability underflows to 0). A slice containing NaN comes back all NaN.

    >>> x = np.log([0.5, 0.3, 0.15, 0.05])
    >>> np.isfinite(top_p_filter(x, 0.75)).tolist()  # 0.5 + 0.3 >= 0.75: two are enough
    [True, True, False, False]
    >>> np.isfinite(top_p_filter(x, 0.85)).tolist()  # 0.5 + 0.3 < 0.85: the third is needed
    [True, True, True, False]
    """
    x, ax = _logits(x, axis)
    p = check_real(p, "p", low=0.0, high=1.0, low_open=True)
    return _top_p(x, p, ax)


def sampling_probs(
    x: Any,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    axis: int = -1,
) -> np.ndarray:
    """The distribution a sampler draws the next token from: top-k, then temperature, then top-p.

    ``softmax(top_p_filter(top_k_filter(x, k) / T, p))``. Top-k is applied to the raw logits
    (dividing by T > 0 does not change their order); top-p uses the tempered probabilities.
    ``None`` switches a filter off; ``temperature=0`` is greedy decoding (the argmax).

    >>> sampling_probs([2.0, 1.0, 0.0, -1.0], top_k=2).round(3)
    array([0.731, 0.269, 0.   , 0.   ])
    >>> sampling_probs([2.0, 1.0, 0.0, -1.0], temperature=0.5, top_p=0.9).round(3)
    array([0.881, 0.119, 0.   , 0.   ])
    """
    x, ax = _logits(x, axis)
    t = check_real(temperature, "temperature", low=0.0)
    if top_k is not None:
        x = _top_k(x, check_int(top_k, "top_k", low=1), ax)
    z = _temper(x, t, ax)
    if top_p is not None:
        z = _top_p(z, check_real(top_p, "top_p", low=0.0, high=1.0, low_open=True), ax)
    return softmax(z, axis=ax)


# ----------------------------------------------------------------------------- derivatives
def softmax_jacobian(x: Any, axis: int = -1) -> np.ndarray:
    """The Jacobian of softmax, eq. (2.9): ``J_ij = d s_i / d x_j = s_i (delta_ij - s_j)``.

    In matrix form ``J = diag(s) - s s^T`` with ``s = softmax(x)``. The result has shape
    ``(..., K, K)``: the dimensions of x other than ``axis``, then K = ``x.shape[axis]`` twice.
    J is symmetric and every row sums to 0 (the outputs always sum to 1).

    >>> softmax_jacobian([0.0, 0.0])  # s = (1/2, 1/2)
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    x, ax = _logits(x, axis)
    s = np.moveaxis(softmax(x, axis=ax), ax, -1)  # (..., K)
    K = s.shape[-1]
    J = np.empty((*s.shape, K))
    for i in range(K):
        for j in range(K):
            J[..., i, j] = s[..., i] * ((i == j) - s[..., j])
    return J


def softmax_vjp(x: Any, grad: Any, axis: int = -1) -> np.ndarray:
    """The backward pass of softmax without forming J, eq. (2.10): ``J^T g = s * (g - <g, s>)``.

    ``grad`` is the gradient of a loss with respect to ``s = softmax(x)`` (same shape as x); the
    result is the gradient with respect to x. It costs O(K) per slice, J costs O(K^2).

    >>> softmax_vjp([0.0, 0.0], [1.0, 0.0])  # J^T (1, 0) = first column of J
    array([ 0.25, -0.25])
    """
    x, ax = _logits(x, axis)
    g = as_array(grad, "grad")
    check_same_shape(x.shape, g.shape, "x", "grad")
    s = softmax(x, axis=ax)
    return s * (g - np.sum(g * s, axis=ax, keepdims=True))


# ----------------------------------------------------------------------------- online softmax
def _merge(m1, l1, m2, l2):
    m = np.maximum(m1, m2)
    shift = np.where(m == -np.inf, 0.0, m)  # two empty states: avoid -inf - (-inf)
    with np.errstate(invalid="ignore"):
        return m, l1 * np.exp(m1 - shift) + l2 * np.exp(m2 - shift)


def merge_softmax_stats(m1: Any, l1: Any, m2: Any, l2: Any) -> tuple[np.ndarray, np.ndarray]:
    """Combine the statistics of two parts of a slice, eq. (2.12): the running-rescale rule.

    A part's statistics are its maximum m and its normaliser ``l = sum_j exp(x_j - m)``. For
    the union, ``m = max(m1, m2)`` and ``l = l1 exp(m1 - m) + l2 exp(m2 - m)``: each sum is
    rescaled from its own maximum to the common one. The rule is associative, so the parts can
    be processed in any grouping (one after the other, or in parallel). An empty part is
    ``(-inf, 0)``. All four arguments must have the same shape; ``l`` must be non-negative.

    >>> m, l = merge_softmax_stats(1.0, 1.0, 3.0, 2.0)  # parts [1] and [3, 3]
    >>> float(m), round(float(l), 6), round(float(1 * np.exp(1 - 3) + 2), 6)  # l1 rescaled, plus l2
    (3.0, 2.135335, 2.135335)
    """
    arrs = [
        as_array(v, n, allow_empty=True)
        for v, n in ((m1, "m1"), (l1, "l1"), (m2, "m2"), (l2, "l2"))
    ]
    for a, n in zip(arrs[1:], ("l1", "m2", "l2"), strict=True):
        check_same_shape(arrs[0].shape, a.shape, "m1", n)
    for a, n in ((arrs[1], "l1"), (arrs[3], "l2")):
        if np.any(a < 0):
            raise ValueError(f"{n} is a sum of exponentials and must be >= 0, got {a.min()}")
    return _merge(*arrs)


def online_softmax_stats(
    x: Any, chunk_size: int = CHUNK, axis: int = -1
) -> tuple[np.ndarray, np.ndarray]:
    """One pass over ``axis`` in chunks, eq. (2.11): the maximum m and ``l = sum exp(x - m)``.

    The state starts empty, ``(m, l) = (-inf, 0)``, and absorbs one chunk at a time with
    :func:`merge_softmax_stats`. Only one chunk is ever in memory besides the state, so x could
    be a stream. ``m + log(l)`` is the logsumexp. Both outputs have x's shape without ``axis``.

    >>> m, l = online_softmax_stats([1.0, 3.0, 2.0, 3.0], chunk_size=2)
    >>> float(m), round(float(l), 6), round(float(np.exp(-2) + 1 + np.exp(-1) + 1), 6)
    (3.0, 2.503215, 2.503215)
    """
    x, ax = _logits(x, axis)
    chunk_size = check_int(chunk_size, "chunk_size", low=1)
    xs = np.moveaxis(x, ax, -1)  # a view, (..., K)
    m = np.full(xs.shape[:-1], -np.inf)  # the empty state
    l = np.zeros(xs.shape[:-1])
    for start in range(0, xs.shape[-1], chunk_size):
        chunk = xs[..., start : start + chunk_size]  # a view: nothing copied
        m_c = np.max(chunk, axis=-1)
        with np.errstate(invalid="ignore"):
            e = chunk - np.where(m_c == -np.inf, 0.0, m_c)[..., None]  # the one temporary
        np.exp(e, out=e)  # in place
        l_c = np.sum(e, axis=-1)
        del e  # free the chunk before the next one is made
        m, l = _merge(m, l, m_c, l_c)
    return m, l


def online_softmax(x: Any, chunk_size: int = CHUNK, axis: int = -1) -> np.ndarray:
    """Softmax in two passes over chunks: :func:`online_softmax_stats`, then ``exp(x - m) / l``.

    Equal to :func:`softmax` (same conventions) up to rounding. Besides the output, it needs
    memory for one chunk at a time: the second pass writes each chunk of the result in place.

    >>> online_softmax([2.0, 4.0, 4.0], chunk_size=1).round(3)
    array([0.063, 0.468, 0.468])
    """
    x, ax = _logits(x, axis)
    m, l = online_softmax_stats(x, chunk_size, ax)
    xs = np.moveaxis(x, ax, -1)
    out = np.empty_like(xs)
    shift = np.where(m == -np.inf, 0.0, m)[..., None]  # (..., 1)
    scale = np.where(l == 0.0, 1.0, l)[..., None]  # a fully masked slice stays 0
    for start in range(0, xs.shape[-1], chunk_size):
        o = out[..., start : start + chunk_size]  # a view of the output
        with np.errstate(invalid="ignore"):
            np.subtract(xs[..., start : start + chunk_size], shift, out=o)
        np.exp(o, out=o)
        np.divide(o, scale, out=o)
    return np.moveaxis(out, -1, ax)  # NaN or +inf in a slice made its m or l NaN: all NaN


# ----------------------------------------------------------------------------- cross-entropy
def _targets(targets: Any, expected_shape: tuple[int, ...], classes: int, ignore_index: int):
    t = np.asarray(targets.detach().cpu() if hasattr(targets, "detach") else targets)
    check_target_kind(t.dtype.kind in "iu", t.dtype)
    check_target_shape(t.shape, expected_shape)
    bad = (t != ignore_index) & ((t < 0) | (t >= classes))
    if bad.any():
        raise bad_target_error(int(t[bad].ravel()[0]), classes, ignore_index)
    return t.astype(np.int64)


def cross_entropy(
    logits: Any,
    targets: Any,
    axis: int = -1,
    reduction: str = "mean",
    ignore_index: int = -100,
) -> np.ndarray:
    """Cross-entropy from logits, eq. (2.6): ``loss = logsumexp(x) - x_t = -log_softmax(x)_t``.

    ``logits`` has the classes along ``axis``; ``targets`` holds one class index per slice
    (its shape is the logits' shape without ``axis``). Targets equal to ``ignore_index`` are
    left out (loss 0 with ``reduction="none"``). ``reduction`` is ``"mean"`` (over the targets
    not ignored: NaN if every target is ignored, as in PyTorch), ``"sum"`` or ``"none"``. The
    gradient with respect to the logits is ``softmax(x) - onehot(t)``.

    >>> float(cross_entropy([[0.0, 0.0, 0.0, 0.0]], [2]))  # uniform over 4 classes: log 4
    1.3862943611198906
    >>> cross_entropy([[1000.0, 0.0], [0.0, 1000.0]], [1, -100], reduction="none")
    array([1000.,    0.])
    """
    x, ax = _logits(logits, axis, "logits")
    reduction = check_reduction(reduction)
    ignore_index = check_int(ignore_index, "ignore_index")
    out_shape = x.shape[:ax] + x.shape[ax + 1 :]
    t = _targets(targets, out_shape, x.shape[ax], ignore_index)
    keep = t != ignore_index
    logp = np.moveaxis(log_softmax(x, axis=ax), ax, -1)  # (..., C)
    picked = np.take_along_axis(logp, np.where(keep, t, 0)[..., None], axis=-1)[..., 0]
    losses = np.where(keep, -picked, 0.0)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return np.asarray(losses.sum())
    with np.errstate(invalid="ignore"):
        return np.asarray(losses.sum() / keep.sum())
