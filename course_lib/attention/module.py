"""A multi-head attention layer as a ``torch.nn.Module``, and weight copying to and from PyTorch's.

:class:`MultiHeadAttention` stores one (d_in, d_model) projection matrix per input (the fused
form of the per-head matrices of eqs. 14-15) and computes eqs. (16)-(18) with one product per
input and a reshape. ``fused=True`` (the default) hands the attention itself to PyTorch's fused
kernel ``torch.nn.functional.scaled_dot_product_attention``; ``fused=False`` uses the explicit
:func:`course_lib.attention.accelerated.scaled_dot_product_attention`. Both follow the course's
mask convention (boolean, True = may attend) and accept an additive ``bias``.

:func:`to_torch_multihead` and :func:`from_torch_multihead` translate between the per-head
weights of :func:`~course_lib.attention.accelerated.multi_head_attention` and
``torch.nn.MultiheadAttention``, whose conventions differ in three ways: it stores weights as
(out, in) and computes ``x @ W.T``; it packs the heads' rows one after another; and its boolean
``attn_mask`` means the *opposite* (True = may **not** attend).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import accelerated as A
from course_lib.checks import as_tensor, check_int, fmt_shape

__all__ = ["MultiHeadAttention", "from_torch_multihead", "to_torch_multihead"]


class MultiHeadAttention(nn.Module):
    """Multi-head attention, eqs. (14)-(18), with d_k = d_v = d_model / n_heads and d_o = d_model.

    Args:
        d_model: width of the queries' source and of the output.
        n_heads: number of heads h; must divide ``d_model``.
        kdim, vdim: widths of the keys' and values' sources (default ``d_model``).
        bias: whether the four projections have biases (as in ``torch.nn.MultiheadAttention``).
        fused: use PyTorch's fused attention kernel (True) or the explicit computation (False).

    >>> _ = torch.manual_seed(0)
    >>> mha = MultiHeadAttention(8, 2)
    >>> x = torch.randn(3, 5, 8)  # (B, L, d_model)
    >>> mha(x).shape  # self-attention: keys and values default to the queries' source
    torch.Size([3, 5, 8])
    >>> torch.allclose(mha(x), MultiHeadAttention.explicit(mha)(x), atol=1e-6)
    True
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        bias: bool = True,
        fused: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d_model = check_int(d_model, "d_model", low=1)
        n_heads = check_int(n_heads, "n_heads", low=1)
        if d_model % n_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: each head gets "
                f"d_model / n_heads columns (try n_heads in {_divisors(d_model)})"
            )
        kdim = d_model if kdim is None else check_int(kdim, "kdim", low=1)
        vdim = d_model if vdim is None else check_int(vdim, "vdim", low=1)
        self.d_model, self.n_heads, self.fused = d_model, n_heads, bool(fused)
        kw = {"device": device, "dtype": dtype}
        # row convention (x @ w): w_q is (d_g, h*d_k), the per-head matrices side by side
        self.w_q = nn.Parameter(torch.empty(d_model, d_model, **kw))
        self.w_k = nn.Parameter(torch.empty(kdim, d_model, **kw))
        self.w_v = nn.Parameter(torch.empty(vdim, d_model, **kw))
        self.w_o = nn.Parameter(torch.empty(d_model, d_model, **kw))
        names = ("b_q", "b_k", "b_v", "b_o")
        for name in names:
            self.register_parameter(
                name, nn.Parameter(torch.zeros(d_model, **kw)) if bias else None
            )
        for w in (self.w_q, self.w_k, self.w_v, self.w_o):
            nn.init.xavier_uniform_(w)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, kdim={self.w_k.shape[0]}, "
            f"vdim={self.w_v.shape[0]}, bias={self.b_q is not None}, fused={self.fused}"
        )

    @staticmethod
    def explicit(module: MultiHeadAttention) -> MultiHeadAttention:
        """A copy of ``module`` (same weights) that uses the explicit attention."""
        other = MultiHeadAttention(
            module.d_model,
            module.n_heads,
            kdim=module.w_k.shape[0],
            vdim=module.w_v.shape[0],
            bias=module.b_q is not None,
            fused=False,
            device=module.w_q.device,
            dtype=module.w_q.dtype,
        )
        other.load_state_dict(module.state_dict())
        return other

    def stacked_weights(self) -> dict[str, torch.Tensor | None]:
        """The weights as per-head stacks, the arguments of ``multi_head_attention``."""
        h, dh = self.n_heads, self.d_head

        def heads(w: torch.Tensor) -> torch.Tensor:  # (d_in, h*dh) -> (h, d_in, dh)
            return w.unflatten(1, (h, dh)).permute(1, 0, 2)

        out: dict[str, torch.Tensor | None] = {
            "w_q": heads(self.w_q),
            "w_k": heads(self.w_k),
            "w_v": heads(self.w_v),
            "w_o": self.w_o,
        }
        for name in ("b_q", "b_k", "b_v"):
            b = getattr(self, name)
            out[name] = None if b is None else b.reshape(h, dh)
        out["b_o"] = self.b_o
        return out

    def forward(
        self,
        x_q: torch.Tensor,
        x_k: torch.Tensor | None = None,
        x_v: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(..., L_q, d_model) queries' source -> (..., L_q, d_model).

        ``x_k`` defaults to ``x_q`` and ``x_v`` to ``x_k``; ``mask`` (boolean, True = may attend)
        and ``bias`` broadcast to (..., h, L_q, L_k).
        """
        x_q = as_tensor(x_q, "x_q", min_ndim=2)
        x_k = x_q if x_k is None else as_tensor(x_k, "x_k", min_ndim=2)
        x_v = x_k if x_v is None else as_tensor(x_v, "x_v", min_ndim=2)
        for name, x, w in (("x_q", x_q, self.w_q), ("x_k", x_k, self.w_k), ("x_v", x_v, self.w_v)):
            if x.shape[-1] != w.shape[0]:
                raise ValueError(
                    f"{name} of shape {fmt_shape(x.shape)} has width {x.shape[-1]}, but this "
                    f"layer expects width {w.shape[0]}"
                )
        if x_k.shape[-2] != x_v.shape[-2]:
            raise ValueError(
                f"x_k of shape {fmt_shape(x_k.shape)} and x_v of shape {fmt_shape(x_v.shape)} "
                "must have the same length (one value per key)"
            )
        h = self.n_heads
        if x_q is x_k is x_v:  # self-attention: one product for the three projections
            w = torch.cat([self.w_q, self.w_k, self.w_v], dim=1)  # (d, 3*d)
            b = None if self.b_q is None else torch.cat([self.b_q, self.b_k, self.b_v])
            q, k, v = F.linear(x_q, w.T, b).chunk(3, dim=-1)  # each (..., L, d)
        else:
            q = F.linear(x_q, self.w_q.T, self.b_q)  # (..., L_q, d)
            k = F.linear(x_k, self.w_k.T, self.b_k)  # (..., L_k, d)
            v = F.linear(x_v, self.w_v.T, self.b_v)  # (..., L_k, d)
        q, k, v = (t.unflatten(-1, (h, self.d_head)).transpose(-3, -2) for t in (q, k, v))
        if self.fused:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=_sdpa_mask(q, k, mask, bias))
        else:
            a = A.scaled_dot_product_attention(q, k, v, mask, bias)  # (..., h, L_q, d_head)
        return F.linear(a.transpose(-3, -2).flatten(-2), self.w_o.T, self.b_o)  # (..., L_q, d)


def _sdpa_mask(q, k, mask, bias) -> torch.Tensor | None:
    """The ``attn_mask`` for PyTorch's fused kernel: boolean as it is, or bias with -inf."""
    target = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
    mask = A._as_mask(mask, target, q)
    bias = A._as_bias(bias, target, q)
    if bias is None:
        return mask
    return bias if mask is None else bias.masked_fill(~mask, float("-inf"))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def to_torch_multihead(
    w_q: Any,
    w_k: Any,
    w_v: Any,
    w_o: Any,
    b_q: Any = None,
    b_k: Any = None,
    b_v: Any = None,
    b_o: Any = None,
) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` (batch_first) computing eqs. (14)-(18) with these weights.

    PyTorch's layer needs d_k = d_v, h * d_k = d_o (= its ``embed_dim``); the widths of the
    sources may differ (``kdim``, ``vdim``). Biases are all given or all left out.

    >>> w = torch.randn(2, 4, 2)  # h = 2 heads, d_model = 4, d_k = 2
    >>> mha = to_torch_multihead(w, w, w, torch.eye(4))
    >>> mha.embed_dim, mha.num_heads, mha.in_proj_weight.shape
    (4, 2, torch.Size([12, 4]))
    """
    w_q, w_k, w_v = (as_tensor(w, n, ndim=3) for w, n in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")))
    w_o = as_tensor(w_o, "w_o", ndim=2)
    h, d_g, d_k = w_q.shape
    E = h * d_k
    if w_k.shape[2] != d_k or w_v.shape[2] != d_k or w_o.shape != (E, E):
        raise ValueError(
            "torch.nn.MultiheadAttention needs d_k = d_v and a square w_o of size h * d_k: got "
            f"w_q {fmt_shape(w_q.shape)}, w_k {fmt_shape(w_k.shape)}, w_v {fmt_shape(w_v.shape)}, "
            f"w_o {fmt_shape(w_o.shape)}"
        )
    if d_g != E:
        raise ValueError(f"torch.nn.MultiheadAttention needs d_g = h * d_k = {E}, got d_g = {d_g}")
    biases = (b_q, b_k, b_v, b_o)
    if any(b is None for b in biases) and not all(b is None for b in biases):
        raise ValueError("give all four biases b_q, b_k, b_v, b_o or none of them")
    has_bias = b_q is not None
    mha = nn.MultiheadAttention(
        E,
        h,
        bias=has_bias,
        kdim=w_k.shape[1],
        vdim=w_v.shape[1],
        batch_first=True,
        dtype=w_q.dtype,
        device=w_q.device,
    )

    def rows(w: torch.Tensor) -> torch.Tensor:  # (h, d_in, d_k) -> (h*d_k, d_in): (out, in)
        return A.fuse_head_weights(w).T

    with torch.no_grad():
        if mha._qkv_same_embed_dim:
            mha.in_proj_weight.copy_(torch.cat([rows(w_q), rows(w_k), rows(w_v)]))
        else:
            mha.q_proj_weight.copy_(rows(w_q))
            mha.k_proj_weight.copy_(rows(w_k))
            mha.v_proj_weight.copy_(rows(w_v))
        mha.out_proj.weight.copy_(w_o.T)
        if has_bias:
            b_q, b_k, b_v = (as_tensor(b, n) for b, n in ((b_q, "b_q"), (b_k, "b_k"), (b_v, "b_v")))
            mha.in_proj_bias.copy_(torch.cat([b_q.reshape(-1), b_k.reshape(-1), b_v.reshape(-1)]))
            mha.out_proj.bias.copy_(as_tensor(b_o, "b_o"))
    return mha


def from_torch_multihead(mha: nn.MultiheadAttention) -> dict[str, torch.Tensor | None]:
    """The per-head weights (w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o) of a PyTorch layer.

    >>> mha = nn.MultiheadAttention(4, 2)
    >>> {k: tuple(v.shape) for k, v in from_torch_multihead(mha).items() if v is not None}
    {'w_q': (2, 4, 2), 'w_k': (2, 4, 2), 'w_v': (2, 4, 2), 'w_o': (4, 4), 'b_q': (2, 2), 'b_k': (2, 2), 'b_v': (2, 2), 'b_o': (4,)}
    """
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got {type(mha).__name__}")
    E, h = mha.embed_dim, mha.num_heads
    d = E // h
    if mha._qkv_same_embed_dim:
        wq, wk, wv = mha.in_proj_weight.detach().chunk(3)
    else:
        wq, wk, wv = (getattr(mha, f"{n}_proj_weight").detach() for n in ("q", "k", "v"))

    def heads(w: torch.Tensor) -> torch.Tensor:  # (h*d, d_in) -> (h, d_in, d)
        return w.T.unflatten(1, (h, d)).permute(1, 0, 2)

    out: dict[str, torch.Tensor | None] = {
        "w_q": heads(wq),
        "w_k": heads(wk),
        "w_v": heads(wv),
        "w_o": mha.out_proj.weight.detach().T,
        "b_q": None,
        "b_k": None,
        "b_v": None,
        "b_o": None,
    }
    if mha.in_proj_bias is not None:
        bq, bk, bv = mha.in_proj_bias.detach().chunk(3)
        out.update(b_q=bq.reshape(h, d), b_k=bk.reshape(h, d), b_v=bv.reshape(h, d))
        out["b_o"] = mha.out_proj.bias.detach()
    if mha.bias_k is not None:
        raise ValueError("add_bias_kv=True is not supported (it appends extra keys and values)")
    return out
