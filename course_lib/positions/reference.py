"""Positional encodings, in NumPy (Chapter 6).

Written to be read next to the notes {cite}`strabel2023transformers` and the papers they cite:

* absolute positions: the slides' one-hot position concatenated to the input,
  ``x~_i = [x_i; p(i)]`` (``003``), and a table of position vectors added to the input,
  ``x~_i = x_i + p(i)`` (``003``; GPT's ``h_0 = U W_e + W_p``, ``002`` eq. 21), learned or fixed;
* the sinusoidal table of eq. (19) (``002`` section 3, Vaswani et al. 2017)::

      PE(pos, 2i)   = sin(pos / base^(2i / d_model))
      PE(pos, 2i+1) = cos(pos / base^(2i / d_model))

  and the rotation that maps ``PE(pos)`` to ``PE(pos + k)`` for every ``pos``;
* relative positions as modifications of the attention logits (``001`` section 2): (i) a learned
  vector per clipped offset added to the key (Shaw et al. 2018, with its value term), (ii) a
  learned scalar per clipped offset, (iii) a scalar times the offset (with a fixed slope per
  head: ALiBi, Press et al. 2022);
* the Music Transformer's relative logits (Huang et al. 2018), computed naively (an (L, L, d)
  tensor of gathered embeddings) and by Algorithm 1 of ``002`` section 12 ("skewing");
* rotary embeddings (RoFormer, Su et al. 2021).

Conventions shared with :mod:`course_lib.positions.accelerated` (same names and signatures):

* rows are tokens: ``x`` and ``q`` are (..., L, d); leading dimensions broadcast;
* a *relative offset* is ``j - i`` (key position minus query position): negative offsets look
  back. Tables of relative vectors or scalars have ``2K + 1`` rows for offsets ``-K .. K``
  (row ``r`` holds offset ``r - K``); offsets beyond ``K`` are clipped to ``+-K`` (Shaw et al.);
* the Music Transformer's ``E_r`` has one row per *past* offset: with ``L`` rows, row ``r``
  holds offset ``r - (L - 1)``, so the last row is offset 0 (the token itself);
* ``layout`` says which two columns form a (sin, cos) or rotation pair: ``"interleaved"`` pairs
  columns ``2i`` and ``2i + 1`` (the paper, eq. 19; RoFormer), ``"concatenated"`` pairs ``i`` and
  ``i + d/2`` (sin half then cos half; GPT-NeoX and LLaMA's rotary layout). Both need an even
  width: an odd ``d_model`` is rejected rather than padded, because the pair is what makes a
  shift of position a rotation;
* functions that return attention-logit terms return them *unscaled*; chapter 4's attention adds
  ``bias`` after the ``1/sqrt(d_k)`` scaling, so pass ``logits_term / sqrt(d_k)`` where a paper
  scales the sum.

Everything is computed in float64.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from course_lib.checks import as_array, check_bool, check_choice, check_int, fmt_shape
from course_lib.positions.checks import LAYOUTS, check_base, check_even

__all__ = [
    "add_position_table",
    "alibi_bias",
    "concat_one_hot_positions",
    "relative_bias",
    "relative_key_logits",
    "relative_logits_naive",
    "relative_logits_skewed",
    "relative_value_term",
    "rotary_embedding",
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "skew",
]


# ----------------------------------------------------------------------------- input checks
def _finite(arr: np.ndarray, name: str) -> np.ndarray:
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got NaN or inf")
    return arr


def _positions(positions: Any) -> np.ndarray:
    """An int n means positions 0, 1, ..., n-1; anything else is an array of positions."""
    if isinstance(positions, int | np.integer) and not isinstance(positions, bool):
        n = check_int(positions, "positions (a sequence length)", low=1)
        return np.arange(n, dtype=np.float64)
    return _finite(as_array(positions, "positions"), "positions")


def _pair_columns(i: int, d: int, layout: str) -> tuple[int, int]:
    """The two columns of pair i: (2i, 2i+1) interleaved, (i, i + d/2) concatenated."""
    return (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)


def _table_rows(table: np.ndarray, name: str, axis: int = -2) -> int:
    """Check that a relative table has an odd number 2K+1 of offsets along ``axis``; return K."""
    n = table.shape[axis]
    if n % 2 == 0:
        raise ValueError(
            f"{name} of shape {fmt_shape(table.shape)} must have an odd number 2K+1 of offsets "
            f"(rows for offsets -K..K), got {n}"
        )
    return n // 2


def _clip(offset: int, K: int) -> int:
    return max(-K, min(K, offset))


def _batched(fn, *arrays: np.ndarray, core_ndims: tuple[int, ...]) -> np.ndarray:
    """Apply ``fn`` to each set of core matrices, broadcasting the leading dimensions."""
    try:
        batch = np.broadcast_shapes(
            *(a.shape[: a.ndim - c] for a, c in zip(arrays, core_ndims, strict=True))
        )
    except ValueError:
        shapes = ", ".join(fmt_shape(a.shape) for a in arrays)
        raise ValueError(
            f"the leading (batch) dimensions of shapes {shapes} do not broadcast"
        ) from None
    views = [
        np.broadcast_to(a, (*batch, *a.shape[a.ndim - c :]))
        for a, c in zip(arrays, core_ndims, strict=True)
    ]
    outs = [fn(*(v[idx] for v in views)) for idx in itertools.product(*(range(b) for b in batch))]
    return np.stack(outs).reshape(*batch, *outs[0].shape)


# ----------------------------------------------------------------------------- absolute
def concat_one_hot_positions(x: Any, max_len: int | None = None) -> np.ndarray:
    """The slides' ``x~_i = [x_i; p(i)]``: append the one-hot vector of position i to row i.

    ``x`` is (..., L, d); the result is (..., L, d + max_len) (``max_len`` defaults to L). The
    width grows with the longest sequence, and position ``max_len`` has no one-hot vector at all.

    >>> concat_one_hot_positions([[5.0], [7.0]])
    array([[5., 1., 0.],
           [7., 0., 1.]])
    """
    x = as_array(x, "x", min_ndim=2)
    L, d = x.shape[-2:]
    n = L if max_len is None else check_int(max_len, "max_len", low=1)
    if L > n:
        raise ValueError(
            f"x has L={L} positions but max_len={n}: positions {n}..{L - 1} have no one-hot vector"
        )
    out = np.zeros((*x.shape[:-1], d + n))
    out[..., :d] = x
    for i in range(L):
        out[..., i, d + i] = 1.0  # p(i) = e_i
    return out


def add_position_table(x: Any, table: Any, offset: int = 0) -> np.ndarray:
    """``x~_i = x_i + p(offset + i)``: add rows of a (learned or fixed) position table.

    ``x`` is (..., L, d) and ``table`` is (max_len, d), one row per absolute position (GPT's
    ``W_p``, ``002`` eq. 21). ``offset`` is the position of the first row of ``x`` (non-zero when
    a sequence is continued). A table has no row for positions ``>= max_len``: asking for one
    raises, because a learned table cannot extrapolate.

    >>> add_position_table([[1.0, 1.0], [1.0, 1.0]], [[0.0, 0.5], [2.0, 0.0], [9.0, 9.0]])
    array([[1. , 1.5],
           [3. , 1. ]])
    """
    x = as_array(x, "x", min_ndim=2)
    table = as_array(table, "table", ndim=2)
    offset = check_int(offset, "offset", low=0)
    L, d = x.shape[-2:]
    if table.shape[1] != d:
        raise ValueError(
            f"table of shape {fmt_shape(table.shape)} has width {table.shape[1]}, but x of shape "
            f"{fmt_shape(x.shape)} has width {d}"
        )
    if offset + L > table.shape[0]:
        raise ValueError(
            f"positions {offset}..{offset + L - 1} are needed but the table has rows for positions "
            f"0..{table.shape[0] - 1} only: a position table cannot encode positions it has no row for"
        )
    return x + table[offset : offset + L]


def sinusoidal_encoding(
    positions: Any, d_model: int, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    """The sinusoidal table of eq. (19), one row per position: shape (*positions.shape, d_model).

    ``positions`` is an array of (integer or real) positions, or an int n for positions
    0..n-1. Pair i uses the angular frequency ``w_i = base^(-2i / d_model)``: with the
    ``"interleaved"`` layout column 2i is ``sin(pos w_i)`` and column 2i+1 is ``cos(pos w_i)``
    (eq. 19); with ``"concatenated"`` the sines fill the first half and the cosines the second.

    >>> sinusoidal_encoding([1], 4)  # [sin 1, cos 1, sin 0.01, cos 0.01]
    array([[0.84147098, 0.54030231, 0.00999983, 0.99995   ]])
    """
    pos = _positions(positions)
    d = check_even(d_model, "d_model")
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    out = np.empty((*pos.shape, d))
    for i in range(d // 2):
        angle = pos / base ** (2 * i / d)  # pos * w_i, eq. (19)
        s, c = _pair_columns(i, d, layout)
        out[..., s] = np.sin(angle)
        out[..., c] = np.cos(angle)
    return out


def sinusoidal_shift_matrix(
    offsets: Any, d_model: int, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    """The (d_model, d_model) matrix M_k with ``PE(pos + k) = PE(pos) @ M_k`` for every pos.

    For each pair (sin, cos) at frequency w the angle-addition formulas give
    ``[sin((p+k)w), cos((p+k)w)] = [sin(pw), cos(pw)] @ [[cos kw, -sin kw], [sin kw, cos kw]]``,
    a rotation by ``-k w`` that depends on k and not on p. ``offsets`` is a number or an array of
    them; the result has shape (*offsets.shape, d_model, d_model).

    >>> M = sinusoidal_shift_matrix(3, 4)
    >>> np.allclose(sinusoidal_encoding([5.0], 4) @ M, sinusoidal_encoding([8.0], 4))
    True
    """
    k = _finite(as_array(offsets, "offsets"), "offsets")
    d = check_even(d_model, "d_model")
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    out = np.zeros((*k.shape, d, d))
    for i in range(d // 2):
        w = base ** (-2 * i / d)
        s, c = _pair_columns(i, d, layout)
        out[..., s, s] = np.cos(k * w)
        out[..., s, c] = -np.sin(k * w)
        out[..., c, s] = np.sin(k * w)
        out[..., c, c] = np.cos(k * w)
    return out


# ----------------------------------------------------------------------------- relative
def relative_bias(values: Any, length: int) -> np.ndarray:
    """Variant (ii) of ``001``: a learned scalar per clipped offset, added to the logits.

    ``values`` is (..., 2K+1): ``values[..., r]`` is the scalar for offset ``r - K``. Returns
    (..., L, L) with entry (i, j) equal to the value of offset ``clip(j - i, -K, K)``.

    >>> relative_bias([-1.0, 0.0, 1.0], 4)  # K = 1: offsets beyond +-1 are clipped
    array([[ 0.,  1.,  1.,  1.],
           [-1.,  0.,  1.,  1.],
           [-1., -1.,  0.,  1.],
           [-1., -1., -1.,  0.]])
    """
    values = as_array(values, "values", min_ndim=1)
    L = check_int(length, "length", low=1)
    K = _table_rows(values, "values", axis=-1)
    out = np.empty((*values.shape[:-1], L, L))
    for i in range(L):
        for j in range(L):
            out[..., i, j] = values[..., _clip(j - i, K) + K]
    return out


def alibi_bias(slopes: Any, length: int, symmetric: bool = False) -> np.ndarray:
    """Variant (iii) of ``001``, ``lambda (i - j)`` with a fixed slope per head: ALiBi.

    ``slopes`` is (...,), one slope m per head; returns (..., L, L) with entry (i, j) equal to
    ``-m (i - j)`` (causal use: entries with j > i are masked anyway) or, with
    ``symmetric=True``, ``-m |i - j|`` (the form for bidirectional attention). A positive m
    penalises keys linearly in their distance (Press et al. 2022).

    >>> alibi_bias([0.5], 3)[0]
    array([[ 0. ,  0.5,  1. ],
           [-0.5,  0. ,  0.5],
           [-1. , -0.5,  0. ]])
    """
    slopes = _finite(as_array(slopes, "slopes"), "slopes")
    L = check_int(length, "length", low=1)
    symmetric = check_bool(symmetric, "symmetric")
    out = np.empty((*slopes.shape, L, L))
    for i in range(L):
        for j in range(L):
            distance = abs(i - j) if symmetric else i - j
            out[..., i, j] = slopes * -distance  # -m (i - j): an int times m, so no -0.0
    return out


def relative_key_logits(q: Any, rel_keys: Any) -> np.ndarray:
    """Variant (i) of ``001`` / Shaw et al. eq. (4): the logit term ``q_i . a_ij``, unscaled.

    ``q`` is (..., L, d) and ``rel_keys`` is (..., 2K+1, d): ``a_ij = rel_keys[clip(j - i) + K]``.
    Shaw et al.'s logit is ``q_i . (k_j + a_ij) / sqrt(d)``, i.e. the ordinary logit plus this
    term divided by ``sqrt(d)``. Returns (..., L, L).

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # offsets -1, 0, +1
    >>> relative_key_logits(q, a)  # row 0: offsets 0, +1; row 1: offsets -1, 0
    array([[3., 5.],
           [2., 4.]])
    """
    q = as_array(q, "q", min_ndim=2)
    rel_keys = as_array(rel_keys, "rel_keys", min_ndim=2)
    if q.shape[-1] != rel_keys.shape[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(q.shape)} and rel_keys of shape {fmt_shape(rel_keys.shape)} "
            "must have the same last dimension d"
        )
    K = _table_rows(rel_keys, "rel_keys")

    def one(qm: np.ndarray, a: np.ndarray) -> np.ndarray:
        L = qm.shape[0]
        out = np.empty((L, L))
        for i in range(L):
            for j in range(L):
                out[i, j] = qm[i] @ a[_clip(j - i, K) + K]  # q_i . a_ij
        return out

    return _batched(one, q, rel_keys, core_ndims=(2, 2))


def relative_value_term(weights: Any, rel_values: Any) -> np.ndarray:
    """Shaw et al. eq. (3)'s extra output term ``sum_j alpha_ij a^V_ij``, shape (..., L, d_v).

    ``weights`` are attention weights (..., L, L) and ``rel_values`` is (..., 2K+1, d_v) with
    ``a^V_ij = rel_values[clip(j - i) + K]``. Shaw et al.'s output is ``alpha @ v`` plus this.

    >>> w = np.array([[1.0, 0.0], [0.5, 0.5]])
    >>> relative_value_term(w, [[-1.0], [0.0], [1.0]])  # row 1: 0.5 * (-1) + 0.5 * 0
    array([[ 0. ],
           [-0.5]])
    """
    weights = as_array(weights, "weights", min_ndim=2)
    rel_values = as_array(rel_values, "rel_values", min_ndim=2)
    if weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights must be square (..., L, L), got shape {fmt_shape(weights.shape)}"
        )
    K = _table_rows(rel_values, "rel_values")

    def one(w: np.ndarray, av: np.ndarray) -> np.ndarray:
        L = w.shape[0]
        out = np.zeros((L, av.shape[1]))
        for i in range(L):
            for j in range(L):
                out[i] += w[i, j] * av[_clip(j - i, K) + K]  # alpha_ij a^V_ij
        return out

    return _batched(one, weights, rel_values, core_ndims=(2, 2))


def _music_inputs(q: Any, E_r: Any) -> tuple[np.ndarray, np.ndarray]:
    q = as_array(q, "q", min_ndim=2)
    E_r = as_array(E_r, "E_r", min_ndim=2)
    L = q.shape[-2]
    if q.shape[-1] != E_r.shape[-1]:
        raise ValueError(
            f"q of shape {fmt_shape(q.shape)} and E_r of shape {fmt_shape(E_r.shape)} must have "
            "the same last dimension d"
        )
    if E_r.shape[-2] < L:
        raise ValueError(
            f"E_r of shape {fmt_shape(E_r.shape)} has {E_r.shape[-2]} rows (offsets "
            f"-{E_r.shape[-2] - 1}..0) but q has L={L} positions, which needs offsets -{L - 1}..0"
        )
    return q, E_r[..., E_r.shape[-2] - L :, :]  # the last L rows: offsets -(L-1)..0


def relative_logits_naive(q: Any, E_r: Any) -> np.ndarray:
    """The Music Transformer's relative logits the slow way: build R, then ``q_i . R_ij``.

    ``R`` is the (L, L, d) tensor with ``R[i, j] = E_r[j - i + L - 1]`` (the embedding of offset
    ``j - i``) for ``j <= i`` and zero above the diagonal; the result is ``S[i, j] = q_i . R[i, j]``,
    (..., L, L). ``E_r`` is (..., M, d) with ``M >= L``; its last L rows hold offsets -(L-1)..0.
    This is the O(L^2 d)-memory computation that Algorithm 1 avoids.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> E_r = np.array([[1.0, 2.0], [3.0, 4.0]])  # offsets -1, 0
    >>> relative_logits_naive(q, E_r)
    array([[3., 0.],
           [2., 4.]])
    """
    q, E_r = _music_inputs(q, E_r)

    def one(qm: np.ndarray, E: np.ndarray) -> np.ndarray:
        L, d = qm.shape
        R = np.zeros((L, L, d))  # O(L^2 d) memory
        for i in range(L):
            for j in range(i + 1):
                R[i, j] = E[j - i + L - 1]
        return np.einsum("id,ijd->ij", qm, R)

    return _batched(one, q, E_r, core_ndims=(2, 2))


def _skew_2d(A: np.ndarray) -> np.ndarray:
    """Steps 2-7 of Algorithm 1 (corrected), with the notes' 1-based indices in the comments."""
    L = A.shape[0]
    # step 2 (corrected): keep a_ir only where r >= L - i + 1, i.e. offset r - L >= -(i - 1).
    # In 0-based indices: keep A[i, r] where i + r >= L - 1 (the lower-right triangle).
    M = np.array([[1.0 if i + r >= L - 1 else 0.0 for r in range(L)] for i in range(L)])
    A = A * M  # step 3
    B = np.zeros((L, L + 1))  # step 4: b_i1 = 0, b_ij = a_i,j-1
    B[:, 1:] = A
    V = B.reshape(-1)  # step 5: vec(B^T) = the rows of B one after another, L(L+1) numbers
    C = V.reshape(L + 1, L)  # step 6: c_ij = V_(i-1)L+j for i <= L+1 (the notes print i <= L)
    return C[1:, :]  # step 7: d_ij = c_i+1,j, drop the first row


