"""Perplexity, and the smallest language model that has one: an add-k word-bigram model.

Perplexity scores a model on a text it did not train on: the exponential of the mean negative
log-probability it gives each next token (chapter 2's cross-entropy, per token). The bigram model
is here to have something to score in Chapter 3; the course's real language models are GPT
(chapter 8) and BERT (chapter 9).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from course_lib.checks import check_real

__all__ = ["BOS", "EOS", "UNK", "BigramLM", "perplexity"]

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


def perplexity(log_probs: Iterable[float]) -> float:
    """``exp(-mean(log_probs))``: the perplexity of natural-log token probabilities.

    >>> perplexity([math.log(0.5), math.log(0.5)])  # two fair coin flips
    2.0
    >>> round(perplexity([math.log(1 / 50)] * 7), 9)  # a uniform model over 50 tokens
    50.0
    """
    values = [float(v) for v in log_probs]
    if not values:
        raise ValueError("log_probs is empty: perplexity needs at least one token")
    if any(math.isnan(v) or v > 0 for v in values):
        raise ValueError("log_probs must be logarithms of probabilities (<= 0, not NaN)")
    return math.exp(-math.fsum(values) / len(values))


class BigramLM:
    """An add-k smoothed word-bigram model: ``p(b | a) = (C(a b) + k) / (C(a) + k V)``.

    Trained on token lists; each sentence is framed as ``<s> y_1 ... y_K </s>``. The vocabulary
    of next tokens is the training words plus ``</s>`` and ``<unk>`` (``V`` of them), and a word
    never seen in training is read as ``<unk>``, so every ``p(. | a)`` is a distribution over the
    same ``V`` tokens.

    >>> lm = BigramLM([["a", "b"], ["a", "c"]], k=1.0)
    >>> lm.V, round(lm.prob("a", "b"), 4)  # (1 + 1) / (2 + 1 * 5)
    (5, 0.2857)
    >>> round(sum(lm.prob("a", w) for w in lm.vocabulary), 12)
    1.0
    """

    def __init__(self, sentences: Iterable[Sequence[str]], k: float = 0.1) -> None:
        self.k = check_real(k, "k", low=0.0, low_open=True, high_open=True)
        self.pairs: Counter[tuple[str, str]] = Counter()
        self.contexts: Counter[str] = Counter()
        words: set[str] = set()
        for sentence in sentences:
            if isinstance(sentence, str) or not all(isinstance(w, str) for w in sentence):
                raise TypeError("each training sentence must be a list of str tokens")
            words.update(sentence)
            framed = [BOS, *sentence, EOS]
            self.pairs.update(zip(framed, framed[1:], strict=False))
            self.contexts.update(framed[:-1])
        if not self.contexts:
            raise ValueError("no training sentences")
        self.vocabulary = sorted(words | {EOS, UNK})
        self.V = len(self.vocabulary)
        self._known = set(self.vocabulary)

    def _word(self, w: str) -> str:
        return w if w in self._known else UNK

    def prob(self, previous: str, word: str) -> float:
        """``p(word | previous)``; unknown words of either side are read as ``<unk>``."""
        a = previous if previous == BOS else self._word(previous)
        b = self._word(word)
        return (self.pairs[a, b] + self.k) / (self.contexts[a] + self.k * self.V)

    def log_probs(self, tokens: Sequence[str]) -> list[float]:
        """Natural logs of ``p(y_t | y_{t-1})`` for every token and the closing ``</s>``."""
        framed = [BOS, *tokens, EOS]
        return [math.log(self.prob(a, b)) for a, b in zip(framed, framed[1:], strict=False)]
