"""Text to training batches (Chapter 8): tokenisers, the 90/10 split, random windows.

* :class:`CharTokenizer`: one id per distinct character of the training text (sorted), the
  character-level model of nanoGPT's Shakespeare; an unknown character is an error that names it.
* :class:`BPETokenizer`: Chapter 7's byte-level BPE (:mod:`course_lib.bpe`) trained on the
  training text; it can write any text.
* :func:`split_ids`: the first 90% of the ids train, the last 10% validate.
* :func:`random_windows`: a batch of ``B`` windows of ``L + 1`` consecutive ids at random starts
  (inputs are the first L, targets the last L: every position predicts its successor).
* :func:`validation_windows`: the whole validation split cut into consecutive windows.
* :func:`shakespeare_file`: the first ~1.1 MB of Chapter 7's Shakespeare text written to the cache,
  the size of nanoGPT's ``tiny shakespeare``.

>>> tok = CharTokenizer.train("hello")
>>> tok.encode("hole"), tok.decode([3, 2, 1]), tok.vocab_size
([1, 3, 2, 0], 'olh', 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from course_lib.checks import check_int, check_real

__all__ = [
    "BPETokenizer",
    "CharTokenizer",
    "load_tokenizer",
    "random_windows",
    "shakespeare_file",
    "split_ids",
    "validation_windows",
]


class CharTokenizer:
    """Characters to ids and back; the vocabulary is the sorted set of the training text's characters."""

    kind = "char"

    def __init__(self, chars: str) -> None:
        if not isinstance(chars, str) or not chars:
            raise ValueError("a character tokenizer needs a non-empty string of characters")
        if len(set(chars)) != len(chars):
            raise ValueError("the characters of a tokenizer must be distinct")
        self.chars = chars
        self.ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        if not isinstance(text, str) or not text:
            raise ValueError("the training text must be a non-empty string")
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; a character the tokenizer never saw raises ``ValueError`` naming it."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            return [self.ids[c] for c in text]
        except KeyError as err:
            c = err.args[0]
            raise ValueError(
                f"unknown character {c!r} (U+{ord(c):04X}) at index {text.index(c)}: the "
                f"tokenizer knows only the {self.vocab_size} characters of its training text"
            ) from None

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "char", "chars": self.chars}


class BPETokenizer:
    """Chapter 7's byte-level BPE, trained on the training text (``vocab_size`` ids in all)."""

    kind = "bpe"

    def __init__(self, merges: Sequence[tuple[bytes, bytes]]) -> None:
        from course_lib.bpe.tokenizer import Tokenizer

        vocab = {i: bytes([i]) for i in range(256)}
        for a, b in merges:
            vocab[len(vocab)] = a + b
        self.merges = [(bytes(a), bytes(b)) for a, b in merges]
        self.tok = Tokenizer(vocab, self.merges)

    @classmethod
    def train(cls, text: str, vocab_size: int = 512) -> BPETokenizer:
        from course_lib.bpe.train import count_words, train_bpe_words

        check_int(vocab_size, "vocab_size", low=256)
        return cls(train_bpe_words(count_words([text]), vocab_size - 256))

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self.tok.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode([int(i) for i in ids])

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "bpe", "merges": [[list(a), list(b)] for a, b in self.merges]}


def load_tokenizer(d: Any) -> CharTokenizer | BPETokenizer:
    """The tokenizer a checkpoint describes (:meth:`to_dict`)."""
    if not isinstance(d, dict) or d.get("kind") not in ("char", "bpe"):
        raise ValueError("the checkpoint's tokenizer must be a dict with kind 'char' or 'bpe'")
    if d["kind"] == "char":
        return CharTokenizer(d["chars"])
    return BPETokenizer([(bytes(a), bytes(b)) for a, b in d["merges"]])


def split_ids(ids: Any, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``train_fraction`` of the ids train, the rest validate (no shuffling).

    >>> [t.tolist() for t in split_ids(list(range(10)))]
    [[0, 1, 2, 3, 4, 5, 6, 7, 8], [9]]
    """
    t = torch.as_tensor(ids, dtype=torch.long)
    if t.ndim != 1:
        raise ValueError(f"ids must be one sequence (1-D), got {t.ndim} dimensions")
    check_real(train_fraction, "train_fraction", low=0.0, high=1.0, low_open=True, high_open=True)
    n = int(train_fraction * len(t))
    return t[:n], t[n:]


def random_windows(
    data: torch.Tensor, batch_size: int, context_length: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows: inputs (B, L) and their successors (B, L) as targets.

    >>> x, y = random_windows(torch.arange(100), 2, 5, torch.Generator().manual_seed(0))
    >>> x.shape, bool((y == x + 1).all())
    (torch.Size([2, 5]), True)
    """
    check_int(batch_size, "batch_size", low=1)
    check_int(context_length, "context_length", low=1)
    if len(data) < context_length + 1:
        raise ValueError(
            f"the data has {len(data)} tokens, fewer than context_length + 1 = {context_length + 1}"
        )
    starts = torch.randint(0, len(data) - context_length, (batch_size,), generator=generator)
    rows = starts[:, None] + torch.arange(context_length + 1)  # (B, L+1)
    window = data[rows]
    return window[:, :-1], window[:, 1:]


def validation_windows(
    data: torch.Tensor, context_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole split as consecutive windows (the remainder shorter than a window is dropped).

    >>> x, y = validation_windows(torch.arange(11), 3)
    >>> x.tolist(), y[-1].tolist()
    ([[0, 1, 2], [3, 4, 5], [6, 7, 8]], [7, 8, 9])
    """
    n = (len(data) - 1) // context_length
    if n < 1:
        raise ValueError(
            f"the validation split has {len(data)} tokens, fewer than context_length + 1 = "
            f"{context_length + 1}"
        )
    x = data[: n * context_length].view(n, context_length)
    y = data[1 : n * context_length + 1].view(n, context_length)
    return x, y


#: Characters of nanoGPT's tiny-shakespeare file; we cut Chapter 7's text to about this size.
TINY_SHAKESPEARE_CHARS = 1_115_394


def shakespeare_file(size: int = TINY_SHAKESPEARE_CHARS) -> Path:
    """The first ``size`` characters of Chapter 7's Shakespeare text (cut at a line) as a file in the cache."""
    from course_lib.bpe.corpus import sample
    from course_lib.paths import cache_dir

    path = cache_dir() / "gpt" / f"shakespeare_{size}.txt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(sample(size), encoding="utf-8")
        tmp.replace(path)
    return path
