"""QLoRA's frozen weights: NF4 codes, two per byte, with double-quantised block scales.

Dettmers et al. (2023) store each frozen matrix as 4-bit NormalFloat codes in blocks of 64 with
one absmax scale per block, and quantise those scales again ("double quantisation") to 8 bits in
blocks of 256 around their mean. Chapter 12 built NF4 (:func:`course_lib.number_formats.accelerated.nf4_quantize`)
and the int8 absmax quantiser; this module only composes them. The second level uses absmax int8
where bitsandbytes uses an 8-bit dynamic float code: the same memory, another format (chapter 12).

Memory per weight: ``4 + 8/64 + 32/(64*256)`` bits plus one float32 mean per matrix, about 4.127.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from course_lib.checks import as_tensor, check_int
from course_lib.number_formats import accelerated as nf

__all__ = ["NF4Weight", "bits_per_parameter"]


class NF4Weight(nn.Module):
    """A frozen matrix in NF4 with double quantisation; :meth:`dequantize` gives it back in bfloat16.

    >>> W = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    >>> q = NF4Weight(W)
    >>> q.dequantize().shape, q.dequantize().dtype, q.bits_per_parameter()
    (torch.Size([8, 64]), torch.bfloat16, 4.25)
    >>> q.bits_per_parameter() == bits_per_parameter(8 * 64)  # the formula, counted
    True
    """

    def __init__(self, weight: Any, block_size: int = 64, scale_block_size: int = 256) -> None:
        super().__init__()
        W = as_tensor(weight, "weight", ndim=2).detach().float()
        self.shape = tuple(W.shape)
        self.numel = W.numel()
        if self.numel % 2:
            raise ValueError(
                f"weight must have an even number of entries to pack, got {self.shape}"
            )
        self.block_size = check_int(block_size, "block_size", low=1)
        self.scale_block_size = check_int(scale_block_size, "scale_block_size", low=1)
        codes, absmax = nf.nf4_quantize(W.reshape(-1), block_size=self.block_size)
        offset = absmax.mean()
        q2, scale2 = nf.absmax_quantize(absmax - offset, block_size=self.scale_block_size, bits=8)
        self.register_buffer("packed", nf.pack_4bit(codes).clone())  # uint8, two codes per byte
        self.register_buffer("scale_codes", q2.clone())  # int8, one per block of 64 weights
        self.register_buffer("scale_scales", scale2.float().clone())  # float32, one per 256 blocks
        self.register_buffer("offset", offset.float().reshape(1))  # float32, one per matrix

    def absmax(self) -> torch.Tensor:
        """The block scales, dequantised (float32): the first level of the double quantisation."""
        return (
            nf.absmax_dequantize(self.scale_codes, self.scale_scales, self.scale_block_size)
            + self.offset
        )

    def dequantize(self, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """The matrix back, ``level[code] * absmax`` per block, in ``dtype`` (the compute dtype)."""
        codes = nf.unpack_4bit(self.packed)
        W = nf.nf4_dequantize(codes, self.absmax(), block_size=self.block_size)
        return W.reshape(self.shape).to(dtype)

    def storage_bytes(self) -> int:
        """Bytes the stored tensors occupy (measured from their storages)."""
        return sum(b.untyped_storage().nbytes() for b in self.buffers())

    def bits_per_parameter(self) -> float:
        """Measured storage in bits divided by the number of weights it stands for."""
        return 8 * self.storage_bytes() / self.numel

    def extra_repr(self) -> str:
        return f"shape={self.shape}, bits_per_parameter={self.bits_per_parameter():.3f}"


def bits_per_parameter(n: int, block_size: int = 64, scale_block_size: int = 256) -> float:
    """The formula: 4-bit codes, int8 scales per block, float32 second-level scales, one mean.

    >>> round(bits_per_parameter(4096 * 4096), 4)
    4.127
    >>> bits_per_parameter(64 * 256, scale_block_size=256) == 4 + 8 / 64 + 32 / (64 * 256) + 32 / (64 * 256)
    True
    """
    n = check_int(n, "n", low=1)
    blocks = -(-n // block_size)
    scale_blocks = -(-blocks // scale_block_size)
    bits = 8 * (-(-n // 2)) + 8 * blocks + 32 * scale_blocks + 32
    return bits / n
