"""Chapter 6's integer bookkeeping: tables of offsets, ALiBi's slopes, a binary counter.

Nothing here needs a PyTorch twin: these functions return index tables or lists of a few numbers.

* :func:`relative_offsets`: the (L, L) table of offsets ``j - i``, optionally clipped (Shaw et al.);
* :func:`alibi_slopes`: the fixed per-head slopes of ALiBi (Press et al. 2022);
* :func:`binary_table`: the binary counter of May's notes (section 1.4).
"""

from __future__ import annotations

import math

import numpy as np

from course_lib.checks import check_int

__all__ = ["alibi_slopes", "binary_table", "relative_offsets"]


def relative_offsets(length: int, max_offset: int | None = None) -> np.ndarray:
    """The (L, L) integer table of relative offsets ``j - i``, clipped to ``[-K, K]`` if given.

    Row i is the query, column j the key; negative offsets look back. ``max_offset`` K must be
    non-negative (K = 0 makes every position look the same).

    >>> relative_offsets(4, max_offset=2)
    array([[ 0,  1,  2,  2],
           [-1,  0,  1,  2],
           [-2, -1,  0,  1],
           [-2, -2, -1,  0]])
    >>> relative_offsets(3, max_offset=-1)
    Traceback (most recent call last):
    ...
    ValueError: max_offset must be at least 0, got -1
    """
    L = check_int(length, "length", low=1)
    i = np.arange(L)
    off = i[None, :] - i[:, None]
    if max_offset is None:
        return off
    K = check_int(max_offset, "max_offset", low=0)
    return np.clip(off, -K, K)


def alibi_slopes(num_heads: int) -> list[float]:
    """ALiBi's head slopes: the geometric sequence ``2^(-8/h), 2^(-16/h), ..., 2^(-8)``.

    For a number of heads that is not a power of two, Press et al. take the slopes of the next
    lower power of two n and add every other slope of 2n (their reference code).

    >>> alibi_slopes(4)
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> [round(s, 4) for s in alibi_slopes(6)]
    [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    h = check_int(num_heads, "num_heads", low=1)

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(h).is_integer():
        return power_of_two(h)
    closest = 2 ** math.floor(math.log2(h))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: h - closest]


def binary_table(n: int, bits: int) -> np.ndarray:
    """The binary counter of ``004`` section 1.4: row p holds the bits of p, most significant first.

    >>> binary_table(4, 3)
    array([[0, 0, 0],
           [0, 0, 1],
           [0, 1, 0],
           [0, 1, 1]])
    """
    n = check_int(n, "n", low=1)
    bits = check_int(bits, "bits", low=1)
    if n > 2**bits:
        raise ValueError(f"{bits} bits count up to {2**bits - 1}, but n={n} rows were asked for")
    p = np.arange(n)[:, None]
    return (p >> np.arange(bits - 1, -1, -1)[None, :]) & 1
