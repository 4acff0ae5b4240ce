"""Heads that were learned: a one-layer attention model trained on a lookup task (Chapter 4).

The task, *look back*: a sequence of ``L`` random tokens from a vocabulary of ``vocab``; at
position ``i`` the model must output the token at ``i - 1`` and, as a second output, the token
at ``i - 2`` (``offsets=(1, 2)``). Positions with nothing that far back are not scored.

The model, :class:`LookBackModel`, is as small as a Transformer layer gets: token embedding plus
a learned position embedding, one causal :class:`~course_lib.attention.module.MultiHeadAttention`
(the course's module), and one linear read-out per output. There is no residual connection and
no feed-forward network, so everything the read-out knows has passed through attention.

One head computes *one* weighted average per query. To output two different tokens it has to
mix them: with equal weights, "a at i-1, b at i-2" and "b at i-1, a at i-2" give the same
average (embeddings of tokens and positions are added, and attention is linear in the values),
and with unequal weights the weaker token is a faint trace. Two heads can each look at one
place. This is the "multiple filters" argument of May's notes, section 1.2, as an experiment:
with the defaults, the two-head model gets both outputs right and the one-head model one of
them, and much less of the other (``tests/test_attention.py`` checks it for seed 0;
:func:`make_seed_study` repeats it over five seeds and three learning rates), which shows what
training finds, not that one head could never do better.

:func:`train_look_back` is deterministic for a given seed on a given machine (it seeds its own
generators and leaves the global ones as they were); tests compare accuracies, never weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention.accelerated import attention_weights, causal_mask
from course_lib.attention.module import MultiHeadAttention
from course_lib.checks import check_int, check_real

__all__ = [
    "LookBackModel",
    "TrainedLookBack",
    "attended_offsets",
    "best_learning_rate",
    "load_seed_study",
    "make_seed_study",
    "learned_head_weights",
    "look_back_batch",
    "train_look_back",
]

IGNORE = -100  # the target of a position with nothing that far back (ignored by the loss)


def look_back_batch(
    n: int, L: int, vocab: int, offsets: Sequence[int], generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random sequences (n, L) and their targets (n, len(offsets), L).

    Target ``[s, o, i]`` is the token at ``i - offsets[o]``, or -100 where ``i < offsets[o]``.

    >>> tokens, targets = look_back_batch(1, 5, 10, (1, 2), torch.Generator().manual_seed(0))
    >>> tokens[0, :3].tolist() == targets[0, 0, 1:4].tolist() == targets[0, 1, 2:5].tolist()
    True
    >>> targets[0, 1, :2].tolist()
    [-100, -100]
    """
    n, L, vocab = (
        check_int(n, "n", low=1),
        check_int(L, "L", low=2),
        check_int(vocab, "vocab", low=2),
    )
    offsets = [check_int(o, "offset", low=1, high=L - 1) for o in offsets]
    tokens = torch.randint(vocab, (n, L), generator=generator)  # (n, L)
    targets = torch.full((n, len(offsets), L), IGNORE, dtype=torch.long)  # (n, outputs, L)
    for o, off in enumerate(offsets):
        targets[:, o, off:] = tokens[:, :-off]
    return tokens, targets


