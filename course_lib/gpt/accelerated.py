"""Chapter 8 (GPT): PyTorch twins of :mod:`course_lib.gpt.reference`.

Same names, signatures and equations as the reference (read it for the maths), batched over
leading dimensions, on any device, dtype-preserving and differentiable. The hot path is written
for speed: the three attention projections are one fused matrix product, the attention is
PyTorch's fused ``scaled_dot_product_attention``, and the norms and activations are PyTorch's
kernels. :class:`KVCache` keeps each layer's keys and values so that generation feeds only the
new token (Section 8.5); :class:`course_lib.gpt.model.GPT` runs exactly this code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.checks import (
    as_tensor,
    check_int,
    check_real,
    fmt_shape,
    values_are_free_to_read,
)
from course_lib.gpt.config import GPTConfig
from course_lib.gpt.params import check_params
from course_lib.gpt.reference import NS_COEFFICIENTS

__all__ = [
    "causal_lm_loss",
    "classifier_logits",
    "fine_tune_loss",
    "gpt_forward",
    "muon_step",
    "newton_schulz",
]

_PHI = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "swish": F.silu,
    "relu2": lambda t: F.relu(t).square(),
}


class KVCache:
    """The keys and values of every layer for the tokens seen so far (one batch of sequences).

    ``layers[l]`` is ``(k, v)``, each (..., h, T, d_head), or None before the first call;
    ``length`` is T, the position the next token will take.
    """

    def __init__(self, n_layers: int) -> None:
        self.layers: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layers

    @property
    def length(self) -> int:
        first = self.layers[0]
        return 0 if first is None else first[0].shape[-2]

    def crop(self, n: int) -> None:
        """Keep the first ``n`` positions only."""
        self.layers = [
            None if kv is None else (kv[0][..., :n, :], kv[1][..., :n, :]) for kv in self.layers
        ]


# ------------------------------------------------------------------------------ input checks
def check_tokens(
    tokens: Any, config: GPTConfig, device: torch.device, start: int = 0
) -> torch.Tensor:
    """Integer tokens (..., L) on ``device`` with ``start + L <= context_length``, ids in range."""
    t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(tokens)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"tokens must be integers (token ids), got a tensor of dtype {t.dtype}")
    if t.ndim < 1 or 0 in t.shape:
        raise ValueError(f"tokens must have shape (..., L) with L >= 1, got {fmt_shape(t.shape)}")
    if start + t.shape[-1] > config.context_length:
        seen = f" after {start} cached ones" if start else ""
        raise ValueError(
            f"the sequence has {t.shape[-1]} tokens{seen} but the model has only "
            f"context_length = {config.context_length} positions"
        )
    if t.device != device:
        raise ValueError(f"tokens are on {t.device} but the parameters are on {device}")
    if values_are_free_to_read(t):
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= config.vocab_size:
            raise ValueError(
                f"token ids must lie in [0, {config.vocab_size - 1}] (vocab_size = "
                f"{config.vocab_size}), got values from {lo} to {hi}"
            )
    return t.long()


# ------------------------------------------------------------------------------ the model
def _norm(z: torch.Tensor, p: Mapping[str, Any], prefix: str, c: GPTConfig) -> torch.Tensor:
    if c.norm == "rms":
        return F.rms_norm(z, (c.d_model,), p[f"{prefix}_gain"], c.eps)
    return F.layer_norm(z, (c.d_model,), p[f"{prefix}_gain"], p.get(f"{prefix}_bias"), c.eps)


def _fuse(w: torch.Tensor) -> torch.Tensor:
    """(h, d, d_head) -> (d, h*d_head): the heads' matrices side by side (Chapter 4)."""
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)


