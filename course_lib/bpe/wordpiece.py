"""WordPiece, BERT's tokenizer: a small trainer and greedy longest-match-first encoding.

WordPiece (Schuster and Nakajima 2012; used by BERT, Devlin et al. 2019) and BPE (chapter 7)
both start from characters and merge pairs of pieces into longer ones. They differ in two ways:

* **The merge score.** BPE merges the most *frequent* pair. WordPiece merges the pair that most
  increases the likelihood of the training text under a unigram model of the pieces; the usual
  simplification (the one Hugging Face's course teaches) is

  ``score(a, b) = count(ab) / (count(a) * count(b))``,

  which prefers a pair whose parts are seldom seen apart over a pair of two common pieces.
* **Word-internal pieces are marked.** A piece that does not start a word carries the prefix
  ``##``: "playing" may become ``play ##ing``. Encoding keeps no merge list: it takes, from the
  left, the *longest* piece of the vocabulary that matches (with ``##`` after the first), and
  gives the whole word ``[UNK]`` when some part of it cannot be matched.

Text is first cut into words at whitespace, with every punctuation character a word of its own
(as BERT's pre-tokenizer does for ASCII text). :func:`train_wordpiece` with
``score="frequency"`` is BPE with the ``##`` convention, which is what
``tokenizers.trainers.WordPieceTrainer`` runs (it wraps that library's BPE trainer).

>>> vocab = {"[UNK]", "un", "##aff", "##able", "a", "##f"}
>>> encode_word("unaffable", vocab)
['un', '##aff', '##able']
>>> encode_word("unaffablex", vocab)  # no piece covers the final "x": the whole word is unknown
['[UNK]']
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from course_lib.checks import check_choice, check_int

__all__ = [
    "PREFIX", "SPECIALS", "UNK", "WordPiece", "encode", "encode_word", "merge_score",
    "pre_tokenize", "train_wordpiece",
]  # fmt: skip

PREFIX, UNK = "##", "[UNK]"
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: A run of letters or digits, or one character that is neither a letter, a digit nor a space.
_WORD = re.compile(r"[^\W_]+|[^\w\s]|_")


def pre_tokenize(text: str) -> list[str]:
    """Cut text at whitespace and around every punctuation character.

    >>> pre_tokenize("Nay, answer me: stand, and unfold yourself.")
    ['Nay', ',', 'answer', 'me', ':', 'stand', ',', 'and', 'unfold', 'yourself', '.']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _WORD.findall(text)


def merge_score(pair_count: int, count_a: int, count_b: int, score: str = "likelihood") -> float:
    """WordPiece's ``count(ab) / (count(a) count(b))``, or BPE's ``count(ab)`` (``score="frequency"``).

    >>> merge_score(20, 100, 40), merge_score(5, 5, 5)  # the rarer pair wins under WordPiece
    (0.005, 0.2)
    >>> merge_score(20, 100, 40, "frequency"), merge_score(5, 5, 5, "frequency")  # not under BPE
    (20.0, 5.0)
    """
    if score == "frequency":
        return float(pair_count)
    return pair_count / (count_a * count_b)


def _join(a: str, b: str) -> str:
    return a + (b[len(PREFIX) :] if b.startswith(PREFIX) else b)


