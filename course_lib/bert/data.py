"""Text to BERT inputs: chapter 7's byte-level BPE with BERT's special tokens, and packing.

BERT's input is ``[CLS] sentence A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, with segment id 0 on
``[CLS]``, A and its ``[SEP]`` and 1 on B and its ``[SEP]``; a batch is padded with ``[PAD]`` and
carries an attention mask (True for real tokens). The tokenizer is chapter 7's
(:mod:`course_lib.bpe`), trained here on the two pre-training texts, 150,000 characters of
Shakespeare and 150,000 of *Moby-Dick* (:mod:`course_lib.bert.datasets`); BERT used WordPiece,
which differs in how it scores merges, not in how the model uses the ids.

>>> tok = tokenizer()
>>> ids, seg = pack(tok.encode("To be"), tok.encode(" or not"), max_len=16)
>>> tok.decode(ids), seg
('[CLS]To be[SEP] or not[SEP]', [0, 0, 0, 0, 1, 1, 1])
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from course_lib.bpe.corpus import sample
from course_lib.bpe.tokenizer import Tokenizer
from course_lib.bpe.train import count_words, train_bpe_words
from course_lib.checks import check_int

__all__ = [
    "CLS", "MASK", "PAD", "SEP", "SPECIALS", "pack", "pad_batch", "pretraining_chunks", "text_rows",
    "token_offsets", "tokenizer", "tokenizer_text",
]  # fmt: skip

SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]"]
#: Their ids: chapter 7's trainer puts the special tokens right after the 256 bytes.
PAD, CLS, SEP, MASK = 256, 257, 258, 259
#: Characters the tokenizer learns its merges from (half Shakespeare, half Moby-Dick), and the
#: vocabulary size.
TOKENIZER_TEXT, VOCAB_SIZE = 300_000, 1024


def tokenizer_text() -> list[str]:
    """The tokenizer's training text: the first 150,000 characters of each pre-training text."""
    from course_lib.bert.datasets import moby_dick

    half = TOKENIZER_TEXT // 2
    return [sample(half), moby_dick()[:half]]


@functools.cache
def tokenizer(vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Chapter 7's BPE trained on :func:`tokenizer_text`, with BERT's specials after the bytes."""
    check_int(vocab_size, "vocab_size", low=len(SPECIALS) + 256 + 1)
    merges = train_bpe_words(count_words(tokenizer_text()), vocab_size - 256 - len(SPECIALS))
    vocab = {i: bytes([i]) for i in range(256)}
    for s in SPECIALS:
        vocab[len(vocab)] = s.encode()
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return Tokenizer(vocab, merges, SPECIALS)


def pack(
    a: Sequence[int], b: Sequence[int] | None = None, *, max_len: int
) -> tuple[list[int], list[int]]:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` and its segment ids; an error if it does not fit.

    >>> pack([5, 6], [7, 8, 9], max_len=6)
    Traceback (most recent call last):
    ...
    ValueError: the two segments need 2 + 3 + 3 specials = 8 positions, more than max_len = 6: shorten them
    """
    check_int(max_len, "max_len", low=2)
    a = [int(i) for i in a]
    if b is None:
        if len(a) + 2 > max_len:
            raise ValueError(
                f"the sequence needs {len(a)} + 2 specials = {len(a) + 2} positions, "
                f"more than max_len = {max_len}: shorten it"
            )
        return [CLS, *a, SEP], [0] * (len(a) + 2)
    b = [int(i) for i in b]
    n = len(a) + len(b) + 3
    if n > max_len:
        raise ValueError(
            f"the two segments need {len(a)} + {len(b)} + 3 specials = {n} positions, "
            f"more than max_len = {max_len}: shorten them"
        )
    return [CLS, *a, SEP, *b, SEP], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def pad_batch(
    rows: Sequence[Sequence[int]], fill: int = PAD, length: int | None = None
) -> np.ndarray:
    """Rows of different lengths as one (B, L) int64 array, padded on the right with ``fill``.

    >>> pad_batch([[1, 2, 3], [4]], fill=0)
    array([[1, 2, 3],
           [4, 0, 0]])
    """
    L = max(len(r) for r in rows) if length is None else length
    out = np.full((len(rows), L), fill, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def token_offsets(tok: Tokenizer, ids: Sequence[int]) -> list[tuple[int, int]]:
    """The character span ``(start, end)`` each id covers in ``tok.decode(ids)``.

    Byte-level tokens may split a multi-byte character; such a token gets the span of the whole
    character it touches. For ASCII text ``text[s:e] == tok.decode([i])`` for every token.

    >>> t = tokenizer()
    >>> ids = t.encode("Good night, sweet prince")
    >>> text = t.decode(ids)
    >>> all(text[s:e] == t.decode([i]) for i, (s, e) in zip(ids, token_offsets(t, ids)))
    True
    """
    data = b"".join(tok.vocab[i] for i in ids)
    # char_of[k] = index of the character that byte k belongs to
    char_of, k = np.zeros(len(data) + 1, dtype=np.int64), 0
    for c, ch in enumerate(data.decode("utf-8", errors="replace")):
        n = len(ch.encode("utf-8")) if ch != "\ufffd" else 1
        char_of[k : k + n] = c
        k += n
    char_of[k:] = char_of[k - 1] + 1 if k else 0
    out, pos = [], 0
    for i in ids:
        n = len(tok.vocab[i])
        start, end = char_of[pos], char_of[pos + n - 1] + 1 if n else char_of[pos]
        out.append((int(start), int(end)))
        pos += n
    return out


def pretraining_chunks(
    n_chars: int, length: int, tok: Tokenizer | None = None, moby_dick_chars: int = 0
) -> np.ndarray:
    """Rows ``[CLS] ... [SEP]`` of ``length`` ids (N, length) from the pre-training texts.

    The rows of Shakespeare's first ``n_chars`` characters come first, then those of the first
    ``moby_dick_chars`` characters of *Moby-Dick* (none by default); training draws rows at
    random from all of them, so the two texts are mixed in proportion to their sizes.
    """
    check_int(n_chars, "n_chars", low=0)
    check_int(moby_dick_chars, "moby_dick_chars", low=0)
    tok = tok or tokenizer()
    parts = [text_rows(sample(n_chars), length, tok)] if n_chars else []
    if moby_dick_chars:
        from course_lib.bert.datasets import moby_dick

        parts.append(text_rows(moby_dick()[:moby_dick_chars], length, tok))
    if not parts:
        raise ValueError("n_chars and moby_dick_chars are both 0: ask for some text")
    return np.concatenate(parts)


def text_rows(text: str, length: int, tok: Tokenizer | None = None) -> np.ndarray:
    """``text``'s tokens cut into rows ``[CLS] ... [SEP]`` of ``length`` ids (N, length); the rest is dropped.

    >>> text_rows("To be, or not to be", 5, tokenizer()).shape
    (2, 5)
    """
    check_int(length, "length", low=3)
    tok = tok or tokenizer()
    ids = np.array(tok.encode(text), dtype=np.int64)
    body = length - 2
    n = len(ids) // body
    middle = ids[: n * body].reshape(n, body)
    cls, sep = np.full((n, 1), CLS), np.full((n, 1), SEP)
    return np.concatenate([cls, middle, sep], axis=1)
