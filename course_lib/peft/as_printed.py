"""Strabel's notes' LoRA update as printed (section 11.1), kept to show what it gets wrong.

The notes replace ``W0`` by "frozen(W0) + BA": no ``alpha / r`` scale. It equals the paper's
``W0 + (alpha / r) B A`` only when ``alpha = r`` (the chapter's errata section asserts both).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import as_array
from course_lib.peft.reference import check_lora_shapes

__all__ = ["lora_weight_as_printed"]


def lora_weight_as_printed(W: Any, A: Any, B: Any) -> np.ndarray:
    """``W + B A``, the notes' form, unscaled.

    >>> lora_weight_as_printed(np.zeros((2, 2)), np.array([[1.0, 2.0]]), np.array([[1.0], [0.0]]))
    array([[1., 2.],
           [0., 0.]])
    """
    W, A, B = as_array(W, "W", ndim=2), as_array(A, "A", ndim=2), as_array(B, "B", ndim=2)
    check_lora_shapes(W.shape, A.shape, B.shape)
    return W + B @ A
