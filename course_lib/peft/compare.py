"""The chapter's measured comparison: every method fine-tunes chapter 8's GPT to reverse words.

One run per method, all on the same batches (:func:`course_lib.peft.task.fine_tune`, Adam, batch
32), from chapter 8's shipped pre-trained Shakespeare GPT (:func:`course_lib.peft.task.load_base`):

* ``frozen``: the pre-trained model, not trained (the baseline);
* ``full``: every weight trains (learning rate 1e-3);
* ``lora r=R`` for each rank R: LoRA on all four matrices of every block (``w_qkv``, ``w_o``,
  ``w_1``, ``w_2``; GPT-2's ``c_attn``, ``attn.c_proj``, ``mlp.c_fc``, ``mlp.c_proj``) with
  ``alpha = 2 R`` (learning rate 3e-3);
* ``lora q,v r=4``: the LoRA paper's choice, queries and values only;
* ``qlora r=4``: LoRA r=4 over NF4 frozen matrices computed in bfloat16 (ours), and
  ``qlora r=4 (peft + bitsandbytes)``, the same with ``bitsandbytes`` and ``peft`` from the same
  starting adapters (the reference; its time and memory are not measured);
* ``prompt`` and ``prefix``: 8 virtual tokens (learning rate 3e-2).

For each: trainable parameters; bytes of frozen weights, trained weights, gradients and Adam
state, counted from the tensors after a step (:func:`course_lib.peft.counting.measured_memory`);
seconds per step (best of five rounds, the methods interleaved, one thread); the held-out
exact-match accuracy curve. Run::

    python -m course_lib.peft.compare data/peft/comparison.json

The JSON records the command, the settings and the runtime. Single-threaded (``OMP_NUM_THREADS=1``
and ``torch.set_num_threads(1)``), the shipped file took about 7 minutes of CPU time on the
course's machine (longer in wall-clock time while other jobs shared its two cores).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from course_lib.checks import check_int
from course_lib.peft.model import AdaptedGPT
from course_lib.peft.task import (
    HELD_OUT_SEED,
    N_LETTERS,
    accuracy,
    fine_tune,
    load_base,
    measure_step,
    reverse_examples,
    training_step,
)

__all__ = ["ALL", "RANKS", "by_name", "compare", "load_comparison", "main", "methods"]

ALL = ("w_qkv", "w_o", "w_1", "w_2")
RANKS = (1, 2, 4, 8)
REFERENCE = "qlora r=4 (peft + bitsandbytes)"


def methods(ranks: tuple[int, ...] = RANKS) -> list[dict[str, Any]]:
    """The runs: name, method, rank, learning rate and the ``AdaptedGPT`` arguments.

    >>> [m["name"] for m in methods(ranks=(2,))]
    ['full', 'lora r=2', 'lora q,v r=4', 'qlora r=4', 'prompt', 'prefix']
    """
    out: list[dict[str, Any]] = [
        {"name": "full", "method": "full", "rank": None, "lr": 1e-3, "kw": {"train_base": True}}
    ]
    for r in ranks:
        kw = {"targets": ALL, "rank": r, "alpha": 2.0 * r}
        out.append({"name": f"lora r={r}", "method": "lora", "rank": r, "lr": 3e-3, "kw": kw})
    qv = {"targets": ("w_q", "w_v"), "rank": 4, "alpha": 8.0}
    out.append({"name": "lora q,v r=4", "method": "lora", "rank": 4, "lr": 3e-3, "kw": qv})
    q = {"targets": ALL, "rank": 4, "alpha": 8.0, "nf4": True}
    out.append({"name": "qlora r=4", "method": "qlora", "rank": 4, "lr": 3e-3, "kw": q})
    for kind in ("prompt", "prefix"):
        kw = {f"{kind}_tokens": 8}
        out.append({"name": kind, "method": kind, "rank": None, "lr": 3e-2, "kw": kw})
    return out


def _curve(c: Any) -> dict[str, list]:
    return {
        "steps": list(c.steps),
        "loss": [None if v != v else round(v, 4) for v in c.loss],  # NaN at step 0
        "accuracy": [round(a, 4) for a in c.accuracy],
        **({"held_out_loss": [round(v, 4) for v in c.held_out_loss]} if c.held_out_loss else {}),
    }


def _reference_qlora(base: Any, steps: int, batch: int, eval_every: int, n_eval: int) -> dict:
    """peft's LoRA over bitsandbytes' NF4 GPT-2, started from our ``qlora r=4`` adapters."""
    from course_lib.peft.hf import Logits, to_hf_qlora

    ref = to_hf_qlora(base, rank=4, alpha=8.0)
    start = AdaptedGPT(base, targets=ALL, rank=4, alpha=8.0, nf4=True)  # what ours starts from
    hf_names = {
        "w_qkv": "attn.c_attn",
        "w_o": "attn.c_proj",
        "w_1": "mlp.c_fc",
        "w_2": "mlp.c_proj",
    }
    with torch.no_grad():
        for layer, adapters in enumerate(start.adapters):
            for target, hf_name in hf_names.items():
                sub = ref.get_submodule(f"base_model.model.transformer.h.{layer}.{hf_name}")
                sub.lora_A["default"].weight.copy_(adapters[target].A)
                sub.lora_B["default"].weight.copy_(adapters[target].B)
    n = sum(p.numel() for p in ref.parameters() if p.requires_grad)
    t0 = time.perf_counter()
    curve = fine_tune(
        Logits(ref), steps=steps, batch=batch, lr=3e-3, eval_every=eval_every, eval_examples=n_eval
    )
    return {
        "name": REFERENCE,
        "method": "qlora",
        "rank": 4,
        "lr": 3e-3,
        "trainable": n,
        "reference": True,
        "run_seconds": round(time.perf_counter() - t0, 1),
        "accuracy": round(curve.accuracy[-1], 4),
        "curve": _curve(curve),
    }


def compare(
    steps: int = 1000,
    batch: int = 32,
    eval_every: int = 100,
    eval_examples: int = 512,
    ranks: tuple[int, ...] = RANKS,
    repeats: int = 5,
    reference: bool = True,
    log: bool = False,
) -> dict[str, Any]:
    """Run every method of :func:`methods` (and the bitsandbytes reference); return the record."""
    steps = check_int(steps, "steps", low=1)
    torch.manual_seed(0)
    base, _ = load_base()
    held_out = reverse_examples(eval_examples, seed=HELD_OUT_SEED)
    from course_lib.block.counting import count_parameters

    n_all = count_parameters(base.config)
    runs: list[dict[str, Any]] = [
        {
            "name": "frozen", "method": "frozen", "rank": None, "lr": None, "trainable": 0,
            "frozen_bytes": 4 * n_all, "trained_bytes": 0, "gradient_bytes": 0,
            "optimiser_bytes": 0, "seconds_per_step": None, "peak_step_bytes": None,
            "accuracy": round(accuracy(base, held_out), 4), "curve": None,
        }
    ]  # fmt: skip
    trained: dict[str, AdaptedGPT] = {}
    for spec in methods(ranks):
        t0 = time.perf_counter()
        model = AdaptedGPT(base, seed=0, **spec["kw"])
        curve = fine_tune(
            model,
            steps=steps,
            batch=batch,
            lr=spec["lr"],
            seed=1,
            eval_every=eval_every,
            eval_examples=eval_examples,
        )
        run_seconds = time.perf_counter() - t0
        trained[spec["name"]] = model
        m = measure_step(model, batch=batch, repeats=1)  # memory; the time is measured below
        runs.append(
            {
                "name": spec["name"],
                "method": spec["method"],
                "rank": spec["rank"],
                "lr": spec["lr"],
                "targets": list(spec["kw"].get("targets", ())),
                "trainable": model.trainable_parameters(),
                "frozen_bytes": int(m["frozen"]),
                "trained_bytes": int(m["trained"]),
                "gradient_bytes": int(m["gradients"]),
                "optimiser_bytes": int(m["optimiser"]),
                "seconds_per_step": None,
                "peak_step_bytes": int(m["peak step bytes"]),
                "run_seconds": round(run_seconds, 1),
                "accuracy": round(curve.accuracy[-1], 4),
                "curve": _curve(curve),
            }
        )
        if log:
            r = runs[-1]
            print(f"{r['name']:<14} acc {r['accuracy']:.3f}  {r['run_seconds']:6.1f} s", flush=True)
    # Time every method's step in interleaved rounds (full, lora r=1, ..., prefix, full, ...) and
    # keep each one's best: a machine whose load changes during the script slows all alike.
    import copy

    from course_lib.measure import best_times

    fns = {n: training_step(copy.deepcopy(m).train(), batch) for n, m in trained.items()}
    for name, seconds in best_times(fns, rounds=repeats).items():
        next(r for r in runs if r["name"] == name)["seconds_per_step"] = float(f"{seconds:.4g}")
    if reference:
        runs.append(_reference_qlora(base, steps, batch, eval_every, eval_examples))
        if log:
            print(f"{REFERENCE} acc {runs[-1]['accuracy']:.3f}", flush=True)
    return {
        "description": (
            "Chapter 13: chapter 8's pre-trained Shakespeare GPT (data/gpt/shakespeare_char.pt) "
            "fine-tuned to reverse random lowercase words ('stone:enots;'), one run per method on "
            "the same batches; exact-match accuracy of the answer letters on held-out words"
        ),
        "settings": {
            "steps": steps,
            "batch": batch,
            "eval_every": eval_every,
            "eval_examples": eval_examples,
            "n_letters": N_LETTERS,
            "optimiser": "Adam (no weight decay, constant learning rate)",
            "lora_alpha": "2 r",
            "virtual_tokens": 8,
            "batch_seeds": "1_000_000 + step",
            "held_out_seed": HELD_OUT_SEED,
            "adapter_seed": 0,
            "timing": f"best of {repeats} interleaved rounds of one step per method, one thread",
        },
        "base_parameters": n_all,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m course_lib.peft.compare")
    parser.add_argument("out", help="where to write the JSON")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-examples", type=int, default=512)
    parser.add_argument("--ranks", type=int, nargs="+", default=list(RANKS))
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per method")
    parser.add_argument("--no-reference", action="store_true", help="skip peft + bitsandbytes")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    record = compare(
        steps=args.steps,
        batch=args.batch,
        eval_every=args.eval_every,
        eval_examples=args.eval_examples,
        ranks=tuple(args.ranks),
        repeats=args.repeats,
        reference=not args.no_reference,
        log=True,
    )
    record = {
        "command": " ".join(["python -m course_lib.peft.compare", *argv]),
        "environment": "OMP_NUM_THREADS=1, torch.set_num_threads(1), CPU",
        "torch": torch.__version__,
        "runtime_s": round(time.perf_counter() - t0, 1),
        **record,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out} in {record['runtime_s']:.0f} s")
    return 0


def load_comparison(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The shipped comparison (``data/peft/comparison.json``) or the JSON at ``path``."""
    if path is None:
        from course_lib.paths import data_path

        path = data_path("peft", "comparison.json")
    return json.loads(Path(path).read_text())


def by_name(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The runs of a comparison keyed by name: ``by_name(rec)["lora r=4"]["accuracy"]``."""
    return {r["name"]: r for r in record["runs"]}


if __name__ == "__main__":
    raise SystemExit(main())
