"""Four ways to read a matrix product (Chapter 1; notes ``002`` section 1.1, eqs. 1-3).

For X of shape (n, m) and Y of shape (m, k), the product XY has shape (n, k) and

* eq. (1), entries: ``(XY)_ij = sum_l X_il Y_lj``, the dot product of row i of X and column j of Y;
* eq. (2), columns: ``(XY)_.j = sum_l Y_lj X_.l``, a combination of the columns of X;
* eq. (3), rows: ``(XY)_i. = sum_l X_il Y_l.``, a combination of the rows of Y;
* outer products: ``XY = sum_l X_.l Y_l.``, a sum of m rank-1 matrices.

Each function computes the product *that way*, for single matrices or stacks of them (leading
dimensions broadcast like ``@``). They are written to be read, not to be fast: use ``@``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from course_lib.checks import as_array, matmul_shapes

__all__ = ["matmul_columns", "matmul_entries", "matmul_outer", "matmul_rows", "outer_terms"]


def _batched_matmul_like(fn2d: Callable[[np.ndarray, np.ndarray], np.ndarray]):
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


@_batched_matmul_like
def matmul_entries(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Product entry by entry, eq. (1): ``(XY)_ij = X_i. Y_.j``.

    >>> matmul_entries([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    array([[19., 22.],
           [43., 50.]])
    """
    n, m = X.shape
    k = Y.shape[1]
    out = np.empty((n, k))
    for i in range(n):
        for j in range(k):
            out[i, j] = sum(X[i, l] * Y[l, j] for l in range(m))
    return out


@_batched_matmul_like
def matmul_columns(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Product column by column, eq. (2): column j of XY is ``sum_l Y_lj X_.l``.

    >>> matmul_columns([[1, 2], [3, 4]], [[1], [10]])  # 1 * column 0 + 10 * column 1
    array([[21.],
           [43.]])
    """
    n, m = X.shape
    k = Y.shape[1]
    out = np.zeros((n, k))
    for j in range(k):
        for l in range(m):
            out[:, j] += Y[l, j] * X[:, l]
    return out


@_batched_matmul_like
def matmul_rows(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Product row by row, eq. (3): row i of XY is ``sum_l X_il Y_l.``.

    >>> matmul_rows([[1, 10]], [[1, 2], [3, 4]])  # 1 * row 0 + 10 * row 1
    array([[31., 42.]])
    """
    n, m = X.shape
    k = Y.shape[1]
    out = np.zeros((n, k))
    for i in range(n):
        for l in range(m):
            out[i, :] += X[i, l] * Y[l, :]
    return out


@_batched_matmul_like
def outer_terms(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The m rank-1 terms of XY: ``terms[l] = outer(X_.l, Y_l.)``, shape (..., m, n, k).

    >>> t = outer_terms([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    >>> t.shape
    (2, 2, 2)
    >>> t[0]  # column 0 of X times row 0 of Y
    array([[ 5.,  6.],
           [15., 18.]])
    """
    m = X.shape[1]
    return np.stack([np.outer(X[:, l], Y[l, :]) for l in range(m)])


@_batched_matmul_like
def matmul_outer(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Product as a sum of outer products: ``XY = sum_l X_.l Y_l.``.

    >>> matmul_outer([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    array([[19., 22.],
           [43., 50.]])
    """
    n, m = X.shape
    k = Y.shape[1]
    out = np.zeros((n, k))
    for l in range(m):
        out += np.outer(X[:, l], Y[l, :])
    return out
