"""Chapter 1's explorer on the website: the four views of XY, precomputed over every index.

The same :func:`course_lib.matmul.widget.render_html` the notebook's ``explorer(X, Y)`` calls,
on the notebook's X (2, 3) and Y (3, 2); see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, ex.value(view="entry", i=1, j=0, l=0)  # 0*1 + 1*2 + 3*1
(48, [5.0])
"""

from __future__ import annotations

import numpy as np

from course_lib.matmul.widget import VIEWS, highlight, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "explorer(X, Y)"  # the notebook cell whose frozen widget the website replaces
X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])  # (n, m) = (2, 3), as in section 1.2
Y = np.array([[1.0, 4.0], [2.0, 0.0], [1.0, 1.0]])  # (m, k) = (3, 2)


def highlighted(view: str, i: int, j: int, l: int) -> list[float]:
    """The entries of the result (XY, or term l) that the chosen view highlights, row by row."""
    n, m = X.shape
    _, _, mxy, _ = highlight(view, i, j, l, n, m, Y.shape[1])
    result = np.outer(X[:, l], Y[l, :]) if view == "outer" else X @ Y
    return result[mxy].tolist()


def explorer() -> Explorer:
    n, m = X.shape
    k = Y.shape[1]
    return Explorer(
        "matmul",
        "Explore the four views of XY",
        (
            Control("view", "view", VIEWS, kind="select"),
            Control("i", "row i", tuple(range(n))),
            Control("j", "column j", tuple(range(k))),
            Control("l", "term l", tuple(range(m))),
        ),
        render=lambda view, i, j, l: render_html(X, Y, view, i, j, l),
        value=highlighted,
    )
