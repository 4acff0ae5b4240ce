"""The course's GPT at GPU scale: GPT-2 small (124M) trained as the best harnesses train it.

The model is :class:`course_lib.gpt.model.GPT`, the code chapter 8 teaches, at GPT-2 small's
size (:func:`gpt2_small`: 12 layers, 768 wide, 12 heads, context 1024, the vocabulary padded
to 50,304, a multiple of 128, as nanoGPT pads GPT-2's 50,257). What changes on a GPU is how a
step runs, never what it computes:

* **bfloat16 autocast** for the forward pass (the loss and the optimiser stay float32);
* **the flash kernel** of ``scaled_dot_product_attention`` (the model calls it with
  ``is_causal=True`` and no mask, which is what the flash and memory-efficient kernels need;
  :func:`attention_backends` says which kernels may run);
* **a fused optimiser**: AdamW with ``fused=True`` where PyTorch has it for the device (CUDA),
  ``foreach=True`` otherwise (:func:`fast_adamw`): one or a few kernels per step instead of
  several per parameter;
* **torch.compile** of the forward and backward (``compile=True``), where it pays;
* **gradient accumulation** (:class:`ScaleTrainer`: ``accumulate`` micro-batches per optimiser
  step, the loss of each divided by their number, so the step equals one of the whole batch);
* **a data loader that does not stall the GPU** (:class:`Prefetcher`: a background thread cuts
  the next batches from the token stream, in pinned memory, and copies them with
  ``non_blocking=True`` while the GPU works on the current one).

The training FLOPs per token are ``6 N + 12 n_layers d L`` (:func:`flops_per_token`; Kaplan et
al. 2020, with the attention's scores and weighted sums; N without the position table), and the
model FLOPs utilisation is tokens per second times that over a peak (:func:`mfu`): the peak of a
large bfloat16 matrix product measured on the device and the vendor's dense figure
(:data:`VENDOR_PEAK`). ``benchmarks/gpt_scale.py`` measures it beside nanoGPT's model;
``benchmarks/cuda_check.sh`` runs it on a GPU. The CPU tests run every one of these paths at a
tiny size (2 layers, 64 wide).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.checks import check_int
from course_lib.gpt.config import GPTConfig
from course_lib.gpt.model import GPT

__all__ = [
    "VENDOR_PEAK",
    "Prefetcher",
    "ScaleTrainer",
    "attention_backends",
    "fast_adamw",
    "flops_per_token",
    "gpt2_small",
    "mfu",
    "profile_step",
    "tiny",
]

#: dense bfloat16 tensor-core peaks the vendors state (FLOP/s, without sparsity), by name part
VENDOR_PEAK = {
    "H200": 989e12,  # NVIDIA H200 SXM
    "H100": 989e12,  # NVIDIA H100 SXM (the PCIe card: 756e12)
    "A100": 312e12,
    "L4": 121e12,
    "T4": 65e12,  # float16; the T4 has no bfloat16 tensor cores
}


def gpt2_small(vocab_size: int = 50_304, context_length: int = 1024) -> GPTConfig:
    """GPT-2 small in the course's model: 12 layers, 12 heads, 768 wide, GPT-2's choices
    (LayerNorm, biases, learned positions, the tanh GELU, the tied head).

    >>> from course_lib.gpt.config import count
    >>> cfg = gpt2_small()
    >>> (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.context_length), f"{count(cfg):,}"
    ((12, 12, 768, 1024), '124,475,904')
    """
    return GPTConfig(
        vocab_size=vocab_size,
        context_length=context_length,
        n_layers=12,
        n_heads=12,
        d_model=768,
        activation="gelu_tanh",
    )


def tiny(vocab_size: int = 65, context_length: int = 32) -> GPTConfig:
    """The same code path at a test's size: 2 layers, 64 wide, 4 heads."""
    return GPTConfig(
        vocab_size=vocab_size,
        context_length=context_length,
        n_layers=2,
        n_heads=4,
        d_model=64,
        activation="gelu_tanh",
    )


