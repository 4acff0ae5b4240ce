"""The position-encoding explorer of Chapter 6: sinusoidal and rotary encodings side by side.

:func:`encoding_view` (the numbers) and :func:`render_html` (a picture of them) are pure and tested
without a browser; :func:`explorer` only wires ipywidgets controls to them.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import numpy as np

from course_lib.checks import check_choice, check_int
from course_lib.interact import live_html
from course_lib.positions.checks import check_base, check_even
from course_lib.positions.reference import rotary_embedding, sinusoidal_encoding

KINDS = ("sinusoidal", "rotary")


def encoding_view(
    kind: str = "sinusoidal",
    d_model: int = 64,
    base: float = 10000.0,
    n_positions: int = 50,
    position: int = 10,
) -> dict[str, Any]:
    """What the explorer shows, as arrays.

    * ``table`` (n_positions, d_model): for ``"sinusoidal"`` the rows PE(0), PE(1), ... of
      eq. (19); for ``"rotary"`` a fixed random query q rotated to each position, rot(q, m);
    * ``similarity`` (n_positions, n_positions): for ``"sinusoidal"`` ``PE(m) . PE(n)``, for
      ``"rotary"`` the attention score ``rot(q, m) . rot(k, n)`` of a fixed random query and key;
      both depend on ``m - n`` only;
    * ``row``: the similarity of ``position`` with every position;
    * ``wavelengths``: ``2 pi / w_i`` for every pair i, in positions;
    * ``formula``: one line saying what the similarity is.

    >>> v = encoding_view("sinusoidal", d_model=4, n_positions=3, position=0)
    >>> v["table"].shape, v["similarity"].shape
    ((3, 4), (3, 3))
    >>> np.allclose(v["row"], [2, np.cos(1) + np.cos(0.01), np.cos(2) + np.cos(0.02)])
    True
    """
    kind = check_choice(kind, "kind", KINDS)
    d = check_even(d_model, "d_model")
    base = check_base(base)
    n = check_int(n_positions, "n_positions", low=2)
    position = check_int(position, "position", low=0, high=n - 1)
    w = base ** (-2 * np.arange(d // 2) / d)
    if kind == "sinusoidal":
        table = sinusoidal_encoding(n, d, base)  # (n, d)
        similarity = table @ table.T  # (n, n): sum_i cos((m - n) w_i)
        formula = "PE(m) · PE(n) = Σ_i cos((m − n) w_i): a function of the offset m − n only"
    else:
        rng = np.random.default_rng(0)
        q, k = rng.standard_normal((2, d)) / d**0.25  # a fixed query and key
        rows = np.arange(n)
        table = rotary_embedding(np.tile(q, (n, 1)), rows, base)  # (n, d): rot(q, m)
        keys = rotary_embedding(np.tile(k, (n, 1)), rows, base)  # (n, d): rot(k, n)
        similarity = table @ keys.T  # (n, n)
        formula = "rot(q, m) · rot(k, n) = q · rot(k, n − m): a function of the offset only"
    return {
        "table": table,
        "similarity": similarity,
        "row": similarity[position],
        "wavelengths": 2 * np.pi / w,
        "formula": formula,
        "kind": kind,
        "position": position,
    }


def render_html(view: dict[str, Any]) -> str:
    """An HTML fragment: a PNG with the table, the similarity matrix and the chosen row, and the
    formula underneath.

    >>> "data:image/png;base64," in render_html(encoding_view(d_model=8, n_positions=10, position=3))
    True
    """
    from matplotlib.figure import Figure  # not pyplot: no backend, nothing left open

    from course_lib.plotting import heatmap, use_style

    use_style()
    fig = Figure(figsize=(11, 3.2), dpi=64)
    axes = fig.subplots(1, 3)
    what = "PE(pos)" if view["kind"] == "sinusoidal" else "rot(q, pos)"
    im_table = heatmap(
        axes[0],
        view["table"],
        title=f"{what}, one row per position",
        xlabel="dimension",
        ylabel="position",
        cmap="RdBu",
    )
    im_sim = heatmap(
        axes[1],
        view["similarity"],
        title="similarity of positions m and n",
        xlabel="position n",
        ylabel="position m",
        cmap="RdBu",
    )
    for im in (im_table, im_sim):
        im.set_interpolation("nearest")  # one flat colour per cell: crisper and a smaller PNG
    p = view["position"]
    axes[2].plot(view["row"], marker=".", lw=1)
    axes[2].axvline(p, color="grey", ls=":", lw=1)
    axes[2].set_title(f"row m = {p} of the similarity")
    axes[2].set_xlabel("position n")
    axes[2].set_ylabel("similarity")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    png = base64.b64encode(buf.getvalue()).decode("ascii")
    longest = view["wavelengths"].max()
    return (
        '<div class="positions-explorer">'
        f'<img alt="{html.escape(what)} and its similarities" src="data:image/png;base64,{png}"/>'
        f"<p>{html.escape(view['formula'])}. Wavelengths from "
        f"{view['wavelengths'].min():.2f} to {longest:.4g} positions.</p></div>"
    )


def explorer(d_model: int = 32, n_positions: int = 50):
    """An ipywidgets explorer: kind, d_model, base, number of positions and the chosen position."""
    import ipywidgets as w

    kind = w.ToggleButtons(options=list(KINDS), value="sinusoidal", description="encoding")
    sd = w.IntSlider(check_even(d_model, "d_model"), 2, 128, step=2, description="d_model")
    sb = w.FloatLogSlider(10000.0, base=10, min=1, max=5, step=0.5, description="base")
    sn = w.IntSlider(check_int(n_positions, "n_positions", low=2), 2, 128, description="positions")
    sp = w.IntSlider(0, 0, sn.value - 1, description="position m")

    def render() -> str:
        sp.max = sn.value - 1
        return render_html(encoding_view(kind.value, sd.value, sb.value, sn.value, sp.value))

    out = live_html([kind, sd, sb, sn, sp], render)
    return w.VBox([kind, w.HBox([sd, sb]), w.HBox([sn, sp]), out])
