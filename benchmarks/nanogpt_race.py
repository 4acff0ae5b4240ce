"""The course's ``fast`` recipe (its fastest) against nanoGPT's own CPU recipe, to the same loss.

    python -m benchmarks.nanogpt_race --nanogpt PATH [--seeds 0 1] [--threads 1] [--out JSON]
    python -m benchmarks.nanogpt_race --nanogpt PATH --device cuda --autocast bfloat16 [--compile]
    python -m benchmarks.run nanogpt_race --nanogpt PATH

1. The race corpus (the course's Shakespeare cut, character level, 90/10 split, the same ids as
   the course's tokenizer) is written in nanoGPT's ``shakespeare_char`` format (``train.bin``,
   ``val.bin`` as uint16, ``meta.pkl``) into a temporary folder.
2. nanoGPT's own ``train.py`` runs as a subprocess with its README's CPU settings (device cpu,
   compile off, context 64, batch 12, 4 layers, 4 heads, width 128, 2000 iterations, the
   learning rate decayed over 2000, dropout 0), the same number of threads as ours, and one
   evaluation at 2000 so that it saves its final checkpoint. Its training time is the sum of
   its own per-iteration times (``iter N: ... time T ms``) over the 2000 optimiser steps; the
   iteration that also ran an evaluation (iteration 0) counts at the median iteration time.
3. Its final checkpoint's loss on the *whole* validation split is measured by the course's
   evaluator (:func:`course_lib.gpt.train.validation_loss`), which is the target.
4. The course's ``fast`` recipe (and any other of ``--recipes``) trains, for each seed, until
   that evaluator reaches the target (evaluated every 25 steps, evaluations not timed), in the
   same process and session.

The table gives each side's time to the target, its steps, tokens per second and model FLOPs
utilisation: FLOPs per token ``6 N + 12 n_layers d L`` (Kaplan et al. 2020, section 2.1: forward
and backward through N parameters, plus attention's scores and weighted sums, causal mask not
discounted), N counting every parameter except the position table; utilisation against the
peak of a 2048 x 2048 float32 matrix product measured in the same process with the same threads.

On a GPU (``--device cuda``) both sides run there with the same switches: ``--autocast
bfloat16`` is nanoGPT's ``--dtype=bfloat16`` and the course's ``Trainer(autocast="bfloat16")``
(otherwise both run float32), ``--compile`` is nanoGPT's ``--compile=True`` and the course's
``recipe.compile``. The target is still measured in float32 on the CPU, and the course's
evaluations for the race are float32 too, so a bfloat16 forward cannot move the finish line.
On a GPU, or with ``--compile``, the course's first step counts at its median step time, as
nanoGPT's first iteration always does (for its evaluation): it holds CUDA's lazy start-up
(library handles, first kernel loads) and any compilation, whose seconds are reported beside
(``warmup_s``; on the CPU, eager, every step is counted as measured). The peak is then an
8192 x 8192 product on the GPU in the dtype the models compute in (bfloat16 or float32).

nanoGPT is not a dependency and none of its code is in this repository: pass a checkout
(``git clone https://github.com/karpathy/nanoGPT``).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

TITLE = "The fast recipe against nanoGPT's CPU recipe, to nanoGPT's validation loss"
RATIO_TARGET = 3.0
#: the environment variable ``python -m benchmarks.run`` reads the checkout's path from
NEEDS = "NANOGPT"

HOW_TO_GET = (
    "this benchmark needs a nanoGPT checkout: `git clone https://github.com/karpathy/nanoGPT "
    "/tmp/nanogpt` (or export a local mirror: `git --git-dir=MIRROR archive HEAD | tar -x -C "
    "/tmp/nanogpt`), then pass --nanogpt /tmp/nanogpt (or set NANOGPT=/tmp/nanogpt)"
)

#: nanoGPT's README's CPU settings for shakespeare_char, with one evaluation at the end
NANOGPT_SETTINGS = {
    "device": "cpu",
    "compile": "False",
    "eval_iters": "20",
    "log_interval": "1",
    "block_size": "64",
    "batch_size": "12",
    "n_layer": "4",
    "n_head": "4",
    "n_embd": "128",
    "max_iters": "2000",
    "lr_decay_iters": "2000",
    "dropout": "0.0",
    "eval_interval": "2000",
    "always_save_checkpoint": "True",
}

_ITER = re.compile(r"^iter (\d+): loss ([0-9.naif]+), time ([0-9.]+)ms")


# ------------------------------------------------------------------------------ the corpus
def export_corpus(text: str, folder: str | os.PathLike) -> dict[str, Any]:
    """Write ``text`` in nanoGPT's shakespeare_char format; returns the tokenizer and the splits.

    >>> with tempfile.TemporaryDirectory() as d:
    ...     out = export_corpus("abcabcabca", d)
    ...     sorted(p.name for p in Path(d).iterdir()), out["train_ids"].tolist()
    (['meta.pkl', 'train.bin', 'val.bin'], [0, 1, 2, 0, 1, 2, 0, 1, 2])
    """
    from course_lib.gpt.data import split_ids
    from course_lib.gpt.train import make_tokenizer

    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty str")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer("char", text)
    if tok.vocab_size > 65535:
        raise ValueError(f"nanoGPT stores ids as uint16; this text has {tok.vocab_size} characters")
    train_ids, val_ids = split_ids(tok.encode(text))
    np.asarray(train_ids, dtype=np.uint16).tofile(folder / "train.bin")
    np.asarray(val_ids, dtype=np.uint16).tofile(folder / "val.bin")
    itos = {i: tok.decode([i]) for i in range(tok.vocab_size)}
    meta = {"vocab_size": tok.vocab_size, "itos": itos, "stoi": {c: i for i, c in itos.items()}}
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)
    return {"tokenizer": tok, "train_ids": train_ids, "val_ids": val_ids}


# ------------------------------------------------------------------------------ nanoGPT's log
def parse_log(log: str, steps: int, eval_iters: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """nanoGPT's training seconds over optimiser steps 0..steps-1, from its per-iteration lines.

    The iterations in ``eval_iters`` also ran an evaluation (inside their time): they count at
    the median of the others.

    >>> log = "step 0: train loss 4.2, val loss 4.2\\n" + "\\n".join(
    ...     f"iter {i}: loss 2.0, time {900 if i == 0 else 100}.00ms, mfu 1.00%" for i in range(4))
    >>> parse_log(log, 3)["seconds"]
    0.3
    """
    times: dict[int, float] = {}
    for line in log.splitlines():
        m = _ITER.match(line.strip())
        if m:
            times[int(m.group(1))] = float(m.group(3)) / 1000
    missing = [i for i in range(steps) if i not in times]
    if missing:
        raise ValueError(
            f"nanoGPT's log has no 'iter N: ... time T ms' line for {len(missing)} of the "
            f"{steps} steps (first missing: {missing[0]}); was it run with --log_interval=1?"
        )
    plain = [times[i] for i in range(steps) if i not in eval_iters]
    median = statistics.median(plain) if plain else 0.0
    seconds = sum(plain) + median * sum(1 for i in eval_iters if i < steps)
    return {"steps": steps, "seconds": round(seconds, 3), "median_step_s": round(median, 5)}


def nanogpt_settings(
    steps: int = 2000, device: str = "cpu", autocast: str | None = None, compile: bool = False
) -> dict[str, str]:
    """nanoGPT's command-line settings: its README's CPU ones, on ``device`` with our switches.

    >>> s = nanogpt_settings(500, "cuda", "bfloat16", True)
    >>> s["device"], s["dtype"], s["compile"], s["max_iters"], s["batch_size"]
    ('cuda', 'bfloat16', 'True', '500', '12')
    >>> nanogpt_settings()["dtype"]
    'float32'
    """
    settings = dict(NANOGPT_SETTINGS, max_iters=str(steps), lr_decay_iters=str(steps))
    settings.update(
        eval_interval=str(steps), device=device, dtype=autocast or "float32", compile=str(compile)
    )
    return settings


def run_nanogpt(
    nanogpt: str | os.PathLike,
    data_dir: Path,
    out_dir: Path,
    threads: int,
    steps: int = 2000,
    device: str = "cpu",
    autocast: str | None = None,
    compile: bool = False,
) -> dict[str, Any]:
    """Run nanoGPT's train.py (its README's CPU settings, on ``device``) on the exported corpus."""
    nanogpt = Path(nanogpt)
    if not (nanogpt / "train.py").is_file():
        raise FileNotFoundError(f"{nanogpt} has no train.py; {HOW_TO_GET}")
    settings = nanogpt_settings(steps, device, autocast, compile)
    args = [f"--{k}={v}" for k, v in settings.items()]
    # data_dir is os.path.join('data', dataset): an absolute dataset path is used as it is
    args += [f"--dataset={data_dir}", f"--out_dir={out_dir}"]
    cmd = [sys.executable, "train.py", "config/train_shakespeare_char.py", *args]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=nanogpt, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"nanoGPT's train.py failed:\n{proc.stderr[-2000:]}")
    timing = parse_log(proc.stdout, steps)
    return {
        **timing,
        "first_iter_s": _first_iter_s(proc.stdout),
        "wall_s": round(wall, 1),
        "command": " ".join(cmd[1:]),
    }


def _first_iter_s(log: str) -> float | None:
    """The time nanoGPT logged for iteration 0 (its evaluation and, compiled, its compilation).

    >>> _first_iter_s("iter 0: loss 4.2, time 900.00ms, mfu -100.00%\\niter 1: loss 4.1, time 9ms")
    0.9
    """
    for line in log.splitlines():
        m = _ITER.match(line.strip())
        if m and int(m.group(1)) == 0:
            return float(m.group(3)) / 1000
    return None


def nanogpt_val_loss(
    nanogpt: str | os.PathLike, ckpt: Path, val_ids: torch.Tensor, context_length: int
) -> dict[str, Any]:
    """Load nanoGPT's checkpoint with nanoGPT's own model code; the course's evaluator measures it."""
    import importlib.util

    from course_lib.gpt.train import validation_loss

    spec = importlib.util.spec_from_file_location("nanogpt_model", Path(nanogpt) / "model.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{nanogpt} has no model.py; {HOW_TO_GET}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    model = module.GPT(module.GPTConfig(**state["model_args"]))
    weights = {k.removeprefix("_orig_mod."): v for k, v in state["model"].items()}
    model.load_state_dict(weights)
    model.eval()
    # with targets, nanoGPT's forward returns the logits of every position (B, L, V)
    loss = validation_loss(lambda x: model(x, x)[0], val_ids, context_length)
    n_params = sum(p.numel() for p in model.parameters())
    n_pos = model.transformer.wpe.weight.numel()
    return {"val_loss": loss, "iter_num": int(state["iter_num"]), "params_no_pos": n_params - n_pos}


# ------------------------------------------------------------------------------ FLOPs
def flops_per_token(params_no_pos: int, n_layers: int, d_model: int, context_length: int) -> int:
    """Training FLOPs per token: ``6 N + 12 n_layers d L`` (forward and backward).

    >>> flops_per_token(1000, 2, 8, 4)
    6768
    """
    return 6 * params_no_pos + 12 * n_layers * d_model * context_length


def peak_flops(
    n: int | None = None, repeats: int = 3, device: str = "cpu", dtype: str = "float32"
) -> float:
    """The best FLOP/s of an (n, n) @ (n, n) product: on the CPU with the current threads
    (n = 2048), on a GPU in ``dtype`` (n = 8192), each product waited for."""
    from course_lib.measure import synchronize

    n = n or (2048 if device == "cpu" else 8192)
    a = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
    b = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
    a @ b  # warm-up
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


# ------------------------------------------------------------------------------ our side
def train_to_target(
    recipe: Any,
    tok: Any,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    target: float,
    seed: int,
    eval_every: int = 25,
    max_steps: int = 3000,
    device: str = "cpu",
    autocast: str | None = None,
) -> dict[str, Any]:
    """Train ``recipe`` until the course's evaluator (float32) is at or below ``target``.

    On a GPU or with ``recipe.compile`` the first step, which holds the start-up or the
    compilation, counts at the median step time (``warmup_s`` says what it cost beyond that)."""
    from course_lib.gpt.model import GPT
    from course_lib.gpt.train import Trainer, validation_loss

    model = GPT(recipe.model_config(tok.vocab_size), seed=seed).to(device)
    t = Trainer(model, recipe, train_ids, val_ids, seed=seed, autocast=autocast)
    val = float("inf")
    times: list[float] = []
    while t.step_count < max_steps:
        for _ in range(eval_every):
            before = t.seconds
            t.step()
            times.append(t.seconds - before)
        model.eval()
        val = validation_loss(
            lambda x: model(x).float(), val_ids, recipe.context_length, t.device
        )  # float32 whatever the training's autocast: the target was measured so
        if val <= target:
            break
    warmup_s = 0.0
    if (recipe.compile or t.device.type != "cpu") and len(times) > 1:
        median = statistics.median(times[1:])
        warmup_s = times[0] - median
        times[0] = median
    seconds = sum(times)
    return {
        "seed": seed,
        "steps": t.step_count,
        "seconds": round(seconds, 3),
        "warmup_s": round(warmup_s, 2),
        "val_loss": round(val, 4),
        "reached": val <= target,
        "tokens_per_s": round(t.tokens / seconds, 1),
        "params_no_pos": sum(p.numel() for n, p in model.named_parameters() if n != "pos_emb"),
    }


def _row(name: str, side: dict[str, Any], peak: float, reference_s: float) -> dict[str, Any]:
    runs = side["runs"]
    secs = [r["seconds"] for r in runs if r["reached"]]
    steps = [r["steps"] for r in runs if r["reached"]]
    tps = statistics.mean(r["tokens_per_s"] for r in runs)
    mean = statistics.mean(secs) if secs else float("nan")
    half = (max(secs) - min(secs)) / 2 if secs else float("nan")
    return {
        "recipe": name,
        "seeds": f"{len(secs)}/{len(runs)} reached",
        "time_to_target_s": f"{mean:.1f} ± {half:.1f}",
        "steps": f"{statistics.mean(steps):.0f} ± {(max(steps) - min(steps)) / 2:.0f}"
        if steps
        else "-",
        "tokens_per_s": round(tps),
        "mfu_percent": round(100 * tps * side["flops_per_token"] / peak, 2),
        "speed_up": round(reference_s / mean, 3) if secs else float("nan"),
    }


def table(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per contestant: time to the target (mean ± half the range over seeds), steps,
    tokens/s and utilisation.

    >>> r = {"peak_flops": 1e10, "nanogpt": {"seconds": 100.0, "steps": 2000, "tokens_per_s": 1536.0,
    ...      "flops_per_token": 1e6}, "ours": {"fast": {"flops_per_token": 1e6, "runs": [
    ...      {"seconds": 30.0, "steps": 500, "tokens_per_s": 1000.0, "reached": True},
    ...      {"seconds": 34.0, "steps": 550, "tokens_per_s": 1100.0, "reached": True}]}}}
    >>> [row["time_to_target_s"] for row in table(r)], table(r)[1]["speed_up"]
    (['100.0', '32.0 ± 2.0'], 3.125)
    """
    peak = result["peak_flops"]
    ng = result["nanogpt"]
    where = result.get("device", "cpu")
    label = "README CPU" if where == "cpu" else f"README, {where}"
    if result.get("autocast"):
        label += f", {result['autocast']}"
    if result.get("compile"):
        label += ", compiled"
    rows = [
        {
            "recipe": f"nanoGPT ({label})",
            "seeds": "-",
            "time_to_target_s": f"{ng['seconds']:.1f}",
            "steps": str(ng["steps"]),
            "tokens_per_s": round(ng["tokens_per_s"]),
            "mfu_percent": round(100 * ng["tokens_per_s"] * ng["flops_per_token"] / peak, 2),
            "speed_up": 1.0,
        }
    ]
    for name, side in result["ours"].items():
        rows.append(_row(name, side, peak, ng["seconds"]))
    return rows


def race_nanogpt(
    nanogpt: str | os.PathLike,
    seeds: tuple[int, ...] = (0, 1),
    threads: int = 1,
    quick: bool = False,
    recipes: tuple[Any, ...] = ("fast",),
    eval_every: int = 25,
    device: str = "cpu",
    autocast: str | None = None,
    compile: bool = False,
) -> dict[str, Any]:
    """The whole benchmark (see the module's docstring); returns a JSON-ready result."""
    import dataclasses

    from course_lib.gpt.config import RECIPES
    from course_lib.gpt.data import shakespeare_file

    torch.set_num_threads(threads)
    text = shakespeare_file().read_text(encoding="utf-8")
    steps = 2000
    if quick:
        text, steps = text[:50_000], 20
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="nanogpt_race_") as tmp:
        data_dir, out_dir = Path(tmp) / "race_char", Path(tmp) / "out"
        corpus = export_corpus(text, data_dir)
        ng = run_nanogpt(nanogpt, data_dir, out_dir, threads, steps, device, autocast, compile)
        ev = nanogpt_val_loss(nanogpt, out_dir / "ckpt.pt", corpus["val_ids"], 64)
    target = round(ev["val_loss"], 4)
    load_mid = os.getloadavg()
    ng.update(
        val_loss=target,
        checkpoint_iter=ev["iter_num"],
        tokens_per_s=steps * 12 * 64 / ng["seconds"],
        flops_per_token=flops_per_token(ev["params_no_pos"], 4, 128, 64),
    )
    ours = {}
    for name in recipes:  # a name in RECIPES or a Recipe (./course race --nanogpt)
        recipe = dataclasses.replace(
            RECIPES[name] if isinstance(name, str) else name, compile=compile
        )
        name = recipe.name
        runs = [
            train_to_target(
                recipe,
                corpus["tokenizer"],
                corpus["train_ids"],
                corpus["val_ids"],
                target,
                s,
                eval_every=5 if quick else eval_every,
                max_steps=20 if quick else 3000,
                device=device,
                autocast=autocast,
            )
            for s in seeds
        ]
        ours[name] = {
            "recipe": recipe.to_dict(),
            "runs": runs,
            "flops_per_token": flops_per_token(
                runs[0]["params_no_pos"], recipe.n_layers, recipe.d_model, recipe.context_length
            ),
        }
    result = {
        "target_val_loss": target,
        "threads": threads,
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "autocast": autocast,
        "compile": compile,
        "torch": torch.__version__,
        "quick": quick,
        "eval_every": eval_every,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after_nanogpt": [round(x, 2) for x in load_mid],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "peak_flops": peak_flops(device=device, dtype=autocast or "float32"),
        "nanogpt": ng,
        "ours": ours,
        "flops_formula": "6 N + 12 n_layers d L, N = parameters without the position table",
    }
    result["table"] = table(result)
    return result


def run(quick: bool = False) -> list[dict]:
    """For ``python -m benchmarks.run``: the checkout's path comes from $NANOGPT."""
    path = os.environ.get(NEEDS)
    if not path:
        raise SystemExit(f"nanogpt_race: {HOW_TO_GET}")
    return race_nanogpt(path, quick=quick)["table"]


def summary(rows: list[dict]) -> str:
    ratio = next(r["speed_up"] for r in rows if r["recipe"] == "fast")
    return (
        f"fast reached nanoGPT's final validation loss {ratio:.2f}x sooner in training time "
        f"(target {RATIO_TARGET}x; meaningful only without --quick and on a quiet machine)."
    )


def main(argv: list[str] | None = None) -> int:
    from benchmarks.run import format_table

    parser = argparse.ArgumentParser(prog="python -m benchmarks.nanogpt_race", description=TITLE)
    parser.add_argument("--nanogpt", default=os.environ.get(NEEDS), help="a nanoGPT checkout")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--recipes", nargs="+", default=["fast"], help="names in RECIPES")
    parser.add_argument("--eval-every", type=int, default=25, help="steps between our evaluations")
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    parser.add_argument("--quick", action="store_true", help="a 20-step smoke test")
    parser.add_argument("--device", default="cpu", help="cpu or cuda: where both sides train")
    parser.add_argument(
        "--autocast", choices=["bfloat16"], default=None, help="both sides' mixed precision"
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile on both sides")
    args = parser.parse_args(argv)
    if not args.nanogpt:
        print(f"nanogpt_race: {HOW_TO_GET}", file=sys.stderr)
        return 2
    result = race_nanogpt(
        args.nanogpt,
        tuple(args.seeds),
        args.threads,
        args.quick,
        tuple(args.recipes),
        args.eval_every,
        args.device,
        args.autocast,
        args.compile,
    )
    result["command"] = "python -m benchmarks.nanogpt_race " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    print(format_table(result["table"]))
    print(summary(result["table"]))
    print(
        f"load average before {result['load_average_before']}, after {result['load_average_after']}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
