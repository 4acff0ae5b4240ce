"""A GPT-2-style decoder (chapter 5's weights) with LoRA, QLoRA, prompt tuning or prefix tuning.

:class:`AdaptedGPT` takes a pre-trained :class:`~course_lib.models.decoder.DecoderOnlyModel`
(pre-LN, LayerNorm with biases, ungated feed-forward, tied embeddings: GPT-2's design), copies its
weights, freezes them and adds what the chosen method trains:

* **LoRA** (Hu et al., 2021): a pair ``A`` (r, k), ``B`` (d, r) per adapted matrix. Targets, per
  block: ``w_qkv`` (the fused query/key/value projection, GPT-2's ``c_attn``), ``w_q``, ``w_k``,
  ``w_v`` (one third of it each), ``w_o`` (``attn.c_proj``), ``w_1`` (``mlp.c_fc``), ``w_2``
  (``mlp.c_proj``).
* **QLoRA** (Dettmers et al., 2023): the same, with the frozen matrices stored in NF4 with double
  quantisation (:class:`~course_lib.peft.qlora.NF4Weight`) and multiplied in bfloat16.
* **Prompt tuning** (Lester et al., 2021): ``n`` trainable input embeddings placed before the tokens.
* **Prefix tuning** (Li and Liang, 2021): ``n`` trainable keys and values per head in every layer,
  trained directly or, with ``prefix_projection=H``, through Li and Liang's reparameterisation:
  ``n`` trainable vectors of width d, each mapped by an MLP ``Linear(d, H), tanh,
  Linear(H, layers * 2 * d)`` to its keys and values in every layer (``peft``'s
  ``prefix_projection=True``).
* **Full fine-tuning** (``train_base=True``): every copied weight trains.

Weights are stored as the notes write them: ``W`` is (d_out, d_in) and ``h = x W^T + b``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.block.accelerated import activation as phi
from course_lib.block.config import DecoderConfig
from course_lib.checks import check_bool, check_int, check_real, fmt_shape
from course_lib.models.decoder import DecoderOnlyModel
from course_lib.peft.accelerated import prefix_attention_core
from course_lib.peft.layer import check_rank

__all__ = [
    "TARGETS",
    "AdaptedGPT",
    "check_gpt2_like",
    "target_shape",
]

#: The matrices of a block LoRA can adapt, and what GPT-2 calls them.
TARGETS = {
    "w_qkv": "attn.c_attn",
    "w_q": "attn.c_attn (queries)",
    "w_k": "attn.c_attn (keys)",
    "w_v": "attn.c_attn (values)",
    "w_o": "attn.c_proj",
    "w_1": "mlp.c_fc",
    "w_2": "mlp.c_proj",
}
_MATRIX = {
    "w_qkv": "qkv",
    "w_q": "qkv",
    "w_k": "qkv",
    "w_v": "qkv",
    "w_o": "o",
    "w_1": "fc",
    "w_2": "proj",
}
_SLICE = {"w_q": 0, "w_k": 1, "w_v": 2}


def check_gpt2_like(config: DecoderConfig) -> DecoderConfig:
    """Raise unless ``config`` describes a GPT-2-style model (what :class:`AdaptedGPT` runs)."""
    if not isinstance(config, DecoderConfig):
        raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
    b = config.block
    problems = []
    if b.norm_position != "pre":
        problems.append(f"norm_position={b.norm_position!r} (need 'pre')")
    if b.norm != "layer" or not b.bias:
        problems.append(f"norm={b.norm!r}, bias={b.bias} (need LayerNorm with biases)")
    if b.gated:
        problems.append("gated=True (need an ungated feed-forward)")
    if not config.tie_embeddings:
        problems.append("tie_embeddings=False")
    if problems:
        raise ValueError(
            "AdaptedGPT runs GPT-2-style models only; this one has " + ", ".join(problems)
        )
    return config


def target_shape(config: DecoderConfig, target: str) -> tuple[int, int]:
    """(d, k) of a LoRA target in every block: the output and input widths of its matrix.

    >>> from course_lib.block.config import BlockConfig
    >>> cfg = DecoderConfig(10, 8, 2, BlockConfig(d_model=16, n_heads=2, d_ff=64, norm_position="pre"))
    >>> target_shape(cfg, "w_qkv"), target_shape(cfg, "w_v"), target_shape(cfg, "w_2")
    ((48, 16), (16, 16), (16, 64))
    """
    if target not in TARGETS:
        raise ValueError(
            f"{target!r} is not a matrix of the block; LoRA can adapt one of {sorted(TARGETS)}"
        )
    b = config.block
    d, da, dff = b.d_model, b.d_attn, b.d_ff
    return {
        "w_qkv": (3 * da, d),
        "w_q": (da, d),
        "w_k": (da, d),
        "w_v": (da, d),
        "w_o": (d, da),
        "w_1": (dff, d),
        "w_2": (d, dff),
    }[target]


def _fuse(w: torch.Tensor) -> torch.Tensor:
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)  # (h, d, dk) -> (d, h*dk)


def base_weights(base: DecoderOnlyModel) -> dict[str, torch.Tensor]:
    """The base model's weights in this module's layout (copies, float32, (d_out, d_in) matrices)."""
    p = base.parameter_dict()
    out = {"tok_emb": p["tok_emb"], "pos_emb": p["pos_emb"]}
    for r, blk in enumerate(p["blocks"]):
        qkv = torch.cat([_fuse(blk[f"w_{x}"]) for x in "qkv"], dim=1)  # (d, 3 d_a)
        out |= {
            f"{r}.ln1_g": blk["norm1_gain"], f"{r}.ln1_b": blk["norm1_bias"],
            f"{r}.qkv": qkv.t(), f"{r}.qkv_b": torch.cat([blk[f"b_{x}"].reshape(-1) for x in "qkv"]),
            f"{r}.o": blk["w_o"].t(), f"{r}.o_b": blk["b_o"],
            f"{r}.ln2_g": blk["norm2_gain"], f"{r}.ln2_b": blk["norm2_bias"],
            f"{r}.fc": blk["w_1"].t(), f"{r}.fc_b": blk["b_1"],
            f"{r}.proj": blk["w_2"].t(), f"{r}.proj_b": blk["b_2"],
        }  # fmt: skip
    out |= {"lnf_g": p["final_norm_gain"], "lnf_b": p["final_norm_bias"]}
    return {k: v.detach().float().clone().contiguous() for k, v in out.items()}


class LoRAFactors(nn.Module):
    """The trainable pair of one adapted matrix: ``A`` (r, k) Gaussian, ``B`` (d, r) zero."""

    def __init__(self, d: int, k: int, rank: int, generator: torch.Generator) -> None:
        super().__init__()
        self.A = nn.Parameter(torch.randn(rank, k, generator=generator) / math.sqrt(k))
        self.B = nn.Parameter(torch.zeros(d, rank))


class AdaptedGPT(nn.Module):
    """A frozen GPT-2-style model with trainable adapters; ``forward(tokens) -> logits``.

    Args:
        base: the pre-trained chapter 5 model (its weights are copied, the base is not modified).
        targets: the block matrices LoRA adapts in every block (see :data:`TARGETS`); ``()``: none.
        rank, alpha: LoRA's ``r`` and ``alpha`` (the update is scaled by ``alpha / r``).
        nf4: store the frozen matrices in NF4 with double quantisation (QLoRA).
        prompt_tokens: number of trainable virtual input embeddings (prompt tuning).
        prefix_tokens: number of trainable keys and values per head and layer (prefix tuning).
        prefix_projection: 0 (train the keys and values directly) or the hidden width H of the
            MLP that makes them from ``prefix_tokens`` trainable vectors (Li and Liang, 2021,
            section 4.3); the MLP trains with them, and only its output is needed at inference.
        train_base: train every copied weight too (full fine-tuning).
        seed: seeds the adapters' initialisation.

    Logits are returned for the real tokens only, (..., L, V). With prompt or prefix tokens, the
    real tokens sit at positions ``n .. n + L - 1``, as in ``peft`` on Hugging Face models.
    """

    def __init__(
        self,
        base: DecoderOnlyModel,
        *,
        targets: Iterable[str] = (),
        rank: int = 4,
        alpha: float = 8.0,
        nf4: bool = False,
        prompt_tokens: int = 0,
        prefix_tokens: int = 0,
        prefix_projection: int = 0,
        train_base: bool = False,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(base, DecoderOnlyModel):
            raise TypeError(f"base must be a DecoderOnlyModel, got {type(base).__name__}")
        self.config = c = check_gpt2_like(base.config)
        if isinstance(targets, str):
            targets = (targets,)
        self.targets = tuple(targets)
        for t in self.targets:
            target_shape(c, t)  # raises for a matrix the block does not have
        if "w_qkv" in self.targets and set(self.targets) & {"w_q", "w_k", "w_v"}:
            raise ValueError("adapt either w_qkv or some of w_q, w_k, w_v, not both")
        if len(set(self.targets)) != len(self.targets):
            raise ValueError(f"targets lists a matrix twice: {self.targets}")
        self.nf4 = check_bool(nf4, "nf4")
        self.train_base = check_bool(train_base, "train_base")
        if self.nf4 and self.train_base:
            raise ValueError("QLoRA freezes the NF4 weights: nf4=True needs train_base=False")
        self.prompt_tokens = check_int(prompt_tokens, "prompt_tokens", low=0)
        self.prefix_tokens = check_int(prefix_tokens, "prefix_tokens", low=0)
        if self.prompt_tokens and self.prefix_tokens:
            raise ValueError("use prompt_tokens or prefix_tokens, not both")
        self.prefix_projection = check_int(prefix_projection, "prefix_projection", low=0)
        if self.prefix_projection and not self.prefix_tokens:
            raise ValueError("prefix_projection needs prefix_tokens > 0 (it makes the prefix)")
        if self.virtual_tokens >= c.context_length:
            raise ValueError(
                f"{self.virtual_tokens} virtual tokens leave no position for real tokens "
                f"(context_length = {c.context_length})"
            )
        self.alpha = check_real(alpha, "alpha", low=0.0, low_open=True, high_open=True)
        self.rank = check_int(rank, "rank", low=1)
        for t in self.targets:
            check_rank(rank, *target_shape(c, t), what=f"the matrix {t} {target_shape(c, t)}")
        self.scale = self.alpha / self.rank
        gen = torch.Generator().manual_seed(seed)

        # the frozen (or, for full fine-tuning, trained) copy of the base model
        self.frozen = nn.ParameterDict()
        self.quantized = nn.ModuleDict()
        for name, w in base_weights(base).items():
            key = name.replace(".", "_")
            if self.nf4 and name.split(".")[-1] in ("qkv", "o", "fc", "proj"):
                from course_lib.peft.qlora import NF4Weight

                self.quantized[key] = NF4Weight(w)
            else:
                self.frozen[key] = nn.Parameter(w, requires_grad=self.train_base)

        self.adapters = nn.ModuleList(
            nn.ModuleDict({t: LoRAFactors(*target_shape(c, t), rank, gen) for t in self.targets})
            for _ in range(c.n_layers)
        )
        h, dk = c.block.n_heads, c.block.d_head
        self.prompt = None
        self.prefix = None
        self.prefix_mlp = None
        if self.prompt_tokens:  # start from the embeddings of random vocabulary tokens
            ids = torch.randint(0, c.vocab_size, (self.prompt_tokens,), generator=gen)
            self.prompt = nn.Parameter(self.frozen["tok_emb"].detach()[ids].clone())  # (n, d)
        if self.prefix_tokens and not self.prefix_projection:  # keys and values per layer
            shape = (c.n_layers, 2, h, self.prefix_tokens, dk)
            self.prefix = nn.Parameter(torch.randn(shape, generator=gen))
        elif self.prefix_tokens:  # Li and Liang's reparameterisation, as peft's prefix_projection
            d, H = c.d_model, self.prefix_projection
            self.prefix_embedding = nn.Parameter(torch.randn(self.prefix_tokens, d, generator=gen))
            self.prefix_mlp = nn.Sequential(
                nn.Linear(d, H), nn.Tanh(), nn.Linear(H, c.n_layers * 2 * d)
            )
            with torch.no_grad():  # seeded like everything else (nn.Linear's own init, re-drawn)
                for lin in (self.prefix_mlp[0], self.prefix_mlp[2]):
                    bound = 1 / math.sqrt(lin.in_features)
                    lin.weight.uniform_(-bound, bound, generator=gen)
                    lin.bias.uniform_(-bound, bound, generator=gen)
        self.merged = False

    def prefix_keys_values(self) -> torch.Tensor | None:
        """The prefix every layer's attention reads: (layers, 2, heads, n, d_head), or None.

        Trained directly, it is the parameter ``prefix``; reparameterised, the MLP's output for the
        trained vectors, viewed as ``peft`` does (layer-major, then key/value, head, d_head).
        """
        if self.prefix is not None:
            return self.prefix
        if self.prefix_mlp is None:
            return None
        c = self.config
        n, h, dk = self.prefix_tokens, c.block.n_heads, c.block.d_head
        kv = self.prefix_mlp(self.prefix_embedding)  # (n, layers * 2 * d)
        return kv.view(n, c.n_layers, 2, h, dk).permute(1, 2, 3, 0, 4)

    # ------------------------------------------------------------------ bookkeeping
    @property
    def virtual_tokens(self) -> int:
        return self.prompt_tokens + self.prefix_tokens

    def trainable_parameters(self) -> int:
        """The number of numbers the optimiser updates."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def frozen_parameters(self) -> int:
        """The number of frozen weights (NF4 ones counted as the weights they stand for)."""
        dense = sum(p.numel() for p in self.parameters() if not p.requires_grad)
        return dense + sum(q.numel for q in self.quantized.values())

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """The trained tensors only (what one ships for an adapter), detached copies."""
        return {n: p.detach().clone() for n, p in self.named_parameters() if p.requires_grad}

    def load_adapters(self, state: Mapping[str, torch.Tensor]) -> AdaptedGPT:
        """Load tensors saved by :meth:`adapter_state_dict`; names and shapes must match exactly."""
        own = {n: p for n, p in self.named_parameters() if p.requires_grad}
        missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(
                f"the adapters do not fit this model: missing {missing[:3]}, unexpected "
                f"{unexpected[:3]} (were they trained with other targets or another method?)"
            )
        for name, p in own.items():
            v = state[name]
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"adapter {name!r} must be a tensor, got {type(v).__name__}")
            if v.shape != p.shape:
                raise ValueError(
                    f"adapter {name!r} has shape {fmt_shape(v.shape)} but this model expects "
                    f"{fmt_shape(p.shape)}: it was trained on a model of another shape or rank"
                )
        with torch.no_grad():
            for name, p in own.items():
                p.copy_(state[name])
        return self

    # ------------------------------------------------------------------ merging
    def _delta(self, r: int, matrix: str) -> torch.Tensor | None:
        """The scaled update ``(alpha / r) B A`` of one frozen matrix of block r (all its targets)."""
        pieces = {t: f for t, f in self.adapters[r].items() if _MATRIX[t] == matrix}
        if not pieces:
            return None
        if "w_qkv" in pieces or matrix != "qkv":
            (f,) = pieces.values()
            return self.scale * (f.B @ f.A)
        da = self.config.block.d_attn
        parts = []
        for t in ("w_q", "w_k", "w_v"):
            f = pieces.get(t)
            zero = torch.zeros(da, self.config.d_model)
            parts.append(self.scale * (f.B @ f.A) if f is not None else zero)
        return torch.cat(parts, dim=0)

    @torch.no_grad()
    def merge(self) -> AdaptedGPT:
        """Add every LoRA update into its frozen matrix; the forward then skips the adapters."""
        self._merge(+1)
        self.merged = True
        return self

    @torch.no_grad()
    def unmerge(self) -> AdaptedGPT:
        """Subtract the updates again (the inverse of :meth:`merge`, up to rounding)."""
        if not self.merged:
            raise RuntimeError("nothing to unmerge: the updates are not merged")
        self._merge(-1)
        self.merged = False
        return self

    def _merge(self, sign: int) -> None:
        if self.nf4:
            raise RuntimeError(
                "merging into NF4 weights would re-quantise them (and lose the update's precision); "
                "dequantise the model first"
            )
        if sign > 0 and self.merged:
            raise RuntimeError("the updates are already merged; call unmerge() first")
        for r in range(self.config.n_layers):
            for matrix in ("qkv", "o", "fc", "proj"):
                delta = self._delta(r, matrix)
                if delta is not None:
                    self.frozen[f"{r}_{matrix}"].add_(sign * delta)

    # ------------------------------------------------------------------ forward
    def _weight(self, key: str) -> torch.Tensor:
        if key in self.quantized:
            return self.quantized[key].dequantize()  # bfloat16
        return self.frozen[key]

    def _linear(self, x: torch.Tensor, r: int, matrix: str) -> torch.Tensor:
        """``x W^T + b`` of a frozen matrix of block r, plus the LoRA updates that target it."""
        key = f"{r}_{matrix}"
        W, b = self._weight(key), self.frozen[f"{key}_b"]
        if W.dtype == torch.bfloat16:  # QLoRA: the frozen path runs in bfloat16
            h = F.linear(x.to(torch.bfloat16), W, b.to(torch.bfloat16)).to(x.dtype)
        else:
            h = F.linear(x, W, b)
        if self.merged:
            return h
        for t, f in self.adapters[r].items():
            if _MATRIX[t] != matrix:
                continue
            u = self.scale * F.linear(F.linear(x, f.A), f.B)  # (..., r) then (..., d_t)
            if t in _SLICE:
                da = self.config.block.d_attn
                u = F.pad(u, (da * _SLICE[t], da * (2 - _SLICE[t])))
            h = h + u
        return h

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Integer tokens (..., L) -> logits (..., L, V) of the real tokens."""
        c, fz = self.config, self.frozen
        if not isinstance(tokens, torch.Tensor) or tokens.is_floating_point():
            raise TypeError("tokens must be an integer tensor of token ids")
        n, L = self.virtual_tokens, tokens.shape[-1]
        if n + L > c.context_length:
            raise ValueError(
                f"{L} tokens after {n} virtual ones exceed context_length = {c.context_length}"
            )
        lead = tokens.shape[:-1]
        x = F.embedding(tokens.reshape(-1, L), fz["tok_emb"])  # (B, L, d)
        B = x.shape[0]
        if self.prompt is not None:  # prompt tuning: virtual embeddings before the tokens
            x = torch.cat([self.prompt.expand(B, -1, -1), x], dim=1)  # (B, n + L, d)
            x = x + fz["pos_emb"][: n + L]
        else:
            x = x + fz["pos_emb"][n : n + L]  # a prefix occupies positions 0 .. n-1
        T = x.shape[1]
        h, dk, d = c.block.n_heads, c.block.d_head, c.d_model
        mask = torch.ones(T, T, dtype=torch.bool).tril()  # causal (without a prefix)
        prefix = self.prefix_keys_values()  # (layers, 2, h, P, dk) or None
        for r in range(c.n_layers):
            z = F.layer_norm(x, (d,), fz[f"{r}_ln1_g"], fz[f"{r}_ln1_b"], c.block.eps)
            qkv = self._linear(z, r, "qkv").view(B, T, 3, h, dk)  # (B, T, 3, h, dk)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, h, T, dk)
            if prefix is not None:  # prefix tuning: trained keys and values in front of k, v
                a = prefix_attention_core(q, k, v, prefix[r, 0], prefix[r, 1])  # (B, h, T, dk)
            else:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(x.device))
            a = a.transpose(1, 2).reshape(B, T, h * dk)  # (B, T, h*dk)
            x = x + self._linear(a, r, "o")
            z = F.layer_norm(x, (d,), fz[f"{r}_ln2_g"], fz[f"{r}_ln2_b"], c.block.eps)
            x = x + self._linear(phi(self._linear(z, r, "fc"), c.block.activation), r, "proj")
        x = F.layer_norm(x, (d,), fz["lnf_g"], fz["lnf_b"], c.block.eps)
        logits = F.linear(x[:, self.prompt_tokens :], fz["tok_emb"])  # (B, L, V)
        return logits.reshape(*lead, L, -1)

    def extra_repr(self) -> str:
        return (
            f"targets={self.targets}, rank={self.rank}, alpha={self.alpha}, nf4={self.nf4}, "
            f"prompt_tokens={self.prompt_tokens}, prefix_tokens={self.prefix_tokens}, "
            f"prefix_projection={self.prefix_projection}, "
            f"train_base={self.train_base}, trainable={self.trainable_parameters():,}"
        )
