"""The chapter's controlled sweep of LoRA's rank with alpha held fixed (part 1, section 13.6).

Each run is :func:`course_lib.peft.task.fine_tune` (Adam, batch 32, constant learning rate) from
chapter 8's pre-trained GPT, like :mod:`course_lib.peft.compare`; a run's ``seed`` s draws the
adapters from seed s and the batches from seed s + 1 (seed 0 is the comparison's setting). One
group of runs, written to its JSON by its command (prompt and prefix tuning are studied by
:mod:`course_lib.peft.elicit`):

``rank`` (``python -m course_lib.peft.sweep rank data/peft/sweep_rank.json``)
    LoRA on all four matrices of every block at ranks 1, 2, 4, 8 with alpha = 8 for every rank
    (so the update's scale alpha / r falls as r grows), seeds 0 and 1; the comparison's alpha = 2r
    at the second seed (r = 1, 2, 8; r = 4 has alpha = 8 either way); LoRA r = 4 on the copy task.

Every run records its settings, its loss and accuracy curves (every 100 steps), its final
held-out accuracy and its wall-clock seconds (which include the evaluations and depend on the
machine's load). The file is rewritten after every run, so a stopped sweep keeps what it did.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from course_lib.checks import check_int

__all__ = [
    "GROUPS",
    "final_loss",
    "first_step",
    "from_comparison",
    "load_sweep",
    "main",
    "mean_se",
    "run_one",
    "runs_of",
    "summary",
]

ALL = ("w_qkv", "w_o", "w_1", "w_2")
GROUPS = ("rank",)


def _lora(rank: int, alpha: float) -> dict[str, Any]:
    return {"targets": ALL, "rank": rank, "alpha": alpha}


def runs_of(group: str, steps: int = 1000, copy_steps: int = 500) -> list[dict[str, Any]]:
    """The runs of a group.

    >>> [r["name"] for r in runs_of("rank")][:3]
    ['lora r=1 alpha=8', 'lora r=2 alpha=8', 'lora r=4 alpha=8']
    """
    if group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, got {group!r}")
    out: list[dict[str, Any]] = []

    def add(name: str, method: str, lr: float, seed: int, kw: dict, task: str, n: int) -> None:
        out.append(
            {
                "name": name,
                "method": method,
                "lr": lr,
                "seed": seed,
                "kw": kw,
                "task": task,
                "steps": n,
            }
        )

    for seed in (0, 1):
        for r in (1, 2, 4, 8):
            add(f"lora r={r} alpha=8", "lora", 3e-3, seed, _lora(r, 8.0), "reverse", steps)
    for r in (1, 2, 8):
        add(f"lora r={r} alpha={2 * r}", "lora", 3e-3, 1, _lora(r, 2.0 * r), "reverse", steps)
    add("lora r=4 alpha=8", "lora", 3e-3, 0, _lora(4, 8.0), "copy", copy_steps)
    return out


def final_loss(run: dict[str, Any]) -> float:
    """The mean training loss of a run's last three evaluations (inf if any is missing or NaN).

    >>> final_loss({"curve": {"loss": [None, 3.0, 2.0, 1.0, 0.0]}})
    1.0
    """
    last = [v for v in run["curve"]["loss"][-3:] if v is not None and v == v]
    return sum(last) / len(last) if len(last) == 3 else math.inf


def first_step(run: dict[str, Any], level: float = 0.9) -> int | None:
    """The first evaluation step at which a run's held-out accuracy reached ``level``, or None.

    >>> first_step({"curve": {"steps": [0, 100, 200], "accuracy": [0.0, 0.95, 1.0]}})
    100
    """
    c = run["curve"]
    return next((s for s, a in zip(c["steps"], c["accuracy"], strict=True) if a >= level), None)


def from_comparison(run: dict[str, Any]) -> dict[str, Any]:
    """A LoRA run of ``data/peft/comparison.json`` in the sweep's form (it is the sweep's seed 0:
    adapters from seed 0, batches from seed 1; alpha = 2 r).
    """
    r = run["rank"]
    return {
        **run,
        "name": f"lora r={r} alpha={2 * r}",
        "task": "reverse",
        "seed": 0,
        "steps": run["curve"]["steps"][-1],
    }


def summary(
    runs: list[dict[str, Any]], keys: tuple[str, ...] = ("name", "task", "lr")
) -> list[dict[str, Any]]:
    """One row per distinct ``keys``: seeds, final accuracy and final loss as mean and SE.

    >>> rows = summary([{"name": "a", "task": "t", "lr": 1, "seed": s, "accuracy": x,
    ...                  "curve": {"loss": [None, 1.0, 1.0, 1.0]}} for s, x in ((0, 0.5), (1, 1.0))])
    >>> rows[0]["seeds"], rows[0]["accuracy"], rows[0]["loss"]
    ([0, 1], (0.75, 0.25), (1.0, 0.0))
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(tuple(run[k] for k in keys), []).append(run)
    rows = []
    for key, members in groups.items():
        members = sorted(members, key=lambda m: m["seed"])
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "seeds": [m["seed"] for m in members],
                "accuracy": mean_se([m["accuracy"] for m in members]),
                "loss": mean_se([final_loss(m) for m in members]),
                "runs": members,
            }
        )
    return rows


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation / sqrt(n); 0 for one value).

    >>> mean_se([1.0, 3.0])
    (2.0, 1.0)
    """
    if not values:
        raise ValueError("values must not be empty")
    n = len(values)
    m = sum(values) / n
    if n == 1:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def run_one(spec: dict[str, Any], base: Any, eval_every: int = 100, eval_examples: int = 512):
    """Train one run of the sweep and return its record."""
    from course_lib.peft.compare import _curve
    from course_lib.peft.model import AdaptedGPT
    from course_lib.peft.task import fine_tune

    t0 = time.perf_counter()
    model = AdaptedGPT(base, seed=spec["seed"], **spec["kw"])
    curve = fine_tune(
        model,
        steps=spec["steps"],
        lr=spec["lr"],
        seed=spec["seed"] + 1,
        eval_every=eval_every,
        eval_examples=eval_examples,
        task=spec["task"],
    )
    seconds = time.perf_counter() - t0
    kw = {k: (list(v) if isinstance(v, tuple) else v) for k, v in spec["kw"].items()}
    return {
        **{k: v for k, v in spec.items() if k != "kw"},
        "settings": kw,
        "trainable": model.trainable_parameters(),
        "accuracy": round(curve.accuracy[-1], 4),
        "run_seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / spec["steps"], 4),
        "curve": _curve(curve),
    }


def sweep(group: str, out: Path, steps: int, copy_steps: int, argv: list[str]) -> dict:
    from course_lib.peft.task import load_base

    torch.manual_seed(0)
    base, _ = load_base()
    t0 = time.perf_counter()
    record: dict[str, Any] = {
        "command": " ".join(["python -m course_lib.peft.sweep", *argv]),
        "environment": "OMP_NUM_THREADS=1, torch.set_num_threads(1), CPU",
        "torch": torch.__version__,
        "description": __doc__.split("\n\n")[0].replace("\n", " "),
        "group": group,
        "settings": {
            "batch": 32,
            "eval_every": 100,
            "eval_examples": 512,
            "optimiser": "Adam (no weight decay, constant learning rate)",
            "seeds": "seed s: adapters from seed s, batches from seed s + 1",
            "seconds": "wall clock, including the evaluations, on a shared machine",
        },
        "complete": False,
        "runs": [],
    }

    def save() -> None:
        record["runtime_s"] = round(time.perf_counter() - t0, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, out)

    def go(spec: dict[str, Any]) -> None:
        r = run_one(spec, base)
        record["runs"].append(r)
        save()
        print(
            f"{r['name']:<18} {r['task']:<8} lr {r['lr']:<7g} seed {r['seed']} "
            f"acc {r['accuracy']:.3f} loss {r['curve']['loss'][-1]} {r['run_seconds']:.0f} s",
            flush=True,
        )

    for spec in runs_of(group, steps, copy_steps):
        go(spec)
    record["complete"] = True
    save()
    return record


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m course_lib.peft.sweep")
    parser.add_argument("group", choices=GROUPS)
    parser.add_argument("out", help="where to write the JSON")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--copy-steps", type=int, default=500)
    args = parser.parse_args(argv)
    check_int(args.steps, "steps", low=1)
    check_int(args.copy_steps, "copy_steps", low=1)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rec = sweep(args.group, Path(args.out), args.steps, args.copy_steps, argv)
    print(f"wrote {args.out} in {rec['runtime_s']:.0f} s")
    return 0


def load_sweep(group: str, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The shipped sweep of ``group`` (``data/peft/sweep_<group>.json``) or the JSON at ``path``."""
    if path is None:
        from course_lib.paths import data_path

        path = data_path("peft", f"sweep_{group}.json")
    return json.loads(Path(path).read_text())


if __name__ == "__main__":
    raise SystemExit(main())
