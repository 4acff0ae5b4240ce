"""Widgets of Chapter 9: thin front-ends over pure functions of this folder.

* :func:`visibility`: which keys each query may attend to, in BERT (every real token) and in GPT
  (itself and the past); the chapter's bidirectional-versus-causal picture.
* :func:`masking_rows`: what BERT's corruption does to each token of a sentence, from the draws
  :func:`~course_lib.bert.masking.mask_tokens` makes with a seed; :func:`render_masking` shows
  them as a table and :func:`masking_viewer` wires a text box and a seed slider to it.
* :func:`top_predictions`: a sentence with ``[MASK]`` in it, and the model's best guesses for
  each ``[MASK]``; :func:`mask_filler` wires a text box to it with
  :func:`course_lib.interact.live_html`.
* :func:`head_maps`: the attention weights of every head of one layer for a typed sentence, and
  :func:`render_heads`, those maps as HTML heat tables; :func:`attention_viewer` wires a text box
  and a layer dropdown to them.
"""

from __future__ import annotations

import html

import numpy as np
import torch

from course_lib.bert.data import CLS, MASK, PAD, SEP, pack
from course_lib.bert.inputs import IGNORE
from course_lib.bert.masking import corrupt, masking_draws
from course_lib.checks import check_choice, check_int
from course_lib.interact import live_html

__all__ = [
    "attention_viewer", "head_maps", "mask_filler", "masking_rows", "masking_viewer",
    "render_heads", "render_masking", "render_predictions", "top_predictions", "visibility",
]  # fmt: skip


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


def masking_rows(tok, text: str, seed: int) -> list[tuple[str, float, str, str, str]]:
    """BERT's corruption of ``[CLS] text [SEP]`` with the draws of ``mask_tokens`` and
    ``np.random.default_rng(seed)``: per token (piece, u, fate, shown piece, label piece), the
    fate one of ``"special"``, ``"not chosen"``, ``"[MASK]"``, ``"random"``, ``"unchanged"``.

    >>> from course_lib.bert.data import tokenizer
    >>> rows = masking_rows(tokenizer(), "To be, or not to be", seed=1)
    >>> rows[0][2], rows[-1][2], {r[2] for r in rows} <= {"special", "not chosen", "[MASK]",
    ...                                                    "random", "unchanged"}
    ('special', 'special', True)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(seed, "seed", low=0)
    ids = np.array([CLS, *tok.encode(text), SEP])
    specials = (PAD, CLS, SEP, MASK)
    u, random_ids = masking_draws(ids.shape, np.random.default_rng(seed), mask_id=MASK,
                                  vocab_size=len(tok.vocab), special_ids=specials)  # fmt: skip
    shown, labels = corrupt(ids, u, random_ids, mask_id=MASK, special_ids=specials)
    out = []
    for t, v, x, y in zip(ids, u, shown, labels, strict=True):
        if t in specials:
            fate = "special"
        elif y == IGNORE:
            fate = "not chosen"
        else:
            fate = "[MASK]" if x == MASK else "random" if v < 0.135 else "unchanged"
        label = "" if y == IGNORE else tok.decode([int(y)])
        out.append((tok.decode([int(t)]), round(float(v), 3), fate, tok.decode([int(x)]), label))
    return out


def render_masking(rows: list[tuple[str, float, str, str, str]]) -> str:
    """The rows of :func:`masking_rows` as an HTML table, the chosen positions in bold."""
    head = "<tr><th>token</th><th>u</th><th>what happens</th><th>model sees</th><th>label</th></tr>"
    body = []
    for piece, u, fate, shown, label in rows:
        style = ' style="font-weight:bold"' if label else ""
        cells = (
            f"<code>{html.escape(repr(piece))}</code>",
            "" if fate == "special" else f"{u:.3f}",
            fate,
            f"<code>{html.escape(repr(shown))}</code>",
            f"<code>{html.escape(repr(label))}</code>" if label else "-100 (ignored)",
        )
        body.append(f"<tr{style}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f'<table class="bert-masking">{head}{"".join(body)}</table>'


def masking_viewer(
    tok, text: str = "Friends, Romans, countrymen, lend me your ears", seed: int = 0
):
    """Type a sentence and move the seed: see which tokens BERT's corruption chooses and shows."""
    import ipywidgets as w

    box = w.Text(value=text, description="text", layout=w.Layout(width="95%"))
    draw = w.IntSlider(value=seed, min=0, max=20, description="seed")
    out = live_html([box, draw], lambda: render_masking(masking_rows(tok, box.value, draw.value)))
    return w.VBox([w.HBox([box, draw]), out])


