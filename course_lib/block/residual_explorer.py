"""Chapter 5's residual explorer on the website (section 5.3): gradients through a chain of
layers with and without residual connections, precomputed for three depths and four gains.

The same :func:`course_lib.block.residual.render_html` the notebook's
``residual_explorer(depth=24, gain=0.5)`` calls; see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, ex.value(24, 0.5)[0] < -3 < 0 < ex.value(24, 0.5)[1]  # plain vanishes, residual not
(12, True)
"""

from __future__ import annotations

import math

from course_lib.block.residual import chain_gradients, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "residual_explorer(depth=24, gain=0.5)"


def log_gradients(depth: int, gain: float) -> list[float]:
    """log10 of the gradient at the input, (plain, residual), rounded to 2 decimals."""
    g = chain_gradients(depth, gain)
    return [round(math.log10(float(g[k][0])), 2) for k in ("plain", "residual")]


def explorer() -> Explorer:
    return Explorer(
        "residual",
        "Explore gradients through deep chains, with and without residuals",
        (
            Control("depth", "layers", (6, 24, 48), default=24),
            Control("gain", "gain of the weights", (0.25, 0.5, 1.0, 2.0), default=0.5),
        ),
        render=render_html,
        value=log_gradients,
    )
