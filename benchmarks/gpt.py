"""GPT (Chapter 8): generation with and without a KV cache, and the baseline-vs-modern race.

1. **KV cache.** The baseline-shaped model (4 layers, width 128, context 64) generates 64 new
   characters greedily, with the cache and without it (the same tokens); best of 3.
2. **Race.** On the first 1.1 MB of the course's Shakespeare text (character level, 90/10
   split), the recipes of :data:`course_lib.gpt.race.ABLATION` (``baseline``, then ``modern``'s
   changes added one group at a time, ending at ``modern``) train *in turns* of 100 steps in one
   process (:func:`course_lib.gpt.race.race`), so every recipe sees the same machine load.
   ``baseline`` trains its 2000 steps and its final validation loss (on the whole validation
   split) is the target; every other recipe's time is its training seconds (evaluations
   excluded) at the first evaluation at or below the target. Target: ``modern`` at least 1.5x
   sooner than ``baseline``. (nanoGPT's tiny Shakespeare reaches about 1.89; our cut of the
   course's text, 77 characters, is a slightly different text, so the target is measured.)

``--quick`` shrinks both to a smoke test: a 1-layer model of width 32, 8 new tokens, and a race
of 9 steps on 20 KB.
"""

from __future__ import annotations

import dataclasses

import torch

from course_lib.gpt.config import RECIPES
from course_lib.gpt.data import shakespeare_file
from course_lib.gpt.model import GPT
from course_lib.gpt.sampling import generate
from course_lib.measure import timed

TITLE = "GPT: KV-cache generation and the baseline-vs-modern training race"
RATIO_TARGET = 1.5


def _row(task: str, variant: str, seconds: float, value: float, unit: str, note: str = "") -> dict:
    return {
        "task": task,
        "variant": variant,
        "seconds": round(seconds, 3),
        "value": round(value, 4),
        "unit": unit,
        "note": note,
    }


def run(quick: bool = False) -> list[dict]:
    from course_lib.gpt.pretrained import history
    from course_lib.gpt.race import ablation_recipes, race

    rows = []
    tiny = {"n_layers": 1, "d_model": 32, "batch_size": 4}
    base = dataclasses.replace(RECIPES["baseline"], **tiny) if quick else RECIPES["baseline"]
    model = GPT(base.model_config(77), seed=0).eval()
    new = 8 if quick else 64
    for use_cache in (True, False):
        best = min(
            timed(lambda uc=use_cache: generate(model, [0], new, temperature=0, use_cache=uc)).wall
            for _ in range(1 if quick else 3)
        )
        rows.append(
            _row("generate", "KV cache" if use_cache else "no cache", best, new / best, "tokens/s")
        )
    text = shakespeare_file().read_text(encoding="utf-8")
    recipes = ablation_recipes()
    kw = {"provisional_target": history()[-1]["val_loss"]}
    if quick:
        text = text[:20_000]
        recipes = [dataclasses.replace(r, **tiny, decay_steps=6, warmup_steps=2) for r in recipes]
        kw = {"provisional_target": 10.0, "chunk": 3, "max_steps": 9}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread measures the code, not the scheduler of a shared CPU
    try:
        result = race(text, recipes, **kw)
    finally:
        torch.set_num_threads(threads)
    for r in result["rows"]:
        rows.append(
            _row(
                "train to val loss",
                r["recipe"],
                r["seconds_to_target"] if r["seconds_to_target"] is not None else float("nan"),
                r["final_val_loss"],
                "val loss",
                f"step {r['reached_at_step']}, {r['seconds_per_step']} s/step, "
                f"target {result['target']}",
            )
        )
    torch.set_grad_enabled(True)
    return rows


def summary(rows: list[dict]) -> str:
    by = {(r["task"], r["variant"]): r for r in rows}
    cache = by[("generate", "no cache")]["seconds"] / by[("generate", "KV cache")]["seconds"]
    race = (
        by[("train to val loss", "baseline")]["seconds"]
        / by[("train to val loss", "modern")]["seconds"]
    )  # nan if modern did not reach the target
    return (
        f"KV cache: {cache:.2f}x the tokens/s of uncached generation.\n"
        f"Race: modern reached the target {race:.2f}x sooner than baseline (target {RATIO_TARGET}x; "
        f"meaningful only without --quick)."
    )