def flops_per_token(config: GPTConfig, n_params_no_pos: int | None = None) -> int:
    """Training FLOPs per token: ``6 N + 12 n_layers d L`` (N without the position table).

    >>> f"{flops_per_token(gpt2_small()) / 1e6:.1f} M"
    '855.4 M'
    """
    from course_lib.gpt.config import count

    if n_params_no_pos is None:
        n_params_no_pos = count(config)
        if config.positions == "learned":
            n_params_no_pos -= config.context_length * config.d_model
    return 6 * n_params_no_pos + 12 * config.n_layers * config.d_model * config.context_length


def mfu(tokens_per_s: float, flops_token: float, peak: float) -> float:
    """Model FLOPs utilisation, a fraction of ``peak``.

    >>> round(mfu(100_000, 765e6, 989e12), 4)
    0.0774
    """
    if peak <= 0:
        raise ValueError(f"peak must be positive, got {peak}")
    return tokens_per_s * flops_token / peak


def vendor_peak(device_name: str) -> float | None:
    """The vendor's dense bfloat16 figure for a device name, or None if not in the table.

    >>> vendor_peak("NVIDIA H100 80GB HBM3"), vendor_peak("cpu")
    (989000000000000.0, None)
    """
    for tag, peak in VENDOR_PEAK.items():
        if tag in device_name:
            return peak
    return None


def attention_backends() -> dict[str, bool]:
    """Which of ``scaled_dot_product_attention``'s kernels PyTorch may use now (CUDA's flags)."""
    b = torch.backends.cuda
    return {
        "flash": b.flash_sdp_enabled(),
        "memory_efficient": b.mem_efficient_sdp_enabled(),
        "math": b.math_sdp_enabled(),
    }


