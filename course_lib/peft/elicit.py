"""The chapter's prompt- and prefix-tuning study: what a soft prompt can make a frozen model do.

Both parts steer chapter 8's in-context model (``data/gpt/incontext_char.pt``: 2 layers, width
64, RoPE; pre-trained on Shakespeare with secret-code episodes mixed in) with
:class:`~course_lib.peft.steer.SoftPrompt`, prompt tuning or prefix tuning, Adam with a constant
learning rate. Each part is written to its own JSON by its own command:

``code`` (``python -m course_lib.peft.elicit code data/peft/elicit_code.json``)
    A task the model has the skill for. A fixed secret code of 16 letters
    (:func:`~course_lib.peft.steer.make_codes`, four codes from seed :data:`CODES_SEED`) must be
    answered **with no shots in the input**: the input is one lower-case letter, the target its
    code letter. The soft prompt has as many vectors as the code written out as chapter 8's
    episode text (50 characters) and starts either from that text (``text``: the letters in an
    order drawn from the run's seed) or from as many random characters (``random``, drawn from
    the seed). Every step trains on all 16 letters. Grid: every method, start and learning rate
    of :data:`CODE_LRS`, seeds 0 and 1, each of the four codes, :data:`CODE_STEPS` steps; then
    each method and start at its best learning rate (lowest loss averaged over the run and the
    grid's runs) for :data:`CODE_LONG` steps, both seeds, every code.
``reverse`` (``python -m course_lib.peft.elicit reverse data/peft/elicit_reverse.json``)
    A task the model has no skill for: chapter 13's reversal (``stone:enots;``), trained with
    :func:`course_lib.peft.task.fine_tune` (batch 32, held-out accuracy and loss on 512 words
    every 100 steps). The soft prompt starts from two written examples (24 characters; the words
    from seed ``100 + seed``). Grid: both methods at every learning rate of :data:`REVERSE_LRS`,
    seed 0, :data:`REVERSE_STEPS` steps; each method's best rate (lowest held-out loss over the
    last three evaluations) with seed 1, and with seed 0 for :data:`REVERSE_LONG` steps. The
    reference: full fine-tuning of the same model (every weight, learning rate 1e-3, seeds 0
    and 1), which shows the task is learnable by this network.

A run's seed s draws its starting text (and, for reversal, its batches from seed s + 1, as in
:mod:`course_lib.peft.sweep`). Every record holds its settings, its curve, its trainable count and
its wall-clock seconds (on a shared machine: compare nothing by them). The file is rewritten after
every run, so a stopped study keeps what it did.
"""

from __future__ import annotations

import copy
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
    "CODES_SEED",
    "CODE_LONG",
    "CODE_LRS",
    "CODE_STEPS",
    "FULL_LR",
    "N_CODES",
    "PARTS",
    "REVERSE_LONG",
    "REVERSE_LRS",
    "REVERSE_STEPS",
    "best_code_lr",
    "best_reverse_lr",
    "code_curves",
    "code_runs",
    "final_held_out",
    "grid_loss",
    "load_study",
    "main",
    "mean_curve_loss",
    "reverse_runs",
    "reverse_start",
    "run_code",
    "run_reverse",
]

PARTS = ("code", "reverse")
N_CODES = 4
CODES_SEED = 1313
CODE_LRS = (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)
CODE_STEPS = 100
CODE_LONG = 500
REVERSE_LRS = (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0)
REVERSE_STEPS = 1000
REVERSE_LONG = 4000
FULL_LR = 1e-3


def code_runs(steps: int = CODE_STEPS, n_codes: int = N_CODES, lrs=CODE_LRS) -> list[dict]:
    """The grid of the ``code`` part.

    >>> runs = code_runs()
    >>> len(runs), runs[0]
    (288, {'part': 'code', 'method': 'prompt', 'init': 'text', 'lr': 0.001, 'seed': 0, 'code': 0, 'steps': 100})
    """
    from course_lib.peft.steer import INITS, METHODS

    return [
        {"part": "code", "method": m, "init": i, "lr": lr, "seed": s, "code": c, "steps": steps}
        for m in METHODS
        for i in INITS
        for lr in lrs
        for s in (0, 1)
        for c in range(n_codes)
    ]


