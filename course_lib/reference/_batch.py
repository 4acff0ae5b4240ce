"""Lift a function written for single matrices to stacks of matrices (NumPy broadcasting)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from course_lib.checks import as_array, matmul_shapes


def batched_matmul_like(fn2d: Callable[[np.ndarray, np.ndarray], np.ndarray]):
    """Turn ``fn2d(X, Y)`` for an (n, m) and an (m, k) matrix into a function of stacks.

    The wrapper checks and converts both inputs, broadcasts their leading dimensions as ``@``
    does, and applies ``fn2d`` to each pair of matrices in a plain loop (clear, not fast).
    """

    @functools.wraps(fn2d)
    def wrapper(X, Y):
        X = as_array(X, "X", min_ndim=2)
        Y = as_array(Y, "Y", min_ndim=2)
        out_shape = matmul_shapes(X.shape, Y.shape)
        batch = out_shape[:-2]
        Xb = np.broadcast_to(X, (*batch, *X.shape[-2:]))
        Yb = np.broadcast_to(Y, (*batch, *Y.shape[-2:]))
        outs = [fn2d(Xb[idx], Yb[idx]) for idx in itertools.product(*(range(b) for b in batch))]
        return np.stack(outs).reshape(*batch, *outs[0].shape)

    return wrapper