def skew(A: Any) -> np.ndarray:
    """Steps 2-7 of Algorithm 1 (``002`` section 12), corrected: ``Q E_r^T`` -> relative logits.

    ``A`` is (..., L, L) with ``A[i, r] = q_i . E_r[r]`` (row r of E_r is offset ``r - (L-1)``).
    Mask the entries no query uses, pad a zero column on the left, read the (L, L+1) matrix as
    (L+1, L), drop the first row: the result has ``D[i, j] = A[i, j - i + L - 1]`` for ``j <= i``
    and zeros above the diagonal.

    >>> skew([[1.0, 2.0], [3.0, 4.0]])  # D[0,0] = A[0,1], D[1,0] = A[1,0], D[1,1] = A[1,1]
    array([[2., 0.],
           [3., 4.]])
    """
    A = as_array(A, "A", min_ndim=2)
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be square (..., L, L), got shape {fmt_shape(A.shape)}")
    return _batched(_skew_2d, A, core_ndims=(2,))


def relative_logits_skewed(q: Any, E_r: Any) -> np.ndarray:
    """Algorithm 1 of ``002`` section 12 (Huang et al. 2018), corrected: the same result as
    :func:`relative_logits_naive` without ever building the (L, L, d) tensor R.

    Step 1: ``A = q E_r^T`` (L, L) (the notes write X for q); steps 2-7: :func:`skew`.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> relative_logits_skewed(q, [[1.0, 2.0], [3.0, 4.0]])
    array([[3., 0.],
           [2., 4.]])
    """
    q, E_r = _music_inputs(q, E_r)
    A = q @ np.swapaxes(E_r, -1, -2)  # step 1: (..., L, L), A[i, r] = q_i . E_r[r]
    return _batched(_skew_2d, A, core_ndims=(2,))