def reverse_runs(steps: int = REVERSE_STEPS, lrs=REVERSE_LRS) -> list[dict]:
    """The grid of the ``reverse`` part (seed 0) and its full fine-tuning reference.

    >>> [(r["method"], r["lr"], r["seed"]) for r in reverse_runs(lrs=(0.1,))]
    [('prompt', 0.1, 0), ('prefix', 0.1, 0), ('full', 0.001, 0), ('full', 0.001, 1)]
    """
    from course_lib.peft.steer import METHODS

    grid = [
        {"part": "reverse", "method": m, "init": "text", "lr": lr, "seed": 0, "steps": steps}
        for m in METHODS
        for lr in lrs
    ]
    full = [
        {
            "part": "reverse",
            "method": "full",
            "init": None,
            "lr": FULL_LR,
            "seed": s,
            "steps": steps,
        }
        for s in (0, 1)
    ]
    return grid + full


def mean_curve_loss(run: dict[str, Any]) -> float:
    """The loss averaged over a run's recorded steps (inf if any is missing or not finite).

    >>> mean_curve_loss({"curve": {"loss": [3.0, 1.0, 2.0]}})
    2.0
    """
    values = run["curve"]["loss"]
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return math.inf
    return sum(values) / len(values)


def final_held_out(run: dict[str, Any]) -> float:
    """The held-out loss of a reversal run, averaged over its last three evaluations.

    >>> final_held_out({"curve": {"held_out_loss": [5.0, 3.0, 2.0, 1.0]}})
    2.0
    """
    last = [v for v in run["curve"]["held_out_loss"][-3:] if v is not None and math.isfinite(v)]
    return sum(last) / len(last) if len(last) == 3 else math.inf


def _matching(runs: list[dict[str, Any]], match: dict[str, Any]) -> list[dict[str, Any]]:
    found = [r for r in runs if all(r.get(k) == v for k, v in match.items())]
    if not found:
        raise ValueError(f"no run matches {match}")
    return found


def code_curves(runs: list[dict[str, Any]], **match: Any) -> dict[int, dict[str, list]]:
    """Per seed, the curves of the matching runs averaged over the codes (steps, loss, accuracy).

    >>> run = {"method": "prompt", "seed": 0, "curve": {"steps": [0, 5], "loss": [2.0, 1.0],
    ...        "accuracy": [0.0, 0.5]}}
    >>> code_curves([run, {**run, "curve": {**run["curve"], "accuracy": [0.5, 1.0]}}], method="prompt")
    {0: {'steps': [0, 5], 'loss': [2.0, 1.0], 'accuracy': [0.25, 0.75]}}
    """
    by_seed: dict[int, list[dict]] = {}
    for r in _matching(runs, match):
        by_seed.setdefault(r["seed"], []).append(r["curve"])
    out = {}
    for seed in sorted(by_seed):
        curves = by_seed[seed]
        steps = curves[0]["steps"]
        if any(c["steps"] != steps for c in curves):
            raise ValueError(f"the runs of seed {seed} were evaluated at different steps")
        out[seed] = {"steps": list(steps)} | {
            key: [sum(c[key][i] for c in curves) / len(curves) for i in range(len(steps))]
            for key in ("loss", "accuracy")
        }
    return out


def grid_loss(runs: list[dict[str, Any]], **match: Any) -> float:
    """The loss averaged over each matching run and then over the runs (:func:`mean_curve_loss`)."""
    found = _matching(runs, match)
    return sum(mean_curve_loss(r) for r in found) / len(found)


def best_code_lr(runs: list[dict[str, Any]], method: str, init: str) -> float:
    """The learning rate whose grid runs of ``method`` from ``init`` had the lowest mean loss."""
    by_lr: dict[float, list[float]] = {}
    for r in runs:
        if r["method"] == method and r["init"] == init and r["steps"] == runs[0]["steps"]:
            by_lr.setdefault(r["lr"], []).append(mean_curve_loss(r))
    if not by_lr:
        raise ValueError(f"no grid run of {method!r} from {init!r}")
    return min(by_lr, key=lambda lr: sum(by_lr[lr]) / len(by_lr[lr]))


