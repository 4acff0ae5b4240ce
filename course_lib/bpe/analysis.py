"""Measurements behind the chapter's plots and widget: units of text, compression, token spans.

>>> units("the cat sat")["words"], units("the cat sat")["characters"]
(3, 11)
"""

from __future__ import annotations

from collections.abc import Sequence

from course_lib.bpe.tokenizer import Tokenizer
from course_lib.bpe.train import count_words, train_bpe_words
from course_lib.checks import check_int

__all__ = ["bytes_per_token", "compression_curve", "tokenizer_from_merges", "token_spans", "units"]


def units(text: str) -> dict[str, int]:
    """How long ``text`` is as characters, UTF-8 bytes and white-space separated words."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return {"characters": len(text), "bytes": len(text.encode("utf-8")), "words": len(text.split())}


def tokenizer_from_merges(merges: Sequence[tuple[bytes, bytes]]) -> Tokenizer:
    """A byte-level tokenizer that uses ``merges`` (ids: 256 bytes, then one per merge)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return Tokenizer(vocab, merges)


def bytes_per_token(tokenizer: Tokenizer, text: str) -> float:
    """Compression: UTF-8 bytes of ``text`` per token (1.0 with no merges).

    >>> bytes_per_token(tokenizer_from_merges([(b"a", b"b")]), "abab")
    2.0
    """
    ids = tokenizer.encode(text)
    return len(text.encode("utf-8")) / max(len(ids), 1)


def compression_curve(
    train_text: str, test_text: str, vocab_sizes: Sequence[int]
) -> list[tuple[int, float]]:
    """(vocabulary size, bytes per token on ``test_text``) after training on ``train_text``.

    One training run to the largest size serves every point: the first k merges are exactly
    what training to 256 + k would learn.
    """
    sizes = sorted(check_int(v, "vocab size", low=256) for v in vocab_sizes)
    merges = train_bpe_words(count_words([train_text]), sizes[-1] - 256)
    return [
        (v, bytes_per_token(tokenizer_from_merges(merges[: v - 256]), test_text)) for v in sizes
    ]


def token_spans(tokenizer: Tokenizer, text: str) -> list[tuple[int, str]]:
    """Each token of ``text`` with its text (bytes decoded with U+FFFD where a token cuts a
    character), for colouring tokens in the widget.

    >>> token_spans(tokenizer_from_merges([(b"a", b"b")]), "abc")
    [(256, 'ab'), (99, 'c')]
    """
    return [
        (i, tokenizer.vocab[i].decode("utf-8", errors="replace")) for i in tokenizer.encode(text)
    ]
