"""The notes' position formulas as printed, so that Chapter 6 can show where they go wrong.

* :func:`sinusoidal_as_printed`, :func:`printed_case_counts`: the sinusoidal formula of May's
  notes read literally (the position multiplies the sine instead of sitting inside it; the cosine
  is put at index 2k+2);
* :func:`algorithm1_steps`: every intermediate matrix of Algorithm 1 (Strabel's notes, section
  12), with the mask as printed or corrected.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import as_array, check_choice, fmt_shape
from course_lib.positions.checks import check_base, check_even

__all__ = ["algorithm1_steps", "printed_case_counts", "sinusoidal_as_printed"]


def printed_case_counts(d_model: int) -> np.ndarray:
    """How many of ``004``'s two cases (sin at i = 2k, cos at i = 2k+2) claim each column i.

    Even columns from 2 on are claimed twice (a sine and a cosine), odd columns never, and the
    last cosine (i = d) falls outside the vector.

    >>> printed_case_counts(6)
    array([1, 0, 2, 0, 2, 0])
    """
    d = check_even(d_model, "d_model")
    counts = np.zeros(d, dtype=int)
    for k in range(d // 2):
        counts[2 * k] += 1  # n sin(w_k) at i = 2k
        if 2 * k + 2 < d:
            counts[2 * k + 2] += 1  # n cos(w_k) at i = 2k+2
    return counts


def sinusoidal_as_printed(
    positions: Any, d_model: int, base: float = 10000.0, cos_index: str = "2k+2"
) -> np.ndarray:
    """``004``'s formula read literally: ``p_n^(i) = n sin(w_k)`` (i = 2k), ``n cos(w_k)`` (i = 2k+2).

    The position n multiplies a constant instead of entering the angle. With ``cos_index="2k+2"``
    (as printed) the sine case is read first, so even columns hold ``n sin(w_{i/2})`` and odd
    columns are left undefined (NaN). ``cos_index="2k+1"`` fixes only the index, keeping the
    position outside: ``[n sin(w_0), n cos(w_0), n sin(w_1), ...]``, every row a multiple of row 1.

    >>> sinusoidal_as_printed([2], 4, cos_index="2k+1").round(4)  # 2 * [sin 1, cos 1, sin .01, cos .01]
    array([[1.6829, 1.0806, 0.02  , 1.9999]])
    >>> np.isnan(sinusoidal_as_printed([2], 4)).astype(int)  # odd columns undefined
    array([[0, 1, 0, 1]])
    """
    n = as_array(positions, "positions")
    d = check_even(d_model, "d_model")
    base = check_base(base)
    cos_index = check_choice(cos_index, "cos_index", ("2k+2", "2k+1"))
    out = np.full((*n.shape, d), np.nan)
    for k in range(d // 2):
        w_k = 1.0 / base ** (2 * k / d)
        out[..., 2 * k] = n * np.sin(w_k)  # n x sin(w_k): the position outside the sine
        if cos_index == "2k+1":
            out[..., 2 * k + 1] = n * np.cos(w_k)
        # "2k+2": column 2k+2 is already the sine case of k+1, read first; odd columns stay NaN
    return out


def algorithm1_steps(X: Any, E_r: Any, mask: str = "corrected") -> dict[str, np.ndarray]:
    """Every intermediate of Algorithm 1 (``002`` section 12) for one (L, d) input, in NumPy.

    The notes' indices are 1-based; here they are 0-based. Returns A (step 1), M (step 2), the
    masked A (step 3), B (step 4), V (step 5), C (step 6) and D (step 7). ``mask="as printed"``
    uses the printed ``m_ij = 1 if i >= j`` (lower triangle); ``"corrected"`` keeps the entries
    the result uses, ``i + j >= L - 1`` (the lower-right triangle). Step 6's index range is taken
    from its printed shape (L+1) x L: the printed bound ``i <= L`` would leave ``c_{L+1, j}``,
    which step 7 needs, undefined.

    >>> s = algorithm1_steps(np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> s["D"]
    array([[3., 0.],
           [2., 4.]])
    """
    X = as_array(X, "X", ndim=2)
    E_r = as_array(E_r, "E_r", ndim=2)
    mask = check_choice(mask, "mask", ("corrected", "as printed"))
    if X.shape != E_r.shape:
        raise ValueError(
            f"Algorithm 1 takes X and E_r of the same shape (L, d_model), got {fmt_shape(X.shape)} "
            f"and {fmt_shape(E_r.shape)}"
        )
    L = X.shape[0]
    A = X @ E_r.T  # step 1: a_ir = x_i . e_r
    i, r = np.indices((L, L))
    M = (i >= r) if mask == "as printed" else (i + r >= L - 1)  # step 2
    A_masked = A * M  # step 3
    B = np.zeros((L, L + 1))  # step 4
    B[:, 1:] = A_masked
    V = B.reshape(-1)  # step 5: vec(B^T), the rows of B in order
    C = V.reshape(L + 1, L)  # step 6
    D = C[1:, :]  # step 7
    return {"A": A, "M": M.astype(float), "A_masked": A_masked, "B": B, "V": V, "C": C, "D": D}