def train_wordpiece(
    text: str | Iterable[str],
    vocab_size: int,
    *,
    score: str = "likelihood",
    min_count: int = 1,
    specials: Iterable[str] = SPECIALS,
) -> list[str]:
    """Learn a WordPiece vocabulary of (at most) ``vocab_size`` pieces from text.

    1. Cut the text into words (:func:`pre_tokenize`) and count them.
    2. Start from characters: the first one of each word as is, the others with ``##``
       ("yes" -> ``y ##e ##s``). The vocabulary is the special tokens and these characters.
    3. Until the vocabulary is full: count every piece and every adjacent pair of pieces (each
       word weighted by its count), merge the pair of highest :func:`merge_score` everywhere,
       and add the merged piece (``y`` + ``##e`` -> ``ye``; ``##e`` + ``##s`` -> ``##es``).
       Ties go to the more frequent pair, then to the alphabetically first.

    It stops early when no pair is left (every word is a single piece). Returns the vocabulary
    as a list: the specials, the sorted characters, then the merged pieces in the order learned.

    >>> text = "hug hug hug pug pun bun"
    >>> train_wordpiece(text, 12, specials=["[UNK]"])[7:]  # the rare "bun" before "hug"
    ['##ug', '##un', 'bun', 'pun', 'hug']
    >>> train_wordpiece(text, 12, specials=["[UNK]"], score="frequency")[7:]  # BPE's order
    ['##ug', 'hug', '##un', 'bun', 'pug']
    """
    check_int(vocab_size, "vocab_size", low=1)
    check_choice(score, "score", ("likelihood", "frequency"))
    check_int(min_count, "min_count", low=1)
    lines = [text] if isinstance(text, str) else list(text)
    if not all(isinstance(t, str) for t in lines):
        raise TypeError("text must be a str or an iterable of str")
    counts = Counter(w for t in lines for w in pre_tokenize(t))
    words = list(counts)
    freq = [counts[w] for w in words]
    splits = [[w[0], *(PREFIX + c for c in w[1:])] for w in words]
    alphabet = sorted({p for s in splits for p in s}, key=lambda p: (p.startswith(PREFIX), p))
    vocab = list(dict.fromkeys([*specials, *alphabet]))

    pieces: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)  # pair -> words holding it
    by_piece: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)  # piece -> its pairs
    for i, s in enumerate(splits):
        for p in s:
            pieces[p] += freq[i]
        for pair in zip(s, s[1:], strict=False):
            pairs[pair] += freq[i]
            where[pair].add(i)
            by_piece[pair[0]].add(pair)
            by_piece[pair[1]].add(pair)

    # A heap of (-score, -count, pair): the best pair on top, ties to the more frequent pair,
    # then to the alphabetically first. Entries go stale when counts change; a fresh one is
    # pushed for every pair whose score may have changed, and stale ones are skipped.
    def entry(ab):
        return (-merge_score(pairs[ab], pieces[ab[0]], pieces[ab[1]], score), -pairs[ab], ab)

    heap = [entry(ab) for ab in pairs if pairs[ab] >= min_count]
    heapq.heapify(heap)
    known = set(vocab)
    while len(vocab) < vocab_size and heap:
        top = heapq.heappop(heap)
        best = top[2]
        if pairs.get(best, 0) < min_count or entry(best) != top:
            continue  # stale: the pair is gone, or its score changed and was pushed again
        a, b = best
        new = _join(a, b)
        touched = set()
        for i in list(where[best]):
            s, f = splits[i], freq[i]
            for p in s:  # take the word's old pieces and pairs out ...
                pieces[p] -= f
            for pair in zip(s, s[1:], strict=False):
                pairs[pair] -= f
                where[pair].discard(i)
                touched.add(pair)
            merged, k = [], 0
            while k < len(s):
                if k + 1 < len(s) and s[k] == a and s[k + 1] == b:
                    merged.append(new)
                    k += 2
                else:
                    merged.append(s[k])
                    k += 1
            splits[i] = merged
            for p in merged:  # ... and its new ones in
                pieces[p] += f
            for pair in zip(merged, merged[1:], strict=False):
                pairs[pair] += f
                where[pair].add(i)
                by_piece[pair[0]].add(pair)
                by_piece[pair[1]].add(pair)
                touched.add(pair)
        for p in (a, b, new):  # their counts changed: so did the score of every pair with them
            touched |= by_piece[p]
        for pair in touched:
            if pairs.get(pair, 0) <= 0:
                pairs.pop(pair, None)
                where.pop(pair, None)
                by_piece[pair[0]].discard(pair)
                by_piece[pair[1]].discard(pair)
            elif pairs[pair] >= min_count:
                heapq.heappush(heap, entry(pair))
        if new not in known:
            vocab.append(new)
            known.add(new)
    return vocab


def encode_word(word: str, vocab: Iterable[str], max_chars: int = 100) -> list[str]:
    """Greedy longest-match-first: the longest vocabulary piece at each point, ``##`` after the first.

    A word that cannot be covered, or longer than ``max_chars`` characters, is ``[UNK]`` as a
    whole (as in BERT and in ``tokenizers``' WordPiece).

    >>> encode_word("unwanted", {"un", "##want", "##wan", "##ted", "##t", "##ed"})
    ['un', '##want', '##ed']
    """
    if not isinstance(word, str):
        raise TypeError(f"word must be a str, got {type(word).__name__}")
    vocab = vocab if isinstance(vocab, set | frozenset | Mapping) else set(vocab)
    if len(word) > max_chars:
        return [UNK]
    out, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # longest first
            piece = word[start:end] if start == 0 else PREFIX + word[start:end]
            if piece in vocab:
                out.append(piece)
                start = end
                break
        else:
            return [UNK]  # nothing matches here: the whole word is unknown
    return out


def encode(text: str, vocab: Iterable[str]) -> list[str]:
    """The pieces of a text: :func:`pre_tokenize`, then :func:`encode_word` on every word.

    >>> encode("Hug, pug!", train_wordpiece("hug hug pug , !", 30))
    ['[UNK]', ',', 'pug', '!']
    """
    vocab = vocab if isinstance(vocab, set | frozenset | Mapping) else set(vocab)
    return [p for w in pre_tokenize(text) for p in encode_word(w, vocab)]


class WordPiece:
    """A trained vocabulary with ids: ``encode`` gives ids, ``tokens`` the pieces, ``decode`` text.

    >>> wp = WordPiece(["[UNK]", "h", "##u", "##g", "hu", "hug"])
    >>> wp.tokens("hug hugu"), wp.encode("hug hugu"), wp.decode(wp.encode("hug hugu"))
    (['hug', 'hug', '##u'], [5, 5, 2], 'hug hugu')
    """

    def __init__(self, vocab: Iterable[str]):
        self.vocab = list(vocab)
        self.ids = {p: i for i, p in enumerate(self.vocab)}
        if UNK not in self.ids:
            raise ValueError(f"the vocabulary needs an {UNK} token")

    @classmethod
    def train(cls, text: str | Iterable[str], vocab_size: int, **kw) -> WordPiece:
        return cls(train_wordpiece(text, vocab_size, **kw))

    def tokens(self, text: str) -> list[str]:
        return encode(text, self.ids)

    def encode(self, text: str) -> list[int]:
        return [self.ids[p] for p in self.tokens(text)]

    def decode(self, ids: Iterable[int]) -> str:
        """Pieces joined: ``##`` pieces glue to the previous one, the others get a space."""
        out = ""
        for i in ids:
            p = self.vocab[int(i)]
            out += p[len(PREFIX) :] if p.startswith(PREFIX) else (" " if out else "") + p
        return out
