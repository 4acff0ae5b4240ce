"""Widgets of Chapter 8: the next-token explorer over a trained GPT, and the in-context one.

:func:`next_token_table`, :func:`render_html`, :func:`episode_rows` and :func:`render_episode`
are pure (tested without a browser); :func:`sampling_explorer` and :func:`incontext_explorer`
only wire ipywidgets controls to them with :func:`course_lib.interact.live_html`.
"""

from __future__ import annotations

import html
from typing import Any

import torch

from course_lib.checks import check_int, check_real
from course_lib.gpt.model import GPT
from course_lib.gpt.sampling import complete, next_token_probs
from course_lib.interact import live_html

__all__ = [
    "episode_rows", "incontext_explorer", "next_token_table", "render_episode", "render_html",
    "sampling_explorer",
]  # fmt: skip


def _show(token: str) -> str:
    return {"\n": "⏎", " ": "␣", "\t": "⇥"}.get(token, token)


@torch.no_grad()
def next_token_table(
    model: GPT,
    tokenizer: Any,
    prompt: str,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    rows: int = 8,
) -> list[tuple[str, float, float]]:
    """The ``rows`` most likely next tokens: ``(token, model probability, sampling probability)``.

    ``top_k=0`` and ``top_p=1`` switch the filters off; the sampling probability is 0 for a
    token the filters drop.
    """
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("the prompt is empty: type at least one character")
    t = check_real(temperature, "temperature", low=0.0)
    k = check_int(top_k, "top_k", low=0)
    p = check_real(top_p, "top_p", low=0.0, high=1.0, low_open=True)
    check_int(rows, "rows", low=1)
    ids = tokenizer.encode(prompt)[-model.config.context_length :]
    logits = model.eval()(torch.tensor([ids]))[0, -1].double()
    raw = torch.softmax(logits, -1)
    sampled = next_token_probs(logits, t, k or None, None if p == 1.0 else p)
    order = torch.argsort(raw, descending=True)[:rows]
    return [(tokenizer.decode([int(i)]), float(raw[i]), float(sampled[i])) for i in order]


def render_html(
    model: GPT,
    tokenizer: Any,
    prompt: str,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    new_tokens: int = 120,
) -> str:
    """A table of the next-token distribution before and after the filters, and a continuation."""
    table = next_token_table(model, tokenizer, prompt, temperature, top_k, top_p)
    rows = "".join(
        f"<tr><td><code>{html.escape(_show(tok))}</code></td><td>{a:.3f}</td>"
        f'<td><div style="background:#4c72b0;height:10px;width:{int(200 * b)}px"></div></td>'
        f"<td>{b:.3f}</td></tr>"
        for tok, a, b in table
    )
    text = complete(
        model, tokenizer, prompt, new_tokens, temperature=temperature,
        top_k=top_k or None, top_p=None if top_p == 1.0 else top_p, seed=seed,
    )  # fmt: skip
    return (
        "<table><tr><th>next token</th><th>model</th><th colspan=2>sampled from</th></tr>"
        f"{rows}</table><pre style='white-space:pre-wrap'><b>{html.escape(prompt)}</b>"
        f"{html.escape(text)}</pre>"
    )


def sampling_explorer(model: GPT, tokenizer: Any, prompt: str = "ROMEO:\n") -> Any:
    """Sliders for temperature, top-k, top-p and the seed over a prompt box."""
    import ipywidgets as w

    box = w.Textarea(value=prompt, description="prompt")
    temp = w.FloatSlider(value=0.8, min=0.0, max=2.0, step=0.1, description="temperature")
    k = w.IntSlider(value=0, min=0, max=model.config.vocab_size, description="top-k (0 off)")
    p = w.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p")
    seed = w.IntSlider(value=0, min=0, max=20, description="seed")
    out = live_html(
        [box, temp, k, p, seed],
        lambda: render_html(model, tokenizer, box.value, temp.value, k.value, p.value, seed.value),
    )
    return w.VBox([box, temp, k, p, seed, out])


@torch.no_grad()
def episode_rows(
    model: GPT, tokenizer: Any, shots: int, episode: int, rows: int = 5
) -> tuple[str, str, list[tuple[str, float]]]:
    """A held-out secret-code episode with ``shots`` examples (episode number ``episode``, drawn
    from its own seed) and the model's ``rows`` most probable next characters.

    Returns ``(prompt, answer, [(character, probability), ...])``; the prompt is what the model
    reads after a blank line, as in section 8.9.
    """
    import random

    from course_lib.gpt import incontext as icl

    check_int(shots, "shots", low=0, high=16)
    check_int(episode, "episode", low=0)
    check_int(rows, "rows", low=1)
    rnd = random.Random(1000 + episode)
    prompt, answer = icl.episode(icl.make_code(rnd), shots, rnd)
    ids = tokenizer.encode("\n\n" + prompt)[-model.config.context_length :]
    probs = torch.softmax(model.eval()(torch.tensor([ids]))[0, -1].double(), -1)
    top = torch.argsort(probs, descending=True)[:rows]
    return prompt, answer, [(tokenizer.decode([int(i)]), float(probs[i])) for i in top]


def render_episode(model: GPT, tokenizer: Any, shots: int, episode: int) -> str:
    """The prompt, the answer, whether the prompt shows it, and the model's next characters."""
    prompt, answer, rows = episode_rows(model, tokenizer, shots, episode)
    query = prompt.rsplit("\n", 1)[-1]
    shown = f"{query}{answer}\n" in prompt
    table = "".join(
        f"<tr><td><code>{html.escape(_show(c))}</code></td><td>{p:.3f}</td>"
        f'<td><div style="background:#4c72b0;height:10px;width:{int(200 * p)}px"></div></td>'
        f"<td>{'the answer' if c == answer else ''}</td></tr>"
        for c, p in rows
    )
    note = "the prompt shows it" if shown else "the prompt does not show it"
    return (
        f"<pre style='white-space:pre-wrap'>{html.escape(prompt)}<b>?</b></pre>"
        f"<p>answer: <code>{html.escape(answer)}</code> ({note})</p>"
        f"<table><tr><th>next character</th><th colspan=2>model's probability</th><th></th></tr>"
        f"{table}</table>"
    )


def incontext_explorer(model: GPT, tokenizer: Any, shots: int = 4) -> Any:
    """Sliders for the number of shots and the episode over section 8.9's held-out episodes."""
    import ipywidgets as w

    k = w.IntSlider(value=shots, min=0, max=8, description="shots")
    episode = w.IntSlider(value=0, min=0, max=20, description="episode")
    out = live_html([k, episode], lambda: render_episode(model, tokenizer, k.value, episode.value))
    return w.VBox([k, episode, out])
