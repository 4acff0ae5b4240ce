"""Chapter 12's quantisation explorer on the website (part 2, section 12.10): every scheme,
block size and number of outliers of the notebook's ``explorer()``, precomputed.

The same :func:`course_lib.number_formats.quantisation_widget.render_html` the notebook's call
shows; see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, ex.value("int8", 64, 0)[0]  # 8 bits a code + 32 bits a scale per 64 weights
(36, 8.5)
"""

from __future__ import annotations

from course_lib.number_formats.quantisation_widget import (
    BLOCKS,
    SCHEMES,
    quantisation_summary,
    render_html,
)
from course_lib.static_explorer import Control, Explorer

CALL = 'explorer("NF4", 64, 16)'


def summary(scheme: str, block: int, outliers: int) -> list[float]:
    """(bits per weight, RMS error / std), rounded to 4 decimals."""
    s = quantisation_summary(scheme, block, outliers)
    return [round(s["bits"], 4), round(s["rms"], 4)]


def explorer() -> Explorer:
    labels = tuple(str(b) if b else "whole matrix" for b in BLOCKS)
    return Explorer(
        "quantisation",
        "Explore bits per weight against error",
        (
            Control("scheme", "scheme", SCHEMES, default="NF4", kind="select"),
            Control("block", "block", BLOCKS, default=64, kind="select", labels=labels),
            Control("outliers", "outliers", (0, 16, 256), default=16, kind="select"),
        ),
        render=render_html,
        value=summary,
    )
