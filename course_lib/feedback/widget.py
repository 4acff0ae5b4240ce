"""Widgets of Chapter 10: thin front-ends over pure functions of this folder.

:func:`scores_html` is the pure function (tested without a browser); :func:`reward_explorer`
wires a word and a response typed by the learner to it with :func:`course_lib.interact.live_html`.

>>> "0.75" in scores_html("abcd", "dcbf.")
True
"""

from __future__ import annotations

import html
from typing import Any

from course_lib.feedback.tasks import LETTERS, VOCAB, WORD_LENGTH, flawed_reward, grade, judge
from course_lib.interact import live_html

__all__ = ["reward_explorer", "scores_html"]


def scores_html(word: str, response: str) -> str:
    """A small table: the exact judge, the labeller's grade and the flawed proxy for one response."""
    if len(word) != WORD_LENGTH or any(c not in LETTERS for c in word):
        raise ValueError(f"word must be {WORD_LENGTH} letters from {LETTERS!r}, got {word!r}")
    VOCAB.encode(response)  # raises on characters the model cannot write
    rows = [
        ("right answer", html.escape(word[::-1] + ".")),
        ("judge (exactly right?)", str(judge(word, response))),
        ("grade (labeller's partial credit)", f"{grade(word, response):.2f}"),
        ("flawed proxy reward", f"{flawed_reward(word, response):.2f}"),
    ]
    body = "".join(f"<tr><td>{k}</td><td><code>{v}</code></td></tr>" for k, v in rows)
    return f'<table class="course-table">{body}</table>'


def reward_explorer(word: str = "abcd", response: str = "dcba.") -> Any:
    """Type a word and a response; see how the three scorers rate it."""
    import ipywidgets as w

    word_box = w.Text(value=word, description="word")
    resp_box = w.Text(value=response, description="response")
    out = live_html([word_box, resp_box], lambda: scores_html(word_box.value, resp_box.value))
    return w.VBox([word_box, resp_box, out])
