"""A fast byte-level BPE trainer: incremental pair counts, buckets for the maximum.

The readable trainer (:mod:`course_lib.bpe.readable`) recounts every pair of every word at each
step. Here the counts are kept between steps: a merge of the pair (A, B) changes only the words
that contain it, so only the pairs of those words are updated, through an index from each pair
to the words that contain it. The most frequent pair is found in buckets of pairs by count; the
largest count never grows (a new pair occurs at most as often as the pair merged to make it),
so the search only walks down. Ties go to the lexicographically greatest pair of byte strings,
as in the reference, and the two produce identical merges on every input (tests/test_bpe.py).

Training text is split first: on the special tokens (never merged or split), then with GPT-2's
pre-tokenisation pattern (words with their leading space, numbers, punctuation, white space),
so that no merge crosses a word boundary.

>>> train_bpe_words({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 3)
[(b's', b't'), (b'e', b'st'), (b'o', b'w')]
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import regex

from course_lib.checks import check_int

__all__ = ["GPT2_PATTERN", "count_words", "split_on_specials", "train_bpe", "train_bpe_words"]

#: GPT-2's pre-tokenisation pattern (Radford et al. 2019, the released encoder).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2 = regex.compile(GPT2_PATTERN)


def split_on_specials(text: str, special_tokens: Sequence[str]) -> list[str]:
    """Cut ``text`` at every special token (longest first), keeping the tokens as pieces.

    >>> split_on_specials("a<|end|>b", ["<|end|>"])
    ['a', '<|end|>', 'b']
    """
    if not special_tokens:
        return [text]
    alternatives = "|".join(regex.escape(s) for s in sorted(special_tokens, key=len, reverse=True))
    return [piece for piece in regex.split(f"({alternatives})", text) if piece]


def count_words(texts: Iterable[str], special_tokens: Sequence[str] = ()) -> Counter:
    """How often each pre-token occurs (as UTF-8 bytes), special tokens left out.

    >>> count_words(["the cat, the hat"])
    Counter({b'the': 1, b' cat': 1, b',': 1, b' the': 1, b' hat': 1})
    """
    specials = set(special_tokens)
    strings: Counter = Counter()
    for text in texts:
        for piece in split_on_specials(text, special_tokens):
            if piece not in specials:
                strings.update(_GPT2.findall(piece))
    return Counter({s.encode("utf-8"): c for s, c in strings.items()})  # encode each once


def train_bpe_words(word_counts: Mapping[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    """Learn up to ``num_merges`` merges from words (bytes) and their counts, fast."""
    check_int(num_merges, "num_merges", low=0)
    words = [list(bytes([b]) for b in w) for w in word_counts]  # tokens of each distinct word
    freqs = [c for w, c in word_counts.items()]
    pair_count: dict[tuple[bytes, bytes], int] = defaultdict(int)
    where: dict[tuple[bytes, bytes], set[int]] = defaultdict(set)  # pair -> ids of its words
    for i, (w, f) in enumerate(zip(words, freqs, strict=True)):
        for pair in zip(w, w[1:], strict=False):
            pair_count[pair] += f
            where[pair].add(i)
    buckets: dict[int, set] = defaultdict(set)  # count -> pairs with that count
    for pair, c in pair_count.items():
        buckets[c].add(pair)
    top = max(buckets, default=0)

    def change(pair: tuple[bytes, bytes], delta: int) -> None:
        old = pair_count[pair]
        buckets[old].discard(pair)
        pair_count[pair] = old + delta
        if old + delta > 0:
            buckets[old + delta].add(pair)
        else:
            del pair_count[pair]

    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < num_merges:
        while top > 0 and not buckets.get(top):
            top -= 1
        if top == 0:
            break
        best = max(buckets[top])  # tuples of bytes compare lexicographically: ties -> greatest
        merges.append(best)
        a, b = best
        new = a + b
        for i in list(where[best]):
            w, f = words[i], freqs[i]
            merged, j, n = [], 0, len(w) - 1
            while j <= n:
                if j < n and w[j] == a and w[j + 1] == b:
                    merged.append(new)
                    j += 2
                else:
                    merged.append(w[j])
                    j += 1
            before: dict = {}
            for pair in zip(w, w[1:], strict=False):
                before[pair] = before.get(pair, 0) + 1
            after: dict = {}
            for pair in zip(merged, merged[1:], strict=False):
                after[pair] = after.get(pair, 0) + 1
            for pair, n in before.items():  # the word's pairs that changed, and only those
                d = after.get(pair, 0) - n
                if d:
                    change(pair, d * f)
                    if d == -n:
                        where[pair].discard(i)
            for pair, n in after.items():
                if pair not in before:
                    change(pair, n * f)
                    where[pair].add(i)
            words[i] = merged
        where.pop(best, None)
    return merges


def _read_text(input_path: str | os.PathLike) -> str:
    if not isinstance(input_path, str | os.PathLike):
        raise TypeError(f"input_path must be a path, got {type(input_path).__name__}")
    path = Path(input_path)
    if not path.is_file():
        raise FileNotFoundError(f"input_path {str(path)!r} does not exist or is not a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"input_path {str(path)!r} is not UTF-8 text (byte {err.start}: {err.reason})"
        ) from None


def train_bpe(
    input_path: str | os.PathLike, vocab_size: int, special_tokens: Sequence[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on a UTF-8 text file.

    Returns ``(vocab, merges)``: ``vocab`` maps ids to byte strings (ids 0-255 the single
    bytes, then the special tokens, then one id per merge, in order) and has at most
    ``vocab_size`` entries; ``merges`` lists the merged pairs in the order they were learned.
    """
    if isinstance(special_tokens, str) or not all(isinstance(s, str) for s in special_tokens):
        raise TypeError("special_tokens must be a list of str")
    if any(not s for s in special_tokens) or len(set(special_tokens)) != len(special_tokens):
        raise ValueError("special_tokens must be distinct, non-empty strings")
    check_int(vocab_size, "vocab_size")
    floor = 256 + len(special_tokens)
    if vocab_size < floor:
        raise ValueError(
            f"vocab_size must be at least 256 + {len(special_tokens)} special tokens = {floor} "
            f"(every byte has a token), got {vocab_size}"
        )
    text = _read_text(input_path)
    counts = count_words([text], special_tokens)
    if not counts:
        raise ValueError(f"input_path {str(input_path)!r} holds no text to train on")
    merges = train_bpe_words(counts, vocab_size - floor)
    vocab = {i: bytes([i]) for i in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return vocab, merges
