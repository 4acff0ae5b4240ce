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
    "bag_of_words_accuracy", "encode_tagging", "entities", "fine_tune", "predict", "tag_scores",
    "train_classifier", "train_span", "train_tagger", "word_labels_to_tokens",
]  # fmt: skip


@dataclass
class Batch:
    """Padded inputs (N, L) and the targets of one task."""

    ids: np.ndarray
    segments: np.ndarray
    mask: np.ndarray
    targets: tuple[np.ndarray, ...]

    def t(self, idx=slice(None), device: str | torch.device = "cpu"):
        """The inputs of rows ``idx`` as tensors on ``device``: ids, segments, mask."""
        return tuple(
            torch.from_numpy(v[idx]).to(device) for v in (self.ids, self.segments, self.mask)
        )

    def __len__(self) -> int:
        return len(self.ids)


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
def fine_tune(
    model: torch.nn.Module,
    train: Batch,
    *,
    steps: int,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
    warmup: int = 20,
    schedule: str = "constant",
    device: str = "cpu",
    callback=None,
) -> list[float]:
    """The chapter's one fine-tuning loop: AdamW on ``model.loss(*model(x), *targets)`` over
    random batches of ``train`` (:func:`~course_lib.bert.train.fit`); returns the losses.

    ``model`` is any head with a ``loss`` method whose arguments are its outputs followed by the
    batch's targets (:class:`~course_lib.bert.model.SequenceClassifier`, ``SpanPredictor``,
    ``TokenTagger``, :class:`course_lib.bert.compare.Classifier`).
    """
    model.to(device)
    targets = [torch.from_numpy(t).to(device) for t in train.targets]

    def step_loss(i: np.ndarray) -> torch.Tensor:
        out = model(*train.t(i, device))
        return model.loss(*(out if isinstance(out, tuple) else (out,)), *(t[i] for t in targets))

    return fit(model, step_loss, len(train), steps=steps, batch_size=batch_size, lr=lr, seed=seed,
               warmup=warmup, schedule=schedule, callback=callback)  # fmt: skip


@torch.no_grad()
def predict(model: torch.nn.Module, data: Batch, chunk: int = 500) -> tuple[np.ndarray, ...]:
    """``model``'s outputs on every row of ``data`` in eval mode, as NumPy arrays (a tuple)."""
    was, device = model.training, next(model.parameters()).device
    model.eval()
    outs = []
    for i in range(0, len(data), chunk):
        out = model(*data.t(slice(i, i + chunk), device))
        outs.append([o.cpu().numpy() for o in (out if isinstance(out, tuple) else (out,))])
    model.train(was)
    return tuple(np.concatenate(parts) for parts in zip(*outs, strict=True))


def train_classifier(bert: Bert, train: Batch, test: Batch, **kw):
    """Fine-tune a copy of ``bert`` with a [CLS] classifier; returns (losses, test accuracy).

    Keywords go to :func:`fine_tune` (``steps``, default 150; ``lr``, ``batch_size``, ``seed``).
    """
    model = SequenceClassifier(
        copy.deepcopy(bert), int(train.targets[0].max()) + 1, seed=kw.get("seed", 0)
    )
    losses = fine_tune(model, train, **{"steps": 150, **kw})
    (logits,) = predict(model, test)
    return losses, float((logits.argmax(-1) == test.targets[0]).mean())


def train_span(bert: Bert, train: Batch, test: Batch, **kw):
    """Fine-tune a copy of ``bert`` with start/end scores; returns (losses, test exact match)."""
    model = SpanPredictor(copy.deepcopy(bert), seed=kw.get("seed", 0))
    losses = fine_tune(model, train, **{"steps": 150, **kw})
    pred = [best_span(a, b) for a, b in zip(*predict(model, test), strict=True)]
    hits = [p == (a, b) for p, a, b in zip(pred, *test.targets, strict=True)]
    return losses, float(np.mean(hits))


def train_tagger(bert: Bert, train: Batch, test: Batch, **kw):
    """Fine-tune a copy of ``bert`` with a per-token tagger; returns (losses, test predictions).

    The predictions are tag ids (N, L), one per position; score them with :func:`tag_scores`.
    """
    model = TokenTagger(copy.deepcopy(bert), len(TAGS), seed=kw.get("seed", 0))
    losses = fine_tune(model, train, **{"steps": 150, **kw})
    (logits,) = predict(model, test)
    return losses, logits.argmax(-1)


def entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The entities of a BIO sequence as ``(type, first, last)`` word positions.

    An ``I-X`` that does not continue an ``X`` starts a new entity (as ``seqeval`` reads it).

    >>> sorted(entities(["B-PER", "I-PER", "O", "B-LOC", "I-PER"]))
    [('LOC', 3, 3), ('PER', 0, 1), ('PER', 4, 4)]
    """
    out, kind, first = set(), None, 0
    for i, t in enumerate([*tags, "O"]):
        if kind is not None and not (t.startswith("I-") and t[2:] == kind):
            out.add((kind, first, i - 1))
            kind = None
        if t != "O" and kind is None:
            kind, first = t[2:], i
    return out


def tag_scores(pred: np.ndarray, test: Batch) -> dict[str, float]:
    """Per-token accuracy and entity F1 of predicted tag ids ``pred`` (N, L) on ``test``.

    An entity counts as found only when its type and both ends match exactly (the CoNLL rule),
    read over the labelled tokens (a word cut into pieces is ``B-X I-X ...``).
    """
    y = test.targets[0]
    keep = y != IGNORE
    found = true = hit = 0
    for p, t, k in zip(pred, y, keep, strict=True):
        want, got = entities([TAGS[i] for i in t[k]]), entities([TAGS[i] for i in p[k]])
        found, true, hit = found + len(got), true + len(want), hit + len(want & got)
    precision, recall = hit / max(found, 1), hit / max(true, 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-12)
    return {"token_accuracy": float((pred[keep] == y[keep]).mean()), "entity_f1": float(f1)}


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
