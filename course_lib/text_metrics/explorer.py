"""Chapter 3's BLEU explorer on the website, precomputed over candidates, n, tokenizers, smoothing.

The same :func:`course_lib.text_metrics.widget.render_html` the notebook's ``bleu_explorer(...)``
calls, with the notebook's references; see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, round(ex.value(CANDIDATES[1], 2, "13a", "none"), 4)
(360, 1.0)
"""

from __future__ import annotations

from course_lib.static_explorer import Control, Explorer
from course_lib.text_metrics import SMOOTHING, TOKENIZERS
from course_lib.text_metrics.widget import bleu_breakdown, render_html

CALL = "bleu_explorer("
REFERENCES = ("the cat sat on the mat", "a cat was on the mat")
# The notebook's candidate first; then one reference itself, and a short one (brevity penalty).
CANDIDATES = ("the the cat sat on on the mat", "the cat sat on the mat", "a cat on the mat")


def render(candidate: str, max_n: int, tokenize_method: str, smoothing: str) -> str:
    return render_html(
        candidate, list(REFERENCES), max_n, tokenize_method=tokenize_method, smoothing=smoothing
    )


def score(candidate: str, max_n: int, tokenize_method: str, smoothing: str) -> float:
    """The BLEU score shown (0 to 1)."""
    b = bleu_breakdown(
        candidate, list(REFERENCES), max_n, tokenize_method=tokenize_method, smoothing=smoothing
    )
    return b["bleu"]


def explorer() -> Explorer:
    return Explorer(
        "bleu",
        "Explore BLEU's counts",
        (
            Control("candidate", "candidate", CANDIDATES, kind="select"),
            Control("max_n", "max n", (1, 2, 3, 4, 5, 6), default=4),
            Control("tokenize_method", "tokenize", TOKENIZERS, default="13a", kind="select"),
            Control("smoothing", "smoothing", tuple(SMOOTHING), kind="select"),
        ),
        render=render,
        value=score,
    )
