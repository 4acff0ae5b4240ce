"""Pre-training a GPT on a text file (Chapter 8): the trainer and its command line.

::

    python -m course_lib.gpt.train --text PATH --tokenizer char|bpe --recipe NAME \\
        [--until-val-loss X] [--max-steps N] [--max-minutes M] [--seed S] [--out DIR]

``NAME`` is one of :data:`course_lib.gpt.config.RECIPES`: ``baseline``, ``modern``, ``speedrun``
or ``fast`` (the fastest measured).

The first 90% of the file trains, the last 10% validates. Every ``--eval-interval`` steps (100)
the loss on the *whole* validation split is measured and one JSON line is printed
(``step``, ``seconds`` of training, ``train_loss``, ``val_loss``, ``tokens_per_s``); a final JSON
line summarises the run. Training stops at ``--until-val-loss``, ``--max-steps`` or
``--max-minutes``, whichever comes first. With ``--out``, a checkpoint ``DIR/ckpt.pt`` is written
atomically at every evaluation (and ``--resume`` continues from it, to the same losses as an
uninterrupted run). The same script runs under ``torchrun --nproc_per_node=N``: each process
takes its share of every global batch and DistributedDataParallel averages the gradients
(gloo on CPUs, NCCL on GPUs).

The optimiser is AdamW with decoupled weight decay on the matrices only (or, with the recipe's
``optimizer="muon"``, Muon for the blocks' matrices and AdamW for the rest), the learning rate
rises linearly for ``warmup_steps`` and then falls along a half cosine to ``min_lr`` at
``decay_steps``, and the gradient's global norm is clipped to ``clip``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.checks import check_int, check_real
from course_lib.gpt.config import RECIPES, GPTConfig, Recipe
from course_lib.gpt.data import (
    BPETokenizer,
    CharTokenizer,
    load_tokenizer,
    random_windows,
    split_ids,
    validation_windows,
)
from course_lib.gpt.model import GPT

__all__ = [
    "Trainer",
    "learning_rate",
    "load_checkpoint",
    "load_model",
    "main",
    "save_checkpoint",
    "train",
    "validation_loss",
]

CHECKPOINT_VERSION = 1


# ------------------------------------------------------------------------------ the schedule
def learning_rate(step: int, recipe: Recipe) -> float:
    """Linear warm-up to ``lr`` over ``warmup_steps``, half-cosine decay to ``min_lr`` at ``decay_steps``.

    >>> r = RECIPES["baseline"]
    >>> [round(learning_rate(s, r), 6) for s in (0, 99, 1050, 2000, 5000)]
    [1e-05, 0.001, 0.00055, 0.0001, 0.0001]
    """
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    if step >= recipe.decay_steps:
        return recipe.min_lr
    progress = (step - recipe.warmup_steps) / (recipe.decay_steps - recipe.warmup_steps)
    return recipe.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (recipe.lr - recipe.min_lr)


def make_optimizer(model: torch.nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    """The recipe's optimiser; every parameter group carries ``base_lr`` for the schedule.

    ``adamw``: AdamW, weight decay on tensors of two or more dimensions (matrices, embeddings)
    only. ``muon``: :class:`~course_lib.gpt.optim.Muon` at ``muon_lr`` for the blocks'
    matrices, AdamW at ``lr`` for the embeddings, the output layer, the gains and biases.
    """
    named = list(model.named_parameters())
    # on CUDA AdamW's fused kernel: one launch for every tensor instead of several per tensor
    # (the CPU keeps PyTorch's default, so that the CPU's printed numbers stay as they are)
    fused = {"fused": True} if named and named[0][1].device.type == "cuda" else {}
    if recipe.optimizer == "adamw":
        decay = [p for _, p in named if p.ndim >= 2]
        no_decay = [p for _, p in named if p.ndim < 2]
        groups = [
            {"params": decay, "weight_decay": recipe.weight_decay, "base_lr": recipe.lr},
            {"params": no_decay, "weight_decay": 0.0, "base_lr": recipe.lr},
        ]
        return torch.optim.AdamW(groups, lr=recipe.lr, betas=recipe.betas, **fused)
    from course_lib.gpt.optim import Muon

    def fold(name: str) -> str | None:
        base = name.rsplit(".", 1)[-1]
        return {"w_q": "heads_in", "w_k": "heads_in", "w_v": "heads_in", "w_o": "heads_out"}.get(
            base
        )

    hidden = [(n, p) for n, p in named if n.startswith("blocks.") and p.ndim >= 2]
    rest = [p for n, p in named if not (n.startswith("blocks.") and p.ndim >= 2)]
    muon_groups = [
        {"params": [p for n, p in hidden if fold(n) == f], "fold": f, "base_lr": recipe.muon_lr}
        for f in ("heads_in", "heads_out", None)
    ]
    adam = torch.optim.AdamW(
        [{"params": rest, "weight_decay": 0.0, "base_lr": recipe.lr}],
        lr=recipe.lr,
        betas=recipe.betas,
        **fused,
    )
    muon = Muon(
        [g for g in muon_groups if g["params"]], lr=recipe.muon_lr, momentum=recipe.muon_momentum
    )
    return _Together([muon, adam])


class _Together(torch.optim.Optimizer):
    """Several optimisers stepped as one (their groups side by side)."""

    def __init__(self, parts: list[torch.optim.Optimizer]) -> None:
        self.parts = parts
        self.param_groups = [g for o in parts for g in o.param_groups]
        self.defaults = {}
        self.state = {}  # type: ignore[assignment]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.parts:
            o.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for o in self.parts:
            o.step()

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return {"parts": [o.state_dict() for o in self.parts]}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # type: ignore[override]
        for o, st in zip(self.parts, state["parts"], strict=True):
            o.load_state_dict(st)


# ------------------------------------------------------------------------------ distributed
@dataclass(frozen=True)
class World:
    """This process's place among ``size`` processes (1 without torchrun)."""

    rank: int = 0
    size: int = 1

    @classmethod
    def from_env(cls) -> World:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size == 1:
            return cls()
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        return cls(rank=dist.get_rank(), size=dist.get_world_size())

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean of a scalar over the processes."""
        if self.size == 1:
            return value
        import torch.distributed as dist

        value = value.detach().clone()
        dist.all_reduce(value)
        return value / self.size


# ------------------------------------------------------------------------------ the trainer
@torch.no_grad()
def validation_loss(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    val_ids: torch.Tensor,
    context_length: int,
    device: Any = "cpu",
    windows_per_batch: int = 128,
) -> float:
    """The race's target: the mean cross-entropy over every prediction of the validation split.

    The split is cut into consecutive windows of ``context_length + 1`` tokens
    (:func:`~course_lib.gpt.data.validation_windows`); ``logits_of(x)`` maps windows (B, L) to
    logits (B, L, V). Any model can be measured by it (the nanoGPT race uses it for nanoGPT's).

    >>> ids = torch.arange(9) % 3
    >>> round(validation_loss(lambda x: torch.zeros(*x.shape, 3), ids, 4), 4)  # uniform: log 3
    1.0986
    """
    if not callable(logits_of):
        raise TypeError(f"logits_of must be callable, got {type(logits_of).__name__}")
    check_int(context_length, "context_length", low=1)
    check_int(windows_per_batch, "windows_per_batch", low=1)
    x, y = validation_windows(val_ids, context_length)
    total = torch.zeros((), dtype=torch.float64)
    for i in range(0, len(x), windows_per_batch):
        xb = x[i : i + windows_per_batch].to(device)
        yb = y[i : i + windows_per_batch].to(device)
        logits = logits_of(xb)  # (B, L, V)
        total += (
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1), reduction="sum")
            .double()
            .cpu()
        )
    return float(total / y.numel())


def compiler_missing() -> str | None:
    """Why ``torch.compile`` cannot run here (no C compiler for the CPU backend), or None."""
    import shutil

    if torch.cuda.is_available():
        return None
    if not any(shutil.which(c) for c in ("cc", "gcc", "clang", "g++")):
        return "torch.compile's CPU backend needs a C++ compiler (cc, gcc or clang) on PATH"
    return None


def compile_forward(net: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """``torch.compile(net)``, or a clear error saying why it cannot run here."""
    reason = compiler_missing()
    if reason is not None:
        raise RuntimeError(f"recipe.compile is set but {reason}")
    return torch.compile(net, dynamic=False)


@dataclass
class Trainer:
    """Holds a model, its optimiser and the data; :meth:`step` is one optimiser step.

    The data generator is seeded from ``seed`` and its state is part of :meth:`state_dict`,
    so that a resumed run draws the same windows as an uninterrupted one.
    """

    model: GPT
    recipe: Recipe
    train_ids: torch.Tensor
    val_ids: torch.Tensor
    seed: int = 0
    world: World = field(default_factory=World)
    step_count: int = 0
    seconds: float = 0.0
    tokens: int = 0
    autocast: str | None = None

    def __post_init__(self) -> None:
        if self.autocast not in (None, "bfloat16", "float16"):
            raise ValueError(
                f"autocast must be None, 'bfloat16' or 'float16', got {self.autocast!r}"
            )
        self.optimizer = make_optimizer(self.model, self.recipe)
        self.generator = torch.Generator().manual_seed(self.seed + 1)
        self.device = self.model.tok_emb.device
        self.net: torch.nn.Module = self.model
        if self.world.size > 1:
            from torch.nn.parallel import DistributedDataParallel

            if self.recipe.batch_size % self.world.size:
                raise ValueError(
                    f"batch_size {self.recipe.batch_size} must be divisible by the number of "
                    f"processes {self.world.size}"
                )
            self.net = DistributedDataParallel(self.model)
        self.forward: Callable[[torch.Tensor], torch.Tensor] = self.net
        if self.recipe.compile:
            self.forward = compile_forward(self.net)

    def _autocast(self) -> Any:
        """Mixed precision for the forward pass (bfloat16 on a GPU or a CPU), or nothing."""
        if self.autocast is None:
            return contextlib.nullcontext()
        dtype = getattr(torch, self.autocast)
        return torch.autocast(self.device.type, dtype=dtype)

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This process's share of the next global batch."""
        r = self.recipe
        x, y = random_windows(self.train_ids, r.batch_size, r.context_length, self.generator)
        share = r.batch_size // self.world.size
        rows = slice(self.world.rank * share, (self.world.rank + 1) * share)
        return x[rows].to(self.device), y[rows].to(self.device)

    def step(self) -> float:
        """One optimiser step; returns the global batch's mean training loss."""
        t0 = time.perf_counter()
        x, y = self.batch()
        factor = learning_rate(self.step_count, self.recipe) / self.recipe.lr
        for group in self.optimizer.param_groups:
            group["lr"] = group["base_lr"] * factor  # every group follows the schedule's shape
        self.net.train()
        with self._autocast():
            logits = self.forward(x)  # (B, L, V): position i predicts token i+1 of the window
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.recipe.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.clip)
        self.optimizer.step()
        value = float(self.world.mean(loss.detach()))
        self.step_count += 1
        self.tokens += self.recipe.batch_size * self.recipe.context_length
        self.seconds += time.perf_counter() - t0
        return value

    def evaluate(self, windows_per_batch: int = 128) -> float:
        """The mean loss over every prediction of the whole validation split."""
        self.model.eval()
        with self._autocast():
            return validation_loss(
                lambda x: self.model(x).float(),
                self.val_ids,
                self.recipe.context_length,
                self.device,
                windows_per_batch,
            )

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "step": self.step_count,
            "seconds": self.seconds,
            "tokens": self.tokens,
            "seed": self.seed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.step_count = int(state["step"])
        self.seconds = float(state["seconds"])
        self.tokens = int(state["tokens"])


