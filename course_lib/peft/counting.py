"""How many numbers each method trains, and the memory of weights, gradients and optimiser state.

Pure functions of a configuration (the widget and the exercises call them) and one measurement
(:func:`measured_memory`) that adds up the storages of the tensors a training step leaves behind.

Counts, per model of ``n_layers`` blocks:

* LoRA on a (d, k) matrix in every block: ``n_layers * r * (d + k)``;
* prompt tuning with n virtual tokens: ``n * d_model``;
* prefix tuning: ``n_layers * 2 * n * d_model`` (a key and a value per head and position);
* full fine-tuning: every parameter of the model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from course_lib.block.config import DecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.checks import check_choice, check_int
from course_lib.peft.layer import check_rank
from course_lib.peft.model import target_shape
from course_lib.peft.qlora import bits_per_parameter

__all__ = [
    "METHODS",
    "NF4_DQ_BITS",
    "measured_memory",
    "memory_bytes",
    "qlora_budget",
    "trainable_parameters",
]

METHODS = ("full", "lora", "qlora", "prompt", "prefix", "frozen")
#: Bits per weight of NF4 with double quantisation: 4 + 8/64 + 32/(64 * 256), about 4.127.
NF4_DQ_BITS = 4 + 8 / 64 + 32 / (64 * 256)


def qlora_budget(n_params: int, d: int, d_ff: int, n_layers: int, rank: int) -> dict[str, float]:
    """Bytes to fine-tune a LLaMA-style model with QLoRA, activations not counted.

    The frozen weights in NF4 with double quantisation (:data:`NF4_DQ_BITS` per weight, every
    weight counted, as if embeddings were quantised too); LoRA of rank ``rank`` on all seven
    matrices of every block (queries, keys, values, output: ``d x d``; gate and up:
    ``d_ff x d``; down: ``d x d_ff``), ``r (d_out + d_in)`` numbers each, every one with a
    float32 weight, gradient and two Adam moments (16 bytes).

    >>> b = qlora_budget(6_738_415_616, 4096, 11008, 32, 64)  # LLaMA-7B, r = 64
    >>> round(b["frozen"] / 1e9, 2), b["trained"], round(b["adapters"] / 1e9, 2)
    (3.48, 159907840, 2.56)
    """
    n_params = check_int(n_params, "n_params", low=1)
    d, d_ff = check_int(d, "d", low=1), check_int(d_ff, "d_ff", low=1)
    n_layers = check_int(n_layers, "n_layers", low=1)
    rank = check_int(rank, "rank", low=1)
    if rank > d:
        raise ValueError(f"rank must be at most d = {d}, got {rank}")
    n_lora = n_layers * rank * (4 * (d + d) + 3 * (d + d_ff))
    return {
        "frozen": n_params * NF4_DQ_BITS / 8,
        "trained": n_lora,
        "adapters": 16.0 * n_lora,
    }


def trainable_parameters(
    config: DecoderConfig,
    method: str,
    *,
    rank: int = 4,
    targets: Iterable[str] = ("w_qkv",),
    virtual_tokens: int = 8,
) -> int:
    """The number of trained numbers for ``method`` (one of :data:`METHODS`).

    >>> from course_lib.block.config import BlockConfig
    >>> cfg = DecoderConfig(50257, 1024, 12, BlockConfig(768, 12, 3072, norm_position="pre"))
    >>> trainable_parameters(cfg, "lora", rank=8, targets=["w_qkv"])  # 12 * 8 * (2304 + 768)
    294912
    >>> trainable_parameters(cfg, "prefix", virtual_tokens=20)  # 12 * 2 * 20 * 768
    368640
    """
    method = check_choice(method, "method", METHODS)
    if not isinstance(config, DecoderConfig):
        raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
    if method == "full":
        return count_parameters(config)
    if method == "frozen":
        return 0
    if method in ("prompt", "prefix"):
        n = check_int(virtual_tokens, "virtual_tokens", low=1)
        per_layer = 2 * config.n_layers if method == "prefix" else 1
        return per_layer * n * config.d_model
    if isinstance(targets, str):
        targets = [targets]
    total = 0
    for t in targets:
        d, k = target_shape(config, t)
        r = check_rank(rank, d, k, what=f"the matrix {t} ({d}, {k})")
        total += config.n_layers * r * (d + k)
    return total


def memory_bytes(
    config: DecoderConfig,
    method: str,
    *,
    rank: int = 4,
    targets: Iterable[str] = ("w_qkv",),
    virtual_tokens: int = 8,
) -> dict[str, float]:
    """Bytes of frozen weights, trained weights, gradients and Adam's two moments (float32).

    QLoRA stores the adapted-block matrices in NF4 with double quantisation
    (:func:`~course_lib.peft.qlora.bits_per_parameter`); embeddings, norms and biases stay float32.
    Activations are not included: they depend on the batch, not on the method.

    >>> from course_lib.block.config import BlockConfig
    >>> cfg = DecoderConfig(12, 32, 2, BlockConfig(64, 4, 256, norm_position="pre"))
    >>> m = memory_bytes(cfg, "full")
    >>> m["frozen"], m["trained"] == m["gradients"] == m["optimiser"] / 2
    (0.0, True)
    """
    method = check_choice(method, "method", METHODS)
    n_all = count_parameters(config)
    n_train = trainable_parameters(
        config, method, rank=rank, targets=targets, virtual_tokens=virtual_tokens
    )
    frozen = 0.0 if method == "full" else 4.0 * n_all
    if method == "qlora":
        matrices = [target_shape(config, t) for t in ("w_qkv", "w_o", "w_1", "w_2")]
        n_mat = sum(d * k for d, k in matrices)
        per_layer = sum(bits_per_parameter(d * k) * d * k / 8 for d, k in matrices)
        frozen = 4.0 * (n_all - config.n_layers * n_mat) + config.n_layers * per_layer
    return {
        "frozen": frozen,
        "trained": 4.0 * n_train,
        "gradients": 4.0 * n_train,
        "optimiser": 8.0 * n_train,
    }


def measured_memory(model: torch.nn.Module, optimiser: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes held by the model's tensors, their gradients and the optimiser's state, counted.

    Call it after at least one step (Adam creates its state on the first step). Storages shared
    by several tensors (tied weights) are counted once.
    """
    seen: set[int] = set()

    def nbytes(tensors: Iterable[Any]) -> int:
        total = 0
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            s = t.untyped_storage()
            if s.data_ptr() in seen or s.nbytes() == 0:
                continue
            seen.add(s.data_ptr())
            total += s.nbytes()
        return total

    trained = [p for p in model.parameters() if p.requires_grad]
    frozen = [p for p in model.parameters() if not p.requires_grad] + list(model.buffers())
    state = [
        v for s in optimiser.state.values() for v in s.values() if torch.is_tensor(v) and v.ndim > 0
    ]
    return {
        "frozen": nbytes(frozen),
        "trained": nbytes(trained),
        "gradients": nbytes(p.grad for p in trained),
        "optimiser": nbytes(state),
    }
