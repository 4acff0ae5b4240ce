"""Chapter 2's temperature explorer on the website, precomputed over a grid of T, top-k, top-p.

The same :func:`course_lib.softmax.widget.render_html` the notebook's
``temperature_explorer(...)`` calls; see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, round(ex.value(logits=LOGITS[0], temperature=1.0, top_k=0, top_p=1.0), 3)
(324, 1.431)
"""

from __future__ import annotations

from course_lib.softmax.widget import distribution, parse_logits, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "temperature_explorer("
LABELS = ["the", "a", "one", "this", "cat"]
# The notebook's logits first; then one entry masked, and one clear favourite.
LOGITS = ("2, 4, 4, 1, -1", "2, 4, 4, 1, -inf", "5, 2, 1, 0, 0")
TEMPERATURES = (0.01, 0.1, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0)


def render(logits: str, temperature: float, top_k: int, top_p: float) -> str:
    """What the widget shows for these settings (its ``render``)."""
    return render_html(parse_logits(logits), temperature, top_k, top_p, LABELS)


def entropy(logits: str, temperature: float, top_k: int, top_p: float) -> float:
    """The entropy in bits of the distribution shown."""
    return distribution(parse_logits(logits), temperature, top_k, top_p)["entropy_bits"]


def explorer() -> Explorer:
    return Explorer(
        "softmax",
        "Explore temperature, top-k and top-p",
        (
            Control("logits", "logits", LOGITS, kind="select"),
            Control("temperature", "T", TEMPERATURES, default=1.0),
            Control("top_k", "top-k", (0, 1, 2, 3), labels=("off", "1", "2", "3")),
            Control("top_p", "top-p", (1.0, 0.9, 0.5), labels=("off", "0.9", "0.5")),
        ),
        render=render,
        value=entropy,
    )