def rope_tables(
    start: int, L: int, d_head: int, base: float, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles ``m w_i`` for positions m = start..start+L-1, (L, d_head/2) each.

    Computed once per forward pass and shared by every layer (Chapter 6's
    :func:`~course_lib.positions.accelerated.rotary_embedding` recomputes them on every call).
    """
    w = base ** -(torch.arange(0, d_head, 2, dtype=torch.float64, device=device) / d_head)
    angle = torch.arange(start, start + L, dtype=torch.float64, device=device)[:, None] * w
    return angle.cos().to(dtype), angle.sin().to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the pairs (2i, 2i+1) of x (..., L, d) by the tables: Chapter 6's interleaved RoPE."""
    xa, xb = x[..., 0::2], x[..., 1::2]  # (..., L, d/2) each
    return torch.stack([xa * cos - xb * sin, xa * sin + xb * cos], dim=-1).flatten(-2)


def _attention(
    z: torch.Tensor,
    p: Mapping[str, Any],
    c: GPTConfig,
    cache: KVCache | None,
    layer: int,
    start: int,
    rope: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Causal multi-head self-attention of z (..., L, d), appending to ``cache`` if given."""
    L, h = z.shape[-2], c.n_heads
    w = torch.cat([_fuse(p["w_q"]), _fuse(p["w_k"]), _fuse(p["w_v"])], dim=1)  # (d, 3d)
    b = (
        torch.cat([p["b_q"].reshape(-1), p["b_k"].reshape(-1), p["b_v"].reshape(-1)])
        if c.bias
        else None
    )
    qkv = F.linear(z, w.t(), b)  # (..., L, 3d): the three projections in one product
    q, k, v = (t.unflatten(-1, (h, c.d_head)).transpose(-3, -2) for t in qkv.chunk(3, dim=-1))
    if c.qk_norm:  # (..., h, L, d_head): every query and key at root mean square 1
        q, k = F.rms_norm(q, (c.d_head,), None, c.eps), F.rms_norm(k, (c.d_head,), None, c.eps)
    if rope is not None:  # (..., h, L, d_head), rotated by their absolute positions
        q, k = _rotate(q, *rope), _rotate(k, *rope)
    if cache is not None:
        past = cache.layers[layer]
        if past is not None:
            k, v = torch.cat([past[0], k], dim=-2), torch.cat([past[1], v], dim=-2)
        cache.layers[layer] = (k, v)
    T = k.shape[-2]  # keys seen: the cached ones and the new ones
    if T == L:
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    elif L == 1:  # one new query sees every key
        a = F.scaled_dot_product_attention(q, k, v)
    else:  # query i sits at position T-L+i and sees keys 0..T-L+i
        mask = torch.ones(L, T, dtype=torch.bool, device=z.device).tril(T - L)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out = F.linear(a.transpose(-3, -2).flatten(-2), p["w_o"].t(), p.get("b_o"))  # (..., L, d)
    return out


def _mlp(z: torch.Tensor, p: Mapping[str, Any], c: GPTConfig) -> torch.Tensor:
    phi = _PHI[c.activation]
    if c.gated:
        gate = phi(F.linear(z, p["w_1"].t(), p.get("b_1")))
        return F.linear(gate * F.linear(z, p["w_2"].t(), p.get("b_2")), p["w_3"].t(), p.get("b_3"))
    return F.linear(phi(F.linear(z, p["w_1"].t(), p.get("b_1"))), p["w_2"].t(), p.get("b_2"))


def hidden_states(
    tokens: torch.Tensor,
    p: Mapping[str, Any],
    c: GPTConfig,
    cache: KVCache | None = None,
) -> torch.Tensor:
    """``h_n`` after the final norm on checked inputs, (..., L, d); appends to ``cache``."""
    start = 0 if cache is None else cache.length
    L = tokens.shape[-1]
    h = F.embedding(tokens, p["tok_emb"])  # (..., L, d): U W_e
    rope = None
    if c.positions == "learned":
        h = h + p["pos_emb"][start : start + L]  # + W_p at the absolute positions
    else:
        rope = rope_tables(start, L, c.d_head, c.rope_base, h.dtype, h.device)
    for i, blk in enumerate(p["blocks"]):
        h = h + _attention(_norm(h, blk, "norm1", c), blk, c, cache, i, start, rope)
        h = h + _mlp(_norm(h, blk, "norm2", c), blk, c)
    return _norm(h, p, "final_norm", c)


def final_hidden(tokens: Any, params: Any, config: GPTConfig) -> torch.Tensor:
    """``h_n`` after the final norm, (..., L, d)."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    p = check_params(params, config, lambda v, name: as_tensor(v, name))
    return hidden_states(check_tokens(tokens, config, p["tok_emb"].device), p, config)


def gpt_forward(tokens: Any, params: Any, config: GPTConfig) -> torch.Tensor:
    """Eq. (21): the logits ``h_n W_e^T`` (..., L, vocab_size); see the reference.

    >>> from course_lib.gpt.config import GPTConfig, count
    >>> cfg = GPTConfig(vocab_size=5, context_length=4, n_layers=1, n_heads=2, d_model=4)
    >>> gpt_forward(torch.tensor([[0, 3, 1]]), torch.randn(count(cfg)), cfg).shape
    torch.Size([1, 3, 5])
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    p = check_params(params, config, lambda v, name: as_tensor(v, name))
    h = hidden_states(check_tokens(tokens, config, p["tok_emb"].device), p, config)
    return F.linear(h, p["tok_emb"] if config.tie_head else p["lm_head"])  # (..., L, V)


# ------------------------------------------------------------------------------ the losses
def _int_tensor(x: Any, name: str, device: torch.device) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must be integers, got a tensor of dtype {t.dtype}")
    return t.to(device).long()


def _shifted_targets(tokens: torch.Tensor, lengths: Any) -> torch.Tensor:
    targets = tokens[..., 1:]  # (..., L-1): position i predicts token i+1
    if lengths is None:
        return targets
    n = _int_tensor(lengths, "lengths", tokens.device)
    if tuple(n.shape) != tuple(tokens.shape[:-1]):
        raise ValueError(
            f"lengths must have shape {fmt_shape(tokens.shape[:-1])} (one per sequence), got "
            f"{fmt_shape(n.shape)}"
        )
    if (
        values_are_free_to_read(n)
        and n.numel()
        and (int(n.min()) < 1 or int(n.max()) > tokens.shape[-1])
    ):
        raise ValueError(
            f"lengths must lie in [1, {tokens.shape[-1]}], got values from {int(n.min())} to {int(n.max())}"
        )
    target_pos = torch.arange(1, tokens.shape[-1], device=tokens.device)
    return targets.masked_fill(target_pos >= n[..., None], -100)


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of logits (..., L, V) against shifted targets (..., L-1); no checks."""
    V = logits.shape[-1]
    return F.cross_entropy(
        logits[..., :-1, :].reshape(-1, V), targets.reshape(-1), ignore_index=-100
    )


def causal_lm_loss(logits: Any, tokens: Any, lengths: Any = None) -> torch.Tensor:
    """Eq. (20) as a loss, mean of ``-log P(u_(i+1) | u_0..u_i)``; see the reference.

    >>> round(float(causal_lm_loss(torch.zeros(1, 3, 4), torch.tensor([[0, 1, 2]]))), 4)
    1.3863
    """
    x = as_tensor(logits, "logits", min_ndim=2)
    t = _int_tensor(tokens, "tokens", x.device)
    if tuple(t.shape) != tuple(x.shape[:-1]):
        raise ValueError(
            f"tokens must have the shape of logits without the last axis, {fmt_shape(x.shape[:-1])}, "
            f"got {fmt_shape(t.shape)}"
        )
    if t.shape[-1] < 2:
        raise ValueError("a causal LM loss needs sequences of at least 2 tokens (L >= 2)")
    return lm_loss(x, _shifted_targets(t, lengths))


def classifier_logits(hidden: Any, w_y: Any, lengths: Any) -> torch.Tensor:
    """Eq. (23): ``h^m W_y`` at each sequence's last real token; see the reference.

    >>> classifier_logits(torch.arange(6.0).reshape(1, 3, 2), torch.eye(2), torch.tensor([2]))
    tensor([[2., 3.]])
    """
    h = as_tensor(hidden, "hidden", ndim=3)
    w = as_tensor(w_y, "w_y", ndim=2)
    if w.shape[0] != h.shape[-1]:
        raise ValueError(
            f"w_y must have {h.shape[-1]} rows to match hidden {fmt_shape(h.shape)}, got "
            f"{fmt_shape(w.shape)}"
        )
    n = _int_tensor(lengths, "lengths", h.device)
    if tuple(n.shape) != (h.shape[0],):
        raise ValueError(f"lengths must have shape ({h.shape[0]},), got {fmt_shape(n.shape)}")
    if values_are_free_to_read(n) and (int(n.min()) < 1 or int(n.max()) > h.shape[1]):
        raise ValueError(
            f"lengths must lie in [1, {h.shape[1]}], got values from {int(n.min())} to {int(n.max())}"
        )
    last = h[torch.arange(h.shape[0], device=h.device), n - 1]  # (B, d)
    return last @ w  # (B, C)


def fine_tune_loss(
    class_logits: Any, labels: Any, lm_logits: Any, tokens: Any, lengths: Any, lam: float = 0.5
) -> torch.Tensor:
    """Eq. (24) as a loss, ``L_3 = L_2 + lambda L_1``; see the reference.

    >>> float(fine_tune_loss(torch.zeros(1, 2), torch.tensor([0]), torch.zeros(1, 2, 4),
    ...                      torch.tensor([[0, 1]]), torch.tensor([2]), lam=1.0))  # doctest: +ELLIPSIS
    2.079...
    """
    lam = check_real(lam, "lam", low=0.0)
    x = as_tensor(class_logits, "class_logits", ndim=2)
    l2 = F.cross_entropy(x, _int_tensor(labels, "labels", x.device))
    if lam == 0:
        return l2
    return l2 + lam * causal_lm_loss(lm_logits, tokens, lengths)


# ------------------------------------------------------------------------------ Muon
def _orthogonalise(G: torch.Tensor, steps: int, eps: float) -> torch.Tensor:
    """Newton-Schulz on (..., m, n) without checks; 16-bit inputs are iterated in float32."""
    a, b, c = NS_COEFFICIENTS
    X = G.float() if G.dtype in (torch.float16, torch.bfloat16) else G
    tall = X.shape[-2] > X.shape[-1]
    if tall:
        X = X.mT
    X = X / (torch.linalg.matrix_norm(X, keepdim=True) + eps)
    batch = X.shape[:-2]
    X = X.reshape(-1, *X.shape[-2:])  # (n, m, k): baddbmm folds the scalars into the products
    for _ in range(steps):
        A = X @ X.mT  # (n, m, m)
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)  # b A + c A A
        X = torch.baddbmm(X, B, X, beta=a)  # a X + B X
    X = X.reshape(*batch, *X.shape[-2:])
    return (X.mT if tall else X).to(G.dtype)


def newton_schulz(grad: Any, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """Push every singular value of a matrix towards 1; see the reference (batched here).

    >>> x = newton_schulz(torch.diag(torch.tensor([3.0, 1.0])))
    >>> [round(v, 2) for v in torch.diag(x).tolist()]
    [0.75, 1.13]
    """
    G = as_tensor(grad, "grad", min_ndim=2)
    check_int(steps, "steps", low=0)
    check_real(eps, "eps", low=0.0)
    if values_are_free_to_read(G) and not bool(torch.isfinite(G).all()):
        raise ValueError("grad must be finite, got NaN or infinity")
    return _orthogonalise(G, steps, eps)


def muon_step(
    weight: Any,
    grad: Any,
    momentum: Any,
    lr: float,
    beta: float = 0.95,
    nesterov: bool = True,
    steps: int = 5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One Muon step for one matrix, ``(new_weight, new_momentum)``; see the reference.

    >>> w, m = muon_step(torch.zeros(2, 2), torch.diag(torch.tensor([4.0, 1.0])), torch.zeros(2, 2), 0.1)
    >>> [round(v, 2) for v in torch.diag(-w / 0.1).tolist()]
    [0.74, 0.74]
    """
    W = as_tensor(weight, "weight", ndim=2)
    G = as_tensor(grad, "grad", ndim=2)
    M = as_tensor(momentum, "momentum", ndim=2)
    if G.shape != W.shape or M.shape != W.shape:
        raise ValueError(
            f"grad and momentum must have the weight's shape {fmt_shape(W.shape)}, got "
            f"{fmt_shape(G.shape)} and {fmt_shape(M.shape)}"
        )
    lr = check_real(lr, "lr", low=0.0)
    beta = check_real(beta, "beta", low=0.0, high=1.0, high_open=True)
    M = beta * M + G
    direction = G + beta * M if nesterov else M
    scale = math.sqrt(max(1.0, W.shape[0] / W.shape[1]))
    return W - lr * scale * newton_schulz(direction, steps), M
