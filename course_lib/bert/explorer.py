"""Chapter 9's mask filler on the website: the shipped BERT's guesses, precomputed for a few
sentences.

The same :func:`top_predictions` and :func:`render_predictions` the notebook's
``mask_filler(model, tok)`` calls, with the shipped checkpoint and chapter 9's tokenizer; see
:mod:`course_lib.static_explorer`.
"""

from __future__ import annotations

from functools import lru_cache

from course_lib.bert.widget import render_predictions, top_predictions
from course_lib.static_explorer import Control, Explorer

CALL = "mask_filler(model, tok)"
# The widget's default sentence first ([MASK] with no space before it: the space belongs to the
# next word in this tokenizer).
TEXTS = (
    "To be, or not to[MASK], that is the question",
    "Friends, Romans, countrymen, lend me your[MASK]",
    "The whale swam in the[MASK]",
    "O Romeo, Romeo, wherefore art[MASK] Romeo?",
    "All the world's a[MASK], and all the men and women merely players",
)


@lru_cache(maxsize=1)
def model_and_tokenizer():
    """The shipped small BERT and its tokenizer (the notebook's ``model, tok``)."""
    from course_lib.bert.data import tokenizer
    from course_lib.bert.pretrain_long import load_checkpoint

    model, _ = load_checkpoint()
    return model, tokenizer()


def guesses(text: str) -> list:
    """For each [MASK], the five likeliest tokens and their probabilities (3 decimals)."""
    model, tok = model_and_tokenizer()
    return [[[t, p] for t, p in g] for g in top_predictions(model, tok, text)]


def render(text: str) -> str:
    model, tok = model_and_tokenizer()
    return render_predictions(top_predictions(model, tok, text))


def explorer() -> Explorer:
    return Explorer(
        "bert",
        "Explore the shipped BERT's guesses",
        (Control("text", "sentence", TEXTS, kind="select"),),
        render=render,
        value=guesses,
    )
