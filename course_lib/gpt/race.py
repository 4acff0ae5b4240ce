"""Racing training recipes to the same validation loss, fairly, in one process (Chapter 8).

A wall-clock race between two training runs is only fair if both run under the same conditions.
On a shared laptop the load changes from minute to minute, so :func:`race` does not train one
recipe and then the other: it keeps one :class:`~course_lib.gpt.train.Trainer` per recipe and
advances them **in turns** of ``chunk`` optimiser steps (100, the evaluation interval), so that
every recipe sees the same mix of quiet and busy minutes. Each trainer counts only its own
training seconds (evaluations excluded).

The target is the validation loss the reference recipe (``baseline``) ends with after its
``decay_steps``. Every other recipe trains until its loss on the whole validation split is at or
below the target (or ``max_steps``); its time is the training seconds at the first evaluation that
reached it. While the reference is still running its final loss is not yet known, so the others
pause at ``provisional_target`` (the loss of the shipped run of the same recipe) and, if the
reference ends lower, continue in turns until they reach the real target.

The chapter's ablation is :data:`ABLATION`: from the reference, ``modern``'s changes are added
one group at a time (the schedule, then RoPE, then RMSNorm without biases, which is ``modern``)::

    python -m course_lib.gpt.race OUT.json [--quick]

Section 8.11's race is :data:`SPEEDRUN` (each of the speed-run's ideas added alone to
``modern``, then all of them, then ``fast``: the ones that paid), to a fixed target, one seed per
run, then merged::

    python -m course_lib.gpt.race S0.json --speedrun --target 1.9237 --max-steps 1500 \\
        --chunk 50 --seed 0
    python -m course_lib.gpt.race C.json --speedrun --step-costs
    python -m course_lib.gpt.race OUT.json --merge S0.json S1.json [--target T] [--costs C.json]
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from typing import Any

import torch

from course_lib.checks import check_int
from course_lib.gpt.config import RECIPES, Recipe
from course_lib.gpt.data import split_ids
from course_lib.gpt.model import GPT
from course_lib.gpt.train import Trainer, make_tokenizer

__all__ = [
    "ABLATION",
    "SPEEDRUN",
    "ablation_recipes",
    "race",
    "speedrun_recipes",
    "step_costs",
    "summarise_seeds",
]

_SCHEDULE = {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 50, "decay_steps": 1000}

#: (name, change): cumulative, each row adds one group of ``modern``'s changes to the row above.
ABLATION: list[tuple[str, dict[str, Any]]] = [
    ("baseline", {}),
    ("+ schedule", dict(_SCHEDULE)),
    ("+ RoPE", {"positions": "rope"}),
    ("modern", {"norm": "rms", "bias": False}),
]


#: (name, change): the speed-run's ideas, each added alone to ``modern`` (Muon at two learning
#: rates, the race choosing between them on the validation split; 0.01 was the slowest of three
#: after 100 steps of a pilot with both seeds and was dropped to save budget), then all of them,
#: then the three that paid alone (Muon at 0.02, QK-norm, ReLU squared) together, then the same
#: with the schedule's decay ending at step 400 instead of 1000, which is ``fast``.
SPEEDRUN: list[tuple[str, dict[str, Any]]] = [
    ("modern", {}),
    ("+ Muon 0.02", {"optimizer": "muon", "muon_lr": 0.02}),
    ("+ Muon 0.04", {"optimizer": "muon", "muon_lr": 0.04}),
    ("+ QK-norm", {"qk_norm": True}),
    ("+ ReLU²", {"activation": "relu2"}),
    ("+ zero init", {"zero_init": True}),
    ("+ untied head", {"tie_head": False}),
    (
        "+ all",
        {
            "optimizer": "muon",
            "muon_lr": 0.02,
            "qk_norm": True,
            "activation": "relu2",
            "zero_init": True,
            "tie_head": False,
        },
    ),
    (
        "+ Muon, QK-norm, ReLU²",
        {"optimizer": "muon", "muon_lr": 0.02, "qk_norm": True, "activation": "relu2"},
    ),
    (
        "fast",
        {
            "optimizer": "muon",
            "muon_lr": 0.02,
            "qk_norm": True,
            "activation": "relu2",
            "decay_steps": 400,
        },
    ),
]


def speedrun_recipes(base: Recipe | None = None) -> list[Recipe]:
    """The recipes of :data:`SPEEDRUN`, each one change (or all) on ``base`` (default ``modern``).

    >>> [r.name for r in speedrun_recipes()][:3]
    ['modern', '+ Muon 0.02', '+ Muon 0.04']
    >>> recipes = speedrun_recipes()
    >>> all_of_them, fast = recipes[-3], recipes[-1]
    >>> all_of_them == dataclasses.replace(RECIPES["speedrun"], name="+ all"), fast == RECIPES["fast"]
    (True, True)
    """
    base = RECIPES["modern"] if base is None else base
    return [dataclasses.replace(base, name=name, **change) for name, change in SPEEDRUN]


def ablation_recipes(base: Recipe | None = None) -> list[Recipe]:
    """The recipes of :data:`ABLATION`, built on ``base`` (default ``RECIPES['baseline']``).

    >>> [r.name for r in ablation_recipes()]
    ['baseline', '+ schedule', '+ RoPE', 'modern']
    >>> ablation_recipes()[-1] == RECIPES["modern"]
    True
    """
    current = RECIPES["baseline"] if base is None else base
    out = []
    for name, change in ABLATION:
        current = dataclasses.replace(current, name=name, **change)
        out.append(current)
    return out


def race(
    text: str,
    recipes: list[Recipe],
    *,
    provisional_target: float,
    chunk: int = 100,
    max_steps: int = 3000,
    seed: int = 0,
    log: Any = None,
    target: float | None = None,
    device: Any = "cpu",
    autocast: str | None = None,
) -> dict[str, Any]:
    """Train ``recipes`` in turns of ``chunk`` steps; ``recipes[0]`` is the reference.

    With a fixed ``target`` (a validation loss), no recipe sets it: every one trains in turns
    until it reaches it or ``max_steps``. ``device`` and ``autocast`` (``"bfloat16"``) are passed
    to every :class:`~course_lib.gpt.train.Trainer`.

    Returns ``{"target": T, "rows": [...]}`` with, per recipe, the step and training seconds at
    which it first reached ``T`` (``None`` if it did not within ``max_steps``), its seconds per
    step, its parameter count and its evaluation history.
    """
    if not recipes:
        raise ValueError("race needs at least one recipe (the first is the reference)")
    check_int(chunk, "chunk", low=1)
    names = [r.name for r in recipes]
    if len(set(names)) != len(names):
        raise ValueError(f"recipe names must be distinct, got {names}")
    torch.manual_seed(seed)
    tok = make_tokenizer("char", text)
    train_ids, val_ids = split_ids(tok.encode(text))
    trainers = []
    for r in recipes:
        model = GPT(r.model_config(tok.vocab_size), seed=seed).to(device)
        trainers.append(Trainer(model, r, train_ids, val_ids, seed=seed, autocast=autocast))
    histories: list[list[dict[str, Any]]] = [[] for _ in recipes]
    ref_steps = recipes[0].decay_steps

    def advance(i: int) -> None:
        t, losses = trainers[i], []
        for _ in range(chunk):
            losses.append(t.step())
        record = {
            "step": t.step_count,
            "seconds": round(t.seconds, 3),
            "train_loss": round(sum(losses) / len(losses), 4),
            "val_loss": round(t.evaluate(), 4),
        }
        histories[i].append(record)
        if log is not None:
            log({"recipe": recipes[i].name, **record})

    def reached(i: int, target: float) -> bool:
        return bool(histories[i]) and histories[i][-1]["val_loss"] <= target

    fixed = target is not None

    def active(i: int, target: float) -> bool:
        if fixed:
            return trainers[i].step_count < max_steps and not reached(i, target)
        if trainers[i].step_count >= (ref_steps if i == 0 else max_steps):
            return False
        return i == 0 or not reached(i, target)

    if not fixed:
        target = provisional_target
    assert target is not None
    while any(active(i, target) for i in range(len(recipes))):
        for i in range(len(recipes)):
            if active(i, target):
                advance(i)
        if not fixed and not active(0, target):
            target = histories[0][-1]["val_loss"]  # the reference has finished: the real target
    rows = []
    for r, t, hist in zip(recipes, trainers, histories, strict=True):
        first = next((h for h in hist if h["val_loss"] <= target), None)
        rows.append(
            {
                "recipe": r.name,
                "parameters": t.model.count_parameters(),
                "reached_at_step": None if first is None else first["step"],
                "seconds_to_target": None if first is None else first["seconds"],
                "seconds_per_step": round(t.seconds / max(t.step_count, 1), 4),
                "tokens_per_s": round(t.tokens / max(t.seconds, 1e-9), 1),
                "recipe_fields": r.to_dict(),
                "final_val_loss": hist[-1]["val_loss"],
                "history": hist,
            }
        )
    base = rows[0]["seconds_to_target"]
    for row in rows:
        s = row["seconds_to_target"]
        row["speed_up"] = None if (s is None or base is None) else round(base / s, 3)
    return {"target": target, "chunk": chunk, "seed": seed, "rows": rows}


def step_costs(
    text: str, recipes: list[Recipe], rounds: int = 5, steps: int = 10, seed: int = 0
) -> dict[str, float]:
    """The least seconds per training step of each recipe over ``rounds`` interleaved turns.

    On a shared machine a race's seconds carry the load of the minute they ran in; the *least*
    time of several short turns, taken in turns, is the nearest to what a step costs on a quiet
    machine (a turn cannot run faster than the work it does).
    """
    check_int(rounds, "rounds", low=1)
    check_int(steps, "steps", low=1)
    tok = make_tokenizer("char", text)
    train_ids, val_ids = split_ids(tok.encode(text))
    trainers = [
        Trainer(GPT(r.model_config(tok.vocab_size), seed=seed), r, train_ids, val_ids, seed=seed)
        for r in recipes
    ]
    for t in trainers:  # warm-up: first calls allocate
        t.step()
    best = [float("inf")] * len(recipes)
    for _ in range(rounds):
        for i, t in enumerate(trainers):
            before = t.seconds
            for _ in range(steps):
                t.step()
            best[i] = min(best[i], (t.seconds - before) / steps)
    return {r.name: round(b, 5) for r, b in zip(recipes, best, strict=True)}


def summarise_seeds(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per recipe over the races of several seeds: mean and half-range of the steps and seconds
    to the target (``None`` where a seed did not reach it), and the mean seconds per step.

    >>> a = {"rows": [{"recipe": "x", "reached_at_step": 400, "seconds_to_target": 40.0,
    ...                "seconds_per_step": 0.1}]}
    >>> b = {"rows": [{"recipe": "x", "reached_at_step": 600, "seconds_to_target": 50.0,
    ...                "seconds_per_step": 0.08}]}
    >>> s = summarise_seeds([a, b])[0]
    >>> s["steps"], s["steps_spread"], s["seconds"], s["seconds_spread"], s["seconds_per_step"]
    (500.0, 100.0, 45.0, 5.0, 0.09)
    """
    if not runs:
        raise ValueError("summarise_seeds needs at least one race")
    names = [r["recipe"] for r in runs[0]["rows"]]
    out = []
    for i, name in enumerate(names):
        rows = [run["rows"][i] for run in runs]
        if any(r["recipe"] != name for r in rows):
            raise ValueError(f"the races do not list the same recipes in the same order ({name})")
        hit = [r for r in rows if r["reached_at_step"] is not None]
        steps = [r["reached_at_step"] for r in hit]
        inter = [r.get("interpolated_step") for r in hit]
        inter = [x for x in inter if x is not None] if len(inter) == len(rows) else []
        secs = [r["seconds_to_target"] for r in hit]
        out.append(
            {
                "recipe": name,
                "seeds": len(rows),
                "reached": len(hit),
                "steps": sum(steps) / len(steps) if hit else None,
                "steps_spread": (max(steps) - min(steps)) / 2 if hit else None,
                "seconds": round(sum(secs) / len(secs), 3) if hit else None,
                "seconds_spread": round((max(secs) - min(secs)) / 2, 3) if hit else None,
                "seconds_per_step": round(sum(r["seconds_per_step"] for r in rows) / len(rows), 4),
                "interpolated_steps": round(sum(inter) / len(inter), 1)
                if inter and len(inter) == len(rows)
                else None,
                "interpolated_spread": round((max(inter) - min(inter)) / 2, 1)
                if inter and len(inter) == len(rows)
                else None,
            }
        )
    return out


