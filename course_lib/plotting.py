"""One visual style for every figure of the course.

Every figure has a title and labelled axes: the helpers below take them as required arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

#: Colour cycle (colour-blind safe, Okabe & Ito 2008) shared by all chapters.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")

STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.frameon": False,
    "font.size": 10,
    "axes.prop_cycle": mpl.cycler(color=PALETTE),
    "image.cmap": "viridis",
    "svg.hashsalt": "course",  # deterministic SVG ids
}


def use_style() -> None:
    """Apply the course style to all later matplotlib figures."""
    mpl.rcParams.update(STYLE)


def new_axes(
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    figsize: tuple[float, float] | None = None,
    logx: bool = False,
    logy: bool = False,
) -> tuple[plt.Figure, plt.Axes]:
    """Create a figure with one titled, labelled axes.

    >>> fig, ax = new_axes("Cost", "n", "seconds", logx=True)
    >>> ax.get_title(), ax.get_xlabel(), ax.get_xscale()
    ('Cost', 'n', 'log')
    >>> plt.close(fig)
    """
    use_style()
    if not title or not xlabel or not ylabel:
        raise ValueError("every figure needs a title and labels for both axes")
    fig, ax = plt.subplots(figsize=figsize)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    return fig, ax


def heatmap(
    ax: plt.Axes,
    matrix: np.ndarray,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    annotate: bool = False,
    fmt: str = "{:.2f}",
    cmap: str = "viridis",
    colorbar: bool = True,
) -> mpl.image.AxesImage:
    """Draw a matrix as a heatmap (row 0 at the top), optionally writing each value in its cell."""
    use_style()
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {m.shape}")
    im = ax.imshow(m, cmap=cmap, aspect="auto")
    ax.grid(False)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if xticklabels is not None:
        ax.set_xticks(range(len(xticklabels)), labels=list(xticklabels), rotation=45, ha="right")
    if yticklabels is not None:
        ax.set_yticks(range(len(yticklabels)), labels=list(yticklabels))
    if annotate:
        mid = (np.nanmax(m) + np.nanmin(m)) / 2
        for (i, j), v in np.ndenumerate(m):
            ax.text(
                j,
                i,
                fmt.format(v),
                ha="center",
                va="center",
                fontsize=8,
                color="white" if v < mid else "black",
            )
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return im