class LookBackModel(nn.Module):
    """Embeddings, one causal multi-head attention, one linear read-out per output.

    >>> m = LookBackModel(vocab=8, L=12, d_model=16, n_heads=2, n_outputs=2)
    >>> m(torch.zeros(3, 12, dtype=torch.long)).shape  # (B, outputs, L, vocab)
    torch.Size([3, 2, 12, 8])
    """

    def __init__(self, vocab: int, L: int, d_model: int, n_heads: int, n_outputs: int) -> None:
        super().__init__()
        self.vocab, self.L, self.n_outputs = vocab, L, n_outputs
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(L, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.out = nn.Linear(d_model, n_outputs * vocab)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids -> (B, L, d_model): token embedding plus position embedding."""
        return self.tok(tokens) + self.pos(torch.arange(tokens.shape[-1]))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (B, L, d)
        a = self.attn(x, mask=causal_mask(tokens.shape[-1]))  # (B, L, d)
        logits = self.out(a).unflatten(-1, (self.n_outputs, self.vocab))  # (B, L, outputs, V)
        return logits.transpose(1, 2)  # (B, outputs, L, V)


@dataclass(frozen=True)
class TrainedLookBack:
    """A trained model, its loss after every step, and its accuracy per output on fresh data."""

    model: LookBackModel
    offsets: tuple[int, ...]
    losses: list[float]
    accuracy: tuple[float, ...]


def _accuracy(model: LookBackModel, offsets: Sequence[int], seed: int) -> tuple[float, ...]:
    tokens, targets = look_back_batch(
        512, model.L, model.vocab, offsets, torch.Generator().manual_seed(seed + 1)
    )
    with torch.no_grad():
        guess = model(tokens).argmax(-1)  # (n, outputs, L)
    scored = targets != IGNORE
    return tuple(
        float((guess[:, o] == targets[:, o])[scored[:, o]].float().mean())
        for o in range(len(offsets))
    )


def train_look_back(
    n_heads: int,
    offsets: Sequence[int] = (1, 2),
    *,
    vocab: int = 8,
    L: int = 12,
    d_model: int = 32,
    steps: int = 300,
    batch: int = 64,
    lr: float = 0.01,
    seed: int = 0,
) -> TrainedLookBack:
    """Train a :class:`LookBackModel` with Adam on fresh random batches; return it and its scores.

    The loss is the cross-entropy of every output at every scored position. The global random
    state of PyTorch is left as it was.

    >>> run = train_look_back(1, (1,), steps=60, d_model=16)
    >>> run.accuracy[0] > 0.9  # one head, one place to look: easy
    True
    """
    n_heads = check_int(n_heads, "n_heads", low=1)
    steps = check_int(steps, "steps", low=1)
    check_real(lr, "lr", low=0.0, low_open=True, high_open=True)
    offsets = tuple(check_int(o, "offset", low=1, high=L - 1) for o in offsets)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LookBackModel(vocab, L, d_model, n_heads, len(offsets))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny products: one thread is fastest, and the same everywhere
    try:
        for _ in range(steps):
            tokens, targets = look_back_batch(batch, L, vocab, offsets, gen)
            logits = model(tokens)  # (B, outputs, L, V)
            loss = F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=IGNORE)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    finally:
        torch.set_num_threads(threads)
    model.eval()
    return TrainedLookBack(model, offsets, losses, _accuracy(model, offsets, seed))


def learned_head_weights(model: LookBackModel, tokens: torch.Tensor | Sequence[int]) -> np.ndarray:
    """The attention weights (h, L, L) of every head of a trained model on one sequence.

    Computed from the module's per-head weights, eqs. (16)-(17): ``q = x W_Q^i + b_Q^i``, ...

    >>> m = LookBackModel(vocab=4, L=5, d_model=8, n_heads=2, n_outputs=1)
    >>> w = learned_head_weights(m, [0, 1, 2, 3, 0])
    >>> w.shape, bool(np.allclose(w.sum(-1), 1)), float(w[0, 0, 1])
    ((2, 5, 5), True, 0.0)
    """
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    if tokens.ndim != 1:
        raise ValueError(
            f"tokens must be one sequence of shape (L,), got shape {tuple(tokens.shape)}"
        )
    with torch.no_grad():
        x = model.embed(tokens)  # (L, d)
        w = model.attn.stacked_weights()
        q = x @ w["w_q"] + w["b_q"][:, None]  # (h, L, d_k)
        k = x @ w["w_k"] + w["b_k"][:, None]  # (h, L, d_k)
        return attention_weights(q, k, causal_mask(len(tokens))).numpy()  # (h, L, L)


def attended_offsets(weights: np.ndarray, start: int = 2) -> list[int]:
    """For each head of ``weights`` (h, L, L): the offset i - j its queries i >= start look at most.

    The offset is the most common ``i - argmax_j weights[i, j]`` over the rows from ``start``.

    >>> attended_offsets(np.stack([np.eye(4, k=-1) + np.eye(4) * 0.0, np.eye(4)]), start=1)
    [1, 0]
    """
    out = []
    for head in np.asarray(weights):
        rows = np.arange(start, head.shape[0])
        offsets = rows - head[rows].argmax(axis=1)
        values, counts = np.unique(offsets, return_counts=True)
        out.append(int(values[counts.argmax()]))
    return out


# ------------------------------------------------------------- the chapter's stored seed study
#: The seed study of section 4.8, in ``data/`` (made by ``python -m course_lib.attention.learned``).
STORED_STUDY = "attention_look_back.json"
STUDY_SEEDS = (0, 1, 2, 3, 4)
#: Learning rates tried for each model; each model is reported at its own best (on validation).
STUDY_LRS = (0.003, 0.01, 0.03)
#: The sequence whose attention maps name the offset each head looks at (the chapter's example).
EXAMPLE = (3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 7)


def make_seed_study() -> dict:
    """Train one- and two-head models on look-back (1, 2) for every seed and learning rate.

    Each run records its validation accuracy (512 sequences from generator seed 10,000 + seed,
    used only to choose the learning rate), its test accuracy (the 512 sequences of
    :func:`train_look_back`, seed + 1), the offset each head looks at on ``EXAMPLE``, and the
    mean loss of its last 20 steps. About 30 one-second runs on an idle CPU.
    """
    runs = []
    for n_heads in (1, 2):
        for lr in STUDY_LRS:
            for seed in STUDY_SEEDS:
                run = train_look_back(n_heads, (1, 2), lr=lr, seed=seed)
                val = _accuracy(run.model, run.offsets, 10_000 + seed - 1)
                weights = learned_head_weights(run.model, torch.tensor(EXAMPLE))
                runs.append(
                    {
                        "n_heads": n_heads,
                        "lr": lr,
                        "seed": seed,
                        "validation": [round(a, 3) for a in val],
                        "test": [round(a, 3) for a in run.accuracy],
                        "looks_back": attended_offsets(weights),
                        "final_loss": round(float(np.mean(run.losses[-20:])), 3),
                    }
                )
    return {
        "made_by": "python -m course_lib.attention.learned",
        "task": "look back by 1 and 2, vocabulary 8, length 12",
        "model": "token + position embeddings, one causal MultiHeadAttention of width 32, "
        "a linear read-out per output, no residual",
        "training": "300 Adam steps, batch 64, fresh random batches, one CPU thread",
        "seeds": list(STUDY_SEEDS),
        "learning_rates": list(STUDY_LRS),
        "runs": runs,
    }


def load_seed_study() -> dict:
    """The stored seed study of section 4.8 (``data/attention_look_back.json``)."""
    import json

    from course_lib.paths import data_path

    return json.loads(data_path(STORED_STUDY).read_text(encoding="utf-8"))


def best_learning_rate(study: dict, n_heads: int) -> float:
    """The learning rate whose runs of ``n_heads`` heads have the highest mean validation
    accuracy (over seeds and both outputs); a tie goes to the rate nearer the middle of the grid
    (in log scale), so that a best value is never at an edge by a tie-break.

    >>> study = {"runs": [{"n_heads": 1, "lr": lr, "validation": [v]}
    ...                   for lr, v in ((0.001, 1.0), (0.01, 1.0), (0.1, 0.5))]}
    >>> best_learning_rate(study, 1)
    0.01
    """
    runs = [r for r in study["runs"] if r["n_heads"] == n_heads]
    if not runs:
        raise ValueError(f"the study has no run with {n_heads} head(s)")
    lrs = sorted({r["lr"] for r in runs})
    middle = float(np.mean(np.log(lrs)))

    def score(lr: float) -> tuple[float, float]:
        accuracy = float(np.mean([r["validation"] for r in runs if r["lr"] == lr]))
        return accuracy, -abs(np.log(lr) - middle)

    return max(lrs, key=score)


def main() -> None:
    import json

    from course_lib.paths import data_path

    out = data_path(STORED_STUDY, must_exist=False)
    out.write_text(json.dumps(make_seed_study(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
