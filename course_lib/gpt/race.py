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

The chapter's ablation is :data:`ABLATION`: from the reference, ``fast``'s changes are added one
group at a time (the schedule, then RoPE, then RMSNorm without biases, which is ``fast``)::

    python -m course_lib.gpt.race OUT.json [--quick]

Section 8.11's race is :data:`SPEEDRUN` (each of the speed-run's ideas added alone to ``fast``),
to a fixed target, one seed per run, then merged::

    python -m course_lib.gpt.race S0.json --speedrun --target 1.9237 --max-steps 1500 \\
        --chunk 50 --seed 0
    python -m course_lib.gpt.race OUT.json --merge S0.json S1.json
"""

from __future__ import annotations

import dataclasses
import json
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
    "summarise_seeds",
]

_SCHEDULE = {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 50, "decay_steps": 1000}

#: (name, change): cumulative, each row adds one group of ``fast``'s changes to the row above.
ABLATION: list[tuple[str, dict[str, Any]]] = [
    ("baseline", {}),
    ("+ schedule", dict(_SCHEDULE)),
    ("+ RoPE", {"positions": "rope"}),
    ("fast", {"norm": "rms", "bias": False}),
]


#: (name, change): the speed-run's ideas, each added alone to ``fast`` (Muon at two learning
#: rates, the race choosing between them on the validation split; 0.01 was the slowest of three
#: after 100 steps of a pilot with both seeds and was dropped to save budget), then all of them.
SPEEDRUN: list[tuple[str, dict[str, Any]]] = [
    ("fast", {}),
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
]


def speedrun_recipes(base: Recipe | None = None) -> list[Recipe]:
    """The recipes of :data:`SPEEDRUN`, each one change (or all) on ``base`` (default ``fast``).

    >>> [r.name for r in speedrun_recipes()][:3]
    ['fast', '+ Muon 0.02', '+ Muon 0.04']
    """
    base = RECIPES["fast"] if base is None else base
    return [dataclasses.replace(base, name=name, **change) for name, change in SPEEDRUN]


def ablation_recipes(base: Recipe | None = None) -> list[Recipe]:
    """The recipes of :data:`ABLATION`, built on ``base`` (default ``RECIPES['baseline']``).

    >>> [r.name for r in ablation_recipes()]
    ['baseline', '+ schedule', '+ RoPE', 'fast']
    >>> ablation_recipes()[-1] == RECIPES["fast"]
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


def summarise_seeds(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per recipe over the races of several seeds: mean and half-range of the steps and seconds
    to the target (``None`` where a seed did not reach it), and the mean seconds per step.

    >>> a = {"rows": [{"recipe": "x", "reached_at_step": 400, "seconds_to_target": 40.0,
    ...                "seconds_per_step": 0.1}]}
    >>> b = {"rows": [{"recipe": "x", "reached_at_step": 600, "seconds_to_target": 50.0,
    ...                "seconds_per_step": 0.08}]}
    >>> summarise_seeds([a, b])[0]
    {'recipe': 'x', 'seeds': 2, 'reached': 2, 'steps': 500.0, 'steps_spread': 100.0, 'seconds': 45.0, 'seconds_spread': 5.0, 'seconds_per_step': 0.09}
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
            }
        )
    return out


def merge(out: str, paths: list[str]) -> dict[str, Any]:
    """Several seeds' race files into one: ``{"runs": [...], "summary": [...]}``."""
    runs = [json.loads(open(p, encoding="utf-8").read()) for p in paths]
    result = {"target": runs[0]["target"], "runs": runs, "summary": summarise_seeds(runs)}
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
        "--merge", nargs="+", default=None, help="merge these seeds' race files into OUT"
    )
    parser.add_argument(
        "--speedrun", action="store_true", help="race SPEEDRUN's recipes instead of ABLATION's"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--target", type=float, default=None, help="a fixed validation loss to race to"
    )
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--chunk", type=int, default=100, help="steps per turn (and per evaluation)"
    )
    args = parser.parse_args(argv)
    if args.merge:
        for row in merge(args.out, args.merge)["summary"]:
            print(row)
        return 0
    torch.set_num_threads(args.threads)
    text = shakespeare_file().read_text(encoding="utf-8")
    recipes = speedrun_recipes() if args.speedrun else ablation_recipes()
    provisional = history()[-1]["val_loss"]
    kw: dict[str, Any] = {
        "seed": args.seed,
        "target": args.target,
        "max_steps": args.max_steps,
        "chunk": args.chunk,
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
