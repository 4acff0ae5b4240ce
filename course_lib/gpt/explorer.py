"""Chapter 8's sampling explorer on the website, precomputed over temperatures, filters and seeds.

Each setting generates 120 characters, so the grid is small: three temperatures (greedy, the
notebook's 0.8 and 1.5), no filter or one of the two filters, two seeds, the notebook's prompt.

The same :func:`course_lib.gpt.widget.render_html` the notebook's ``sampling_explorer(model64,
tok, ...)`` calls, with the shipped checkpoint in float64 (the same samples on every machine);
see :mod:`course_lib.static_explorer`.
"""

from __future__ import annotations

from functools import lru_cache

from course_lib.gpt.widget import next_token_table, render_html
from course_lib.static_explorer import Control, Explorer

CALL = "sampling_explorer(model64"
PROMPT = "To be, or not to b"
FILTERS = ("off", "top-k 5", "top-p 0.9")


def _filters(name: str) -> tuple[int, float]:
    """(top_k, top_p) of a filter's name; 0 and 1.0 switch a filter off, as in the widget."""
    return {"off": (0, 1.0), "top-k 5": (5, 1.0), "top-p 0.9": (0, 0.9)}[name]


@lru_cache(maxsize=1)
def model_and_tokenizer():
    """The shipped checkpoint in float64, and its tokenizer (the notebook's ``model64, tok``)."""
    from course_lib.gpt.pretrained import load_pretrained

    model, tok = load_pretrained()
    return model.double(), tok


def render(temperature: float, filters: str, seed: int) -> str:
    model, tok = model_and_tokenizer()
    return render_html(model, tok, PROMPT, temperature, *_filters(filters), seed)


def top_rows(temperature: float, filters: str, seed: int) -> list:
    """The three likeliest next tokens: (token, model probability, sampling probability)."""
    model, tok = model_and_tokenizer()
    table = next_token_table(model, tok, PROMPT, temperature, *_filters(filters))
    return [[t, round(a, 6), round(b, 6)] for t, a, b in table[:3]]


def explorer() -> Explorer:
    return Explorer(
        "gpt",
        f"Explore sampling from chapter 8's GPT after {PROMPT!r}",
        (
            Control("temperature", "temperature", (0.0, 0.8, 1.5), default=0.8),
            Control("filters", "filter", FILTERS, kind="select"),
            Control("seed", "seed", (0, 1)),
        ),
        render=render,
        value=top_rows,
    )
