"""The three encoder tasks end to end: examples -> padded ids -> a head on BERT -> a metric.

Each ``encode_*`` function turns the generated examples of :mod:`course_lib.bert.tasks` into
arrays; each ``train_*`` fine-tunes a head (:mod:`course_lib.bert.model`) on a copy of the given
encoder and returns the training losses and the metric on held-out examples.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from course_lib.bert.data import PAD, pack, pad_batch, token_offsets
from course_lib.bert.inputs import IGNORE
from course_lib.bert.model import Bert, SequenceClassifier, SpanPredictor, TokenTagger
from course_lib.bert.tasks import TAGS, QAExample
from course_lib.bert.train import fit
from course_lib.bpe.tokenizer import Tokenizer

__all__ = [
    "Batch", "best_span", "char_span_to_tokens", "encode_classification", "encode_qa",
    "bag_of_words_accuracy", "encode_tagging", "train_classifier", "train_span", "train_tagger", "word_labels_to_tokens",
]  # fmt: skip


@dataclass
class Batch:
    """Padded inputs (N, L) and the targets of one task."""

    ids: np.ndarray
    segments: np.ndarray
    mask: np.ndarray
    targets: tuple[np.ndarray, ...]

    def t(self, idx=slice(None)):
        return (torch.from_numpy(self.ids[idx]), torch.from_numpy(self.segments[idx]),
                torch.from_numpy(self.mask[idx]))  # fmt: skip


def _batch(rows: list[list[int]], segs: list[list[int]], *targets: np.ndarray) -> Batch:
    ids = pad_batch(rows)
    return Batch(ids, pad_batch(segs, fill=0, length=ids.shape[1]), ids != PAD, targets)


# ------------------------------------------------------------------------------ classification
def encode_classification(
    examples: Sequence[tuple[str, int]], tok: Tokenizer, max_len: int
) -> Batch:
    """``[CLS] sentence [SEP]`` rows and the labels (N,)."""
    rows, segs = zip(*(pack(tok.encode(s), max_len=max_len) for s, _ in examples), strict=True)
    return _batch(list(rows), list(segs), np.array([y for _, y in examples]))


# ------------------------------------------------------------------------------------- spans
def char_span_to_tokens(
    offsets: Sequence[tuple[int, int]], start: int, end: int
) -> tuple[int, int]:
    """The first and last token (inclusive) covering characters ``[start, end)``.

    >>> char_span_to_tokens([(0, 5), (5, 12), (12, 13)], 6, 12)  # " Verona" covers 5..12
    (1, 1)
    """
    if not 0 <= start < end:
        raise ValueError(f"the span [{start}, {end}) must be non-empty and start at 0 or later")
    first = next((i for i, (s, e) in enumerate(offsets) if s <= start < e), None)
    last = next((i for i, (s, e) in enumerate(offsets) if s < end <= e), None)
    if first is None or last is None:
        raise ValueError(f"characters [{start}, {end}) lie outside the tokens' text")
    return first, last


def encode_qa(examples: Sequence[QAExample], tok: Tokenizer, max_len: int) -> Batch:
    """``[CLS] question [SEP] story [SEP]`` with the answer's first and last token positions."""
    rows, segs, starts, ends = [], [], [], []
    for ex in examples:
        q, s = tok.encode(ex.question), tok.encode(ex.story)
        ids, seg = pack(q, s, max_len=max_len)
        a, b = char_span_to_tokens(token_offsets(tok, s), ex.start, ex.end)
        shift = len(q) + 2  # [CLS] question [SEP]
        rows.append(ids)
        segs.append(seg)
        starts.append(a + shift)
        ends.append(b + shift)
    return _batch(rows, segs, np.array(starts), np.array(ends))


def best_span(start_logits, end_logits, max_tokens: int = 8) -> tuple[int, int]:
    """The span (i, j), i <= j < i + max_tokens, with the largest ``start_i + end_j``.

    >>> best_span([0.0, 3.0, 1.0, 0.0], [0.0, 0.0, 2.0, 5.0], max_tokens=2)
    (2, 3)
    """
    s, e = np.asarray(start_logits, dtype=float), np.asarray(end_logits, dtype=float)
    if s.ndim != 1 or s.shape != e.shape:
        raise ValueError(
            f"start_logits and end_logits must be vectors of one length, got {s.shape} and {e.shape}"
        )
    score = s[:, None] + e[None, :]  # (L, L): score[i, j] of the span i..j
    i, j = np.indices(score.shape)
    score = np.where((j >= i) & (j < i + max_tokens), score, -np.inf)
    k = int(np.argmax(score))
    return k // len(s), k % len(s)


