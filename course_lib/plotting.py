"""One visual style for every figure of the course.

Every figure has a title and labelled axes: the helpers below take them as required arguments.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from functools import partial

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


# -- alt text ---------------------------------------------------------------------------------
#
# Every figure a notebook shows carries alt text in its output's metadata,
# ``{"image/png": {"alt": "..."}}``, which the website's ``<img>`` receives (book/_ext/alt_text.py).
# It is generated from the figure itself when the figure is displayed: the titles, the axes'
# labels and ranges, what is drawn (lines and their legend labels, points, bars, images). A
# chapter may add its own sentence of what the figure shows with ``describe(fig, "...")``.

_ALT_ATTR = "_course_alt_sentence"
_MAX_SERIES = 6


def describe(fig: plt.Figure, sentence: str) -> plt.Figure:
    """Give ``fig`` one sentence of what it shows; its alt text ends with it.

    >>> fig, ax = new_axes("Cost", "n", "seconds")
    >>> _ = describe(fig, "The cost grows like n squared.")
    >>> alt_text(fig).endswith("The cost grows like n squared.")
    True
    >>> plt.close(fig)
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"describe needs a matplotlib Figure as fig, got {type(fig).__name__}")
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError("describe needs a non-empty sentence")
    setattr(fig, _ALT_ATTR, sentence.strip())
    return fig


def _num(x: float) -> str:
    return f"{x:.3g}"


def _axis_text(ax: plt.Axes, which: str, ranged: bool = True) -> str:
    label = (ax.get_xlabel() if which == "x" else ax.get_ylabel()).strip()
    lo, hi = ax.get_xlim() if which == "x" else ax.get_ylim()
    lo, hi = min(lo, hi), max(lo, hi)
    scale = ax.get_xscale() if which == "x" else ax.get_yscale()
    ticks = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    names = [t.get_text() for t in ticks if t.get_text()]
    text = f"{which} axis “{label}”" if label else f"unlabelled {which} axis"
    if names and not all(_is_number(n) for n in names):
        shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        return f"{text} ({len(names)} categories: {shown})"
    if not ranged:
        return text
    return f"{text} from {_num(lo)} to {_num(hi)}" + (
        f" ({scale} scale)" if scale != "linear" else ""
    )


def _is_number(text: str) -> bool:
    try:
        float(text.replace("\u2212", "-").replace("$", "").replace("{", "").replace("}", ""))
    except ValueError:
        return "10^" in text  # log-axis tick labels such as $\mathdefault{10^{2}}$
    return True


def _series_labels(artists) -> list[str]:
    return [a.get_label() for a in artists if a.get_label() and not a.get_label().startswith("_")]


def _labels_text(labels: list[str]) -> str:
    if not labels:
        return ""
    shown = ", ".join(f"“{x}”" for x in labels[:_MAX_SERIES])
    return f" ({shown}{', …' if len(labels) > _MAX_SERIES else ''})"


def _axes_alt(ax: plt.Axes, only: bool = False) -> str:
    """One sentence about one axes: its title, what is drawn, its axes and their ranges."""
    title = ax.get_title().strip() or ax.get_title(loc="left").strip()
    parts = []
    lines = [ln for ln in ax.get_lines() if len(np.atleast_1d(ln.get_xdata())) > 0]
    if lines:
        labels = _series_labels(lines)
        n = len(lines)
        parts.append(f"{n} line{'s' if n != 1 else ''}{_labels_text(labels)}")
    points = [c for c in ax.collections if isinstance(c, mpl.collections.PathCollection)]
    if points:
        n = sum(len(c.get_offsets()) for c in points)
        parts.append(f"{n} points{_labels_text(_series_labels(points))}")
    bars = [c for c in ax.containers if isinstance(c, mpl.container.BarContainer)]
    if bars:
        n = sum(len(c) for c in bars)
        parts.append(
            f"{n} bars in {len(bars)} group{'s' if len(bars) != 1 else ''}"
            f"{_labels_text(_series_labels(bars))}"
        )
    outlines = [p for p in ax.patches if isinstance(p, mpl.patches.Polygon)]
    if outlines:  # step histograms, filled polygons
        n = len(outlines)
        parts.append(
            f"{n} outlined area{'s' if n != 1 else ''} (e.g. step histograms)"
            f"{_labels_text(_series_labels(outlines))}"
        )
    fills = [c for c in ax.collections if isinstance(c, mpl.collections.PolyCollection)]
    if fills:
        parts.append(f"{len(fills)} shaded band{'s' if len(fills) != 1 else ''}")
    for im in ax.images:
        arr = np.ma.masked_invalid(np.asarray(im.get_array(), dtype=float))
        rows, cols = arr.shape[:2]
        if arr.count():
            parts.append(
                f"a {rows} by {cols} heat map with values from {_num(arr.min())} to "
                f"{_num(arr.max())}"
            )
        else:
            parts.append(f"a {rows} by {cols} heat map")
    drawn = "; ".join(parts) if parts else "no data drawn"
    if only:
        head = "It"  # the figure's one panel, named by the figure's title
    else:
        head = f"Panel “{title}”" if title else "An untitled panel"
    ranged = not ax.images  # a heat map's axes index its cells: its size says more
    x, y = _axis_text(ax, "x", ranged), _axis_text(ax, "y", ranged)
    return f"{head} shows {drawn}; {x}, {y}."


