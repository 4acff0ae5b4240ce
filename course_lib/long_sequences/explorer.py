"""Chapter 11's pattern explorer on the website: every sparse pattern over a few lengths,
windows and strides, precomputed.

The same :func:`pattern_view` and :func:`render_html` the notebook's ``pattern_explorer(L=32)``
calls; a pattern that ignores a control (the window of a strided pattern) is drawn once, since
its view is the same; see :mod:`course_lib.static_explorer`.

>>> explorer().value("sliding window", 16, 1, 4)  # 16 x 3 in the band, less 2 at the ends
46
"""

from __future__ import annotations

from course_lib.long_sequences.widget import KINDS, pattern_view, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "pattern_explorer(L=32)"
N_GLOBAL = 1  # the widget's default number of global tokens (or blocks)
_drawn: dict[tuple, str] = {}


def render(kind: str, L: int, window: int, stride: int) -> str:
    view = pattern_view(kind, L, window, stride, N_GLOBAL)
    key = (kind, L, view["mask"].tobytes())  # render_html reads only the view
    if key not in _drawn:
        _drawn[key] = render_html(view)
    return _drawn[key]


def computed(kind: str, L: int, window: int, stride: int) -> int:
    """How many of the L^2 entries the pattern computes."""
    return pattern_view(kind, L, window, stride, N_GLOBAL)["computed"]


def explorer() -> Explorer:
    return Explorer(
        "long-sequences",
        "Explore sparse attention patterns",
        (
            Control("kind", "pattern", KINDS, "strided", kind="select"),
            Control("L", "L", (16, 32, 64), 32),
            Control("window", "window", (1, 2, 4), 2),
            Control("stride", "stride/block", (2, 4, 8), 4),
        ),
        render=render,
        value=computed,
    )
