"""The attention explorers of Chapter 4: the toy sentence's heads, and your own queries and keys.

:func:`head_weights`, :func:`parse_vectors`, :func:`own_weights` and :func:`render_html` are pure
(tested without a browser); :func:`explorer` and :func:`own_explorer` only wire ipywidgets
controls to them. The heads of :func:`explorer` are the hand-built ones of
:func:`course_lib.attention.examples.toy_sentence`; :func:`own_explorer` takes queries and keys
typed by the learner, one vector per line.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

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


def _text_colour(w: float) -> str:
    """Black or white, whichever contrasts more with the cell colour ``_colour(w)`` (WCAG)."""
    t = min(max(w, 0.0), 1.0)
    rgb = [(255 + (c - 255) * t) / 255 for c in (8, 48, 107)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    lum = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "black" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "white"


def render_html(
    weights: np.ndarray,
    tokens: Sequence[str],
    title: str = "",
    key_tokens: Sequence[str] | None = None,
) -> str:
    """An HTML heatmap: one row per query token, one column per key token, weights in cells.

    ``key_tokens`` labels the columns when the keys are not the queries' tokens.

    >>> out = render_html(np.eye(2), ["a", "b"], "identity")
    >>> "identity" in out and "1.00" in out
    True
    """
    w = as_array(weights, "weights", ndim=2)
    keys = tokens if key_tokens is None else key_tokens
    if key_tokens is None and w.shape != (len(tokens), len(tokens)):
        raise ValueError(
            f"weights of shape {w.shape} need {w.shape[0]} tokens, got {len(tokens)} tokens"
        )
    if w.shape != (len(tokens), len(keys)):
        raise ValueError(
            f"weights of shape {w.shape} need {w.shape[0]} query and {w.shape[1]} key labels, "
            f"got {len(tokens)} and {len(keys)}"
        )
    cell = "padding:2px 4px;border:1px solid #ddd;text-align:center;font-size:11px;"
    head = "".join(
        f'<th style="{cell}writing-mode:vertical-rl">{html.escape(t)}</th>' for t in keys
    )
    rows = []
    for i, t in enumerate(tokens):
        cells = "".join(
            f'<td style="{cell}background:{_colour(v)};color:{_text_colour(v)}">{v:.2f}</td>'
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


# ----------------------------------------------------------------------------- your own vectors
OWN_QUERIES = "cat: 1 0\nsat: 0 1"
OWN_KEYS = "the: 0 0\ncat: 2 0\nsat: 0 2\non: 1 1"


def parse_vectors(text: str, name: str = "vectors") -> tuple[list[str], np.ndarray]:
    r"""Labels and an (n, d) array from text with one vector per line (or per ``;``).

    A line is numbers separated by spaces or commas, optionally after a label and a colon
    (``cat: 1 0``); a line without a label is named by its number. Empty lines are skipped.
    Every vector must have the same length.

    >>> labels, X = parse_vectors("cat: 1, 0\n 0.5 2")
    >>> labels, X.tolist()
    (['cat', '2'], [[1.0, 0.0], [0.5, 2.0]])
    >>> parse_vectors("a: 1 2\nb: 3", "keys")
    Traceback (most recent call last):
    ...
    ValueError: keys: line 2 ('b') has 1 number, but line 1 has 2: every vector needs the same length
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be text, got {type(text).__name__}")
    labels, rows = [], []
    lines = [line.strip() for line in re.split(r"[\n;]", text)]
    for number, line in enumerate((line for line in lines if line), start=1):
        label, sep, body = line.rpartition(":")
        label = label.strip() if sep else str(number)
        parts = [p for p in re.split(r"[\s,]+", body.strip()) if p]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            bad = next(p for p in parts if not _is_number(p))
            raise ValueError(
                f"{name}: line {number} ({label!r}) has {bad!r}, which is not a number"
            ) from None
        if not values:
            raise ValueError(f"{name}: line {number} ({label!r}) has no numbers")
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{name}: line {number} ({label!r}) has a value that is not finite")
        if rows and len(values) != len(rows[0]):
            n = len(values)
            raise ValueError(
                f"{name}: line {number} ({label!r}) has {n} number{'s' * (n != 1)}, but line 1 "
                f"has {len(rows[0])}: every vector needs the same length"
            )
        labels.append(label)
        rows.append(values)
    if not rows:
        raise ValueError(f"{name}: type at least one vector, one per line, e.g. 'cat: 1 0'")
    return labels, np.array(rows, dtype=np.float64)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def own_weights(
    queries: str, keys: str, temperature: float = 1.0
) -> tuple[np.ndarray, list[str], list[str]]:
    """The attention weights (n_q, n_k) of typed queries over typed keys, eq. (13).

    The logits ``q_i . k_j / sqrt(d_k)`` are divided by ``temperature`` before the softmax.
    Returns the weights and the labels of the queries and of the keys.

    >>> w, q_labels, k_labels = own_weights(OWN_QUERIES, OWN_KEYS)
    >>> q_labels, k_labels, w.round(2).tolist()[0]
    (['cat', 'sat'], ['the', 'cat', 'sat', 'on'], [0.12, 0.5, 0.12, 0.25])
    """
    q_labels, Q = parse_vectors(queries, "queries")
    k_labels, K = parse_vectors(keys, "keys")
    check_real(temperature, "temperature", low=0.0, low_open=True, high_open=True)
    if Q.shape[1] != K.shape[1]:
        raise ValueError(
            f"the queries have {Q.shape[1]} numbers each and the keys {K.shape[1]}: a query and "
            "a key must have the same length d_k to be compared"
        )
    scale = 1.0 / (temperature * math.sqrt(Q.shape[1]))
    return attention_weights(Q, K, scale=scale), q_labels, k_labels


def own_explorer():
    """An ipywidgets explorer: type queries and keys, one per line; see the weights."""
    import ipywidgets as w

    layout = w.Layout(width="260px", height="110px")
    queries = w.Textarea(value=OWN_QUERIES, description="queries", layout=layout)
    keys = w.Textarea(value=OWN_KEYS, description="keys", layout=layout)
    temp = w.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.1, description="temperature")

    def render() -> str:
        weights, q_labels, k_labels = own_weights(queries.value, keys.value, temp.value)
        title = f"softmax(q . k / sqrt(d_k) / {temp.value:g}) for your vectors"
        return render_html(weights, q_labels, title, key_tokens=k_labels)

    out = live_html([queries, keys, temp], render)
    return w.VBox([w.HBox([queries, keys]), temp, out])
