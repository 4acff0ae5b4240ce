"""The course's entry to ``./course challenge int4``: chapter 12's absmax, 4 bits, groups of 64.

An entry defines ``quantise(w) -> (codes, scale, offset)`` for one float32 matrix ``w`` of shape
(rows, cols), cols a multiple of 64: ``codes`` uint8 in 0..15 of ``w``'s shape, ``scale`` and
``offset`` float16 of shape (rows, cols // 64), one pair per group of 64 consecutive weights of a
row; the weight read back is ``codes * scale + offset`` (4.5 bits per weight in all).
"""

import numpy as np


def quantise(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = w.shape
    g = w.reshape(rows, cols // 64, 64)
    scale = (np.abs(g).max(axis=2) / 7).astype(np.float16)  # symmetric: -7..7 around 8
    safe = np.where(scale > 0, scale, 1).astype(np.float32)
    q = np.clip(np.round(g / safe[..., None]), -7, 7) + 8
    codes = q.astype(np.uint8).reshape(rows, cols)
    return codes, scale, (-8 * scale.astype(np.float32)).astype(np.float16)
