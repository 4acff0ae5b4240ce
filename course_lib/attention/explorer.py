"""Chapter 4's head explorer on the website, precomputed over heads, masks and temperatures.

The same functions the notebook's ``explorer()`` calls (:func:`head_weights`, :func:`describe`,
:func:`render_html` of :mod:`course_lib.attention.widget`); see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, ex.value(head=0, mask="causal", temperature=1.0)[0]
(80, 1.0)
"""

from __future__ import annotations

from course_lib.attention.examples import HEAD_NAMES, toy_sentence
from course_lib.attention.widget import MASKS, describe, head_weights, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "explorer()"
TEMPERATURES = (0.1, 0.3, 1.0, 3.0, 10.0)


def render(head: int, mask: str, temperature: float) -> str:
    s = toy_sentence()
    weights = head_weights(head, mask, temperature, s)
    return render_html(weights, s.tokens, describe(head, mask, temperature))


def first_row(head: int, mask: str, temperature: float) -> list[float]:
    """The weights of the first query over every key, rounded to 4 decimals."""
    return [round(float(v), 4) for v in head_weights(head, mask, temperature)[0]]


def explorer() -> Explorer:
    return Explorer(
        "attention",
        "Explore the toy sentence's heads",
        (
            Control(
                "head",
                "head",
                tuple(range(len(HEAD_NAMES))),
                kind="select",
                labels=tuple(f"{i}: {n}" for i, n in enumerate(HEAD_NAMES)),
            ),
            Control("mask", "mask", MASKS, kind="select"),
            Control("temperature", "temperature", TEMPERATURES, default=1.0),
        ),
        render=render,
        value=first_row,
    )
