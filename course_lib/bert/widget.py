"""Widgets of Chapter 9: thin front-ends over pure functions of this folder.

* :func:`visibility`: which keys each query may attend to, in BERT (every real token) and in GPT
  (itself and the past); the chapter's bidirectional-versus-causal picture.
* :func:`top_predictions`: a sentence with ``[MASK]`` in it, and the model's best guesses for
  each ``[MASK]``; :func:`mask_filler` wires a text box to it with
  :func:`course_lib.interact.live_html`.
"""

from __future__ import annotations

import html

import numpy as np
import torch

from course_lib.bert.data import MASK, pack
from course_lib.checks import check_choice, check_int
from course_lib.interact import live_html

__all__ = ["mask_filler", "render_predictions", "top_predictions", "visibility"]


def visibility(L: int, kind: str = "bidirectional", n_pad: int = 0) -> np.ndarray:
    """Boolean (L, L): entry (i, j) is True when query i may attend to key j.

    >>> visibility(3, "causal").astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> visibility(3, "bidirectional", n_pad=1).astype(int)
    array([[1, 1, 0],
           [1, 1, 0],
           [1, 1, 0]])
    """
    check_int(L, "L", low=1)
    check_choice(kind, "kind", ("bidirectional", "causal"))
    check_int(n_pad, "n_pad", low=0, high=L - 1)
    see = np.ones((L, L), dtype=bool) if kind == "bidirectional" else np.tri(L, dtype=bool)
    if n_pad:
        see[:, L - n_pad :] = False  # padding is hidden from every query
    return see


def top_predictions(model, tok, text: str, k: int = 5) -> list[list[tuple[str, float]]]:
    """For each ``[MASK]`` in ``text``, the ``k`` likeliest tokens and their probabilities."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(k, "k", low=1)
    ids, _ = pack(tok.encode(text), max_len=model.config.max_len)
    where = [i for i, t in enumerate(ids) if t == MASK]
    if not where:
        raise ValueError("text has no [MASK]: write [MASK] where a word should be guessed")
    with torch.no_grad():
        probs = torch.softmax(model.mlm(torch.tensor([ids]))[0], dim=-1)  # (L, V)
    out = []
    for i in where:
        p, j = probs[i].topk(k)
        out.append([(tok.decode([int(t)]), round(float(q), 3)) for q, t in zip(p, j, strict=True)])
    return out


def render_predictions(preds: list[list[tuple[str, float]]]) -> str:
    """One row per ``[MASK]``: the guesses with their probabilities."""
    rows = "".join(
        f"<tr><td>[MASK] {n + 1}</td>"
        + "".join(f"<td><code>{html.escape(repr(t))}</code> {p:.3f}</td>" for t, p in guesses)
        + "</tr>"
        for n, guesses in enumerate(preds)
    )
    return f'<table class="bert-masks">{rows}</table>'


def mask_filler(model, tok, text: str = "To be, or not to[MASK], that is the question"):
    """Type a sentence with [MASK] in it; see the model's top five guesses for each."""
    import ipywidgets as w

    box = w.Text(value=text, description="text", layout=w.Layout(width="95%"))
    out = live_html([box], lambda: render_predictions(top_predictions(model, tok, box.value)))
    return w.VBox([box, out])
