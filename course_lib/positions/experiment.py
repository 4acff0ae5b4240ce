"""Tiny causal Transformers with pluggable positions, for Chapter 6's extrapolation experiment.

One model class, :class:`TinyPositionLM`, takes a position ``scheme``:

* ``"none"``: no position information at all (the causal mask is the only hint of order);
* ``"sinusoidal"``: eq. (19) added to the token embeddings;
* ``"learned"``: a learned table added to the token embeddings (GPT's ``W_p``); its rows beyond
  the training length never receive a gradient;
* ``"alibi"``: a fixed linear bias per head on the attention logits (Press et al. 2022);
* ``"rotary"``: queries and keys rotated by their positions (Su et al. 2021).

Everything numerical comes from the library: :mod:`course_lib.positions.accelerated` for the
positions and chapter 4's :func:`course_lib.attention.accelerated.scaled_dot_product_attention`
(with ``bias`` for ALiBi) for attention.

Two synthetic tasks (:func:`make_batch`) ask for two kinds of positional skill: ``"lag"`` (output
the token three places back: an exact relative lookup) and ``"recent"`` (output the most recent
*marker* token: content plus a preference for the nearest).

:func:`train_all` is the study: for each (task, scheme) it chooses the learning rate on
held-out sequences of the training length (:func:`choose_lr`, a grid whose best value is never
at an edge), then trains one model per seed at that rate, at length ``train_len`` on one CPU
thread (bit-for-bit reproducible on a given machine and PyTorch build); :func:`evaluate`
measures the accuracy at every position of longer sequences. The course ships the first seed's
weights and every seed's evaluation in ``data/positions_extrapolation.pt`` and
``data/positions_extrapolation.json``; regenerate them with::

    python -m course_lib.positions.experiment
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention.accelerated import (
    attention_weights,
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from course_lib.checks import check_choice, check_int
from course_lib.paths import data_path
from course_lib.positions.accelerated import (
    add_position_table,
    alibi_bias,
    rotary_embedding,
    sinusoidal_encoding,
)
from course_lib.positions.indices import alibi_slopes

__all__ = [
    "LR_TIE",
    "SCHEMES",
    "TASKS",
    "ExperimentConfig",
    "attention_maps",
    "TinyPositionLM",
    "evaluate",
    "build_model",
    "eval_batch",
    "load_experiment",
    "make_batch",
    "choose_lr",
    "save_experiment",
    "seed_spread",
    "summarise",
    "train_all",
    "train_one",
    "validation_loss",
]

SCHEMES = ("none", "sinusoidal", "learned", "alibi", "rotary")
TASKS = ("lag", "recent")
#: The shipped experiment, under course_lib.paths.data_dir().
WEIGHTS_FILE = "positions_extrapolation.pt"
RESULTS_FILE = "positions_extrapolation.json"


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that determines the experiment (the shipped files record it)."""

    tasks: tuple[str, ...] = ("lag", "recent")
    vocab: int = 16
    lag: int = 3
    n_markers: int = 4
    marker_prob: float = 0.15
    train_len: int = 32
    eval_lens: tuple[int, ...] = (32, 64, 128)
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 64
    steps: int = 600
    batch: int = 32
    lr: float = 3e-3
    seed: int = 0
    eval_batch: int = 256
    eval_seed: int = 1234
    schemes: tuple[str, ...] = field(default=SCHEMES)
    #: the study (:func:`train_all`): a learning rate chosen per (task, scheme) from this grid
    #: on held-out sequences, then one run per seed at that rate
    lr_grid: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    seeds: tuple[int, ...] = (0, 1, 2)
    val_batch: int = 256
    val_seed: int = 99

    @property
    def max_len(self) -> int:
        return max(self.eval_lens)


