"""Issue 46's code paths on the CPU at a tiny size: GPT-2 small's configuration, the prefetching
loader, gradient accumulation, bfloat16 autocast, the fused/foreach optimiser, the FLOPs and
MFU arithmetic, the profile and the benchmark's rows (the GPU figures need a GPU)."""

from __future__ import annotations

import pytest
import torch

from course_lib.gpt import scale
from course_lib.gpt.config import RECIPES, count
from course_lib.gpt.model import GPT
from course_lib.gpt.train import make_optimizer


def test_gpt2_small_is_124m_and_its_flops_match_nanogpts_formula():
    cfg = scale.gpt2_small()
    assert count(cfg) == 124_475_904  # nanoGPT's 124M with the padded vocabulary
    n = count(cfg) - 1024 * 768
    # nanoGPT's estimate_mfu: 6N + 12 L H Q T per token
    assert scale.flops_per_token(cfg) == 6 * n + 12 * 12 * 12 * 64 * 1024


def test_prefetcher_is_deterministic_contiguous_and_checks_its_input():
    data = torch.arange(500)
    with_thread = list(scale.Prefetcher(data, 3, 10, seed=1).take(4))
    without = list(scale.Prefetcher(data, 3, 10, seed=1, ahead=0).take(4))
    for (x, y), (x2, y2) in zip(with_thread, without, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2) and torch.equal(y, x + 1)
        assert x.is_contiguous() and y.is_contiguous() and x.dtype == torch.long
    with pytest.raises(ValueError, match="fewer than context_length"):
        scale.Prefetcher(torch.arange(5), 1, 10)


def test_accumulated_micro_batches_step_like_one_batch():
    """Two micro-batches of 2, each loss halved, give the gradient of one batch of 4."""
    cfg = scale.tiny()
    data = torch.randint(0, cfg.vocab_size, (2000,), generator=torch.Generator().manual_seed(0))
    a = GPT(cfg, seed=0)
    t = scale.ScaleTrainer(
        a,
        scale.Prefetcher(data, 2, 32, seed=3, ahead=0),
        accumulate=2,
        autocast=None,
        clip=0.0,
        lr=0.0,
    )
    t.step()
    b = GPT(cfg, seed=0)
    p = scale.Prefetcher(data, 2, 32, seed=3, ahead=0)
    (x1, y1), (x2, y2) = p.next(), p.next()
    logits = b(torch.cat([x1, x2]))
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), torch.cat([y1, y2]).reshape(-1)
    )
    loss.backward()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert t.tokens == 4 * 32 and t.step_count == 1


def test_bfloat16_autocast_trains_on_the_cpu_with_the_foreach_optimiser():
    cfg = scale.tiny()
    data = torch.arange(5000) % cfg.vocab_size  # each token predicts the next: learnable
    t = scale.ScaleTrainer(GPT(cfg, seed=0), scale.Prefetcher(data, 4, 32, seed=0), lr=1e-2)
    assert t.optimizer.defaults["foreach"] is True and not t.optimizer.defaults["fused"]
    losses = [t.step() for _ in range(10)]
    t.data.close()
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0] - 0.5
    with pytest.raises(ValueError, match="autocast"):
        scale.ScaleTrainer(GPT(cfg), t.data, autocast="int8")


def test_the_race_keeps_its_cpu_optimiser_and_fuses_only_on_cuda():
    model = GPT(RECIPES["baseline"].model_config(65), seed=0)
    opt = make_optimizer(model, RECIPES["baseline"])
    assert not opt.defaults.get("fused") and not opt.defaults.get("foreach")


def test_mfu_and_vendor_peaks():
    assert scale.vendor_peak("NVIDIA H200") == 989e12 and scale.vendor_peak("Radeon") is None
    assert scale.mfu(1e5, 8.554e8, 989e12) == pytest.approx(0.0865, abs=1e-4)
    with pytest.raises(ValueError, match="peak"):
        scale.mfu(1.0, 1.0, 0.0)
    assert set(scale.attention_backends()) == {"flash", "memory_efficient", "math"}


def test_the_profile_names_the_top_operators_and_counts_them():
    """(The benchmark's rows run in tests/test_benchmarks.py, at the tiny size.)"""
    model = GPT(scale.tiny(), seed=0)
    prof = scale.profile_step(lambda: model(torch.zeros(1, 8, dtype=torch.long)), warmup=1, top=5)
    assert prof["launches"] > 10 and any("mm" in r["name"] for r in prof["top"])
    assert sum(r["share"] for r in prof["top"]) <= 1.0 + 1e-6
