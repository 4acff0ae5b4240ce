"""Small, fixed examples for Chapter 4: the worked example of May's notes and a toy sentence.

* :func:`may_worked_example`: the key, query and value matrices printed in May's notes
  (section 1.1), with input vectors that reproduce the printed numbers (the notes do not
  give them).
* :func:`toy_sentence`: a 12-token sentence (two of them padding) with features built by hand,
  and four attention heads whose weights were *written*, not learned, so that each does one
  recognisable job. They stand in for a trained model, whose weights the course does not
  download.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.checks import check_choice, check_int

__all__ = ["HEAD_NAMES", "ToySentence", "may_worked_example", "toy_mask", "toy_sentence"]


def may_worked_example() -> dict[str, np.ndarray]:
    """The matrices of May's notes, section 1.1, and inputs that reproduce its numbers.

    The notes call the three (4, 3) projection matrices K, Q and V (we call them W_K, W_Q,
    W_V, as eqs. 14-16 of Strabel's notes do, to keep K, Q, V for the projected keys, queries and
    values). Rows of ``X`` are the inputs x1 = [1, 0, 1, 0], x2 = [0, 2, 0, 2] and
    x3 = [1, 1, 1, 1].

    >>> ex = may_worked_example()
    >>> (ex["X"][0] @ ex["W_Q"]) @ (ex["X"] @ ex["W_K"]).T  # the printed logits [2, 4, 4]
    array([2., 4., 4.])
    """
    W_K = np.array([[0, 0.5, 0.5], [1, 1, 0], [0, 0.5, 0.5], [1, 1, 0]])
    W_Q = np.array([[0.5, 0, 1], [0, 0, 0], [0.5, 0, 1], [0, 0, 0]])
    W_V = np.array([[0.5, 1, 1.5], [0.5, 2, 0], [0.5, 1, 1.5], [0.5, 2, 0]])
    X = np.array([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    return {"X": X, "W_K": W_K, "W_Q": W_Q, "W_V": W_V}


HEAD_NAMES = ("previous token", "same word", "to the nouns", "to the verbs")

_TOKENS = ("the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired")
_TAGS = ("DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "SCONJ", "PRON", "VERB", "ADJ")
_TAGSET = ("DET", "NOUN", "VERB", "ADP", "SCONJ", "PRON", "ADJ", "PAD")


@dataclass(frozen=True)
class ToySentence:
    """Token strings, features X (L, d), per-head weights (h, d, d_k), and real-token count."""

    tokens: tuple[str, ...]
    X: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    length: int

    @property
    def n_heads(self) -> int:
        return self.w_q.shape[0]


def toy_sentence(strength: float = 4.0) -> ToySentence:
    """The sentence "the cat sat on the mat because it was tired" plus two padding tokens.

    Features of token i (width d = 31): a one-hot position (12), a one-hot word (10: 9 words
    and ``<pad>``), a one-hot tag (8) and a constant 1. Each head uses d_k = 12 and matches one
    feature of the query against one feature of the key, with logits ``strength**2`` apart
    before the 1/sqrt(d_k) scaling:

    * head 0, *previous token*: position i's query is the one-hot of i - 1 (token 0: of 0);
    * head 1, *same word*: the query and key are the word's one-hot;
    * head 2, *to the nouns*: every query is the same vector; only NOUN keys match it;
    * head 3, *to the verbs*: likewise for VERB keys.

    >>> s = toy_sentence()
    >>> s.X.shape, s.w_q.shape, s.tokens[-3:], s.length
    ((12, 31), (4, 31, 12), ('tired', '<pad>', '<pad>'), 10)
    """
    L, d_k = 12, 12
    tokens = (*_TOKENS, "<pad>", "<pad>")
    tags = (*_TAGS, "PAD", "PAD")
    vocab = sorted(set(tokens), key=tokens.index)  # 10 words in order of appearance
    P, W, T = L, len(vocab), len(_TAGSET)  # offsets: positions, words, tags, constant
    d = P + W + T + 1
    X = np.zeros((L, d))
    for i, (tok, tag) in enumerate(zip(tokens, tags, strict=True)):
        X[i, i] = 1.0
        X[i, P + vocab.index(tok)] = 1.0
        X[i, P + W + _TAGSET.index(tag)] = 1.0
        X[i, -1] = 1.0
    h = len(HEAD_NAMES)
    w_q, w_k = np.zeros((h, d, d_k)), np.zeros((h, d, d_k))
    for i in range(L):  # head 0: query at position i looks for key position i - 1
        w_q[0, i, max(i - 1, 0)] = strength
        w_k[0, i, i] = strength
    for j in range(W):  # head 1: same word
        w_q[1, P + j, j] = strength
        w_k[1, P + j, j] = strength
    for head, tag in ((2, "NOUN"), (3, "VERB")):  # heads 2 and 3: the constant asks for a tag
        w_q[head, d - 1, 0] = strength
        w_k[head, P + W + _TAGSET.index(tag), 0] = strength
    rng = np.random.default_rng(4)
    w_v = rng.standard_normal((h, d, d_k)) / np.sqrt(d)
    w_o = rng.standard_normal((h * d_k, d)) / np.sqrt(h * d_k)
    return ToySentence(tokens, X, w_q, w_k, w_v, w_o, length=len(_TOKENS))


def toy_mask(kind: str, sentence: ToySentence) -> np.ndarray | None:
    """The mask of one kind for the toy sentence: 'none', 'causal', 'padding' or 'both'.

    >>> toy_mask("padding", toy_sentence()).shape
    (1, 12)
    """
    from course_lib.attention.reference import causal_mask, padding_mask

    check_choice(kind, "mask", ("none", "causal", "padding", "both"))
    L = check_int(len(sentence.tokens), "L", low=1)
    if kind == "none":
        return None
    causal = causal_mask(L)  # (L, L)
    pad = padding_mask([sentence.length], L)[0]  # (1, L)
    return {"causal": causal, "padding": pad, "both": causal & pad}[kind]