def best_reverse_lr(runs: list[dict[str, Any]], method: str) -> float:
    """The learning rate of ``method``'s seed-0 grid run with the lowest final held-out loss."""
    cands = [r for r in runs if r["method"] == method and r["seed"] == 0]
    if not cands:
        raise ValueError(f"no seed-0 run of {method!r}")
    steps = min(r["steps"] for r in cands)
    return min((r for r in cands if r["steps"] == steps), key=final_held_out)["lr"]


def reverse_start(seed: int) -> str:
    """The text a reversal soft prompt starts from: two written examples.

    >>> reverse_start(0)
    'iipxt:txpii;zqyum:muyqz;'
    """
    from course_lib.peft.task import example_text, random_words

    return "".join(example_text(w) for w in random_words(2, seed=100 + seed))


def run_code(spec: dict[str, Any], model: Any, tokenizer: Any, codes: list[dict]) -> dict:
    """Train one run of the ``code`` part and return its record."""
    from course_lib.peft.steer import SoftPrompt, code_queries, start_text, steer_code, written_code

    t0 = time.perf_counter()
    code = codes[spec["code"]]
    text = start_text(spec["init"], written_code(code, spec["seed"]), spec["seed"], tokenizer)
    soft = SoftPrompt(model, spec["method"], text)
    x, y = code_queries(code, tokenizer)
    curve = steer_code(soft, x, y, steps=spec["steps"], lr=spec["lr"], eval_every=5)
    return {
        **spec,
        "start": tokenizer.decode(text.tolist()),
        "trainable": soft.trainable_parameters(),
        "accuracy": curve["accuracy"][-1],
        "run_seconds": round(time.perf_counter() - t0, 1),
        "curve": curve,
    }


def run_reverse(spec: dict[str, Any], model: Any, tokenizer: Any) -> dict:
    """Train one run of the ``reverse`` part and return its record."""
    from course_lib.peft.compare import _curve
    from course_lib.peft.steer import SoftPrompt
    from course_lib.peft.task import fine_tune

    t0 = time.perf_counter()
    if spec["method"] == "full":
        trained = copy.deepcopy(model).requires_grad_(True)
        start = None
        n = sum(p.numel() for p in trained.parameters())
    else:
        start = reverse_start(spec["seed"])
        trained = SoftPrompt(model, spec["method"], torch.tensor(tokenizer.encode(start)))
        n = trained.trainable_parameters()
    curve = fine_tune(
        trained,
        steps=spec["steps"],
        lr=spec["lr"],
        seed=spec["seed"] + 1,
        eval_every=100,
        eval_examples=512,
    )
    return {
        **spec,
        "start": start,
        "trainable": n,
        "accuracy": round(curve.accuracy[-1], 4),
        "run_seconds": round(time.perf_counter() - t0, 1),
        "curve": _curve(curve),
    }


_KEY = ("method", "init", "lr", "seed", "code", "steps")


