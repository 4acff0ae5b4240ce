"""The matrix-product explorer of Chapter 1: which parts of X and Y make a part of XY.

:func:`highlight` and :func:`render_html` are pure (tested without a browser); :func:`explorer`
only wires ipywidgets controls to them.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from course_lib.checks import as_array, check_choice, check_int, matmul_shapes
from course_lib.interact import live_html

VIEWS = ("entry", "column", "row", "outer")


def highlight(view: str, i: int, j: int, l: int, n: int, m: int, k: int):
    """Boolean masks (for X, Y, XY) of what produces the chosen part of XY, and its formula.

    * ``entry`` (i, j): row i of X and column j of Y give entry (i, j), eq. (1);
    * ``column`` j: every column of X, weighted by column j of Y, gives column j, eq. (2);
    * ``row`` i: every row of Y, weighted by row i of X, gives row i, eq. (3);
    * ``outer`` l: column l of X times row l of Y is the l-th rank-1 term, added to all of XY.

    >>> mx, my, mxy, formula = highlight("entry", 0, 1, 0, 2, 3, 2)
    >>> mx.astype(int).tolist(), my.astype(int).tolist(), mxy.astype(int).tolist()
    ([[1, 1, 1], [0, 0, 0]], [[0, 1], [0, 1], [0, 1]], [[0, 1], [0, 0]])
    >>> formula
    '(XY)[0, 1] = sum over l of X[0, l] * Y[l, 1]'
    """
    check_choice(view, "view", VIEWS)
    for name, v, size in (("i", i, n), ("j", j, k), ("l", l, m)):
        check_int(v, name, low=0, high=size - 1)
    mx, my, mxy = (np.zeros(s, dtype=bool) for s in ((n, m), (m, k), (n, k)))
    if view == "entry":
        mx[i, :], my[:, j], mxy[i, j] = True, True, True
        formula = f"(XY)[{i}, {j}] = sum over l of X[{i}, l] * Y[l, {j}]"
    elif view == "column":
        mx[:, :], my[:, j], mxy[:, j] = True, True, True
        formula = f"(XY)[:, {j}] = sum over l of Y[l, {j}] * X[:, l]"
    elif view == "row":
        mx[i, :], my[:, :], mxy[i, :] = True, True, True
        formula = f"(XY)[{i}, :] = sum over l of X[{i}, l] * Y[l, :]"
    else:
        mx[:, l], my[l, :], mxy[:, :] = True, True, True
        formula = f"term {l} = outer(X[:, {l}], Y[{l}, :]), one of the {m} terms summed into XY"
    return mx, my, mxy, formula


def _table(M: np.ndarray, mask: np.ndarray, name: str, colour: str) -> str:
    rows = []
    for r in range(M.shape[0]):
        cells = "".join(
            f'<td style="padding:3px 7px;border:1px solid #ccc;text-align:right;'
            f'background:{colour if mask[r, c] else "#fff"}">{M[r, c]:.3g}</td>'
            for c in range(M.shape[1])
        )
        rows.append(f"<tr>{cells}</tr>")
    return (
        f'<div style="display:inline-block;margin:0 12px;vertical-align:middle">'
        f'<div style="text-align:center;font-weight:bold">{html.escape(name)} '
        f"{M.shape[0]}×{M.shape[1]}</div>"
        f'<table style="border-collapse:collapse">{"".join(rows)}</table></div>'
    )


def render_html(X: Any, Y: Any, view: str = "entry", i: int = 0, j: int = 0, l: int = 0) -> str:
    """HTML of X, Y and XY (or the chosen outer-product term) with the chosen parts highlighted.

    >>> "sum over l of X[1, l]" in render_html(np.eye(2), np.ones((2, 3)), "row", i=1)
    True
    """
    X = as_array(X, "X", ndim=2)
    Y = as_array(Y, "Y", ndim=2)
    n, k = matmul_shapes(X.shape, Y.shape)
    m = X.shape[1]
    mx, my, mxy, formula = highlight(view, i, j, l, n, m, k)
    if view == "outer":
        result, rname = np.outer(X[:, l], Y[l, :]), f"term {l}"
    else:
        result, rname = X @ Y, "XY"
    return (
        '<div class="matmul-explorer">'
        + _table(X, mx, "X", "#cde4f7")
        + '<span style="font-size:20px">·</span>'
        + _table(Y, my, "Y", "#fde2b8")
        + '<span style="font-size:20px">=</span>'
        + _table(result, mxy, rname, "#c9ecd9")
        + f'<p style="font-family:monospace">{html.escape(formula)}</p></div>'
    )


def explorer(X: Any, Y: Any):
    """An ipywidgets explorer: choose a view and an index, see the highlighted computation."""
    import ipywidgets as w

    X = as_array(X, "X", ndim=2)
    Y = as_array(Y, "Y", ndim=2)
    n, k = matmul_shapes(X.shape, Y.shape)
    m = X.shape[1]
    view = w.ToggleButtons(options=list(VIEWS), value="entry", description="view")
    si = w.IntSlider(0, 0, n - 1, description="row i")
    sj = w.IntSlider(0, 0, k - 1, description="column j")
    sl = w.IntSlider(0, 0, m - 1, description="term l")

    def enable_sliders() -> None:  # only the indices the chosen view uses
        si.disabled = view.value in ("column", "outer")
        sj.disabled = view.value in ("row", "outer")
        sl.disabled = view.value != "outer"

    out = live_html(
        [view, si, sj, sl],
        lambda: render_html(X, Y, view.value, si.value, sj.value, sl.value),
        before=enable_sliders,
    )
    return w.VBox([view, w.HBox([si, sj, sl]), out])
