"""Why pre-LN trains more easily: gradients at initialisation and a small training race (Chapter 5).

* :func:`gradient_norms_at_init`: the gradient norm of each block's weights for a freshly
  initialised decoder on random tokens, for post-LN or pre-LN stacks of any depth.
* :func:`reversal_batch` and :func:`train_reversal`: a synthetic task (read ``n`` digits and a
  separator, then write the digits in reverse order) and a plain Adam training loop on it,
  without learning-rate warm-up unless asked.

``python -m course_lib.block.experiment`` regenerates ``data/block_training_log.json``: the
training curves of a larger grid (depths 2 and 6, three learning rates, with and without
warm-up, three seeds) than the notebook can afford to run in its time budget.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.module import DecoderOnlyModel
from course_lib.checks import check_choice, check_int, check_real
from course_lib.paths import data_path

__all__ = [
    "gradient_norms_at_init",
    "load_log",
    "make_log",
    "reversal_batch",
    "threads",
    "train_reversal",
]

SEPARATOR = 10  # token id of the separator; digits are 0..9
VOCAB = 11
LOG_FILE = "block_training_log.json"  # under course_lib.paths.data_dir()


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Run the block with PyTorch using ``n`` intra-op threads (None: leave it), then restore.

    The models of this chapter multiply matrices of a few thousand numbers: a second thread
    saves almost nothing, and on a busy machine threads that wait for each other cost several
    times the work itself. The training functions below use one.
    """
    if n is None:
        yield
        return
    check_int(n, "threads", low=1)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _decoder(norm_position: str, n_layers: int, d_model: int, vocab: int, context: int):
    check_choice(norm_position, "norm_position", ("post", "pre", "parallel"))
    check_int(n_layers, "n_layers", low=1)
    check_int(d_model, "d_model", low=4)
    block = BlockConfig(d_model=d_model, n_heads=4, d_ff=4 * d_model, norm_position=norm_position)
    return DecoderConfig(vocab_size=vocab, context_length=context, n_layers=n_layers, block=block)


def gradient_norms_at_init(
    norm_position: str,
    n_layers: int,
    d_model: int = 64,
    seed: int = 0,
    names: Sequence[str] = ("w_2",),
    batch_size: int = 16,
    length: int = 32,
    vocab: int = 64,
    device: Any = "cpu",
    dtype: torch.dtype = torch.float64,
) -> np.ndarray:
    """Norm of the loss gradient with respect to each block's weights ``names``, at initialisation.

    The model is a :class:`~course_lib.block.module.DecoderOnlyModel` (``n_heads=4``,
    ``d_ff=4 d_model``, Glorot initialisation, float64 by default so that the numbers do not
    depend on the machine's rounding) and the loss the next-token cross-entropy on uniformly
    random tokens. Returns an array of ``n_layers`` norms, the first block first.

    >>> g = gradient_norms_at_init("pre", 3, d_model=8, batch_size=2, length=5, vocab=7)
    >>> g.shape, bool((g > 0).all())
    ((3,), True)
    """
    cfg = _decoder(norm_position, n_layers, d_model, vocab, length)
    gen = torch.Generator().manual_seed(seed)
    model = DecoderOnlyModel(cfg, dtype=dtype, generator=gen).to(device)
    tokens = torch.randint(0, vocab, (batch_size, length), generator=gen).to(device)
    with threads(1 if torch.device(device).type == "cpu" else None):
        model.loss(tokens[:, :-1], tokens[:, 1:]).backward()
    return np.array(
        [
            float(torch.sqrt(sum((getattr(b, n).grad.double() ** 2).sum() for n in names)))
            for b in model.blocks
        ]
    )


