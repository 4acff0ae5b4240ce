"""Race a training recipe against the course's ``baseline``: ``./course race RECIPE...``.

    ./course race recipes/fast.toml                 # 3 seeds, writes race_records/fast.json
    ./course race mine.toml fast --seeds 0 1 2 --threads 2 --out race_records
    ./course race mine.toml --nanogpt /tmp/nanogpt  # nanoGPT's own train.py raced too
    ./course race --verify race_records/mine.json   # re-run it: does it reproduce?
    ./course race --export recipes                  # the course's recipes as TOML files
    ./course leaderboard race_records/ --out board.html

RECIPE is a ``.toml`` or ``.py`` file of recipe fields (see ``recipes/``) or the name of one of
the course's recipes (baseline, modern, speedrun, fast). For every seed, the reference
(``baseline``) and each recipe train in the same process, in turns of 100 steps, on the
course's Shakespeare text; the target is the validation loss the reference ends with, and each
recipe's time is its training seconds until the first evaluation at or below it
(:func:`course_lib.gpt.race.race`). One record per recipe is written (``OUT/NAME.json``, the
format of :mod:`course_lib.gpt.records`): the speed-up with its spread over the seeds, the
time to the target, tokens per second, the machine, the software, the recipe's hash and this
command. ``--quick`` is a smoke test at a tiny size (the record says so; it is no race).

``--verify RECORD`` re-runs a record's recipe with its seeds and threads on this machine and
says whether the speed-up reproduces (the two ranges overlap); exit status 1 if not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: the smoke test's sizes (both sides): one layer, 32 wide, a 6-step reference
QUICK = {"n_layers": 1, "d_model": 32, "batch_size": 4, "decay_steps": 6, "warmup_steps": 2}


def run_races(
    recipes: list[Any],
    seeds: list[int],
    *,
    threads: int = 1,
    device: str = "cpu",
    autocast: str | None = None,
    quick: bool = False,
    chunk: int = 100,
    max_steps: int = 3000,
    log: Any = None,
    after_seed: Any = None,
) -> tuple[list[list[dict[str, Any]]], float]:
    """Each seed's race of ``recipes`` against the reference; per recipe, its runs (one per
    seed) in :func:`course_lib.gpt.records.make_record`'s form; and the wall minutes.

    ``after_seed(runs, minutes)``, if given, is called after every seed (so that a race
    stopped part-way leaves the records of the seeds it finished)."""
    import torch

    from course_lib.gpt.config import RECIPES
    from course_lib.gpt.data import shakespeare_file
    from course_lib.gpt.pretrained import history
    from course_lib.gpt.race import race
    from course_lib.gpt.records import REFERENCE

    torch.set_num_threads(threads)
    text = shakespeare_file().read_text(encoding="utf-8")
    reference = RECIPES[REFERENCE]
    # distinct names inside the race (an entrant may be the reference recipe itself)
    entrants = [dataclasses.replace(r, name=f"{i}:{r.name}") for i, r in enumerate(recipes)]
    provisional = history()[-1]["val_loss"]
    if quick:
        text, provisional = text[:20_000], 10.0
        reference = dataclasses.replace(reference, **QUICK)
        entrants = [dataclasses.replace(r, **QUICK) for r in entrants]
        chunk, max_steps = 3, 9
    runs: list[list[dict[str, Any]]] = [[] for _ in recipes]
    t0 = time.perf_counter()
    for seed in seeds:
        result = race(
            text,
            [reference, *entrants],
            provisional_target=provisional,
            chunk=chunk,
            max_steps=max_steps,
            seed=seed,
            log=log,
            device=device,
            autocast=autocast,
        )
        ref = result["rows"][0]
        for i, row in enumerate(result["rows"][1:]):
            reached = row["seconds_to_target"] is not None
            runs[i].append(
                {
                    "seed": seed,
                    "target": result["target"],
                    "reference_seconds": ref["seconds_to_target"],
                    "reference_steps": ref["reached_at_step"],
                    "reference_tokens_per_s": ref["tokens_per_s"],
                    "seconds": row["seconds_to_target"],
                    "steps": row["reached_at_step"],
                    "speed_up": row["speed_up"] if reached else None,
                    "tokens_per_s": row["tokens_per_s"],
                    "final_val_loss": row["final_val_loss"],
                    "reached": reached,
                }
            )
        if after_seed is not None:
            after_seed(runs, (time.perf_counter() - t0) / 60)
    return runs, (time.perf_counter() - t0) / 60


def race_nanogpt_too(
    nanogpt: str,
    recipes: list[Any],
    seeds: list[int],
    threads: int,
    quick: bool,
    device: str,
    autocast: str | None,
) -> dict[str, dict[str, Any]]:
    """nanoGPT's own train.py to its loss, then each recipe to it (benchmarks/nanogpt_race.py):
    per recipe, the speed-up over nanoGPT with its spread, and the shared facts."""
    from benchmarks.nanogpt_race import race_nanogpt

    result = race_nanogpt(
        nanogpt, tuple(seeds), threads, quick, tuple(recipes), device=device, autocast=autocast
    )
    ng = result["nanogpt"]
    out = {}
    for r in recipes:
        side = result["ours"][r.name]
        ups = [ng["seconds"] / x["seconds"] for x in side["runs"] if x["reached"]]
        ok = len(ups) == len(side["runs"])
        out[r.name] = {
            "target_val_loss": result["target_val_loss"],
            "nanogpt_seconds": ng["seconds"],
            "nanogpt_command": ng["command"],
            "speed_up": round(statistics.mean(ups), 3) if ok else None,
            "speed_up_spread": round((max(ups) - min(ups)) / 2, 3) if ok else None,
            "runs": side["runs"],
        }
    return out


def _command(argv: list[str]) -> str:
    return "./course race " + " ".join(shlex.quote(a) for a in argv)


def race_command(args: argparse.Namespace, argv: list[str]) -> int:
    from course_lib.gpt.records import load_recipe, machine, make_record

    recipes = [load_recipe(spec) for spec in args.recipes]
    names = [r.name for r in recipes]
    if len(set(names)) != len(names):
        raise SystemExit(f"race: two recipes share a name ({names}); rename one (name = ...)")
    for r in recipes:
        if r.context_length != 64:
            raise SystemExit(
                f"race: {r.name} sets context_length = {r.context_length}: the race's "
                "evaluation reads 64-token windows and may not change (README, 'The race')"
            )
    if len(args.seeds) < 3 and not args.quick:
        print(f"note: {len(args.seeds)} seed(s): the record will be flagged (3 or more count)")
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None

    def log(rec: dict[str, Any]) -> None:
        if not args.silent:
            print(json.dumps(rec), flush=True)

    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    info = machine(args.device)

    def write(runs: list[list[dict[str, Any]]], minutes: float, nano: dict[str, Any]) -> list:
        load_now = os.getloadavg() if hasattr(os, "getloadavg") else None
        written = []
        for r, rr, spec in zip(recipes, runs, args.recipes, strict=True):
            extra: dict[str, Any] = {
                "load_average": [
                    None if load_before is None else round(load_before[0], 2),
                    None if load_now is None else round(load_now[0], 2),
                ],
                "wall_minutes": round(minutes, 1),
                "autocast": args.autocast,
            }
            if r.name in nano:
                extra["nanogpt"] = nano[r.name]
            record = make_record(
                r,
                rr,
                machine_info=info,
                command=_command(argv),
                recipe_file=spec if Path(spec).is_file() else None,
                quick=args.quick,
                entrant=args.name,
                extra=extra,
            )
            path = out / f"{r.name}.json"
            path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            written.append((record, path))
        return written

    runs, minutes = run_races(
        recipes,
        args.seeds,
        threads=args.threads,
        device=args.device,
        autocast=args.autocast,
        quick=args.quick,
        log=log,
        after_seed=lambda runs, minutes: write(runs, minutes, {}),
    )
    nano = {}
    if args.nanogpt:
        nano = race_nanogpt_too(
            args.nanogpt, recipes, args.seeds, args.threads, args.quick, args.device, args.autocast
        )
    for record, path in write(runs, minutes, nano):
        print(_summary_line(record, path))
    return 0


def _summary_line(rec: dict[str, Any], path: Path) -> str:
    up = rec["speed_up"]
    score = (
        "did not reach the target"
        if up is None
        else (
            f"{up:.2f}x ± {rec['speed_up_spread']:.2f} over baseline "
            f"({rec['seconds_to_target']:.1f} ± {rec['seconds_spread']:.1f} s to "
            f"{rec['target_val_loss']:.4f})"
        )
    )
    line = f"{rec['recipe_name']}: {score} [{rec['track']}] -> {path}"
    if rec.get("nanogpt", {}).get("speed_up") is not None:
        ng = rec["nanogpt"]
        line += f"; {ng['speed_up']:.2f}x ± {ng['speed_up_spread']:.2f} over nanoGPT"
    for flag in rec["flags"]:
        line += f"\n  flag: {flag}"
    return line


def verify_command(args: argparse.Namespace, argv: list[str]) -> int:
    from course_lib.gpt.config import Recipe
    from course_lib.gpt.records import audit, compare, machine, make_record, track

    path = Path(args.verify)
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise SystemExit(f"race --verify: cannot read {path}: {err}") from None
    flags = audit(old)
    for flag in flags:
        print(f"the record: {flag}")
    recipe = Recipe.from_dict(old["recipe"])
    m_old = old.get("machine", {})
    threads = int(m_old.get("threads") or 1)
    device = str(m_old.get("device") or "cpu")
    runs, minutes = run_races(
        [recipe],
        list(old.get("seeds") or [0, 1, 2]),
        threads=threads,
        device=device,
        autocast=old.get("autocast"),
        quick=bool(old.get("quick")),
        log=None if args.silent else (lambda rec: print(json.dumps(rec), flush=True)),
    )
    info = machine(device)  # run_races has set the threads
    new = make_record(
        recipe,
        runs[0],
        machine_info=info,
        command=_command(argv),
        quick=bool(old.get("quick")),
        entrant=old.get("entrant"),
        extra={"verifies": str(path), "wall_minutes": round(minutes, 1)},
    )
    verdict = compare(old, new)
    new["verdict"] = verdict
    if track(info) != old.get("track", track(m_old)):
        print(f"note: re-run on another track ({track(info)}; the record: {old.get('track')})")
    if args.out:
        Path(args.out).write_text(json.dumps(new, indent=1) + "\n", encoding="utf-8")
    word = "reproduces" if verdict["reproduces"] else "does NOT reproduce"
    print(
        f"{path}: {word}: recorded {verdict['old']}, re-run {verdict['new']} "
        f"(the ranges {'overlap' if verdict['reproduces'] else 'do not overlap'})"
    )
    return 0 if verdict["reproduces"] and not any("more than its seeds" in f for f in flags) else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="./course race",
        description="Race recipes against the course's baseline; write one record per recipe.",
        epilog="Rules: README, 'The race'.",
    )
    parser.add_argument("recipes", nargs="*", help="recipe files (.toml, .py) or course names")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or mps (both sides)")
    parser.add_argument("--autocast", choices=["bfloat16"], default=None, help="both sides")
    parser.add_argument("--out", default="race_records", help="folder for the records")
    parser.add_argument("--name", default=None, help="the entrant's name on the board")
    parser.add_argument("--nanogpt", default=None, help="a nanoGPT checkout: race it too")
    parser.add_argument("--quick", action="store_true", help="a smoke test at a tiny size")
    parser.add_argument("--silent", action="store_true", help="no per-evaluation lines")
    parser.add_argument("--verify", default=None, metavar="RECORD", help="re-run a record")
    parser.add_argument("--export", default=None, metavar="DIR", help="write the course's recipes")
    args = parser.parse_args(argv)
    from course_lib.gpt.records import export_recipes

    try:
        if args.export:
            for p in export_recipes(args.export):
                print(p)
            return 0
        if args.verify:
            return verify_command(args, argv)
        if not args.recipes:
            parser.error("name at least one recipe file (or --verify RECORD, --export DIR)")
        return race_command(args, argv)
    except (FileNotFoundError, ValueError) as err:
        print(f"race: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