# ------------------------------------------------------------------------------------- tags
def word_labels_to_tokens(word_ids: Sequence[Sequence[int]], tags: Sequence[str]) -> list[str]:
    """One tag per token from one tag per word: the word's first token keeps the tag, the rest
    continue it (``B-X`` becomes ``I-X``).

    >>> word_labels_to_tokens([[7], [8, 9]], ["O", "B-LOC"])
    ['O', 'B-LOC', 'I-LOC']
    """
    if len(word_ids) != len(tags):
        raise ValueError(
            f"there are {len(word_ids)} words but {len(tags)} tags: give one tag per word"
        )
    out = []
    for ids, t in zip(word_ids, tags, strict=True):
        out += [t] + [t.replace("B-", "I-")] * (len(ids) - 1)
    return out


def encode_tagging(sentences, tok: Tokenizer, max_len: int) -> Batch:
    """Each sentence's tokens with one tag id per token; ``IGNORE`` on ``[CLS]``, ``[SEP]``, padding."""
    rows, segs, labels = [], [], []
    for words, tags in sentences:
        word_ids = [tok.encode(w if i == 0 else " " + w) for i, w in enumerate(words)]
        flat = [i for w in word_ids for i in w]
        ids, seg = pack(flat, max_len=max_len)
        lab = [TAGS.index(t) for t in word_labels_to_tokens(word_ids, tags)]
        rows.append(ids)
        segs.append(seg)
        labels.append([IGNORE, *lab, IGNORE])
    b = _batch(rows, segs)
    b.targets = (pad_batch(labels, fill=IGNORE, length=b.ids.shape[1]),)
    return b


# --------------------------------------------------------------------------------- training
def train_classifier(
    bert: Bert,
    train: Batch,
    test: Batch,
    *,
    steps: int = 150,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
):
    """Fine-tune a copy of ``bert`` with a [CLS] classifier; returns (losses, test accuracy)."""
    model = SequenceClassifier(copy.deepcopy(bert), int(train.targets[0].max()) + 1, seed=seed)
    y = torch.from_numpy(train.targets[0])
    losses = fit(
        model,
        lambda i: model.loss(model(*train.t(i)), y[i]),
        len(y),
        steps=steps,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
    )
    with torch.no_grad():
        pred = model(*test.t()).argmax(-1).numpy()
    return losses, float((pred == test.targets[0]).mean())


def train_span(
    bert: Bert,
    train: Batch,
    test: Batch,
    *,
    steps: int = 150,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
):
    """Fine-tune a copy of ``bert`` with start/end scores; returns (losses, test exact match)."""
    model = SpanPredictor(copy.deepcopy(bert), seed=seed)
    s, e = (torch.from_numpy(v) for v in train.targets)
    losses = fit(model, lambda i: model.loss(*model(*train.t(i)), s[i], e[i]), len(s),
                 steps=steps, lr=lr, batch_size=batch_size, seed=seed)  # fmt: skip
    with torch.no_grad():
        st, en = model(*test.t())
    pred = [best_span(a, b) for a, b in zip(st.numpy(), en.numpy(), strict=True)]
    hits = [p == (a, b) for p, a, b in zip(pred, *test.targets, strict=True)]
    return losses, float(np.mean(hits))


def train_tagger(
    bert: Bert,
    train: Batch,
    test: Batch,
    *,
    steps: int = 150,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
):
    """Fine-tune a copy of ``bert`` with a per-token tagger; returns (losses, test tag accuracy)."""
    model = TokenTagger(copy.deepcopy(bert), len(TAGS), seed=seed)
    y = torch.from_numpy(train.targets[0])
    losses = fit(
        model,
        lambda i: model.loss(model(*train.t(i)), y[i]),
        len(y),
        steps=steps,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
    )
    with torch.no_grad():
        pred = model(*test.t()).argmax(-1).numpy()
    keep = test.targets[0] != IGNORE
    return losses, float((pred[keep] == test.targets[0][keep]).mean())


def bag_of_words_accuracy(
    train: Batch, test: Batch, vocab_size: int, steps: int = 300, seed: int = 0
) -> float:
    """A baseline that ignores order: logistic regression on token counts; returns test accuracy."""

    def counts(b: Batch) -> torch.Tensor:
        c = np.zeros((len(b.ids), vocab_size))
        for r, row in enumerate(b.ids):
            np.add.at(c[r], row[b.mask[r]], 1.0)
        return torch.from_numpy(c).float()

    torch.manual_seed(seed)
    x, y = counts(train), torch.from_numpy(train.targets[0])
    lin = torch.nn.Linear(vocab_size, int(y.max()) + 1)
    opt = torch.optim.Adam(lin.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(lin(x), y).backward()
        opt.step()
    with torch.no_grad():
        return float((lin(counts(test)).argmax(-1).numpy() == test.targets[0]).mean())
