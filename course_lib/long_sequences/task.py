"""Associative recall at a distance: a task that needs long range, trained under each pattern.

An example is a sequence of L tokens. Most are **filler**, drawn at random. ``n_pairs`` positions
before the last hold a **pair** token each, a key and its value in one token (id
``n_filler + key * n_values + value``; the keys of one example are distinct, the values are
drawn independently). The last position holds a **query** token naming one of those keys; the
answer is the value stored with it. Nothing but the pair token itself says what the answer is,
so a model that cannot see that position can only guess: accuracy 1 / ``n_values``.

The model is one attention layer with one head, read at the last position: its output there is
the query token's embedding plus attention over the positions in the **last row** of the mask,
then a linear read-out to the values. A pattern is given to it as an (L, L) mask, and the model
computes keys and values for that row's positions only (exactly the masked layer's last row,
at the cost of the row's entries: the point of a sparse pattern). After one layer the last
position has heard only from its row (section 11.6), so a question whose pair lies outside the
row is unanswerable for that pattern, however long it trains.

>>> task = RecallTask(L=12, n_pairs=2, n_keys=3, n_values=2, n_filler=4)
>>> data = make_recall(2, task, seed=0)
>>> data.tokens.shape, data.answer.shape, data.position.shape
(torch.Size([2, 12]), torch.Size([2]), torch.Size([2]))
>>> bool((data.tokens[:, -1] >= task.first_query).all())  # the query comes last
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_int, check_real, fmt_shape

__all__ = [
    "BIN_NAMES",
    "DISTANCE_BINS",
    "RecallData",
    "RecallModel",
    "RecallTask",
    "compare_patterns",
    "describe_recall",
    "evaluate_recall",
    "make_recall",
    "recall_patterns",
    "train_recall",
]

#: Distance bins (first, last) of the accuracy table: near, within a window of 32, up to one
#: segment plus memory of 32 each, and "far" (64 and more).
DISTANCE_BINS = ((1, 16), (17, 32), (33, 63), (64, 10**9))


def _bin_name(lo: int, hi: int) -> str:
    return f"d {lo}+" if hi >= 10**9 else f"d {lo}-{hi}"


#: The keys of the distance bins in :func:`evaluate_recall`'s result: "d 1-16", ..., "d 64+".
BIN_NAMES = tuple(_bin_name(lo, hi) for lo, hi in DISTANCE_BINS)


@dataclass(frozen=True)
class RecallTask:
    """The sizes of the task; the vocabulary is filler, then pair tokens, then query tokens.

    >>> t = RecallTask()
    >>> t.vocab_size, t.chance
    (88, 0.125)
    """

    L: int = 128
    n_pairs: int = 2
    n_keys: int = 8
    n_values: int = 8
    n_filler: int = 16

    def __post_init__(self) -> None:
        check_int(self.L, "L", low=2)
        check_int(self.n_keys, "n_keys", low=1)
        check_int(self.n_values, "n_values", low=2)
        check_int(self.n_filler, "n_filler", low=1)
        check_int(self.n_pairs, "n_pairs", low=1)
        if self.n_pairs > self.n_keys or self.n_pairs > self.L - 1:
            raise ValueError(
                f"n_pairs={self.n_pairs} pairs need as many distinct keys (n_keys={self.n_keys}) "
                f"and positions before the query (L - 1 = {self.L - 1})"
            )

    @property
    def first_query(self) -> int:
        return self.n_filler + self.n_keys * self.n_values

    @property
    def vocab_size(self) -> int:
        return self.first_query + self.n_keys

    @property
    def chance(self) -> float:
        return 1 / self.n_values


class RecallData(NamedTuple):
    tokens: torch.Tensor  # (N, L) int64
    answer: torch.Tensor  # (N,) the value stored with the queried key
    position: (
        torch.Tensor
    )  # (N,) where that pair sits; its distance to the query is L - 1 - position


def make_recall(n: int, task: RecallTask = RecallTask(), seed: Any = 0) -> RecallData:
    """``n`` examples, the same for the same ``seed`` (an int or a list of ints) on every machine.

    >>> d = make_recall(3, RecallTask(L=8, n_pairs=2, n_keys=2, n_values=2, n_filler=1), seed=1)
    >>> d.tokens[:, :-1].unique().tolist()  # filler 0 and the pair tokens 1 + 2 key + value
    [0, 1, 2, 3, 4]
    """
    n = check_int(n, "n", low=1)
    if not isinstance(task, RecallTask):
        raise TypeError(f"task must be a RecallTask, got {type(task).__name__}")
    r = np.random.default_rng(seed)
    L, P = task.L, task.n_pairs
    tokens = r.integers(0, task.n_filler, size=(n, L))  # (n, L): filler everywhere
    keys = np.argsort(r.random((n, task.n_keys)), axis=1)[:, :P]  # (n, P): distinct keys
    values = r.integers(0, task.n_values, size=(n, P))  # (n, P): independent values
    where = np.argsort(r.random((n, L - 1)), axis=1)[:, :P]  # (n, P): distinct positions < L - 1
    rows = np.arange(n)
    tokens[rows[:, None], where] = task.n_filler + keys * task.n_values + values
    asked = r.integers(0, P, size=n)  # (n,): which of the pairs the query names
    tokens[:, -1] = task.first_query + keys[rows, asked]
    return RecallData(
        torch.from_numpy(tokens),
        torch.from_numpy(values[rows, asked]),
        torch.from_numpy(where[rows, asked]),
    )


def describe_recall(tokens: Any, task: RecallTask = RecallTask()) -> str:
    """One example as text: ``.`` filler, ``k2=v5`` a pair (key 2, value 5), ``k2?`` the query.

    >>> t = RecallTask(L=5, n_pairs=1, n_keys=2, n_values=2, n_filler=1)
    >>> describe_recall([0, 4, 0, 0, 6], t)
    '. k1=v1 . . k1?'
    """
    words = []
    for tok in np.asarray(tokens).ravel().tolist():
        if not 0 <= tok < task.vocab_size:
            raise ValueError(
                f"token {tok} is outside the task's vocabulary 0 .. {task.vocab_size - 1}"
            )
        if tok < task.n_filler:
            words.append(".")
        elif tok < task.first_query:
            key, value = divmod(tok - task.n_filler, task.n_values)
            words.append(f"k{key}=v{value}")
        else:
            words.append(f"k{tok - task.first_query}?")
    return " ".join(words)


def _check_mask(mask: Any, L: int) -> torch.Tensor:
    m = torch.as_tensor(mask.detach().cpu() if isinstance(mask, torch.Tensor) else np.asarray(mask))
    if m.dtype != torch.bool or tuple(m.shape) != (L, L):
        raise ValueError(
            f"mask must be a boolean (L, L) = ({L}, {L}) array for the task's L={L}, got "
            f"{m.dtype} of shape {fmt_shape(m.shape)}"
        )
    if not m[-1].any():
        raise ValueError("the mask's last row is empty: the query would see no position at all")
    return m


class RecallModel(nn.Module):
    """One attention layer, one head, read at the last position; sees the mask's last row only.

    >>> row = torch.tensor([True, False, True])  # the query sees position 0 and itself
    >>> model = RecallModel(row, vocab_size=5, n_values=2, d=4)
    >>> model(torch.tensor([[1, 3, 4]])).shape  # (B, n_values)
    torch.Size([1, 2])
    """

    def __init__(self, row: torch.Tensor, vocab_size: int, n_values: int, d: int = 32) -> None:
        super().__init__()
        d = check_int(d, "d", low=1)
        self.embed = nn.Embedding(check_int(vocab_size, "vocab_size", low=1), d)
        self.W_q = nn.Linear(d, d, bias=False)
        self.W_k = nn.Linear(d, d, bias=False)
        self.W_v = nn.Linear(d, d, bias=False)
        self.readout = nn.Linear(d, check_int(n_values, "n_values", low=2))
        self.register_buffer("seen", row.nonzero().flatten())  # (n,): the positions in the row
        self.L = row.shape[0]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens[:, self.seen])  # (B, n, d): only the positions the query sees
        h = self.embed(tokens[:, -1])  # (B, d): the query token
        q = self.W_q(h)  # (B, d)
        logits = (self.W_k(x) @ q[:, :, None]).squeeze(-1) / math.sqrt(q.shape[-1])  # (B, n)
        weights = torch.softmax(logits, dim=-1)  # (B, n)
        heard = (weights[:, None, :] @ self.W_v(x)).squeeze(1)  # (B, d)
        return self.readout(h + heard)  # (B, n_values): the residual plus what was heard


def train_recall(
    mask: Any,
    task: RecallTask = RecallTask(),
    steps: int = 300,
    batch: int = 64,
    lr: float = 0.01,
    d: int = 32,
    seed: int = 0,
) -> tuple[RecallModel, list[float]]:
    """Train a :class:`RecallModel` under ``mask`` with Adam, on one CPU thread; (model, losses).

    Every step draws a fresh batch (``make_recall(batch, task, seed=[seed, step])``); the
    initial weights come from ``torch.manual_seed(seed)`` without touching the global state.
    """
    m = _check_mask(mask, task.L)
    steps = check_int(steps, "steps", low=1)
    batch = check_int(batch, "batch", low=1)
    lr = check_real(lr, "lr", low=0.0)
    seed = check_int(seed, "seed", low=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = RecallModel(m[-1], task.vocab_size, task.n_values, d)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        losses = []
        for step in range(steps):
            x, y, _ = make_recall(batch, task, seed=[seed, step])
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return model.eval(), losses


def _mean(ok: torch.Tensor) -> float:
    return float(ok.float().mean()) if ok.numel() else float("nan")


def evaluate_recall(model: RecallModel, data: RecallData) -> dict:
    """Accuracy overall, on the questions the model can reach and on the others, and by distance."""
    if not isinstance(model, RecallModel):
        raise TypeError(f"model must be a RecallModel, got {type(model).__name__}")
    if data.tokens.ndim != 2 or data.tokens.shape[1] != model.L:
        raise ValueError(
            f"data.tokens must be (N, L={model.L}), got shape {fmt_shape(data.tokens.shape)}"
        )
    with torch.no_grad():
        ok = model(data.tokens).argmax(-1) == data.answer  # (N,)
    reachable = torch.isin(data.position, model.seen)  # the pair is in the query's row
    distance = model.L - 1 - data.position
    result = {
        "accuracy": _mean(ok),
        "reachable": _mean(reachable),
        "acc_reachable": _mean(ok[reachable]),
        "acc_unreachable": _mean(ok[~reachable]),
    }
    for (lo, hi), name in zip(DISTANCE_BINS, BIN_NAMES, strict=True):
        result[name] = _mean(ok[(distance >= lo) & (distance <= hi)])
    return result


def recall_patterns(L: int = 128) -> dict[str, torch.Tensor]:
    """The chapter's patterns as (L, L) masks, with the sizes the task section uses.

    >>> {name: int(m[-1].sum()) for name, m in recall_patterns(128).items()}["sliding window w=32"]
    33
    """
    from course_lib.attention.accelerated import causal_mask
    from course_lib.long_sequences import accelerated as acc
    from course_lib.long_sequences.transformer_xl import recurrence_mask

    L = check_int(L, "L", low=64)
    if L % 16:
        raise ValueError(f"L must be a multiple of 16 (BigBird's blocks), got {L}")
    return {
        "dense (causal)": causal_mask(L),
        "sliding window w=32": acc.sliding_window_mask(L, 32, causal=True),
        "strided l=16": acc.strided_mask(L, 16),
        "fixed l=16, c=2": acc.fixed_mask(L, 16, 2),
        "Longformer w=32 + global query": acc.sliding_window_mask(L, 32)
        | acc.global_mask(L, [L - 1]),
        "BigBird blocks 16, r=2": acc.expand_layout(acc.bigbird_layout(L // 16, 2, 1, 0), 16),
        "Transformer-XL seg 32, mem 32": recurrence_mask(L, 32, 32),
    }


def compare_patterns(
    masks: dict[str, Any],
    task: RecallTask = RecallTask(),
    n_test: int = 2000,
    test_seed: int = 1,
    **train_kwargs: Any,
) -> list[dict]:
    """Train one model per mask (same data, same initial weights) and evaluate each: table rows."""
    if not isinstance(masks, dict) or not masks:
        raise TypeError("masks must be a non-empty dict {name: (L, L) boolean mask}")
    test = make_recall(check_int(n_test, "n_test", low=1), task, seed=test_seed)
    rows = []
    for name, mask in masks.items():
        model, losses = train_recall(mask, task, **train_kwargs)
        row = {"pattern": name, "keys_seen": int(model.seen.numel())}
        row.update({k: round(v, 3) for k, v in evaluate_recall(model, test).items()})
        row["final_loss"] = round(float(np.mean(losses[-20:])), 3)
        rows.append(row)
    return rows