# ----------------------------------------------------------------------------- rotary
def _rotary_positions(positions: Any, lead: tuple[int, ...], L: int) -> np.ndarray:
    if positions is None:
        return np.arange(L, dtype=np.float64)
    pos = _finite(as_array(positions, "positions"), "positions")
    try:
        np.broadcast_shapes(pos.shape, lead)
        ok = np.broadcast_shapes(pos.shape, lead) == lead
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"positions of shape {fmt_shape(pos.shape)} must broadcast to x's shape without its "
            f"last dimension, {fmt_shape(lead)} (one position per row of x)"
        )
    return pos


def rotary_embedding(
    x: Any, positions: Any = None, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    """Rotate each pair of coordinates of row m of x by the angle ``m w_i`` (RoFormer, Su et al. 2021).

    ``x`` is (..., L, d) (queries or keys); ``positions`` (default 0..L-1) broadcasts to
    ``x.shape[:-1]``; ``w_i = base^(-2i/d)`` as in eq. (19). Pair i is columns (2i, 2i+1)
    (``"interleaved"``, the paper) or (i, i + d/2) (``"concatenated"``). Because rotations
    compose, ``rot(q, m) . rot(k, n)`` depends on ``m - n`` only.

    >>> rotary_embedding([[1.0, 0.0], [1.0, 0.0]])  # position 1 is rotated by 1 radian
    array([[1.        , 0.        ],
           [0.54030231, 0.84147098]])
    """
    x = as_array(x, "x", min_ndim=2)
    d = check_even(x.shape[-1], "the last dimension of x")
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    pos = _rotary_positions(positions, x.shape[:-1], x.shape[-2])
    out = np.empty(x.shape)
    for i in range(d // 2):
        angle = pos * base ** (-2 * i / d)  # m w_i, broadcast to x.shape[:-1]
        a, b = _pair_columns(i, d, layout)
        xa, xb = x[..., a], x[..., b]
        out[..., a] = xa * np.cos(angle) - xb * np.sin(angle)  # [[cos, -sin],
        out[..., b] = xa * np.sin(angle) + xb * np.cos(angle)  #  [sin,  cos]] @ (xa, xb)
    return out