# ----------------------------------------------------------------------------- data
def make_batch(
    task: str, batch: int, length: int, cfg: ExperimentConfig, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (B, L) and targets (B, L) for one of the two tasks; -100 marks "no target".

    * ``"lag"``: random tokens; ``target[t] = x[t - lag]`` (no target for t < lag). Solved by
      attending to the key at offset ``-lag``: an exact relative lookup.
    * ``"recent"``: tokens ``0..n_markers-1`` are *markers* (each position is one with
      probability ``marker_prob``), the others filler; ``target[t]`` is the most recent marker at
      or before t (no target before the first marker). Solved by attending to markers with a
      preference for the nearest one: content plus recency.

    >>> cfg = ExperimentConfig(lag=2)
    >>> x, y = make_batch("lag", 1, 6, cfg, torch.Generator().manual_seed(0))
    >>> bool((y[0, 2:] == x[0, :-2]).all()), y[0, :2].tolist()
    (True, [-100, -100])
    >>> x, y = make_batch("recent", 1, 8, cfg, torch.Generator().manual_seed(17))
    >>> x.tolist(), y.tolist()  # markers 3 and 0
    ([[6, 9, 5, 3, 0, 14, 15, 7]], [[-100, -100, -100, 3, 0, 0, 0, 0]])
    """
    task = check_choice(task, "task", TASKS)
    batch = check_int(batch, "batch", low=1)
    length = check_int(length, "length", low=1)
    if task == "lag":
        lag = check_int(cfg.lag, "lag", low=0, high=length - 1)
        x = torch.randint(0, cfg.vocab, (batch, length), generator=generator)
        y = torch.full_like(x, -100)  # -100: ignored by cross_entropy
        y[:, lag:] = x[:, : length - lag]
        return x, y
    is_marker = torch.rand(batch, length, generator=generator) < cfg.marker_prob
    marker = torch.randint(0, cfg.n_markers, (batch, length), generator=generator)
    filler = torch.randint(cfg.n_markers, cfg.vocab, (batch, length), generator=generator)
    x = torch.where(is_marker, marker, filler)  # (B, L)
    t = torch.arange(length).expand(batch, length)
    last = torch.where(is_marker, t, -1).cummax(dim=1).values  # (B, L): latest marker position
    y = torch.where(last >= 0, x.gather(1, last.clamp(min=0)), -100)
    return x, y


# ----------------------------------------------------------------------------- model
class _Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, scheme: str) -> None:
        super().__init__()
        self.n_heads, self.scheme = n_heads, scheme
        self.qkv = nn.Linear(d_model, 3 * d_model)  # biases give queries a content-free part
        self.out = nn.Linear(d_model, d_model)
        slopes = torch.tensor(alibi_slopes(n_heads))
        self.register_buffer("slopes", slopes, persistent=False)  # (h,), fixed, not learned

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        B, L, _ = x.shape
        q, k, v = (
            split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1)
        )  # (B, h, L, d_h)
        if self.scheme == "rotary":
            q, k = rotary_embedding(q), rotary_embedding(k)
        bias = None
        if self.scheme == "alibi":
            bias = alibi_bias(self.slopes.to(x.dtype), L)  # (h, L, L)
        mask = causal_mask(L).to(x.device)  # (L, L)
        y = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias)  # (B, h, L, d_h)
        out = self.out(merge_heads(y))  # (B, L, d)
        if not return_weights:
            return out
        return out, attention_weights(q, k, mask=mask, bias=bias)  # (B, h, L, L)


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, scheme: str) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = _Attention(d_model, n_heads, scheme)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # pre-LN residual blocks
        return x + self.ff(self.ln2(x))


class TinyPositionLM(nn.Module):
    """Token embedding, position scheme, ``n_layers`` pre-LN blocks, a linear read-out.

    >>> m = TinyPositionLM("rotary", vocab=8, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=4)
    >>> m(torch.zeros(3, 5, dtype=torch.long)).shape  # rotary has no table: any length works
    torch.Size([3, 5, 8])
    >>> TinyPositionLM("learned", 8, 8, 2, 1, 16, max_len=4)(torch.zeros(1, 5, dtype=torch.long))
    Traceback (most recent call last):
    ...
    ValueError: positions 0..4 are needed but the table has rows for positions 0..3 only: a position table cannot encode positions it has no row for
    """

    def __init__(
        self,
        scheme: str,
        vocab: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        max_len: int,
    ) -> None:
        super().__init__()
        self.scheme = check_choice(scheme, "scheme", SCHEMES)
        self.d_model = check_int(d_model, "d_model", low=2)
        self.embed = nn.Embedding(check_int(vocab, "vocab", low=2), d_model)
        if scheme == "learned":
            self.table = nn.Parameter(
                0.02 * torch.randn(check_int(max_len, "max_len", low=1), d_model)
            )
        self.blocks = nn.ModuleList(
            _Block(d_model, n_heads, d_ff, scheme)
            for _ in range(check_int(n_layers, "n_layers", low=1))
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def embed_with_positions(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids -> (B, L, d): token embeddings plus absolute positions, if any."""
        x = self.embed(tokens)  # (B, L, d)
        L = tokens.shape[-1]
        if self.scheme == "sinusoidal":
            pos = torch.arange(L, device=x.device, dtype=x.dtype)
            x = x + sinusoidal_encoding(pos, self.d_model)  # (L, d) broadcast over B
        elif self.scheme == "learned":
            x = add_position_table(x, self.table)
        return x

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids -> (B, L, vocab) logits."""
        x = self.embed_with_positions(tokens)  # (B, L, d)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, L, vocab)


@torch.no_grad()
def attention_maps(model: TinyPositionLM, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The attention weights of every layer for ``tokens`` (B, L): a list of (B, h, L, L).

    >>> m = TinyPositionLM("alibi", 8, 8, 2, 1, 16, max_len=4)
    >>> w = attention_maps(m, torch.zeros(1, 3, dtype=torch.long))[0]
    >>> w.shape, bool(torch.allclose(w.sum(-1), torch.ones(1, 2, 3)))
    (torch.Size([1, 2, 3, 3]), True)
    """
    x = model.embed_with_positions(tokens)  # (B, L, d), on the model's device
    maps = []
    for block in model.blocks:
        _, w = block.attn(block.ln1(x), return_weights=True)
        maps.append(w)
        x = block(x)
    return maps


# ----------------------------------------------------------------------------- train, evaluate
def build_model(scheme: str, cfg: ExperimentConfig) -> TinyPositionLM:
    """A fresh (untrained) model of ``cfg``'s size with the given position scheme."""
    return TinyPositionLM(
        scheme, cfg.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff, cfg.max_len
    )


def _round_weights(model: nn.Module) -> None:
    """Round every weight to float16 precision (the shipped file stores float16)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())


def train_one(
    task: str,
    scheme: str,
    cfg: ExperimentConfig = ExperimentConfig(),
    *,
    lr: float | None = None,
    seed: int | None = None,
) -> tuple[TinyPositionLM, list[float]]:
    """Train one model on ``task`` at length ``cfg.train_len``, on the CPU with one thread.

    ``lr`` and ``seed`` default to ``cfg.lr`` and ``cfg.seed``; the seed fixes both the initial
    weights and the training batches. Returns the model (eval mode, weights rounded to float16
    precision, as shipped) and the training losses. One thread gives the same bits on every run
    on a given machine.
    """
    task = check_choice(task, "task", TASKS)
    lr = cfg.lr if lr is None else float(lr)
    seed = cfg.seed if seed is None else check_int(seed, "seed", low=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = build_model(scheme, cfg)
        # Adam without weight decay: table rows that never get a gradient stay as initialised
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        g = torch.Generator().manual_seed(seed)
        losses = []
        for _ in range(cfg.steps):
            x, y = make_batch(task, cfg.batch, cfg.train_len, cfg, g)  # (B, L) each
            logits = model(x)  # (B, L, vocab)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    _round_weights(model)
    return model.eval(), losses


def eval_batch(task: str, cfg: ExperimentConfig = ExperimentConfig()):
    """The fixed evaluation sequences of a task: (eval_batch, max_len) tokens and targets."""
    g = torch.Generator().manual_seed(cfg.eval_seed)
    return make_batch(task, cfg.eval_batch, cfg.max_len, cfg, g)


@torch.no_grad()
def evaluate(
    model: TinyPositionLM, task: str, cfg: ExperimentConfig = ExperimentConfig()
) -> torch.Tensor:
    """Accuracy at each position of the task's evaluation sequences, (max_len,) float64.

    The accuracy at position t is over the sequences that have a target there (NaN if none).
    Because the model is causal, position t of a long sequence sees exactly what it would see in a
    sequence of length t + 1, so one evaluation at the longest length covers every shorter one.
    """
    x, y = eval_batch(task, cfg)
    pred = model(x).argmax(-1)  # (B, L)
    scored = y != -100
    hits = ((pred == y) & scored).sum(0).double()
    return hits / scored.sum(0).double()  # NaN where nothing is scored


def summarise(
    per_position: torch.Tensor, cfg: ExperimentConfig = ExperimentConfig()
) -> dict[int, float]:
    """Mean accuracy over the scored positions of a sequence of each length in ``cfg.eval_lens``."""
    return {n: float(per_position[:n].nanmean()) for n in cfg.eval_lens}


@torch.no_grad()
def validation_loss(
    model: TinyPositionLM, task: str, cfg: ExperimentConfig = ExperimentConfig()
) -> float:
    """Cross-entropy on held-out sequences of the training length (seed ``cfg.val_seed``, used
    neither for training nor for the evaluation): what the learning rate is chosen on."""
    g = torch.Generator().manual_seed(cfg.val_seed)
    x, y = make_batch(task, cfg.val_batch, cfg.train_len, cfg, g)
    logits = model(x)
    return float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100))


#: Held-out losses within this many nats of the best count as tied (the task is solved at both
#: rates); among tied rates :func:`choose_lr` takes the smallest.
LR_TIE = 1e-3


def choose_lr(
    task: str, scheme: str, cfg: ExperimentConfig = ExperimentConfig(), verbose: bool = False
) -> tuple[float, dict[float, float], tuple[TinyPositionLM, list[float]]]:
    """The learning rate of ``cfg.lr_grid`` with the lowest held-out loss, for the first seed.

    Rates within :data:`LR_TIE` of the lowest loss are tied, and the smallest of them is chosen
    (a solved task does not reward a larger step). If the chosen rate sits at an end of the
    grid, the grid grows by one more factor of ``grid[1] / grid[0]`` on that side (at most
    twice), so that a worse rate lies on both sides of the choice wherever one exists. Returns
    ``(lr, {lr: held-out loss}, (model, losses) of the chosen run)``.
    """
    grid = sorted(cfg.lr_grid)
    factor = grid[1] / grid[0]
    tried: dict[float, float] = {}
    runs: dict[float, tuple[TinyPositionLM, list[float]]] = {}
    for _ in range(3):
        for lr in grid:
            if lr not in tried:
                runs[lr] = train_one(task, scheme, cfg, lr=lr, seed=cfg.seeds[0])
                tried[lr] = validation_loss(runs[lr][0], task, cfg)
                if verbose:
                    print(f"  {task}/{scheme} lr {lr:.0e}: held-out loss {tried[lr]:.4f}")
        lowest = min(tried.values())
        best = min(lr for lr, loss in tried.items() if loss <= lowest + LR_TIE)
        lrs = sorted(tried)
        if best == lrs[0]:
            grid = [round(lrs[0] / factor, 12)]
        elif best == lrs[-1]:
            grid = [round(lrs[-1] * factor, 12)]
        else:
            break
    return best, dict(sorted(tried.items())), runs[best]


def train_all(cfg: ExperimentConfig = ExperimentConfig(), verbose: bool = False) -> dict[str, Any]:
    """The study: for every (task, scheme) of ``cfg``, choose the learning rate on held-out
    sequences (:func:`choose_lr`), then train one model per seed at that rate and evaluate it.

    Returns ``{"config", "runs": {"task/scheme": {"lr", "lr_search", "by_seed": {seed: {...}}}}}``
    with each seed's weights, final training loss and evaluation.
    """
    out: dict[str, Any] = {"config": asdict(cfg), "runs": {}}
    for task in cfg.tasks:
        for scheme in cfg.schemes:
            start = time.perf_counter()
            lr, search, first = choose_lr(task, scheme, cfg, verbose)
            by_seed = {}
            for seed in cfg.seeds:
                model, losses = (
                    first
                    if seed == cfg.seeds[0]
                    else train_one(task, scheme, cfg, lr=lr, seed=seed)
                )
                acc = evaluate(model, task, cfg)
                by_seed[seed] = {
                    "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
                    "final_loss": sum(losses[-50:]) / len(losses[-50:]),
                    "per_position": acc,
                    "summary": summarise(acc, cfg),
                }
            out["runs"][f"{task}/{scheme}"] = {"lr": lr, "lr_search": search, "by_seed": by_seed}
            if verbose:
                print(
                    f"{task:<7} {scheme:<11} lr {lr:.0e}  "
                    + "  ".join(
                        f"acc@{n} " + "/".join(f"{r['summary'][n]:.3f}" for r in by_seed.values())
                        for n in cfg.eval_lens
                    )
                    + f"  ({time.perf_counter() - start:.0f} s)"
                )
    return out


def save_experiment(
    result: dict[str, Any], weights: Path | None = None, results: Path | None = None
) -> None:
    """Write the first seed's weights (float16) and every seed's evaluation (JSON, 4 decimals)."""
    weights = data_path(WEIGHTS_FILE, must_exist=False) if weights is None else Path(weights)
    results = data_path(RESULTS_FILE, must_exist=False) if results is None else Path(results)
    first = result["config"]["seeds"][0]
    torch.save(
        {
            "config": result["config"],
            "state_dicts": {
                key: {k: v.half() for k, v in r["by_seed"][first]["state_dict"].items()}
                for key, r in result["runs"].items()
            },
        },
        weights,
    )

    def rounded(acc: torch.Tensor) -> list[float | None]:
        return [None if a != a else round(float(a), 4) for a in acc]

    table = {
        "config": result["config"],
        "runs": {
            key: {
                "lr": r["lr"],
                "lr_search": {f"{lr:g}": round(loss, 4) for lr, loss in r["lr_search"].items()},
                "by_seed": {
                    str(seed): {
                        "final_loss": round(run["final_loss"], 4),
                        "summary": {str(n): round(a, 4) for n, a in run["summary"].items()},
                        "per_position": rounded(run["per_position"]),
                    }
                    for seed, run in r["by_seed"].items()
                },
            }
            for key, r in result["runs"].items()
        },
    }
    results.write_text(json.dumps(table, indent=1) + "\n")


def seed_spread(results: dict[str, Any]) -> dict[str, dict[int, tuple[float, float, float]]]:
    """Per ``"task/scheme"`` and evaluation length: (mean, min, max) accuracy over the seeds.

    >>> runs = {"lag/none": {"by_seed": {"0": {"summary": {"32": 0.2}},
    ...                                  "1": {"summary": {"32": 0.4}}}}}
    >>> seed_spread({"runs": runs})
    {'lag/none': {32: (0.3, 0.2, 0.4)}}
    """
    out: dict[str, dict[int, tuple[float, float, float]]] = {}
    for key, run in results["runs"].items():
        seeds = list(run["by_seed"].values())
        out[key] = {}
        for n in seeds[0]["summary"]:
            values = [s["summary"][n] for s in seeds]
            out[key][int(n)] = (round(sum(values) / len(values), 4), min(values), max(values))
    return out


def load_experiment(
    weights: Path | None = None, results: Path | None = None
) -> tuple[ExperimentConfig, dict[str, TinyPositionLM], dict[str, Any]]:
    """Load the shipped models (the first seed's, keys ``"task/scheme"``, eval mode) and the
    recorded evaluation of every seed."""
    weights = data_path(WEIGHTS_FILE) if weights is None else Path(weights)
    results = data_path(RESULTS_FILE) if results is None else Path(results)
    blob = torch.load(weights, weights_only=True)
    raw = dict(blob["config"])
    for key in ("tasks", "eval_lens", "schemes", "lr_grid", "seeds"):
        raw[key] = tuple(raw[key])
    cfg = ExperimentConfig(**raw)
    models = {}
    for key, sd in blob["state_dicts"].items():
        m = build_model(key.split("/")[1], cfg)
        m.load_state_dict({k: v.float() for k, v in sd.items()})
        models[key] = m.eval()
    return cfg, models, json.loads(Path(results).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train Chapter 6's extrapolation models.")
    parser.add_argument("--no-save", action="store_true", help="train and print, write nothing")
    args = parser.parse_args(argv)
    result = train_all(verbose=True)
    if not args.no_save:
        save_experiment(result)
        print(f"wrote {data_path(WEIGHTS_FILE)} and {data_path(RESULTS_FILE)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
