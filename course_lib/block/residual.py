"""Gradients through a deep chain of layers, with and without residual connections (Chapter 5).

:func:`chain_gradients` is the computation behind section 5.3's demonstration and its explorer:
a chain of ``depth`` layers ``h -> tanh(h W)`` (plain) or ``h -> h + tanh(h W)`` (residual),
each ``W`` drawn from N(0, gain^2 / d), and the norm of the gradient of ``sum(output)`` with
respect to the input of every layer, by hand-written backpropagation in float64.
:func:`render_html` draws both chains on one plot; ``widget.residual_explorer`` wires sliders
to it and ``residual_explorer`` (the module) precomputes it for the website.

>>> g = chain_gradients(24, 0.5)
>>> g["plain"].shape, bool(g["plain"][0] < 1e-4 < g["residual"][0])
((25,), True)
>>> float(g["plain"][-1]) == float(g["residual"][-1]) == 8.0  # at the output: sqrt(d) = 8
True
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np

from course_lib.checks import check_int, check_real

__all__ = ["chain_gradients", "render_html"]


def chain_gradients(depth: int, gain: float, d: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """``{"plain": (depth + 1,), "residual": (depth + 1,)}``: ``|d sum(out) / d h_l|`` for the
    input ``h_l`` of each layer ``l = 0 .. depth - 1`` and the output (entry ``depth``).

    Both chains use the same weights and the same input (seeded), so they differ only by the
    identity path. For small ``h`` the Jacobian of ``tanh(h W)`` is about ``W``, whose norm on a
    typical vector is about ``gain``.
    """
    check_int(depth, "depth", low=1, high=512)
    check_real(gain, "gain", low=0.0, low_open=True, high=100.0)
    check_int(d, "d", low=1, high=4096)
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((depth, d, d)) * gain / np.sqrt(d)  # (depth, d, d)
    x = rng.standard_normal(d)  # (d,): one token's vector
    out = {}
    for name, residual in (("plain", False), ("residual", True)):
        h, ys = x, []
        for W in weights:  # forward, keeping each layer's tanh output
            y = np.tanh(h @ W)  # (d,)
            ys.append(y)
            h = h + y if residual else y
        g = np.ones(d)  # d sum(out) / d out
        norms = [np.linalg.norm(g)]
        for W, y in zip(weights[::-1], ys[::-1], strict=True):  # backward, top layer first
            through = (g * (1 - y**2)) @ W.T  # J^T g: through tanh(h W)
            g = g + through if residual else through
            norms.append(np.linalg.norm(g))
        out[name] = np.array(norms[::-1])  # entry l: the gradient at layer l's input
    return out


def render_html(depth: int, gain: float) -> str:
    """A PNG of :func:`chain_gradients` for both chains (log scale) and a sentence of numbers.

    >>> "data:image/png;base64," in render_html(6, 0.5)
    True
    """
    from matplotlib.figure import Figure  # not pyplot: no backend, nothing left open

    from course_lib.plotting import use_style

    g = chain_gradients(depth, gain)
    use_style()
    fig = Figure(figsize=(6.0, 3.0), dpi=56)
    ax = fig.subplots()
    layers = np.arange(depth + 1)
    ax.semilogy(layers, g["residual"], marker=".", label="residual: h + tanh(h W)")
    ax.semilogy(layers, g["plain"], marker=".", label="plain: tanh(h W)")
    ax.axhline(8.0, color="grey", ls=":", lw=1, label="no layers (identity)")
    ax.set(
        title=f"{depth} layers, weights of gain {gain:g}",
        xlabel="layer (0 = the input, right = the output)",
        ylabel="|gradient| at that layer",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    png = base64.b64encode(buf.getvalue()).decode("ascii")
    alt = f"gradient norms through {depth} layers of gain {gain:g}, with and without residuals"
    return (
        '<div class="residual-explorer">'
        f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{png}"/>'
        f"<p>At the input: plain {g['plain'][0]:.2e}, residual {g['residual'][0]:.2e} "
        "(8 with no layers at all).</p></div>"
    )
