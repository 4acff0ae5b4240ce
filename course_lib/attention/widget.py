"""The attention-heatmap explorer of Chapter 4: one head, one mask, one temperature.

:func:`head_weights` and :func:`render_html` are pure (tested without a browser); :func:`explorer`
only wires ipywidgets controls to them. The heads are the hand-built ones of
:func:`course_lib.attention.examples.toy_sentence`.
"""

from __future__ import annotations

import html
import math

import numpy as np

from course_lib.attention.examples import HEAD_NAMES, ToySentence, toy_mask, toy_sentence
from course_lib.attention.reference import attention_weights
from course_lib.checks import as_array, check_choice, check_int, check_real
from course_lib.interact import live_html

MASKS = ("none", "causal", "padding", "both")


def head_weights(
    head: int, mask: str = "none", temperature: float = 1.0, sentence: ToySentence | None = None
) -> np.ndarray:
    """Attention weights (L, L) of one head of the toy sentence.

    The logits ``q_i . k_j / sqrt(d_k)`` are divided by ``temperature`` before the softmax:
    below 1 the weights sharpen towards the largest logit, above 1 they flatten towards
    uniform. ``mask`` is 'none', 'causal', 'padding' or 'both'.

    >>> w = head_weights(0, "causal")
    >>> w.shape, bool(np.allclose(w.sum(axis=1), 1)), float(w[0, 1])
    ((12, 12), True, 0.0)
    """
    s = toy_sentence() if sentence is None else sentence
    check_int(head, "head", low=0, high=s.n_heads - 1)
    check_choice(mask, "mask", MASKS)
    check_real(temperature, "temperature", low=0.0, low_open=True, high_open=True)
    q = s.X @ s.w_q[head]  # (L, d_k)
    k = s.X @ s.w_k[head]  # (L, d_k)
    scale = 1.0 / (temperature * math.sqrt(q.shape[-1]))
    return attention_weights(q, k, toy_mask(mask, s), scale=scale)


def _colour(w: float) -> str:
    """White (0) to dark blue (1)."""
    t = min(max(w, 0.0), 1.0)
    r, g, b = (round(255 + (c - 255) * t) for c in (8, 48, 107))
    return f"rgb({r},{g},{b})"


def render_html(weights: np.ndarray, tokens: list[str] | tuple[str, ...], title: str = "") -> str:
    """An HTML heatmap: one row per query token, one column per key token, weights in cells.

    >>> out = render_html(np.eye(2), ["a", "b"], "identity")
    >>> "identity" in out and "1.00" in out
    True
    """
    w = as_array(weights, "weights", ndim=2)
    if w.shape != (len(tokens), len(tokens)):
        raise ValueError(
            f"weights of shape {w.shape} need {w.shape[0]} tokens, got {len(tokens)} tokens"
        )
    cell = "padding:2px 4px;border:1px solid #ddd;text-align:center;font-size:11px;"
    head = "".join(
        f'<th style="{cell}writing-mode:vertical-rl">{html.escape(t)}</th>' for t in tokens
    )
    rows = []
    for i, t in enumerate(tokens):
        cells = "".join(
            f'<td style="{cell}background:{_colour(v)};color:{"white" if v > 0.5 else "black"}">'
            f"{v:.2f}</td>"
            for v in w[i]
        )
        rows.append(f'<tr><th style="{cell}text-align:right">{html.escape(t)}</th>{cells}</tr>')
    caption = f'<caption style="font-weight:bold">{html.escape(title)}</caption>' if title else ""
    return (
        '<div class="attention-explorer"><table style="border-collapse:collapse">'
        f'{caption}<tr><th style="{cell}">query \\ key</th>{head}</tr>{"".join(rows)}</table></div>'
    )


def describe(head: int, mask: str, temperature: float) -> str:
    """The caption of the explorer's heatmap.

    >>> describe(1, "causal", 0.5)
    "head 1 ('same word'), mask: causal, temperature 0.5"
    """
    return f"head {head} ({HEAD_NAMES[head]!r}), mask: {mask}, temperature {temperature:g}"


def explorer():
    """An ipywidgets explorer: choose a head, a mask and a temperature; see the weights."""
    import ipywidgets as w

    s = toy_sentence()
    head = w.Dropdown(
        options=[(f"{i}: {n}", i) for i, n in enumerate(HEAD_NAMES)], value=0, description="head"
    )
    mask = w.ToggleButtons(options=list(MASKS), value="none", description="mask")
    temp = w.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.1, description="temperature")

    def render() -> str:
        weights = head_weights(head.value, mask.value, temp.value, s)
        return render_html(weights, s.tokens, describe(head.value, mask.value, temp.value))

    out = live_html([head, mask, temp], render)
    return w.VBox([w.HBox([head, temp]), mask, out])