def study(
    part: str, out: Path, steps: int, long_steps: int, argv: list[str], resume: bool = False
) -> dict:
    """Run one part (its grid, then its best rates) and write the JSON after every run.

    With ``resume``, the runs already in ``out`` (same part and budgets) are kept and only the
    missing ones run; best-rate runs at a rate that is no longer the best are dropped.
    """
    from course_lib.gpt.incontext import load_incontext
    from course_lib.peft.steer import INITS, METHODS, make_codes

    torch.manual_seed(0)
    model, tokenizer, _ = load_incontext()
    t0 = time.perf_counter()
    command = [a for a in argv if a != "--resume"]
    record: dict[str, Any] = {
        "command": " ".join(["python -m course_lib.peft.elicit", *command]),
        "environment": "OMP_NUM_THREADS=1, torch.set_num_threads(1), CPU",
        "torch": torch.__version__,
        "description": __doc__.split("\n\n")[0].replace("\n", " "),
        "part": part,
        "settings": {
            "model": "data/gpt/incontext_char.pt (chapter 8), frozen",
            "optimiser": "Adam (no weight decay, constant learning rate)",
            "steps": steps,
            "long_steps": long_steps,
            "seconds": "wall clock, on a shared machine",
        },
        "complete": False,
        "runs": [],
    }
    done: dict[tuple, dict] = {}
    before = 0.0
    if resume and out.exists():
        old = json.loads(out.read_text())
        same = (old["part"], old["settings"]["steps"], old["settings"]["long_steps"])
        if same != (part, steps, long_steps):
            raise ValueError(f"{out} holds part {same[0]!r} with other budgets: cannot resume it")
        done = {tuple(r.get(k) for k in _KEY): r for r in old["runs"]}
        before = old.get("runtime_s", 0.0)
        record["sessions"] = old.get("sessions", 1) + 1
    codes = make_codes(N_CODES, seed=CODES_SEED)
    if part == "code":
        record["codes"] = codes
        record["settings"] |= {"batch": "all 16 letters of the code, every step", "eval_every": 5}
    else:
        record["settings"] |= {"batch": 32, "eval_every": 100, "eval_examples": 512}

    def save() -> None:
        record["runtime_s"] = round(before + time.perf_counter() - t0, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, out)

    def go(spec: dict[str, Any]) -> None:
        key = tuple(spec.get(k) for k in _KEY)
        if key in done:
            record["runs"].append(done[key])
            return
        if part == "code":
            r = run_code(spec, model, tokenizer, codes)
        else:
            r = run_reverse(spec, model, tokenizer)
        record["runs"].append(r)
        save()
        print(
            f"{r['method']:<7} {str(r['init']):<7} lr {r['lr']:<6g} seed {r['seed']} "
            f"code {r.get('code', '-')} steps {r['steps']} acc {r['accuracy']:.3f} "
            f"loss {r['curve']['loss'][-1]} {r['run_seconds']:.0f} s",
            flush=True,
        )

    if part == "code":
        for spec in code_runs(steps):
            go(spec)
        grid = list(record["runs"])
        for method in METHODS:
            for init in INITS:
                lr = best_code_lr(grid, method, init)
                for spec in code_runs(long_steps, lrs=(lr,)):
                    if spec["method"] == method and spec["init"] == init:
                        go(spec)
    else:
        for spec in reverse_runs(steps):
            go(spec)
        grid = [r for r in record["runs"] if r["method"] != "full"]
        for method in METHODS:
            lr = best_reverse_lr(grid, method)
            base = {"part": "reverse", "method": method, "init": "text", "lr": lr}
            go({**base, "seed": 1, "steps": steps})
            go({**base, "seed": 0, "steps": long_steps})
    record["complete"] = True
    save()
    return record


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m course_lib.peft.elicit")
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("out", help="where to write the JSON")
    parser.add_argument("--steps", type=int, default=None, help="the grid's steps per run")
    parser.add_argument("--long-steps", type=int, default=None, help="the best rates' steps")
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs already in OUT, run the rest"
    )
    args = parser.parse_args(argv)
    steps = args.steps or (CODE_STEPS if args.part == "code" else REVERSE_STEPS)
    long_steps = args.long_steps or (CODE_LONG if args.part == "code" else REVERSE_LONG)
    check_int(steps, "steps", low=1)
    check_int(long_steps, "long_steps", low=1)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    rec = study(args.part, Path(args.out), steps, long_steps, argv, resume=args.resume)
    print(f"wrote {args.out} in {rec['runtime_s']:.0f} s")
    return 0


def load_study(part: str, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The shipped part (``data/peft/elicit_<part>.json``) or the JSON at ``path``."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    if path is None:
        from course_lib.paths import data_path

        path = data_path("peft", f"elicit_{part}.json")
    return json.loads(Path(path).read_text())


if __name__ == "__main__":
    raise SystemExit(main())
