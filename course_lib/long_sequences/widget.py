"""The pattern explorer of Chapter 11: each sparse pattern's mask for your L, window, stride and
number of global tokens, with the count of entries that are computed.

:func:`pattern_view` (the numbers) and :func:`render_html` (the picture) are pure and tested
without a browser; :func:`pattern_explorer` only wires ipywidgets controls to them.

>>> v = pattern_view("sliding window", L=8, window=1)
>>> v["computed"], v["dense"]
(22, 64)
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import numpy as np

from course_lib.checks import check_choice, check_int
from course_lib.interact import live_html
from course_lib.long_sequences import reference as ref

__all__ = ["KINDS", "pattern_explorer", "pattern_mask", "pattern_view", "render_html"]

KINDS = (
    "causal (dense)",
    "strided",
    "fixed",
    "sliding window",
    "dilated window",
    "Longformer",
    "BigBird",
)


def pattern_mask(
    kind: str, L: int, window: int = 2, stride: int = 4, n_global: int = 1, seed: int = 0
) -> np.ndarray:
    """The (L, L) mask of one pattern.

    * ``"strided"``, ``"fixed"``: the Sparse Transformer's patterns with ``stride`` (fixed: c = 1);
    * ``"sliding window"``: ``window`` neighbours each side; ``"dilated window"``: dilation 2;
    * ``"Longformer"``: the window plus the first ``n_global`` tokens as global tokens;
    * ``"BigBird"``: blocks of ``stride`` tokens, ``n_global`` global blocks at each end, a
      window of 3 blocks and one random block per row (the last, partial block cut off).

    >>> int(pattern_mask("Longformer", 5, window=1, n_global=1).sum())  # 13 in the band + 6
    19
    """
    kind = check_choice(kind, "kind", KINDS)
    L = check_int(L, "L", low=2)
    if kind == "causal (dense)":
        return np.tril(np.ones((L, L), dtype=bool))
    if kind == "strided":
        return ref.strided_mask(L, stride)
    if kind == "fixed":
        return ref.fixed_mask(L, stride, 1)
    if kind == "sliding window":
        return ref.sliding_window_mask(L, window)
    if kind == "dilated window":
        return ref.sliding_window_mask(L, window, dilation=2)
    if kind == "Longformer":
        n_global = check_int(n_global, "n_global", low=0, high=L)
        return ref.sliding_window_mask(L, window) | ref.global_mask(L, list(range(n_global)))
    block = check_int(stride, "stride", low=1, high=L)
    n_blocks = -(-L // block)
    n_random = 1 if n_blocks - 2 * n_global >= 4 else 0
    layout = ref.bigbird_layout(n_blocks, n_random, n_global, seed)
    return ref.expand_layout(layout, block)[:L, :L]


def pattern_view(
    kind: str, L: int = 32, window: int = 2, stride: int = 4, n_global: int = 1
) -> dict[str, Any]:
    """What the explorer shows: the mask, the number of computed entries and the dense L^2."""
    mask = pattern_mask(kind, L, window, stride, n_global)
    return {
        "kind": kind,
        "mask": mask,
        "computed": int(mask.sum()),
        "dense": L * L,
        "per_query": float(mask.sum(axis=1).mean()),
    }


def render_html(view: dict[str, Any]) -> str:
    """A PNG of the mask (rows: queries, columns: keys) and one line of counts.

    >>> "data:image/png;base64," in render_html(pattern_view("strided", L=8, stride=2))
    True
    """
    from matplotlib.figure import Figure  # not pyplot: no backend, nothing left open

    from course_lib.plotting import heatmap, use_style

    use_style()
    fig = Figure(figsize=(4.2, 4.0), dpi=64)
    ax = fig.subplots()
    im = heatmap(
        ax,
        view["mask"].astype(float),
        title=f"{view['kind']}: who attends to whom",
        xlabel="key j",
        ylabel="query i",
        cmap="Blues",
        colorbar=False,
    )
    im.set_interpolation("nearest")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    png = base64.b64encode(buf.getvalue()).decode("ascii")
    share = view["computed"] / view["dense"]
    return (
        '<div class="pattern-explorer">'
        f'<img alt="{html.escape(view["kind"])} mask" src="data:image/png;base64,{png}"/>'
        f"<p>{view['computed']:,} of {view['dense']:,} entries computed ({share:.0%}); "
        f"{view['per_query']:.1f} keys per query on average.</p></div>"
    )


def pattern_explorer(L: int = 32):
    """Choose a pattern, L, the window, the stride (or block) and the number of global tokens."""
    import ipywidgets as w

    kind = w.Dropdown(options=list(KINDS), value="strided", description="pattern")
    sl = w.IntSlider(check_int(L, "L", low=2), 8, 96, description="L")
    sw = w.IntSlider(2, 0, 8, description="window")
    ss = w.IntSlider(4, 1, 16, description="stride/block")
    sg = w.IntSlider(1, 0, 4, description="global")
    out = live_html(
        [kind, sl, sw, ss, sg],
        lambda: render_html(pattern_view(kind.value, sl.value, sw.value, ss.value, sg.value)),
    )
    return w.VBox([w.HBox([kind, sl]), w.HBox([sw, ss, sg]), out])
