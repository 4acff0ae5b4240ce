"""Byte-level BPE as GPT-2 does it: encode text to ids with learned merges, and back.

A text is cut at its allowed special tokens (each becomes one id; see :meth:`Tokenizer.encode`
for the allow-list, as in tiktoken, that keeps user text from injecting control tokens), the
rest is pre-tokenised with GPT-2's pattern, and each piece is encoded on its own: start from its
UTF-8 bytes and apply the merges in the order they were learned (always the earliest-learned
pair present first), which reproduces the training. Decoding concatenates the tokens' bytes; a
sequence that ends inside a multi-byte character decodes with U+FFFD for the broken part
(``errors="replace"``).

GPT-2 stores its vocabulary as *strings*: :func:`bytes_to_unicode` maps the 256 byte values to
printable characters (printable bytes to themselves, the others to code points from 256 on), so
``encoder.json`` and ``vocab.bpe`` are plain text; :func:`unicode_to_bytes` undoes it.

>>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"<eos>"},
...                 [(b"a", b"b")], special_tokens=["<eos>"])
>>> tok.encode("abab<eos>a", allowed_special={"<eos>"})
[256, 256, 257, 97]
>>> tok.decode([256, 257])
'ab<eos>'
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from course_lib.bpe.train import _GPT2, split_on_specials

__all__ = ["Tokenizer", "bytes_to_unicode", "unicode_to_bytes"]


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: each byte value to one printable character.

    >>> table = bytes_to_unicode()
    >>> table[ord("A")], table[ord(" ")], len(set(table.values()))
    ('A', 'Ġ', 256)
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def unicode_to_bytes(text: str) -> bytes:
    """Undo :func:`bytes_to_unicode` on a token string of GPT-2's vocabulary.

    >>> unicode_to_bytes("Ġthe")
    b' the'
    """
    inverse = {c: b for b, c in bytes_to_unicode().items()}
    try:
        return bytes(inverse[c] for c in text)
    except KeyError as err:
        raise ValueError(
            f"{text!r} is not a byte-level token: {err.args[0]!r} maps to no byte"
        ) from None


class Tokenizer:
    """Encode and decode with a vocabulary ``{id: bytes}`` and merges ``[(bytes, bytes), ...]``."""

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(vocab, Mapping) or not all(
            isinstance(i, int) and isinstance(t, bytes) for i, t in vocab.items()
        ):
            raise TypeError("vocab must map int ids to bytes")
        self.vocab = dict(vocab)
        self.ids = {t: i for i, t in self.vocab.items()}
        missing = [bytes([b]) for b in range(256) if bytes([b]) not in self.ids]
        if missing:
            raise ValueError(f"vocab must contain every single byte; {missing[0]!r} is missing")
        self.special_tokens = list(special_tokens or [])
        for s in self.special_tokens:
            if s.encode("utf-8") not in self.ids:
                self.ids[s.encode("utf-8")] = len(self.vocab)
                self.vocab[len(self.vocab)] = s.encode("utf-8")
        self.ranks: dict[tuple[bytes, bytes], int] = {}
        for rank, (a, b) in enumerate(merges):
            if a + b not in self.ids:
                raise ValueError(f"merge {rank} ({a!r}, {b!r}) makes {a + b!r}, which vocab lacks")
            self.ranks.setdefault((a, b), rank)
        self._cache: dict[bytes, list[int]] = {}

    def _encode_piece(self, piece: bytes) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        parts = [piece[i : i + 1] for i in range(len(piece))]
        ranks = self.ranks
        while len(parts) > 1:
            best, best_rank = -1, len(ranks)
            for i in range(len(parts) - 1):
                r = ranks.get((parts[i], parts[i + 1]))
                if r is not None and r < best_rank:
                    best, best_rank = i, r
            if best < 0:
                break
            a, b = parts[best], parts[best + 1]
            merged, i = [], 0
            while i < len(parts):  # merge every occurrence of this pair, left to right
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        out = [self.ids[p] for p in parts]
        if len(self._cache) < 100_000:
            self._cache[piece] = out
        return out

    def encode(
        self,
        text: str,
        *,
        allowed_special: str | Collection[str] = frozenset(),
        disallowed_special: str | Collection[str] = "all",
    ) -> list[int]:
        """The ids of ``text``; an allowed special token is one id, never split.

        ``allowed_special`` names the special tokens that ``text`` may contain as control tokens
        (``"all"`` allows every special token of this tokenizer, for text one wrote oneself, such
        as the course's training text). The default allows none, as tiktoken's does: a special
        token in the text raises ``ValueError``, or, with ``disallowed_special=()``, is encoded
        as ordinary text, so text a user typed can never turn into a control id.
        ``disallowed_special`` names the special tokens that raise (``"all"``: every one that is
        not allowed).

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], special_tokens=["<eos>"])
        >>> tok.encode("a<eos>", allowed_special={"<eos>"})
        [97, 256]
        >>> tok.encode("a<eos>", allowed_special=set(), disallowed_special=())
        [97, 60, 101, 111, 115, 62]
        >>> tok.encode("a<eos>", allowed_special=set())
        Traceback (most recent call last):
        ...
        ValueError: text contains the special token '<eos>', which allowed_special does not allow: pass allowed_special={'<eos>'} to encode it as a control token, or disallowed_special=() to encode it as plain text
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        allowed = self._specials(allowed_special, "allowed_special")
        disallowed = self._specials(disallowed_special, "disallowed_special") - allowed
        for s in sorted(disallowed):
            if s in text:
                raise ValueError(
                    f"text contains the special token {s!r}, which allowed_special does not "
                    f"allow: pass allowed_special={{{s!r}}} to encode it as a control token, or "
                    "disallowed_special=() to encode it as plain text"
                )
        ids: list[int] = []
        for chunk in split_on_specials(text, sorted(allowed)):
            if chunk in allowed:
                ids.append(self.ids[chunk.encode("utf-8")])
                continue
            for m in _GPT2.findall(chunk):
                ids.extend(self._encode_piece(m.encode("utf-8")))
        return ids

    def _specials(self, which: str | Collection[str], name: str) -> set[str]:
        """``"all"`` or a collection of this tokenizer's special tokens, as a set."""
        if which == "all":
            return set(self.special_tokens)
        if isinstance(which, str) or not isinstance(which, Collection):
            raise TypeError(f'{name} must be "all" or a set of special tokens, got {which!r}')
        unknown = sorted(set(which) - set(self.special_tokens))
        if unknown:
            raise ValueError(
                f"{name} names {unknown[0]!r}, which is not a special token of this tokenizer "
                f"(its special tokens: {self.special_tokens})"
            )
        return set(which)

    def encode_iterable(self, lines: Iterable[str]) -> Iterator[int]:
        """Encode a stream of text (a file opened for reading, or any pieces) lazily.

        The ids are exactly those of ``encode("".join(lines), allowed_special="all")``, wherever
        the pieces are cut: a stream is one's own training text, whose special tokens are control
        tokens.
        What the next piece could still change is held back: the end of the text that may be
        the start of a special token, and the pre-tokens that end within two characters of the
        text's end (the pattern decides a pre-token by looking at most one character past its
        end, or three past its start for a contraction such as ``'ll``). The pre-tokens before
        them are final and are encoded as they are, not pre-tokenised again.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> list(tok.encode_iterable(["a\x1c", "b"])) == tok.encode("a\x1cb")
        True
        """
        pending = ""
        for line in lines:
            if not isinstance(line, str):
                raise TypeError(f"lines must yield str, got {type(line).__name__}")
            pending += line
            ids, pending = self._encode_final(pending)
            yield from ids
        if pending:
            yield from self.encode(pending, allowed_special="all")

    def _encode_final(self, text: str) -> tuple[list[int], str]:
        """The ids of the part of ``text`` that no continuation can change, and the rest."""
        hold = len(text)  # from here on, the text may grow into a special token
        for s in self.special_tokens:
            for k in range(min(len(s) - 1, len(text)), 0, -1):
                if text.endswith(s[:k]):
                    hold = min(hold, len(text) - k)
                    break
        pieces = split_on_specials(text, self.special_tokens)
        specials = set(self.special_tokens)
        ids: list[int] = []
        start = 0
        for i, piece in enumerate(pieces):
            end = start + len(piece)
            if piece in specials:  # one that starts before `hold` is final, whatever follows
                if start >= hold:
                    break
                ids.append(self.ids[piece.encode("utf-8")])
            elif i + 1 < len(pieces) and end < hold:  # ended by a final special token
                for m in _GPT2.findall(piece):
                    ids.extend(self._encode_piece(m.encode("utf-8")))
            else:  # the open end: the pre-tokens that end 2 or more characters before `hold`
                open_end = text[start:hold]
                for m in _GPT2.finditer(open_end):
                    if m.end() + 2 > len(open_end):
                        return ids, text[start + m.start() :]
                    ids.extend(self._encode_piece(m.group().encode("utf-8")))
                break
            start = end
        return ids, text[start:]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD."""
        try:
            data = b"".join(self.vocab[i] for i in ids)
        except KeyError as err:
            raise ValueError(f"id {err.args[0]} is not in the vocabulary") from None
        return data.decode("utf-8", errors="replace")