def fast_adamw(
    model: torch.nn.Module, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.95)
) -> torch.optim.AdamW:
    """AdamW, decay on matrices only, ``fused=True`` on CUDA, ``foreach=True`` elsewhere.

    >>> opt = fast_adamw(torch.nn.Linear(2, 2), 1e-3)
    >>> opt.defaults["foreach"], opt.defaults["fused"]
    (True, None)
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    on_cuda = bool(params) and params[0].device.type == "cuda"
    kind = {"fused": True} if on_cuda else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=betas, **kind)


class Prefetcher:
    """Batches of random windows, cut ahead in a background thread and sent to ``device``.

    The windows are drawn from a generator seeded with ``seed`` in the order they are asked
    for, so a run is the same with or without the thread; on CUDA they sit in pinned memory and
    are copied with ``non_blocking=True``, so the copy overlaps the GPU's work.

    >>> data = torch.arange(1000)
    >>> a = [x for x, _ in Prefetcher(data, 2, 8, seed=0).take(3)]
    >>> b = [x for x, _ in Prefetcher(data, 2, 8, seed=0, ahead=0).take(3)]
    >>> all(bool((p == q).all()) for p, q in zip(a, b))
    True
    """

    def __init__(
        self,
        data: torch.Tensor,
        batch_size: int,
        context_length: int,
        *,
        seed: int = 0,
        device: Any = "cpu",
        ahead: int = 4,
    ) -> None:
        check_int(batch_size, "batch_size", low=1)
        check_int(context_length, "context_length", low=1)
        check_int(ahead, "ahead", low=0)
        if len(data) < context_length + 1:
            raise ValueError(
                f"the data has {len(data)} tokens, fewer than context_length + 1 = "
                f"{context_length + 1}"
            )
        self.data, self.B, self.L = data, batch_size, context_length
        self.device = torch.device(device)
        self.pin = self.device.type == "cuda"
        self.generator = torch.Generator().manual_seed(seed)
        self.ahead = ahead
        self._queue: queue.Queue = queue.Queue(maxsize=max(ahead, 1))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if ahead:
            self._thread = threading.Thread(target=self._fill, daemon=True)
            self._thread.start()

    def _cut(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.data) - self.L, (self.B,), generator=self.generator)
        w = self.data[starts[:, None] + torch.arange(self.L + 1)].long()
        x, y = w[:, :-1].contiguous(), w[:, 1:].contiguous()
        if self.pin:
            x, y = x.pin_memory(), y.pin_memory()
        return x, y

    def _fill(self) -> None:
        while not self._stop.is_set():
            batch = self._cut()
            while not self._stop.is_set():
                try:
                    self._queue.put(batch, timeout=0.1)
                    break
                except queue.Full:
                    continue

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self._queue.get() if self._thread is not None else self._cut()
        nb = self.device.type == "cuda"
        return x.to(self.device, non_blocking=nb), y.to(self.device, non_blocking=nb)

    def take(self, n: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        try:
            for _ in range(n):
                yield self.next()
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


@dataclass
class ScaleTrainer:
    """One optimiser step of ``accumulate`` micro-batches, autocast, fused AdamW, compiled or not.

    ``step()`` returns the mean loss of its micro-batches; ``tokens`` and ``seconds`` (each step
    waited for) count the work for throughput.
    """

    model: GPT
    data: Prefetcher
    lr: float = 6e-4
    accumulate: int = 1
    autocast: str | None = "bfloat16"
    compile: bool = False
    clip: float = 1.0
    tokens: int = 0
    seconds: float = 0.0
    step_count: int = 0
    step_times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_int(self.accumulate, "accumulate", low=1)
        if self.autocast not in (None, "bfloat16", "float16"):
            raise ValueError(f"autocast must be None or 'bfloat16', got {self.autocast!r}")
        self.device = self.model.tok_emb.device
        self.optimizer = fast_adamw(self.model, self.lr)
        self.forward = self.model
        if self.compile:
            from course_lib.gpt.train import compile_forward

            self.forward = compile_forward(self.model)

    def _ctx(self) -> Any:
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=getattr(torch, self.autocast))

    def micro_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self._ctx():
            logits = self.forward(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))

    def step(self) -> float:
        from course_lib.measure import synchronize

        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for _ in range(self.accumulate):
            x, y = self.data.next()
            loss = self.micro_loss(x, y) / self.accumulate
            loss.backward()
            total += loss.detach()
            self.tokens += x.numel()
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        value = float(total)  # waits for the device
        synchronize(self.device)
        dt = time.perf_counter() - t0
        self.seconds += dt
        self.step_times.append(dt)
        self.step_count += 1
        return value


def profile_step(step: Any, warmup: int = 3, device: Any = "cpu", top: int = 10) -> dict[str, Any]:
    """One call of ``step()`` under ``torch.profiler`` after ``warmup`` calls: the ``top``
    operators or kernels by their own time, and ``launches``: on a GPU the kernels launched, on
    a CPU the ATen operator calls (nested ones included), the CPU's nearest count.

    >>> out = profile_step(lambda: torch.ones(8) @ torch.ones(8), warmup=1, top=3)
    >>> out["launches"] >= 1 and len(out["top"]) <= 3
    True
    """
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        step()
    dev = torch.device(device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    events = prof.key_averages()
    on_gpu = dev.type == "cuda"
    key = "self_device_time_total" if on_gpu else "self_cpu_time_total"

    def own(e: Any) -> float:
        return float(getattr(e, key, 0.0) or 0.0)

    rows = [e for e in events if own(e) > 0]
    if on_gpu:  # kernels: events with device time and no CPU children of their own
        launches = sum(
            e.count
            for e in rows
            if getattr(e, "device_type", None) is not None and "cuda" in str(e.device_type).lower()
        )
    else:
        launches = sum(e.count for e in rows if e.key.startswith("aten::"))
    total = sum(own(e) for e in rows) or 1.0
    ranked = sorted(rows, key=own, reverse=True)[:top]
    return {
        "device": str(dev),
        "launches": int(launches),
        "total_ms": round(total / 1000, 3),
        "top": [
            {
                "name": e.key,
                "calls": e.count,
                "ms": round(own(e) / 1000, 3),
                "share": round(own(e) / total, 3),
            }
            for e in ranked
        ],
    }


def estimate_seconds(config: GPTConfig, tokens: int, peak: float, utilisation: float) -> float:
    """Seconds to train on ``tokens`` at a given utilisation of ``peak`` (a planning figure).

    >>> round(estimate_seconds(gpt2_small(), 10**9, 989e12, 0.4) / 3600, 2)
    0.6
    """
    return tokens * flops_per_token(config) / (peak * utilisation)
