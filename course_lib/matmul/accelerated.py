"""Four ways to read a matrix product, in PyTorch (Chapter 1; notes ``002`` eqs. 1-3).

Same names and signatures as :mod:`course_lib.matmul.reference`, but batched (leading dimensions
broadcast), on any device, in the inputs' dtype, and differentiable. Each view is vectorised over
the dimensions it does not single out, so the loop that remains is the one the equation names.
``torch.matmul`` is still much faster: these exist to show the views, not to replace it.
"""

from __future__ import annotations

from typing import Any

import torch

from course_lib.checks import as_tensor, matmul_shapes, same_device_and_dtype

__all__ = ["matmul_columns", "matmul_entries", "matmul_outer", "matmul_rows", "outer_terms"]


def _matmul_operands(X: Any, Y: Any) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...]]:
    """Check two operands of a matrix product; return them and the product's shape."""
    X = as_tensor(X, "X", min_ndim=2)
    Y = as_tensor(Y, "Y", min_ndim=2)
    same_device_and_dtype(X=X, Y=Y)
    return X, Y, matmul_shapes(tuple(X.shape), tuple(Y.shape))


def matmul_entries(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Every entry as a dot product, eq. (1), all at once (uses n*m*k memory).

    >>> matmul_entries(torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([[5., 6.], [7., 8.]]))
    tensor([[19., 22.],
            [43., 50.]])
    """
    X, Y, _ = _matmul_operands(X, Y)
    # X[..., i, l, None] * Y[..., None, l, j] summed over l
    return (X.unsqueeze(-1) * Y.unsqueeze(-3)).sum(dim=-2)  # (..., n, k)


def matmul_columns(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Column j of XY is X's columns weighted by column j of Y, eq. (2); loop over j.

    >>> matmul_columns(torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([[1.], [10.]]))
    tensor([[21.],
            [43.]])
    """
    X, Y, _ = _matmul_operands(X, Y)
    cols = [(X * Y[..., None, :, j]).sum(dim=-1) for j in range(Y.shape[-1])]  # each (..., n)
    return torch.stack(cols, dim=-1)  # (..., n, k)


def matmul_rows(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Row i of XY is Y's rows weighted by row i of X, eq. (3); loop over i.

    >>> matmul_rows(torch.tensor([[1., 10.]]), torch.tensor([[1., 2.], [3., 4.]]))
    tensor([[31., 42.]])
    """
    X, Y, _ = _matmul_operands(X, Y)
    rows = [(X[..., i, :, None] * Y).sum(dim=-2) for i in range(X.shape[-2])]  # each (..., k)
    return torch.stack(rows, dim=-2)  # (..., n, k)


def outer_terms(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """The m rank-1 terms ``outer(X_.l, Y_l.)``, shape (..., m, n, k).

    >>> outer_terms(torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([[5., 6.], [7., 8.]]))[0]
    tensor([[ 5.,  6.],
            [15., 18.]])
    """
    X, Y, _ = _matmul_operands(X, Y)
    return X.transpose(-2, -1).unsqueeze(-1) * Y.unsqueeze(-2)  # (..., m, n, 1) * (..., m, 1, k)


def matmul_outer(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """XY as a running sum of m outer products; loop over l (memory n*k, not m*n*k).

    >>> matmul_outer(torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([[5., 6.], [7., 8.]]))
    tensor([[19., 22.],
            [43., 50.]])
    """
    X, Y, shape = _matmul_operands(X, Y)
    out = torch.zeros(shape, dtype=X.dtype, device=X.device)
    for l in range(X.shape[-1]):
        out = out + X[..., :, l, None] * Y[..., None, l, :]  # (..., n, 1) * (..., 1, k)
    return out
