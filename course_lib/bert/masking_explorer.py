"""Chapter 9's masking table on the website (part 1, section 9.4): what BERT's corruption does
to each token of a sentence, for a few sentences and seeds, precomputed.

The same :func:`masking_rows` and :func:`render_masking` the notebook's
``masking_viewer(tok)`` calls, with chapter 9's tokenizer; see :mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, value(text=TEXTS[0], seed=0)
(63, 6)
"""

from __future__ import annotations

from course_lib.bert.widget import masking_rows, render_masking
from course_lib.static_explorer import Control, Explorer

CALL = "masking_viewer(tok)"
# The widget's default sentence first, then one of each book.
TEXTS = (
    "Friends, Romans, countrymen, lend me your ears",
    "Call me Ishmael. Some years ago, never mind how long precisely",
    "To be, or not to be, that is the question",
)
SEEDS = tuple(range(21))  # the widget's slider


def _tok():
    from course_lib.bert.data import tokenizer

    return tokenizer()


def render(text: str, seed: int) -> str:
    return render_masking(masking_rows(_tok(), text, seed))


def value(text: str, seed: int) -> int:
    """How many tokens the draw chose (the rows the loss counts)."""
    return sum(1 for row in masking_rows(_tok(), text, seed) if row[4])


def explorer() -> Explorer:
    return Explorer(
        "bert-masking",
        "Explore BERT's corruption of a sentence",
        (Control("text", "sentence", TEXTS, kind="select"), Control("seed", "seed", SEEDS)),
        render=render,
        value=value,
    )
