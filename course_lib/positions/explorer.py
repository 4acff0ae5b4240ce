"""Chapter 6's position explorer on the website: sinusoidal and rotary encodings, precomputed
over two bases and two positions (d_model 32 and 50 positions, as in the notebook; each setting
is a PNG of about 85 KB, so the grid stays small).

The same :func:`course_lib.positions.widget.encoding_view` and ``render_html`` the notebook's
``explorer(d_model=32, n_positions=50)`` calls; see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, ex.value("sinusoidal", 10000.0, 0)[0]  # PE(0) . PE(0) = d_model / 2
(8, 16.0)
"""

from __future__ import annotations

from course_lib.positions.widget import KINDS, encoding_view, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "explorer(d_model=32, n_positions=50)"
D_MODEL, N_POSITIONS = 32, 50


def render(kind: str, base: float, position: int) -> str:
    return render_html(encoding_view(kind, D_MODEL, base, N_POSITIONS, position))


def similarities(kind: str, base: float, position: int) -> list[float]:
    """The similarity of position m with positions m, m + 1, m + 2 (rounded to 6 decimals)."""
    row = encoding_view(kind, D_MODEL, base, N_POSITIONS, position)["row"]
    return [round(float(v), 6) for v in row[position : position + 3]]


def explorer() -> Explorer:
    return Explorer(
        "positions",
        "Explore sinusoidal and rotary encodings",
        (
            Control("kind", "encoding", KINDS, kind="select"),
            Control("base", "base", (100.0, 10000.0), default=10000.0, labels=("100", "10000")),
            Control("position", "position m", (0, 25)),
        ),
        render=render,
        value=similarities,
    )