def top_predictions(model, tok, text: str, k: int = 5) -> list[list[tuple[str, float]]]:
    """For each ``[MASK]`` in ``text``, the ``k`` likeliest tokens and their probabilities."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(k, "k", low=1)
    # [MASK] typed into the text is the control token this widget is for; the other specials,
    # typed, are plain text (chapter 7: special tokens are allowed by name only)
    ids = tok.encode(text, allowed_special={"[MASK]"}, disallowed_special=())
    ids, _ = pack(ids, max_len=model.config.max_len)
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


def head_maps(model, tok, text: str, layer: int) -> tuple[list[str], np.ndarray]:
    """The pieces of ``[CLS] text [SEP]`` and every head's attention in block ``layer``: (h, L, L).

    Row q of head i holds the weights with which token q reads every token of the sentence.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(layer, "layer", low=0, high=model.config.n_layers - 1)
    ids = tok.encode(text, allowed_special={"[MASK]"}, disallowed_special=())
    ids, _ = pack(ids, max_len=model.config.max_len)
    with torch.no_grad():
        a = model.attention_maps(torch.tensor([ids]))[0, layer]  # (h, L, L)
    return [tok.decode([i]) for i in ids], a.double().numpy()


def _cell(w: float) -> str:
    shade = round(255 * (1 - w))  # white (0) to dark blue (1)
    ink = "#fff" if w > 0.5 else "#000"
    return (f'<td title="{w:.3f}" style="background:rgb({shade},{shade},255);color:{ink};'
            f'width:1em;height:1em;padding:0"></td>')  # fmt: skip


def render_heads(pieces: list[str], maps: np.ndarray) -> str:
    """One heat table per head (rows: queries, columns: keys), side by side; darker = more weight."""
    maps = np.asarray(maps, dtype=float)
    L = len(pieces)
    if maps.ndim != 3 or maps.shape[1:] != (L, L):
        raise ValueError(f"maps must have shape (h, {L}, {L}) for {L} pieces, got {maps.shape}")
    names = [html.escape(p.strip() or repr(p)) for p in pieces]
    head_row = "<tr><th></th>" + "".join(
        f'<th style="writing-mode:vertical-rl;font-weight:normal">{n}</th>' for n in names
    ) + "</tr>"  # fmt: skip
    tables = []
    for i, a in enumerate(maps):
        rows = "".join(
            f'<tr><th style="text-align:right;font-weight:normal">{names[q]}</th>'
            + "".join(_cell(float(w)) for w in a[q]) + "</tr>"
            for q in range(L)
        )  # fmt: skip
        tables.append(
            f'<table class="bert-head" style="border-collapse:collapse;margin:4px;font-size:11px">'
            f"<caption>head {i}</caption>{head_row}{rows}</table>"
        )
    return '<div style="display:flex;flex-wrap:wrap">' + "".join(tables) + "</div>"


def attention_viewer(model, tok, text: str = "Friends, Romans, countrymen, lend me your ears"):
    """Type a sentence, pick a layer: see every head's attention map in that layer."""
    import ipywidgets as w

    box = w.Text(value=text, description="text", layout=w.Layout(width="95%"))
    layer = w.Dropdown(options=list(range(model.config.n_layers)), value=0, description="layer")
    out = live_html(
        [box, layer], lambda: render_heads(*head_maps(model, tok, box.value, layer.value))
    )
    return w.VBox([w.HBox([box, layer]), out])