def from_log(path: str) -> dict[str, Any]:
    """A race's rows rebuilt from the JSON lines it printed (for a race stopped before its end)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith('{"recipe"'):
                rec = json.loads(line)
                rows.setdefault(rec.pop("recipe"), []).append(rec)
    if not rows:
        raise ValueError(f"{path} holds no race records")
    return {
        "from_log": path,
        "rows": [
            {
                "recipe": name,
                "seconds_per_step": round(h[-1]["seconds"] / h[-1]["step"], 4),
                "final_val_loss": h[-1]["val_loss"],
                "history": h,
            }
            for name, h in rows.items()
        ],
    }


def retarget(run: dict[str, Any], target: float) -> dict[str, Any]:
    """The race's rows timed to another ``target`` from their evaluation histories.

    Every recipe was evaluated after the same turns, so any target the histories reach is as
    fair as the race's own.
    """
    rows = []
    for row in run["rows"]:
        h = row["history"]
        k = next((i for i, e in enumerate(h) if e["val_loss"] <= target), None)
        crossing = None
        if k is not None:  # linear between the evaluations either side of the target
            # before the first evaluation: a fresh model's loss, ln V (section 8.4)
            a = h[k - 1] if k > 0 else {"step": 0, "val_loss": math.log(run.get("vocab_size", 77))}
            b = h[k]
            frac = (a["val_loss"] - target) / (a["val_loss"] - b["val_loss"])
            crossing = round(a["step"] + frac * (b["step"] - a["step"]), 1)
        rows.append(
            {
                **row,
                "reached_at_step": None if k is None else h[k]["step"],
                "seconds_to_target": None if k is None else h[k]["seconds"],
                "interpolated_step": crossing,
                "steps_trained": h[-1]["step"],
            }
        )
    return {**run, "target": target, "rows": rows}


def merge(
    out: str, paths: list[str], target: float | None = None, costs: str | None = None
) -> dict[str, Any]:
    """Several seeds' races (JSON files, or the logs of stopped races) into one file:
    ``{"target", "runs", "summary"}``; with ``costs`` (from :func:`step_costs`), the summary
    adds each recipe's least seconds per step and steps-to-target times it."""
    runs = []
    for p in paths:
        run = from_log(p) if p.endswith(".log") else json.loads(open(p, encoding="utf-8").read())
        if target is None and "target" not in run:
            raise ValueError(f"{p} is a log: pass the target to time it to")
        runs.append(retarget(run, run["target"] if target is None else target))
    summary = summarise_seeds(runs)
    result: dict[str, Any] = {"target": runs[0]["target"], "runs": runs, "summary": summary}
    if costs is not None:
        least = json.loads(open(costs, encoding="utf-8").read())
        result["step_costs"] = least
        for row in summary:
            c = least[row["recipe"]]
            row["least_seconds_per_step"] = c
            n = row["interpolated_steps"]
            row["estimated_seconds"] = None if n is None else round(n * c, 1)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse

    from course_lib.gpt.data import shakespeare_file
    from course_lib.gpt.pretrained import history

    parser = argparse.ArgumentParser(prog="python -m course_lib.gpt.race", description=__doc__)
    parser.add_argument("out", help="where to write the results (JSON)")
    parser.add_argument("--quick", action="store_true", help="a tiny smoke test")
    parser.add_argument(
        "--merge", nargs="+", default=None, help="merge these seeds' race files (or logs) into OUT"
    )
    parser.add_argument("--costs", default=None, help="with --merge: step_costs' JSON file")
    parser.add_argument(
        "--step-costs", action="store_true", help="write the recipes' least seconds per step"
    )
    parser.add_argument(
        "--speedrun", action="store_true", help="race SPEEDRUN's recipes instead of ABLATION's"
    )
    parser.add_argument(
        "--only", nargs="+", default=None, help="race only these of the list's recipes (names)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--target", type=float, default=None, help="a fixed validation loss to race to"
    )
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (then bfloat16 is wise)")
    parser.add_argument("--autocast", choices=["bfloat16", "float16"], default=None)
    parser.add_argument("--compile", action="store_true", help="torch.compile every recipe")
    parser.add_argument(
        "--chunk", type=int, default=100, help="steps per turn (and per evaluation)"
    )
    args = parser.parse_args(argv)
    if args.merge:
        for row in merge(args.out, args.merge, args.target, args.costs)["summary"]:
            print(row)
        return 0
    torch.set_num_threads(args.threads)
    text = shakespeare_file().read_text(encoding="utf-8")
    recipes = speedrun_recipes() if args.speedrun else ablation_recipes()
    if args.only:
        unknown = sorted(set(args.only) - {r.name for r in recipes})
        if unknown:
            parser.error(f"--only: no recipes named {unknown} in {[r.name for r in recipes]}")
        recipes = [r for r in recipes if r.name in args.only]
    if args.step_costs:
        costs = step_costs(text, recipes, rounds=8, steps=10)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(costs, f, indent=1)
        print(costs)
        return 0
    if args.compile:
        recipes = [dataclasses.replace(r, compile=True) for r in recipes]
    provisional = history()[-1]["val_loss"]
    kw: dict[str, Any] = {
        "seed": args.seed,
        "target": args.target,
        "max_steps": args.max_steps,
        "chunk": args.chunk,
        "device": args.device,
        "autocast": args.autocast,
    }
    if args.quick:
        text = text[:20_000]
        tiny = {"n_layers": 1, "d_model": 32, "batch_size": 4, "decay_steps": 6, "warmup_steps": 2}
        recipes = [dataclasses.replace(r, **tiny) for r in recipes]
        provisional = 10.0
        kw.update(chunk=3, max_steps=9, target=None if args.target is None else 10.0)
    t0 = time.perf_counter()
    result = race(
        text,
        recipes,
        provisional_target=provisional,
        log=lambda rec: print(json.dumps(rec), flush=True),
        **kw,
    )
    result["command"] = "python -m course_lib.gpt.race " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    result["threads"] = torch.get_num_threads()
    result["wall_minutes"] = round((time.perf_counter() - t0) / 60, 1)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    for row in result["rows"]:
        print({k: v for k, v in row.items() if k != "history"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
