"""Chapter 13 (parameter-efficient fine-tuning): NumPy references, float64, written to be read next to the notes.

LoRA (Hu et al., 2021; Strabel's notes, section 11.1) freezes a pre-trained weight
``W0`` (d x k) and learns a low-rank update: ``h = W0 x + (alpha / r) B A x`` with
``B`` (d x r), ``A`` (r x k). The notes print ``W0 + BA``; the paper and every library scale the
update by ``alpha / r`` (see the chapter's errata). Weights follow the notes: ``W`` is
(d_out, d_in) = (d, k) and a batch of inputs is a row per example, so ``h = x W^T + ...``.

Every public function here has a PyTorch twin of the same name and signature in
:mod:`course_lib.peft.accelerated`, and a spec in :mod:`course_lib.peft.spec`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import as_array, check_real, fmt_shape

__all__ = ["dora_weight", "lora_linear", "lora_weight", "prefix_attention"]


def check_lora_shapes(W_shape: tuple, A_shape: tuple, B_shape: tuple) -> int:
    """Check W (d, k), A (r, k), B (d, r) and return the rank r; raise ValueError naming the culprit.

    >>> check_lora_shapes((4, 3), (2, 3), (4, 2))
    2
    >>> check_lora_shapes((4, 3), (2, 4), (4, 2))
    Traceback (most recent call last):
    ...
    ValueError: A must have shape (r, k) = (r, 3) to multiply inputs of W (4, 3), got (2, 4)
    """
    d, k = W_shape
    r = A_shape[0]
    if A_shape[1] != k:
        raise ValueError(
            f"A must have shape (r, k) = (r, {k}) to multiply inputs of W {fmt_shape(W_shape)}, "
            f"got {fmt_shape(A_shape)}"
        )
    if tuple(B_shape) != (d, r):
        raise ValueError(
            f"B must have shape (d, r) = ({d}, {r}) for W {fmt_shape(W_shape)} and A "
            f"{fmt_shape(A_shape)}, got {fmt_shape(B_shape)}"
        )
    if r > min(d, k):
        raise ValueError(
            f"the rank r = {r} (rows of A) exceeds min(d, k) = {min(d, k)} of W "
            f"{fmt_shape(W_shape)}: a low-rank update needs r <= min(d, k)"
        )
    return r


def lora_weight(W: Any, A: Any, B: Any, alpha: float) -> np.ndarray:
    """The merged weight ``W + (alpha / r) B A`` (Hu et al., 2021, eq. 3): (d, k).

    Merging is what makes inference free: after it, the layer is an ordinary ``W'`` again.

    >>> W, A, B = np.zeros((2, 2)), np.array([[1.0, 2.0]]), np.array([[1.0], [0.0]])
    >>> lora_weight(W, A, B, alpha=2.0)  # r = 1: the update is 2 * outer([1, 0], [1, 2])
    array([[2., 4.],
           [0., 0.]])
    """
    W = as_array(W, "W", ndim=2)
    A = as_array(A, "A", ndim=2)
    B = as_array(B, "B", ndim=2)
    r = check_lora_shapes(W.shape, A.shape, B.shape)
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True, high_open=True)
    d, k = W.shape
    update = np.zeros((d, k))
    for j in range(r):  # B A = sum over the rank of outer products of B's columns with A's rows
        update += np.outer(B[:, j], A[j, :])
    return W + (alpha / r) * update


def dora_weight(W: Any, A: Any, B: Any, m: Any, alpha: float) -> np.ndarray:
    """DoRA's weight (Liu et al., 2024): ``m * V / ||V||`` with ``V = W + (alpha / r) B A``: (d, k).

    The LoRA-updated matrix ``V`` gives the direction; the trained vector ``m`` (d,) gives each
    output unit's length. ``||V||`` is the norm of each output unit's weights, a row of our
    (d_out, d_in) matrix (the paper's "column-wise" norm: it writes the transposed matrix).
    DoRA starts with ``B = 0`` and ``m = ||W||``, so the layer starts unchanged.

    >>> W = np.array([[3.0, 4.0], [0.0, 2.0]])
    >>> dora_weight(W, np.ones((1, 2)), np.zeros((2, 1)), np.array([5.0, 2.0]), alpha=1.0)
    array([[3., 4.],
           [0., 2.]])
    >>> dora_weight(W, np.ones((1, 2)), np.zeros((2, 1)), np.array([1.0, 1.0]), alpha=1.0)
    array([[0.6, 0.8],
           [0. , 1. ]])
    """
    V = lora_weight(W, A, B, alpha)  # (d, k): the direction before normalising
    m = as_array(m, "m", ndim=1)
    if m.shape != (V.shape[0],):
        raise ValueError(
            f"m must have one length per output unit, shape ({V.shape[0]},), got {fmt_shape(m.shape)}"
        )
    norms = np.sqrt((V**2).sum(axis=1))  # (d,): one norm per output unit (a row of V)
    if np.any(norms == 0):
        raise ValueError("a row of W + (alpha / r) B A is zero: its direction is undefined")
    return m[:, None] * V / norms[:, None]


def lora_linear(x: Any, W: Any, A: Any, B: Any, alpha: float, b: Any = None) -> np.ndarray:
    """A LoRA layer, unmerged: ``h = x W^T + (alpha / r) (x A^T) B^T + b``; x (..., k) -> (..., d).

    The update goes through the rank-r bottleneck ``x A^T`` (..., r), never forming ``B A``.

    >>> x = np.array([[1.0, 1.0]])
    >>> lora_linear(x, np.eye(2), np.array([[1.0, 2.0]]), np.array([[1.0], [0.0]]), alpha=2.0)
    array([[7., 1.]])
    """
    x = as_array(x, "x", min_ndim=1)
    W = as_array(W, "W", ndim=2)
    A = as_array(A, "A", ndim=2)
    B = as_array(B, "B", ndim=2)
    r = check_lora_shapes(W.shape, A.shape, B.shape)
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True, high_open=True)
    d, k = W.shape
    if x.shape[-1] != k:
        raise ValueError(
            f"x must have last dimension k = {k} (the inputs of W {fmt_shape(W.shape)}), "
            f"got shape {fmt_shape(x.shape)}"
        )
    h = x @ W.T  # (..., d): the frozen path
    z = x @ A.T  # (..., r): down to the rank-r bottleneck
    h = h + (alpha / r) * (z @ B.T)  # (..., d): back up, scaled
    if b is not None:
        b = as_array(b, "b", ndim=1)
        if b.shape != (d,):
            raise ValueError(f"b must have shape ({d},), got {fmt_shape(b.shape)}")
        h = h + b
    return h


def prefix_attention(q: Any, k: Any, v: Any, pk: Any, pv: Any) -> np.ndarray:
    """Causal attention of the tokens with a trained prefix in front (Li and Liang, 2021).

    ``q``, ``k``, ``v`` (..., T, d_head) come from the T tokens; ``pk``, ``pv`` (..., P, d_head) are
    the trained keys and values (broadcast over the leading dimensions). Every token sees all P
    prefix positions and the tokens up to itself: row i of the mask over the P + T keys is true
    at columns 0 .. P + i. Returns (..., T, d_head).

    >>> q = k = v = np.zeros((2, 3))  # T = 2 tokens, d_head = 3
    >>> pk, pv = np.zeros((1, 3)), np.ones((1, 3))  # P = 1 prefix position of value 1
    >>> prefix_attention(q, k, v, pk, pv)  # equal scores: token 0 averages 2 values, token 1 three
    array([[0.5       , 0.5       , 0.5       ],
           [0.33333333, 0.33333333, 0.33333333]])
    """
    q, k, v = (as_array(a, n, min_ndim=2) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    pk, pv = (as_array(p, n, min_ndim=2, allow_empty=True) for p, n in ((pk, "pk"), (pv, "pv")))
    T, dk = q.shape[-2:]
    if k.shape[-2:] != (T, dk) or v.shape[-2:] != (T, dk):
        raise ValueError(
            f"k and v must end in (T, d_head) = ({T}, {dk}) like q, got {fmt_shape(k.shape)} "
            f"and {fmt_shape(v.shape)}"
        )
    if pk.shape[-1] != dk or pk.shape != pv.shape:
        raise ValueError(
            f"pk and pv must have the same shape (..., P, {dk}), got {fmt_shape(pk.shape)} and "
            f"{fmt_shape(pv.shape)}"
        )
    P = pk.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], pk.shape[:-2])
    keys = np.concatenate(
        [np.broadcast_to(pk, (*lead, P, dk)), np.broadcast_to(k, (*lead, T, dk))], -2
    )
    vals = np.concatenate(
        [np.broadcast_to(pv, (*lead, P, dk)), np.broadcast_to(v, (*lead, T, dk))], -2
    )
    s = q @ np.swapaxes(keys, -1, -2) / np.sqrt(dk)  # (..., T, P + T)
    sees = np.tril(np.ones((T, P + T), dtype=bool), k=P)  # the prefix and tokens 0 .. i
    s = np.where(sees, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ vals  # (..., T, d_head)
