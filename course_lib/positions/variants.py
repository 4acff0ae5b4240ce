"""Sinusoidal tables as code bases other than the paper compute them (Chapter 6).

The paper's table (eq. 19 of Strabel's notes, :func:`course_lib.positions.reference.sinusoidal_encoding`)
uses the frequencies ``w_i = 10000^(-2i/d)`` for pairs ``i = 0 .. d/2 - 1``. tensor2tensor's
``get_timing_signal_1d``, which many later code bases copied, differs in two ways: the sines fill
the first half and the cosines the second (a permutation of the columns), and its frequencies are
spaced so that the last one is exactly ``1/10000``: ``w_i = 10000^(-i/(d/2 - 1))``. The second
difference is not a permutation, so the two tables hold different numbers.

>>> t = tensor2tensor_encoding(3, 4)  # pairs: w_0 = 1, w_1 = 1/10000
>>> [round(float(v), 4) for v in t[1]]  # position 1: sin(1), sin(1e-4), cos(1), cos(1e-4)
[0.8415, 0.0001, 0.5403, 1.0]
"""

from __future__ import annotations

import numpy as np

from course_lib.checks import check_int
from course_lib.positions.checks import check_base, check_even

__all__ = ["tensor2tensor_encoding", "tensor2tensor_frequencies"]


def tensor2tensor_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """The d/2 frequencies of tensor2tensor's table: ``base^(-i/(d/2 - 1))``, from 1 to 1/base.

    >>> [float(w) for w in tensor2tensor_frequencies(6)]
    [1.0, 0.01, 0.0001]
    """
    half = check_even(d_model, "d_model") // 2
    base = check_base(base)
    if half == 1:
        return np.ones(1)
    return base ** (-np.arange(half) / (half - 1))


def tensor2tensor_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The (num_positions, d_model) table: ``[sin(pos w_i) for i] + [cos(pos w_i) for i]``."""
    n = check_int(num_positions, "num_positions", low=1)
    angles = np.arange(n)[:, None] * tensor2tensor_frequencies(d_model, base)[None, :]  # (n, d/2)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
