"""Input handling shared by the PyTorch implementations."""

from __future__ import annotations

from typing import Any

import torch

from course_lib.checks import as_tensor, matmul_shapes, same_device_and_dtype


def matmul_operands(X: Any, Y: Any) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...]]:
    """Check two operands of a matrix product; return them and the product's shape."""
    X = as_tensor(X, "X", min_ndim=2)
    Y = as_tensor(Y, "Y", min_ndim=2)
    same_device_and_dtype(X=X, Y=Y)
    return X, Y, matmul_shapes(tuple(X.shape), tuple(Y.shape))
