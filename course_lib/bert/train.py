"""Training loops of Chapter 9: masked-LM pre-training and fine-tuning on the encoder tasks.

Small on purpose: a few hundred AdamW steps on 2 CPU cores. Each loop is seeded (masking, batch
order and initial weights), returns the losses step by step, and leaves the model in eval mode.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from course_lib.bert.config import BertConfig, bert_block
from course_lib.bert.data import CLS, MASK, PAD, SEP, VOCAB_SIZE
from course_lib.bert.masking import mask_tokens
from course_lib.bert.model import Bert
from course_lib.checks import check_choice, check_int

__all__ = ["SMALL", "fit", "is_long_step", "lr_factor", "pretrain_mlm"]

#: The chapter's small BERT: 2 blocks of width 64, 4 heads, 80 positions, the BPE vocabulary.
SMALL = BertConfig(vocab_size=VOCAB_SIZE, max_len=80, n_layers=2, block=bert_block(64, 4))


def lr_factor(step: int, steps: int, warmup: int = 20, schedule: str = "constant") -> float:
    """The learning rate of step ``step`` (from 0) as a fraction of the peak: a linear warm-up
    over ``warmup`` steps, then constant or, for ``schedule="cosine"``, a half cosine from the
    peak at step ``warmup`` towards 0 at step ``steps``, one step *after* the last: every step
    that is taken learns something (the last at a small rate, not at 0).

    >>> [round(lr_factor(s, 10, warmup=2, schedule="cosine"), 3) for s in (0, 1, 2, 6, 9)]
    [0.5, 1.0, 1.0, 0.5, 0.038]
    >>> lr_factor(500, 1000)
    1.0
    """
    check_choice(schedule, "schedule", ("constant", "cosine"))
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    done = (step - warmup) / max(1, steps - warmup)  # the fraction of the decay done: < 1
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, done)))


def is_long_step(step: int, long_every: int) -> bool:
    """Whether step ``step`` (from 0) draws full-length rows: one step in ``long_every`` (the
    last of each group), never when ``long_every`` is 0.

    >>> [s for s in range(12) if is_long_step(s, 4)]
    [3, 7, 11]
    """
    return long_every > 0 and step % long_every == long_every - 1


def fit(
    model: torch.nn.Module,
    step_loss: Callable[[np.ndarray], torch.Tensor],
    n_examples: int | Callable[[int], int],
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    warmup: int = 20,
    schedule: str = "constant",
    progress: bool = False,
    callback: Callable[[int], None] | None = None,
) -> list[float]:
    """AdamW on ``step_loss(batch_indices)`` for ``steps`` steps; returns the losses.

    The indices of a step are drawn without replacement from ``range(n_examples)``, or from
    ``range(n_examples(step))`` when it is a function of the step (rows of two lengths). The
    learning rate is ``lr`` times :func:`lr_factor` (``warmup``, ``schedule``).
    ``callback(step)``, if given, runs after each step (``step`` counts from 1), e.g. to
    evaluate; it must leave the model in training mode.
    """
    check_int(steps, "steps", low=1)
    check_int(batch_size, "batch_size", low=1)
    size = n_examples if callable(n_examples) else (lambda _, n=n_examples: n)
    if not callable(n_examples):
        check_int(n_examples, "n_examples", low=1)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, steps, warmup=warmup, schedule=schedule)
    )
    losses = []  # detached tensors: reading each one would wait for the GPU at every step
    it = range(steps)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="training")
    model.train()
    for step in it:
        n = size(step)
        idx = rng.choice(n, size=min(batch_size, n), replace=False)
        loss = step_loss(idx)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.detach())
        if callback is not None:
            callback(step + 1)
    model.eval()
    return torch.stack(losses).cpu().tolist()


def pretrain_mlm(
    chunks: np.ndarray,
    *,
    config: BertConfig = SMALL,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 2e-3,
    seed: int = 0,
    dropout: float = 0.1,
    warmup: int = 20,
    schedule: str = "constant",
    model: Bert | None = None,
    progress: bool = False,
    device: str = "cpu",
    long_chunks: np.ndarray | None = None,
    long_every: int = 0,
) -> tuple[Bert, list[float]]:
    """Masked-LM pre-training on rows of token ids (N, L): fresh masks every step (15%, 80/10/10).

    The loss is :meth:`Bert.mlm_loss`, which runs the head only at the chosen positions. The
    model is trained on ``device`` and returned there; the masks are drawn on the CPU.

    BERT's length schedule: with ``long_chunks`` (N', L') and ``long_every = k``, one step in
    ``k`` (:func:`is_long_step`) draws its rows from ``long_chunks`` instead, so that most steps
    are cheap short rows and every row of the position table up to ``L'`` is trained.
    """
    model = Bert(config, seed=seed, dropout=dropout) if model is None else model
    model.to(device)
    mask_rng = np.random.default_rng(seed + 1)
    rows_at, n_at = _row_schedule(chunks, long_chunks, long_every)
    step = [0]

    def step_loss(idx: np.ndarray) -> torch.Tensor:
        rows = rows_at(step[0])[idx]  # (B, L) or (B, L')
        step[0] += 1
        x, y = mask_tokens(rows, mask_rng, mask_id=MASK, vocab_size=config.vocab_size,
                           special_ids=(PAD, CLS, SEP, MASK))  # fmt: skip
        x, y, pad = (torch.from_numpy(v).to(device) for v in (x, y, rows != PAD))
        return model.mlm_loss(x, y, None, pad)

    losses = fit(model, step_loss, n_at, steps=steps, batch_size=batch_size, lr=lr,
                 seed=seed, warmup=warmup, schedule=schedule, progress=progress)  # fmt: skip
    return model, losses


def _row_schedule(rows: np.ndarray, long_rows: np.ndarray | None, long_every: int):
    """(rows of step s, number of rows of step s) for :func:`fit`."""
    check_int(long_every, "long_every", low=0)
    if long_rows is None or long_every == 0:
        if long_every:
            raise ValueError("long_every > 0 needs long_chunks, the full-length rows")
        return (lambda s: rows), len(rows)

    def rows_at(s: int) -> np.ndarray:
        return long_rows if is_long_step(s, long_every) else rows

    return rows_at, lambda s: len(rows_at(s))
