"""The readable byte-level BPE trainer: the listing's loop, over bytes (Sennrich et al. 2016).

Every word starts as its sequence of bytes. Each step counts all adjacent pairs over all words
(weighted by how often the word occurs), takes the most frequent pair, and replaces it
everywhere by one new token. Ties between equally frequent pairs go to the lexicographically
greatest pair of byte strings (the convention of Stanford CS336), so the result does not depend
on dictionary order. This is the definition :mod:`course_lib.bpe.train` must reproduce, fast.

>>> train_bpe_reference({b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}, 3)
[(b's', b't'), (b'e', b'st'), (b'o', b'w')]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from course_lib.checks import check_int

__all__ = ["count_pairs", "merge_word", "train_bpe_reference"]


def count_pairs(words: Mapping[tuple[bytes, ...], int]) -> Counter:
    """Adjacent pairs of tokens over all words, each weighted by the word's count.

    >>> count_pairs({(b"a", b"b", b"a", b"b"): 2})
    Counter({(b'a', b'b'): 4, (b'b', b'a'): 2})
    """
    pairs: Counter = Counter()
    for word, freq in words.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += freq
    return pairs


def merge_word(word: tuple, pair: tuple, new) -> tuple:
    """Replace each non-overlapping occurrence of ``pair`` in ``word``, left to right, by ``new``.

    >>> merge_word((1, 2, 3, 1, 2), (1, 2), 4)  # minbpe's example
    (4, 3, 4)
    >>> merge_word((1, 1, 1), (1, 1), 9)  # left to right: the first two merge, the third stays
    (9, 1)
    """
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe_reference(
    word_counts: Mapping[bytes, int], num_merges: int
) -> list[tuple[bytes, bytes]]:
    """Learn up to ``num_merges`` merges from words (bytes) and their counts, the slow clear way."""
    check_int(num_merges, "num_merges", low=0)
    words = {tuple(bytes([b]) for b in w): c for w, c in word_counts.items() if w}
    merges: list[tuple[bytes, bytes]] = []
    for _ in range(num_merges):
        pairs = count_pairs(words)
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))  # most frequent; ties: greatest bytes
        merges.append(best)
        words = {merge_word(w, best, best[0] + best[1]): c for w, c in words.items()}
    return merges