# ------------------------------------------------------------------------------ checkpoints
def save_checkpoint(
    path: str | os.PathLike,
    model: GPT,
    tokenizer: CharTokenizer | BPETokenizer,
    recipe: Recipe | None = None,
    trainer: Trainer | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint atomically: to a temporary file beside ``path``, then renamed over it.

    It holds only tensors and plain values, so :func:`load_checkpoint` reads it with
    ``torch.load(weights_only=True)`` (no code runs on loading).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = {
        "version": CHECKPOINT_VERSION,
        "config": model.config.to_dict(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "tokenizer": tokenizer.to_dict(),
        "recipe": None if recipe is None else recipe.to_dict(),
        "trainer": None if trainer is None else trainer.state_dict(),
        "extra": extra or {},
    }
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save(ckpt, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``; a damaged or foreign file is a clear error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, pickle of arbitrary objects, not a torch file ...
        raise ValueError(
            f"checkpoint {str(path)!r} is corrupt or not a course checkpoint "
            f"({type(err).__name__}: {str(err).splitlines()[0][:120]})"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"checkpoint {str(path)!r} is not a version-{CHECKPOINT_VERSION} course checkpoint"
        )
    for key in ("config", "model", "tokenizer"):
        if key not in ckpt:
            raise ValueError(f"checkpoint {str(path)!r} has no {key!r} entry")
    return ckpt


def model_from_checkpoint(ckpt: dict[str, Any], config: GPTConfig | None = None) -> GPT:
    """The model a checkpoint holds; with ``config``, the checkpoint must have been made for it."""
    stored = GPTConfig.from_dict(ckpt["config"])
    if config is not None and config != stored:
        diff = {
            k: (v, getattr(stored, k))
            for k, v in config.to_dict().items()
            if getattr(stored, k) != v
        }
        raise ValueError(f"the checkpoint was made for another model: (expected, stored) = {diff}")
    model = GPT(stored)
    state = ckpt["model"]
    want = dict(model.state_dict())
    missing, extra = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    if missing or extra:
        raise ValueError(
            f"checkpoint weights do not match the model: missing {missing[:3]}, unexpected {extra[:3]}"
        )
    for k, v in state.items():
        if tuple(v.shape) != tuple(want[k].shape):
            raise ValueError(
                f"checkpoint weight {k} has shape {tuple(v.shape)}, the model needs {tuple(want[k].shape)}"
            )
    model.load_state_dict(state)
    return model


def load_model(path: str | os.PathLike) -> tuple[GPT, CharTokenizer | BPETokenizer]:
    """The model and tokenizer of a checkpoint file, in eval mode."""
    ckpt = load_checkpoint(path)
    model = model_from_checkpoint(ckpt)
    tok = load_tokenizer(ckpt["tokenizer"])
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"the checkpoint's tokenizer has {tok.vocab_size} tokens but its model {model.config.vocab_size}"
        )
    return model.eval(), tok


# ------------------------------------------------------------------------------ a whole run
def make_tokenizer(
    kind: str, text: str, train_fraction: float = 0.9
) -> CharTokenizer | BPETokenizer:
    """``char``: the characters of the whole file (as nanoGPT); ``bpe``: 512 ids learned on the training part."""
    if kind == "char":
        return CharTokenizer.train(text)
    if kind == "bpe":
        return BPETokenizer.train(text[: int(train_fraction * len(text))], vocab_size=512)
    raise ValueError(f"tokenizer must be 'char' or 'bpe', got {kind!r}")


def train(
    text: str,
    tokenizer: str | CharTokenizer | BPETokenizer = "char",
    recipe: str | Recipe = "baseline",
    *,
    until_val_loss: float | None = None,
    max_steps: int | None = None,
    max_minutes: float | None = None,
    seed: int = 0,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    eval_interval: int = 100,
    progress: bool = True,
    log: Callable[[dict[str, Any]], None] | None = None,
    device: Any = "cpu",
    autocast: str | None = None,
) -> dict[str, Any]:
    """Train a GPT on ``text``; returns the summary (with ``history``, the evaluation records, and ``model``).

    ``log(record)`` is called with every evaluation record (the CLI prints them as JSON lines).
    """
    recipe = RECIPES[recipe] if isinstance(recipe, str) else recipe
    if not isinstance(recipe, Recipe):
        raise TypeError(
            f"recipe must be a Recipe or one of {sorted(RECIPES)}, got {type(recipe).__name__}"
        )
    if max_steps is None and max_minutes is None and until_val_loss is None:
        max_steps = recipe.decay_steps
    if max_steps is not None:
        check_int(max_steps, "max_steps", low=0)
    if max_minutes is not None:
        check_real(max_minutes, "max_minutes", low=0.0, low_open=True)
    if until_val_loss is not None:
        check_real(until_val_loss, "until_val_loss", low=0.0, low_open=True)
    check_int(eval_interval, "eval_interval", low=1)
    world = World.from_env()
    torch.manual_seed(seed)
    ckpt_path = None if out is None else Path(out) / "ckpt.pt"
    state = None
    if resume:
        if ckpt_path is None or not ckpt_path.exists():
            raise FileNotFoundError(
                "--resume needs --out DIR holding a ckpt.pt from an earlier run"
            )
        state = load_checkpoint(ckpt_path)
        tok = load_tokenizer(state["tokenizer"])
    else:
        tok = make_tokenizer(tokenizer, text) if isinstance(tokenizer, str) else tokenizer
    train_ids, val_ids = split_ids(tok.encode(text))
    cfg = recipe.model_config(tok.vocab_size)
    model = (GPT(cfg, seed=seed) if state is None else model_from_checkpoint(state, cfg)).to(device)
    trainer = Trainer(model, recipe, train_ids, val_ids, seed=seed, world=world, autocast=autocast)
    history: list[dict[str, Any]] = []
    if state is not None:
        trainer.load_state_dict(state["trainer"])
        history = list(state["extra"].get("history", []))
    limit = max_steps if max_steps is not None else 10**9
    bar = _progress(
        progress and world.rank == 0, trainer.step_count, None if max_steps is None else max_steps
    )
    reason, last_loss = "max_steps", float("nan")
    losses: list[float] = []
    while trainer.step_count < limit:
        last_loss = trainer.step()
        losses.append(last_loss)
        bar.update(1)
        bar.set_postfix(loss=f"{last_loss:.3f}", refresh=False)
        timed_out = max_minutes is not None and trainer.seconds >= 60 * max_minutes
        if trainer.step_count % eval_interval == 0 or trainer.step_count == limit or timed_out:
            record = _evaluate(trainer, losses)
            losses = []
            history.append(record)
            if world.rank == 0:
                if log is not None:
                    log(record)
                if ckpt_path is not None:
                    save_checkpoint(ckpt_path, model, tok, recipe, trainer, {"history": history})
            if until_val_loss is not None and record["val_loss"] <= until_val_loss:
                reason = "until_val_loss"
                break
            if timed_out:
                reason = "max_minutes"
                break
    bar.close()
    summary = {
        "summary": True,
        "recipe": recipe.name,
        "tokenizer": tok.kind,
        "steps": trainer.step_count,
        "seconds": round(trainer.seconds, 3),
        "final_train_loss": round(last_loss, 4),
        "final_val_loss": history[-1]["val_loss"] if history else None,
        "stopped_by": reason,
        "parameters": model.count_parameters(),
        "processes": world.size,
    }
    return {**summary, "history": history, "model": model, "tokenizer": tok}


def _evaluate(trainer: Trainer, losses: list[float]) -> dict[str, Any]:
    val = trainer.evaluate()
    return {
        "step": trainer.step_count,
        "seconds": round(trainer.seconds, 3),
        "train_loss": round(sum(losses) / max(len(losses), 1), 4),
        "val_loss": round(val, 4),
        "tokens_per_s": round(trainer.tokens / max(trainer.seconds, 1e-9), 1),
    }


def _progress(enabled: bool, initial: int, total: int | None) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(
        total=total, initial=initial, desc="training", unit="step", file=sys.stderr, leave=False
    )


class _NoBar:
    def update(self, n: int) -> None: ...
    def set_postfix(self, **kw: Any) -> None: ...
    def close(self) -> None: ...


# ------------------------------------------------------------------------------ command line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.gpt.train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--text", required=True, help="a UTF-8 text file (first 90%% trains, last 10%% validates)"
    )
    parser.add_argument("--tokenizer", choices=("char", "bpe"), default="char")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="baseline")
    parser.add_argument("--until-val-loss", type=float, default=None)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--max-minutes", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", default=None, help="folder for ckpt.pt (written at every evaluation)"
    )
    parser.add_argument("--resume", action="store_true", help="continue from OUT/ckpt.pt")
    parser.add_argument("--eval-interval", type=int, default=100)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--autocast", choices=["bfloat16", "float16"], default=None)
    parser.add_argument("--compile", action="store_true", help="torch.compile the forward pass")
    args = parser.parse_args(argv)
    path = Path(args.text)
    if not path.is_file():
        parser.error(f"--text {args.text!r} is not a file")
    text = path.read_text(encoding="utf-8")
    world_rank = int(os.environ.get("RANK", "0"))

    def log(record: dict[str, Any]) -> None:
        print(json.dumps(record), flush=True)

    recipe = RECIPES[args.recipe]
    if args.compile:
        recipe = dataclasses.replace(recipe, compile=True)
    result = train(
        text,
        args.tokenizer,
        recipe,
        until_val_loss=args.until_val_loss,
        max_steps=args.max_steps,
        max_minutes=args.max_minutes,
        seed=args.seed,
        out=args.out,
        resume=args.resume,
        eval_interval=args.eval_interval,
        progress=not args.no_progress,
        log=log,
        device=args.device,
        autocast=args.autocast,
    )
    if world_rank == 0:
        summary = {k: v for k, v in result.items() if k not in ("history", "model", "tokenizer")}
        print(json.dumps(summary), flush=True)
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