def alt_text(fig: plt.Figure) -> str:
    """Alt text for ``fig``: its title(s), each panel's content and axes, and its sentence.

    >>> fig, ax = new_axes("Softmax of two logits", "logit gap", "probability")
    >>> _ = ax.plot([0, 1, 2], [0.5, 0.73, 0.88], label="p(first)")
    >>> print(alt_text(fig))  # doctest: +NORMALIZE_WHITESPACE
    Figure “Softmax of two logits”. It shows 1 line (“p(first)”);
    x axis “logit gap” from -0.1 to 2.1, y axis “probability” from 0.481 to 0.899.
    >>> plt.close(fig)
    """
    if not isinstance(fig, mpl.figure.Figure):
        raise TypeError(f"alt_text needs a matplotlib Figure as fig, got {type(fig).__name__}")
    axes = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is None and ax.get_visible()]
    suptitle = fig._suptitle.get_text().strip() if fig._suptitle is not None else ""
    titles = [t for t in (ax.get_title().strip() for ax in axes) if t]
    if suptitle:
        name = suptitle
    elif titles:
        name = titles[0] if len(titles) == 1 else "; ".join(titles)
    else:
        name = ""
    head = f"Figure “{name}”." if name else "An untitled figure."
    if len(axes) > 1:
        head += f" {len(axes)} panels."
    only = len(axes) == 1 and axes[0].get_title().strip() in ("", name)
    body = " ".join(_axes_alt(ax, only) for ax in axes)
    sentence = getattr(fig, _ALT_ATTR, "")
    return " ".join(s for s in (head, body, sentence) if s)


def _png_with_alt(printer, fig):
    """The inline backend's PNG printer, with ``{"alt": alt_text(fig)}`` in its metadata."""
    out = printer(fig)
    if out is None:
        return None
    data, md = out if isinstance(out, tuple) else (out, None)
    md = dict(md or {})
    md["alt"] = alt_text(fig)
    return data, md


def install_alt_text(shell=None) -> bool:
    """Make IPython's PNG output of every Figure carry alt text; True if installed.

    Idempotent; re-checked before every cell, because ``%matplotlib inline`` or changing
    ``InlineBackend.figure_formats`` registers a new PNG printer. Outside IPython it does nothing.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython is a dependency of the course
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    formatter = shell.display_formatter.formatters["image/png"]
    try:
        printer = formatter.lookup_by_type(mpl.figure.Figure)
    except KeyError:
        printer = None
    if printer is None and "matplotlib_inline.backend_inline" not in sys.modules:
        # importing the inline backend registers its printers when it is the kernel's backend
        importlib.import_module("matplotlib_inline.backend_inline")

        try:
            printer = formatter.lookup_by_type(mpl.figure.Figure)
        except KeyError:
            printer = None
    if printer is not None and not getattr(printer, "_course_alt", False):
        wrapped = partial(_png_with_alt, printer)
        wrapped._course_alt = True
        formatter.for_type(mpl.figure.Figure, wrapped)
    if not getattr(shell, "_course_alt_hook", False):
        shell.events.register("pre_run_cell", lambda *_: install_alt_text(shell))
        shell.events.register("post_run_cell", lambda *_: install_alt_text(shell))
        shell._course_alt_hook = True
    return printer is not None


install_alt_text()
