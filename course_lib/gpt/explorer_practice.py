"""The in-context explorer of chapter 8's second part on the website, precomputed.

The notebook's ``incontext_explorer(icl_model, icl_tok)`` over the held-out secret-code
episodes of section 8.9: five numbers of shots (those the section measures) and five episodes,
the same :func:`course_lib.gpt.widget.render_episode`, with the shipped in-context model in
float64 (the same probabilities on every machine); see :mod:`course_lib.static_explorer`.
"""

from __future__ import annotations

from functools import lru_cache

from course_lib.gpt.widget import episode_rows, render_episode
from course_lib.static_explorer import Control, Explorer

CALL = "incontext_explorer(icl_model"


@lru_cache(maxsize=1)
def model_and_tokenizer():
    """The shipped in-context model in float64, and its tokenizer (``icl_model, icl_tok``)."""
    from course_lib.gpt.incontext import load_incontext

    model, tok, _ = load_incontext()
    return model.double(), tok


def render(shots: int, episode: int) -> str:
    model, tok = model_and_tokenizer()
    return render_episode(model, tok, shots, episode)


def top_rows(shots: int, episode: int) -> list:
    """The answer and the three likeliest next characters with their probabilities."""
    model, tok = model_and_tokenizer()
    _, answer, rows = episode_rows(model, tok, shots, episode, rows=3)
    return [answer, [[c, round(p, 6)] for c, p in rows]]


def explorer() -> Explorer:
    return Explorer(
        "gpt-incontext",
        "Explore in-context learning: one held-out secret code, shot by shot",
        (
            Control("shots", "shots", (0, 1, 2, 4, 8), default=4),
            Control("episode", "episode", (0, 1, 2, 3, 4)),
        ),
        render=render,
        value=top_rows,
    )
