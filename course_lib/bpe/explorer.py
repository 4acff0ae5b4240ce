"""Chapter 7's merges explorer on the website, precomputed over a few texts and merge counts.

The same pipeline the notebook's ``merges_explorer(merges_2000, ...)`` runs
(:func:`token_spans` of :func:`tokenizer_from_merges`, drawn by
:func:`course_lib.bpe.widget.render_html`), with the notebook's merges: 2,000 - 256 merges
learned from the first 1.1 MB of Shakespeare; see :mod:`course_lib.static_explorer`.
"""

from __future__ import annotations

from functools import lru_cache

from course_lib.bpe.analysis import token_spans, tokenizer_from_merges
from course_lib.bpe.widget import render_html
from course_lib.static_explorer import Control, Explorer

CALL = "merges_explorer(merges_2000"
TEXTS = (
    "Shall I compare thee to a summer's day? Transformers tokenise text.",
    "To be, or not to be, that is the question.",
    "Byte pair encoding merges the most frequent pair again and again.",
)
MERGE_COUNTS = (0, 10, 50, 200, 500, 1000, 1744)


@lru_cache(maxsize=1)
def merges() -> tuple:
    """The notebook's ``merges_2000`` (a few seconds to learn)."""
    from course_lib.bpe.corpus import shakespeare_text
    from course_lib.bpe.train import count_words, train_bpe_words

    train_text = shakespeare_text()[:1_100_000]
    return tuple(train_bpe_words(count_words([train_text]), 2000 - 256))


@lru_cache(maxsize=16)
def _tokenizer(n: int):
    return tokenizer_from_merges(list(merges()[:n]))


def render(text: str, n_merges: int) -> str:
    return render_html(token_spans(_tokenizer(n_merges), text))


def n_tokens(text: str, n_merges: int) -> int:
    """How many tokens the text becomes."""
    return len(token_spans(_tokenizer(n_merges), text))


def explorer() -> Explorer:
    return Explorer(
        "bpe",
        "Explore BPE merges",
        (
            Control("text", "text", TEXTS, kind="select"),
            Control("n_merges", "merges", MERGE_COUNTS, default=200),
        ),
        render=render,
        value=n_tokens,
    )
