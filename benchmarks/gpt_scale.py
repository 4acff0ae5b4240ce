"""GPT-2 small (124M) at GPU scale: the course's model beside nanoGPT's, eager and compiled.

    python -m benchmarks.gpt_scale --device cuda --nanogpt /tmp/nanogpt --out scale.json
    python -m benchmarks.gpt_scale --device cuda --profile-only --out profile.json
    python -m benchmarks.gpt_scale --size tiny --steps 3 --warmup 1      # the CPU smoke test

For each side (the course's :class:`~course_lib.gpt.model.GPT` at :func:`~course_lib.gpt.scale.gpt2_small`,
and, given ``--nanogpt DIR``, nanoGPT's own ``model.py`` at its 124M config) and each mode
(eager, ``torch.compile``): bfloat16 autocast, fused AdamW (nanoGPT's ``configure_optimizers``
on its side), ``--batch`` sequences of 1024 tokens per micro-batch, ``--accumulate`` micro-batches
per step, the same prefetching loader (:class:`~course_lib.gpt.scale.Prefetcher`) on a random
token stream made on the machine (throughput does not depend on the tokens' values; no data is
carried). ``--warmup`` steps are run first (their extra time over the median step is the
compile time reported), then ``--steps`` timed ones. Reported per row: tokens/s, ms/step,
model FLOPs utilisation against a measured bfloat16 matmul peak (8192^3 on a GPU) and against
the vendor's dense figure (:data:`~course_lib.gpt.scale.VENDOR_PEAK`), compile seconds.

``--profile`` adds a profile of one training step of the course's race model (chapter 8's
``baseline`` and ``fast`` recipes, 4 layers, 128 wide, context 64, batch 12), with the
optimiser as the race runs it and with the fused/foreach AdamW: the top kernels (operators on
a CPU) by their own time and the number of launches.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

TITLE = "GPT-2 small: the course's model beside nanoGPT's, tokens/s and MFU"


def _nanogpt(path: str, config: Any, device: str) -> tuple[torch.nn.Module, Any]:
    spec = importlib.util.spec_from_file_location("nanogpt_model", Path(path) / "model.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{path} has no model.py (a nanoGPT checkout is needed)")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = mod.GPTConfig(
        block_size=config.context_length,
        vocab_size=config.vocab_size,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        n_embd=config.d_model,
        dropout=0.0,
        bias=True,
    )
    model = mod.GPT(cfg).to(device)
    opt = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), torch.device(device).type)
    return model, opt


def measure(
    side: str,
    mode: str,
    config: Any,
    *,
    device: str,
    batch: int,
    accumulate: int,
    steps: int,
    warmup: int,
    nanogpt: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """One row: ``side`` (``course`` or ``nanogpt``) in ``mode`` (``eager`` or ``compiled``)."""
    from course_lib.gpt.model import GPT
    from course_lib.gpt.scale import Prefetcher, ScaleTrainer, flops_per_token
    from course_lib.measure import synchronize

    torch.manual_seed(seed)
    stream = torch.randint(0, config.vocab_size, (2_000_000,), dtype=torch.int32)
    data = Prefetcher(stream, batch, config.context_length, seed=seed, device=device)
    compiled = mode == "compiled"
    autocast = "bfloat16"
    try:
        if side == "course":
            model = GPT(config, seed=seed).to(device)
            trainer = ScaleTrainer(
                model, data, accumulate=accumulate, autocast=autocast, compile=compiled
            )
            step = trainer.step
        else:
            if nanogpt is None:
                raise ValueError("side 'nanogpt' needs --nanogpt DIR")
            model, opt = _nanogpt(nanogpt, config, device)
            fwd = torch.compile(model) if compiled else model
            times: list[float] = []

            def step() -> float:
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                total = 0.0
                for _ in range(accumulate):
                    x, y = data.next()
                    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
                        _, loss = fwd(x, y)
                    (loss / accumulate).backward()
                    total += float(loss.detach()) / accumulate
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                synchronize(device)
                times.append(time.perf_counter() - t0)
                return total

        t_first = time.perf_counter()
        for _ in range(warmup):
            step()
        warm_s = time.perf_counter() - t_first
        t0 = time.perf_counter()
        per_step = []
        for _ in range(steps):
            s0 = time.perf_counter()
            step()
            per_step.append(time.perf_counter() - s0)
        seconds = time.perf_counter() - t0
    finally:
        data.close()
    n_no_pos = sum(
        p.numel() for n, p in model.named_parameters() if "pos" not in n and "wpe" not in n
    )
    fpt = flops_per_token(config, n_no_pos)
    tokens = steps * accumulate * batch * config.context_length
    median = statistics.median(per_step)
    return {
        "side": side,
        "mode": mode,
        "tokens_per_s": round(tokens / seconds, 1),
        "ms_per_step": round(1000 * median, 2),
        "compile_s": round(max(0.0, warm_s - warmup * median), 2),
        "flops_per_token": fpt,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def profile_race(device: str) -> list[dict[str, Any]]:
    """One race step of ``baseline`` and ``fast``, profiled, with the race's optimiser and with
    the fused/foreach AdamW (``baseline`` only; Muon has no fused form here)."""
    import dataclasses

    from course_lib.gpt.config import RECIPES
    from course_lib.gpt.data import shakespeare_file, split_ids
    from course_lib.gpt.model import GPT
    from course_lib.gpt.scale import fast_adamw, profile_step
    from course_lib.gpt.train import Trainer, make_tokenizer

    text = shakespeare_file().read_text(encoding="utf-8")
    tok = make_tokenizer("char", text)
    train_ids, val_ids = split_ids(tok.encode(text))
    out = []
    for name, fused in (("baseline", False), ("baseline", True), ("fast", False)):
        r = dataclasses.replace(RECIPES[name])
        model = GPT(r.model_config(tok.vocab_size), seed=0).to(device)
        autocast = "bfloat16" if device.startswith("cuda") else None
        t = Trainer(model, r, train_ids, val_ids, seed=0, autocast=autocast)
        if fused:
            t.optimizer = fast_adamw(model, r.lr, r.weight_decay, r.betas)
            for g in t.optimizer.param_groups:
                g["base_lr"] = r.lr
        prof = profile_step(t.step, warmup=5, device=device)
        ms = []
        for _ in range(20):
            before = t.seconds
            t.step()
            ms.append(1000 * (t.seconds - before))
        prof.update(
            recipe=name,
            optimizer=("fused/foreach AdamW" if fused else r.optimizer + " (as the race)"),
            median_ms_per_step=round(statistics.median(ms), 3),
        )
        out.append(prof)
    return out


def run(quick: bool = False) -> list[dict]:
    """For ``python -m benchmarks.run``: the tiny size on the CPU (quick) or the current device."""
    from course_lib.device import get_device

    device = str(get_device())
    return main_rows(
        size="tiny" if quick or device == "cpu" else "small",
        device=device,
        steps=2 if quick else 10,
        warmup=1 if quick else 3,
        modes=("eager",) if quick else ("eager", "compiled"),
    )["rows"]


def main_rows(
    *,
    size: str = "small",
    device: str = "cuda",
    batch: int | None = None,
    accumulate: int = 1,
    steps: int = 10,
    warmup: int = 3,
    modes: tuple[str, ...] = ("eager", "compiled"),
    nanogpt: str | None = None,
    profile: bool = False,
) -> dict[str, Any]:
    from benchmarks.nanogpt_race import peak_flops
    from course_lib.gpt.scale import gpt2_small, mfu, tiny, vendor_peak
    from course_lib.gpt.train import compiler_missing

    config = gpt2_small() if size == "small" else tiny()
    batch = batch or (16 if size == "small" else 2)
    on_gpu = device.startswith("cuda")
    name = torch.cuda.get_device_name() if on_gpu else "cpu"
    peak = peak_flops(device=device, dtype="bfloat16" if on_gpu else "float32")
    vendor = vendor_peak(name)
    sides = ["course"] + (["nanogpt"] if nanogpt else [])
    rows = []
    for mode in modes:
        if mode == "compiled" and compiler_missing():
            continue
        for side in sides:
            r = measure(
                side,
                mode,
                config,
                device=device,
                batch=batch,
                accumulate=accumulate,
                steps=steps,
                warmup=warmup,
                nanogpt=nanogpt,
            )
            r["mfu_measured_peak_pct"] = round(
                100 * mfu(r["tokens_per_s"], r["flops_per_token"], peak), 2
            )
            r["mfu_vendor_pct"] = (
                None
                if vendor is None
                else round(100 * mfu(r["tokens_per_s"], r["flops_per_token"], vendor), 2)
            )
            rows.append(r)
    result: dict[str, Any] = {
        "device": name,
        "size": size,
        "config": config.to_dict(),
        "batch": batch,
        "accumulate": accumulate,
        "context_length": config.context_length,
        "steps": steps,
        "warmup": warmup,
        "peak_flops_measured": peak,
        "peak_flops_vendor": vendor,
        "data": "a random token stream made on the machine (throughput only)",
        "torch": torch.__version__,
        "rows": rows,
    }
    if profile:
        result["profile"] = profile_race(device)
    return result


def main(argv: list[str] | None = None) -> int:
    from benchmarks.run import format_table

    p = argparse.ArgumentParser(prog="python -m benchmarks.gpt_scale", description=TITLE)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--size", choices=["small", "tiny"], default="small")
    p.add_argument("--batch", type=int, default=None, help="sequences per micro-batch")
    p.add_argument("--accumulate", type=int, default=1, help="micro-batches per step")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--modes", nargs="+", default=["eager", "compiled"])
    p.add_argument("--nanogpt", default=None, help="a nanoGPT checkout: measure its model too")
    p.add_argument("--profile", action="store_true", help="also profile the race model's step")
    p.add_argument("--profile-only", action="store_true", help="only the race model's profile")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.profile_only:
        result: dict[str, Any] = {"device": a.device, "profile": profile_race(a.device)}
    else:
        result = main_rows(
            size=a.size,
            device=a.device,
            batch=a.batch,
            accumulate=a.accumulate,
            steps=a.steps,
            warmup=a.warmup,
            modes=tuple(a.modes),
            nanogpt=a.nanogpt,
            profile=a.profile,
        )
        print(format_table(result["rows"]))
    for prof in result.get("profile", []):
        print(
            f"{prof['recipe']} ({prof['optimizer']}): {prof['median_ms_per_step']} ms/step, "
            f"{prof['launches']} launches"
        )
        print(format_table(prof["top"][:5]))
    result["command"] = "python -m benchmarks.gpt_scale " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