def reversal_batch(
    generator: torch.Generator, batch_size: int, n_digits: int = 6
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets for "reverse the digits": ``d1..dn | dn..d1``.

    The sequence is ``n`` random digits, the separator (token 10) and the digits reversed;
    the model reads all but the last token and predicts the next one at every position. Only
    the ``n`` predictions after the separator count (the first digits are random, nothing can
    predict them): the other targets are -100, which the loss ignores.

    >>> x, y = reversal_batch(torch.Generator().manual_seed(0), 1, n_digits=3)
    >>> x.shape, y.shape, int(x[0, 3])
    (torch.Size([1, 6]), torch.Size([1, 6]), 10)
    >>> bool((y[0, 3:] == x[0, :3].flip(0)).all()), y[0, :3].tolist()
    (True, [-100, -100, -100])
    """
    check_int(batch_size, "batch_size", low=1)
    check_int(n_digits, "n_digits", low=1)
    digits = torch.randint(0, 10, (batch_size, n_digits), generator=generator)
    sep = torch.full((batch_size, 1), SEPARATOR)
    seq = torch.cat([digits, sep, digits.flip(1)], dim=1)  # (B, 2n + 1)
    x, y = seq[:, :-1], seq[:, 1:].clone()  # (B, 2n)
    y[:, :n_digits] = -100  # positions 0..n-1 predict the digits and the separator
    return x, y


def train_reversal(
    norm_position: str,
    n_layers: int,
    lr: float,
    steps: int,
    d_model: int = 32,
    seed: int = 0,
    batch_size: int = 64,
    warmup: int = 0,
    n_digits: int = 6,
    device: Any = "cpu",
) -> dict[str, Any]:
    """Train a small decoder on digit reversal with Adam; return its loss curve and accuracy.

    The learning rate is ``lr`` from the first step, or rises linearly over ``warmup`` steps.
    Returns ``{"loss": [per-step training loss], "accuracy": fraction of reversed digits right on
    a fresh batch of 512 after training}``.

    >>> out = train_reversal("pre", 1, 1e-3, 3, d_model=8, batch_size=4)
    >>> len(out["loss"]), 0 <= out["accuracy"] <= 1
    (3, True)
    """
    check_int(steps, "steps", low=1)
    check_int(warmup, "warmup", low=0)
    check_real(lr, "lr", low=0.0, low_open=True, high_open=True)
    with threads(1 if torch.device(device).type == "cpu" else None):
        return _train_reversal(
            norm_position, n_layers, lr, steps, d_model, seed, batch_size, warmup, n_digits, device
        )


def _train_reversal(
    norm_position, n_layers, lr, steps, d_model, seed, batch_size, warmup, n_digits, device
) -> dict[str, Any]:
    cfg = _decoder(norm_position, n_layers, d_model, VOCAB, 2 * n_digits)
    gen = torch.Generator().manual_seed(seed)
    model = DecoderOnlyModel(cfg, generator=gen).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        if warmup:
            for group in opt.param_groups:
                group["lr"] = lr * min(1.0, (step + 1) / warmup)
        x, y = reversal_batch(gen, batch_size, n_digits)
        loss = model.loss(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        x, y = reversal_batch(gen, 512, n_digits)
        pred = model(x.to(device)).argmax(-1).cpu()
        scored = y != -100
        accuracy = float((pred[scored] == y[scored]).double().mean())
    return {"loss": losses, "accuracy": accuracy}


# ------------------------------------------------------------------ the shipped training log
GRID = {
    "n_layers": [2, 6],
    "lr": [1e-3, 3e-3, 1e-2],
    "warmup": [0, 100],
    "norm_position": ["post", "pre"],
    "seed": [0, 1, 2],
}
STEPS = 300
WINDOW = 5  # the log stores the mean loss of each window of 5 steps


def _window_means(values: Sequence[float], width: int) -> list[float]:
    v = np.asarray(values, dtype=float)
    n = len(v) // width
    return [round(float(m), 4) for m in v[: n * width].reshape(n, width).mean(axis=1)]


def make_log(path: Path | None = None, steps: int = STEPS) -> dict[str, Any]:
    """Run the grid of :data:`GRID` on the CPU and write the curves.

    Each run's ``loss`` is the mean training loss of each window of :data:`WINDOW` steps
    (rounded to 4 decimals), which keeps the file small.
    """
    torch.set_num_threads(1)
    runs = []
    start = time.perf_counter()
    for R in GRID["n_layers"]:
        for lr in GRID["lr"]:
            for warmup in GRID["warmup"]:
                for pos in GRID["norm_position"]:
                    for seed in GRID["seed"]:
                        out = train_reversal(pos, R, lr, steps, seed=seed, warmup=warmup)
                        runs.append(
                            {
                                "n_layers": R,
                                "lr": lr,
                                "warmup": warmup,
                                "norm_position": pos,
                                "seed": seed,
                                "accuracy": round(out["accuracy"], 4),
                                "loss": _window_means(out["loss"], WINDOW),
                            }
                        )
                        print(
                            f"R={R} lr={lr:g} warmup={warmup} {pos:<4} seed={seed}: final loss "
                            f"{np.mean(out['loss'][-20:]):.3f}, accuracy {out['accuracy']:.3f}"
                        )
    log = {
        "description": (
            "Digit reversal (6 digits) with a decoder-only Transformer, d_model=32, 4 heads, "
            "d_ff=128, batch 64, Adam, made by python -m course_lib.block.experiment"
        ),
        "steps": steps,
        "window": WINDOW,
        "grid": GRID,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "seconds": round(time.perf_counter() - start, 1),
        "runs": runs,
    }
    path = data_path(LOG_FILE, must_exist=False) if path is None else Path(path)
    path.write_text(json.dumps(log, separators=(",", ":")) + "\n")
    return log


def load_log(path: Path | None = None) -> dict[str, Any]:
    """Read the shipped training log (see :func:`make_log`)."""
    path = data_path(LOG_FILE) if path is None else Path(path)
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate data/block_training_log.json")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    log = make_log(args.out, args.steps)
    print(f"wrote {args.out or data_path(LOG_FILE)} ({len(log['runs'])} runs, {log['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
