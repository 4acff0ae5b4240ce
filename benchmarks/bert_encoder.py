"""Chapter 9's encoder, before and after fusing its attention, against ``transformers``' ``BertModel``.

Three contestants compute the same hidden states from the same weights (float32, CPU, dropout
off, a padded batch):

* ``before``: the course's encoder with chapter 5's explicit attention, three projections and the
  (L, L) weights in memory (``encode(..., fused=False)``, what chapter 9 ran until issue 33);
* ``fused``: the course's encoder as it runs now, one (d, 3d) QKV product and PyTorch's
  ``scaled_dot_product_attention`` (``Bert.forward``);
* ``hf``: Hugging Face's ``BertModel`` (no pooler) with ``attn_implementation="sdpa"``, our
  weights copied in (:func:`course_lib.bert.hf.to_hf`).

Each is timed on the forward pass (under ``torch.no_grad``) and on forward + backward of
``sum(H * G)`` for a fixed G, at the chapter's size (``SMALL``, batch 32, 32 tokens, as it
pre-trains) and at BERT-base's (12 layers, d = 768, 12 heads, vocabulary 30,522, 128 tokens).
One thread, one warm-up call each, then rounds in which the contestants take turns in a rotated
order, so that a change of load on a shared machine falls on all of them. Reported: the median
over rounds of each call's CPU seconds (``ms`` columns; on one thread the process's CPU time is
what the code costs, the least disturbed by other processes on a loaded machine), the ratios
``before / fused`` (target at least 1.2) and ``hf / fused`` (target at least 1.0) of those
medians, the same ratios of the median wall-clock times, and the highest 1-minute load average
seen while the row ran. On an idle machine the two kinds of ratio agree.

Where CUDA is available, the same contestants are timed again on the GPU (float32, so the same
arithmetic; PyTorch's default leaves TF32 off), adding a BERT-base row at batch 32 x 512 tokens
where the GPU has work enough to fill it. There each call is followed by
``torch.cuda.synchronize()`` and the ``ms`` columns are wall-clock medians (a process's CPU time
says nothing of the GPU's); the ``clock`` column says which kind a row holds.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import torch

TITLE = "BERT encoder, forward and forward+backward: course before/after fusing vs BertModel (SDPA)"
THREADS = 1  # one thread measures the code, not the scheduler of a shared machine


def _sizes(quick: bool):
    from course_lib.bert.config import BertConfig, bert_block
    from course_lib.bert.train import SMALL

    if quick:
        return [("tiny", BertConfig(512, 32, 1, bert_block(32, 2)), 4, 16, 2)]
    base = BertConfig(30522, 512, 12, bert_block(768, 12))
    return [("chapter (SMALL)", SMALL, 32, 32, 40), ("BERT-base", base, 4, 128, 7)]


def _cuda_sizes(quick: bool):
    from course_lib.bert.config import BertConfig, bert_block
    from course_lib.bert.train import SMALL

    if quick:
        return [("tiny", BertConfig(512, 32, 1, bert_block(32, 2)), 4, 16, 2)]
    base = BertConfig(30522, 512, 12, bert_block(768, 12))
    return [
        ("chapter (SMALL)", SMALL, 32, 32, 40),
        ("BERT-base", base, 4, 128, 20),
        ("BERT-base", base, 32, 512, 10),
    ]


def _contestants(cfg, B: int, L: int, device: str = "cpu") -> dict:
    from course_lib.bert import accelerated as A
    from course_lib.bert.hf import to_hf
    from course_lib.bert.model import Bert

    rng = np.random.default_rng(0)
    tokens = torch.from_numpy(rng.integers(4, cfg.vocab_size, (B, L)))
    segments = torch.from_numpy((np.arange(L) >= L // 2) * np.ones((B, 1), dtype=np.int64))
    lengths = np.linspace(L, L // 2, B).astype(int)  # a padded batch: L down to L/2 real tokens
    mask = torch.from_numpy(np.arange(L) < lengths[:, None])
    ours = Bert(cfg, seed=0)
    theirs = to_hf(
        ours.numpy_parameters(), cfg, "model", dtype=torch.float32, attn_implementation="sdpa"
    )
    grad = torch.randn(B, L, cfg.d_model, generator=torch.Generator().manual_seed(0))
    if device != "cpu":
        ours, theirs = ours.to(device), theirs.to(device)
        tokens, segments, mask, grad = (t.to(device) for t in (tokens, segments, mask, grad))

    def before():
        p = ours.parameter_dict()
        t, s, m = A._inputs(tokens, segments, mask, p, cfg)  # the checks Bert.forward makes
        return A.encode(t, s, m, p, cfg, fused=False)

    def fused():
        return ours(tokens, segments, mask)

    def hf():
        am = mask.long()
        return theirs(
            input_ids=tokens, token_type_ids=segments, attention_mask=am
        ).last_hidden_state

    def backward(fn, model):
        def run():
            model.zero_grad(set_to_none=True)
            (fn() * grad).sum().backward()

        return run

    def forward(fn):
        def run():
            with torch.no_grad():
                fn()

        return run

    fns = {"before": (before, ours), "fused": (fused, ours), "hf": (hf, theirs)}
    return {
        "forward": {k: forward(f) for k, (f, _) in fns.items()},
        "forward+backward": {k: backward(f, m) for k, (f, m) in fns.items()},
    }


def _race(fns: dict, rounds: int, device: str = "cpu") -> tuple[dict, dict]:
    """Median wall and CPU seconds per call, the contestants in a rotated order each round
    (on a GPU, each call waits for its kernels: ``synchronize``)."""
    from course_lib.measure import synchronize

    names = list(fns)
    for name in names:
        fns[name]()  # warm-up
    synchronize(device)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            w, c = time.perf_counter(), time.process_time()
            fns[name]()
            synchronize(device)
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    med = statistics.median
    return {n: med(v) for n, v in wall.items()}, {n: med(v) for n, v in cpu.items()}


def _measure(name: str, cfg, B: int, L: int, rounds: int, device: str = "cpu") -> list[dict]:
    rows = []
    for kind, fns in _contestants(cfg, B, L, device).items():
        load0 = os.getloadavg()[0]
        wall, cpu = _race(fns, rounds, device)
        main = cpu if device == "cpu" else wall  # CPU time means nothing for GPU kernels
        rows.append({
            "device": device, "clock": "cpu time" if device == "cpu" else "wall (synchronised)",
            "size": name, "batch x length": f"{B} x {L}", "pass": kind, "rounds": rounds,
            "before ms": 1e3 * main["before"], "fused ms": 1e3 * main["fused"],
            "hf ms": 1e3 * main["hf"],
            "before/fused": main["before"] / main["fused"], "hf/fused": main["hf"] / main["fused"],
            "before/fused (wall)": wall["before"] / wall["fused"],
            "hf/fused (wall)": wall["hf"] / wall["fused"],
            "load": round(max(load0, os.getloadavg()[0]), 1),
        })  # fmt: skip
    return rows


def run(quick: bool = False) -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        rows = [row for size in _sizes(quick) for row in _measure(*size)]
        if torch.cuda.is_available():
            rows += [row for size in _cuda_sizes(quick) for row in _measure(*size, "cuda")]
        return rows
    finally:
        torch.set_num_threads(threads)


def summary(rows: list[dict]) -> str:
    """Whether each row meets the targets (at least 1.2x today's own, no slower than HF)."""
    lines = []
    for r in rows:
        ok = r["before/fused"] >= 1.2 and r["hf/fused"] >= 1.0
        lines.append(
            f"{r['device']}, {r['size']} {r['batch x length']}, {r['pass']}: "
            f"{r['before/fused']:.2f}x today's own, {r['hf/fused']:.2f}x BertModel (SDPA), "
            f"{r['clock']}"
            f" ({'both targets met' if ok else 'a target missed'})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.bert_encoder --device cuda``: the GPU rows alone (``benchmarks.run
    bert_encoder`` gives the CPU's and, where CUDA is available, the GPU's)."""
    import argparse

    from benchmarks.run import format_table

    parser = argparse.ArgumentParser(prog="python -m benchmarks.bert_encoder", description=TITLE)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but PyTorch sees no CUDA device here")
    if args.device == "cpu":
        torch.set_num_threads(THREADS)
        rows = [row for size in _sizes(args.quick) for row in _measure(*size)]
    else:
        rows = [row for size in _cuda_sizes(args.quick) for row in _measure(*size, "cuda")]
    print(format_table(rows))
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
