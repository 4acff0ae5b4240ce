"""How low-rank is a weight update? The share of its squared Frobenius norm in the top singular
directions (the LoRA paper's question, section 7, asked of a full fine-tuning's update).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import as_array

__all__ = ["top_r_energy"]


def top_r_energy(delta: Any, r: int) -> float:
    """The fraction of ``||delta||_F^2`` in its ``r`` largest singular directions.

    ``sum(s[:r]**2) / sum(s**2)`` for the singular values ``s`` of the matrix ``delta``: 1 when
    ``delta`` has rank at most r; about ``r / min(d, k)`` for a random Gaussian matrix.

    >>> top_r_energy(np.diag([3.0, 4.0, 0.0]), 1)  # 16 / 25
    0.64
    """
    delta = as_array(delta, "delta", ndim=2)
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or not 1 <= r <= min(delta.shape):
        raise ValueError(
            f"r must be an integer from 1 to min(d, k) = {min(delta.shape)}, got {r!r}"
        )
    s2 = np.linalg.svd(delta, compute_uv=False) ** 2
    if s2.sum() == 0:
        raise ValueError("delta is zero: it has no singular directions to share its energy")
    return float(s2[:r].sum() / s2.sum())
