"""The quantisation explorer of Chapter 12, part 2: bits per weight against error.

:func:`quantisation_summary` and :func:`render_html` are pure (tested without a browser);
:func:`explorer` only wires ipywidgets controls to them. A 256 x 256 matrix of N(0, 0.02^2)
weights, optionally with outliers of 1.0, is stored with absmax int8, absmax int4 or NF4 at a
chosen block size (float32 scales); the explorer shows the memory per weight, scales included,
and the error, so that the trade-off of section 12.10 (small blocks contain outliers, but every
block costs a scale) can be played with.

>>> s = quantisation_summary("NF4", 64, 0)
>>> s["bits"], round(s["rms"], 2)  # 4 bits a code + 32 bits a scale per 64 weights
(4.5, 0.09)
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

import course_lib.number_formats.reference as ref
from course_lib.checks import check_choice, check_int
from course_lib.interact import live_html

__all__ = ["BLOCKS", "SCHEMES", "explorer", "quantisation_summary", "render_html"]

SCHEMES = ("int8", "int4", "NF4")
#: block sizes the controls offer; 0 means one scale for the whole matrix
BLOCKS = (16, 64, 256, 0)


def _weights(outliers: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = 0.02 * rng.standard_normal((256, 256))
    W.flat[rng.choice(W.size, size=outliers, replace=False)] = 1.0
    return W


def quantisation_summary(scheme: str, block: int, outliers: int, seed: int = 0) -> dict[str, Any]:
    """Bits per weight (scales included) and errors of storing the explorer's matrix.

    Returns ``{"bits", "rms", "worst", "zeroed"}``: the bits per weight, the RMS error relative to
    the weights' standard deviation (the outliers excluded from both), the largest error relative
    to that standard deviation, and the share of ordinary weights stored as exactly 0.
    """
    check_choice(scheme, "scheme", SCHEMES)
    check_int(block, "block", low=0)
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {BLOCKS} (0: one scale), got {block}")
    check_int(outliers, "outliers", low=0, high=1024)
    W = _weights(outliers, seed)
    size = block or None
    if scheme == "NF4":
        codes, absmax = ref.nf4_quantize(W, block_size=block or W.size)
        W_hat, code_bits, scales = ref.nf4_dequantize(codes, absmax, block or W.size), 4, absmax
    else:
        bits = 8 if scheme == "int8" else 4
        q, scales = ref.absmax_quantize(W, block_size=size, bits=bits)
        W_hat, code_bits = ref.absmax_dequantize(q, scales, block_size=size), bits
    ordinary = W != 1.0  # (256, 256): the outliers excluded from the error
    std = W[ordinary].std()
    err = (W_hat - W)[ordinary]
    return {
        "bits": code_bits + 32 * np.size(scales) / W.size,
        "rms": float(np.sqrt(np.mean(err**2)) / std),
        "worst": float(np.abs(err).max() / std),
        "zeroed": float(np.mean(W_hat[ordinary] == 0)),
    }


def render_html(scheme: str, block: int, outliers: int) -> str:
    """An HTML table of :func:`quantisation_summary` for one setting, with a sentence on it.

    >>> "bits per weight" in render_html("int8", 0, 16)
    True
    """
    s = quantisation_summary(scheme, block, outliers)
    where = f"blocks of {block}" if block else "one scale for the whole matrix"
    rows = [
        ("bits per weight (scales included)", f"{s['bits']:.3f}"),
        ("RMS error / std of the weights", f"{s['rms']:.4f}"),
        ("largest error / std", f"{s['worst']:.3f}"),
        ("ordinary weights stored as 0", f"{s['zeroed']:.1%}"),
    ]
    body = "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v}</td></tr>" for k, v in rows
    )
    return (
        '<div class="quantisation-explorer">'
        f"<p>{html.escape(scheme)}, {where}, {outliers} outliers of 1.0 among 65,536 weights of "
        "N(0, 0.02<sup>2</sup>):</p>"
        f"<table>{body}</table></div>"
    )


def explorer(scheme: str = "NF4", block: int = 64, outliers: int = 16) -> Any:
    """An ipywidgets explorer: scheme, block size and outliers; the memory and the error."""
    import ipywidgets as w

    check_choice(scheme, "scheme", SCHEMES)
    pick = w.ToggleButtons(options=list(SCHEMES), value=scheme, description="scheme")
    labels = [(f"{b}" if b else "whole matrix", b) for b in BLOCKS]
    size = w.Dropdown(options=labels, value=block, description="block")
    out_n = w.Dropdown(options=[0, 16, 256], value=outliers, description="outliers")
    out = live_html([pick, size, out_n], lambda: render_html(pick.value, size.value, out_n.value))
    return w.VBox([pick, w.HBox([size, out_n]), out])
