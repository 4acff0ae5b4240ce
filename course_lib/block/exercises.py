"""Checkers for the exercises of Chapter 5 (the Transformer block).

>>> import course_lib.block.reference as ref
>>> layer_norm(lambda x, g, b, eps=1e-5: ref.layer_norm(x, g, b, eps)).passed
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import course_lib.block.reference as ref
from course_lib.attention.reference import multi_head_attention
from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import count_parameters
from course_lib.block.params import init_decoder_block, init_parameters
from course_lib.checker import Outcome, check_cases, diagnose, guarded, seeded, to_array
from course_lib.checks import is_tensor

__all__ = [
    "DECODER_CONFIG",
    "PRE_LN_CONFIG",
    "decoder_block",
    "gpt_parameters",
    "layer_norm",
    "layer_norm_backward",
    "pre_ln_block",
]

#: The block of exercise "a pre-LN block from parts": d_model 8, 2 heads, d_ff 32, ReLU, biases.
PRE_LN_CONFIG = BlockConfig(d_model=8, n_heads=2, d_ff=32, norm_position="pre")


#: The decoder block of exercise "a decoder block with cross-attention": post-LN, as the paper.
DECODER_CONFIG = BlockConfig(d_model=8, n_heads=2, d_ff=32, norm_position="post")

#: Seed of this chapter's checker inputs.
SEED = 2025


def _close(got: object, expected: np.ndarray) -> bool:
    arr = to_array(got)
    return arr is not None and arr.shape == np.shape(expected) and np.allclose(arr, expected)


# ------------------------------------------------------------------------------ LayerNorm
@guarded
def layer_norm(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(x, gain, bias, eps=1e-5)`` is LayerNorm over the last axis of x."""
    rng = seeded(SEED)
    eps = 1e-5
    cases = [
        ("two tokens [[1, 2, 3], [0, 0, 6]], gain 1, bias 0", np.array([[1.0, 2.0, 3.0], [0, 0, 6]]),
         np.ones(3), np.zeros(3)),
        ("a (4, 8) x with a random gain and bias", rng.standard_normal((4, 8)),
         1 + rng.standard_normal(8), rng.standard_normal(8)),
        ("a batch (2, 3, 5)", 3 * rng.standard_normal((2, 3, 5)) + 1,
         rng.standard_normal(5), rng.standard_normal(5)),
        ("a token whose entries are all equal (sigma = 0)", np.array([[2.0, 2.0, 2.0, 2.0]]),
         np.ones(4), np.arange(4.0)),
    ]  # fmt: skip

    def compare(got: object, case: tuple) -> str | None:
        x, g, b = case
        expected = ref.layer_norm(x, g, b, eps)
        if _close(got, expected):
            return None
        arr = to_array(got)
        if arr is not None and arr.shape == expected.shape:
            mu = x.mean(-1, keepdims=True)
            if not np.all(np.isfinite(arr)):
                return (
                    "the result has NaN or inf: when all entries of a token are equal, sigma is "
                    "0; add eps inside the square root, sqrt(var + eps)"
                )
            with np.errstate(all="ignore"):
                no_eps = b + g * (x - mu) / x.std(-1, keepdims=True)
            if _close(arr, no_eps):
                return "you left out eps: put eps inside the square root, sqrt(var + eps)"
            if _close(arr, ref.layer_norm(x, None, b, eps)):
                return (
                    "you left out the gain gamma (the handwritten notes do too): multiply by gain"
                )
            if _close(arr, ref.layer_norm(x, g, None, eps)):
                return "you left out the bias beta: add bias at the end"
            if x.shape[-1] > 1 and _close(
                arr, b + g * (x - mu) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps)
            ):
                return "divide the squared deviations by d, not d - 1 (the biased variance)"
            if _close(arr, b + g * (x - mu) / (x.std(-1, keepdims=True) + eps)):
                return "put eps inside the square root, sqrt(var + eps), as torch.nn.LayerNorm does"
            if x.ndim >= 2 and x.shape[0] > 1:
                m0, s0 = x.mean(0, keepdims=True), np.sqrt(x.var(0, keepdims=True) + eps)
                if _close(arr, b + g * (x - m0) / s0):
                    return "normalise each token over its features (the last axis), not over axis 0"
        return diagnose(got, expected)

    return check_cases(
        "LayerNorm with gain and bias",
        lambda x, g, b: fn(x, g, b, eps=eps),
        [(d, (x, g, b), (x, g, b)) for d, x, g, b in cases],
        compare=compare,
        require=require,
    )


# ------------------------------------------------------------------- LayerNorm backward
def _layer_norm_grad(x: np.ndarray, g: np.ndarray, dy: np.ndarray, eps: float) -> np.ndarray:
    """dL/dx of LayerNorm by autograd (float64), the checker's independent answer."""
    import torch

    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.layer_norm(xt, x.shape[-1:], torch.tensor(g), None, eps)
    y.backward(torch.tensor(dy))
    return xt.grad.numpy()


def _ln_grad_formula(
    x: np.ndarray, g: np.ndarray, dy: np.ndarray, eps: float, axis: int = -1, ddof: int = 0
) -> np.ndarray:
    """The derived gradient with the means over ``axis`` and ``ddof``: typical wrong variants."""
    mu = x.mean(axis, keepdims=True)
    sigma = np.sqrt(x.var(axis, keepdims=True, ddof=ddof) + eps)
    gh, xh = dy * g, (x - mu) / sigma
    return (gh - gh.mean(axis, keepdims=True) - xh * (gh * xh).mean(axis, keepdims=True)) / sigma


@guarded
def layer_norm_backward(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(x, gain, grad_out, eps=1e-5)`` returns dL/dx of LayerNorm over the last
    axis, given dL/dy = ``grad_out`` (the bias does not change it)."""
    rng = seeded(SEED + 1)
    eps = 1e-5
    cases = [
        ("one token (1, 2, 3), gain 1, grad_out (1, 0, 0)", np.array([[1.0, 2.0, 3.0]]),
         np.ones(3), np.array([[1.0, 0.0, 0.0]])),
        ("a (4, 8) x with a random gain and grad_out", rng.standard_normal((4, 8)),
         1 + rng.standard_normal(8), rng.standard_normal((4, 8))),
        ("a batch (2, 3, 5)", 3 * rng.standard_normal((2, 3, 5)) + 1,
         rng.standard_normal(5), rng.standard_normal((2, 3, 5))),
    ]  # fmt: skip

    def compare(got: object, case: tuple) -> str | None:
        x, g, dy = case
        expected = _layer_norm_grad(x, g, dy, eps)
        if _close(got, expected):
            return None
        arr = to_array(got)
        if arr is not None and arr.shape == expected.shape and np.all(np.isfinite(arr)):
            mu = x.mean(-1, keepdims=True)
            sigma = np.sqrt(x.var(-1, keepdims=True) + eps)
            gh, xh = dy * g, (x - mu) / sigma
            if _close(arr, gh / sigma):
                return (
                    "you treated mu and sigma as constants; they depend on every entry of the "
                    "token, which adds -mean(g_hat) and -x_hat * mean(g_hat * x_hat)"
                )
            if _close(arr, (gh - gh.mean(-1, keepdims=True)) / sigma):
                return "the mean's term is right; the path through sigma is missing"
            if _close(arr, (gh - xh * (gh * xh).mean(-1, keepdims=True)) / sigma):
                return "the path through sigma is right; the path through mu is missing"
            if not np.allclose(g, 1) and _close(arr, _ln_grad_formula(x, np.ones_like(g), dy, eps)):
                return "multiply grad_out by the gain first: the gain sits after the normalisation"
            if _close(arr, expected * sigma):
                return (
                    "the bracket is right but the final division by sigma = sqrt(var + eps) is "
                    "missing"
                )
            if _close(arr, _ln_grad_formula(x, g, dy, eps, ddof=1)):
                return (
                    "you used the unbiased variance (divide by D - 1, torch.var's default); "
                    "LayerNorm divides by D: x.var(-1) in NumPy, unbiased=False in PyTorch"
                )
            if x.ndim > 1 and _close(arr, _ln_grad_formula(x, g, dy, eps, 0)):
                if x.shape[0] == 1:
                    return (
                        "your gradient is all zeros for a single token: is it a stub that "
                        "returns zeros? If you computed it, your means may run over axis 0 "
                        "(across tokens), where a lone token is its own mean; LayerNorm "
                        "normalises each token over its features, the last axis (axis=-1, "
                        "keepdims=True)"
                    )
                return (
                    "your means run over axis 0, across tokens; LayerNorm normalises each token "
                    "over its features, the last axis (axis=-1, keepdims=True)"
                )
            if not np.allclose(arr.sum(-1), 0) and np.allclose(expected.sum(-1), 0):
                return (
                    "each token's gradient must sum to 0 (adding a constant to a token does not "
                    "change its LayerNorm); yours does not"
                )
        return diagnose(got, expected)

    return check_cases(
        "the gradient of LayerNorm",
        lambda x, g, dy: fn(x, g, dy, eps=eps),
        [(d, (x, g, dy), (x, g, dy)) for d, x, g, dy in cases],
        compare=compare,
        require=require,
    )


# ---------------------------------------------------------------------- a pre-LN block
def _params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    p = init_parameters(PRE_LN_CONFIG, rng)
    for k in p:  # make gains and biases matter
        if k.endswith("_gain"):
            p[k] = 1 + 0.3 * rng.standard_normal(p[k].shape)
        elif k.endswith("_bias") or k.startswith("b_"):
            p[k] = 0.3 * rng.standard_normal(p[k].shape)
    return p


def _variants(x: np.ndarray, p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Typical wrong answers, each with the explanation the checker gives."""

    def ln(i: int, z: np.ndarray) -> np.ndarray:
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    def attn(z: np.ndarray) -> np.ndarray:
        return multi_head_attention(
            z, z, z, p["w_q"], p["w_k"], p["w_v"], p["w_o"],
            b_q=p["b_q"], b_k=p["b_k"], b_v=p["b_v"], b_o=p["b_o"],
        )  # fmt: skip

    def ffn(z: np.ndarray) -> np.ndarray:
        return ref.feed_forward(z, p["w_1"], p["w_2"], p["b_1"], p["b_2"])

    cfg = PRE_LN_CONFIG
    x1 = x + attn(ln(1, x))
    return {
        "this is the post-LN block (norm after each residual addition); pre-LN normalises the "
        "input of each branch and adds the branch's output to the un-normalised stream": (
            ref.transformer_block(x, p, BlockConfig(**{**cfg.__dict__, "norm_position": "post"}))
        ),
        "both branches read the same LN(x): that is the parallel block; in pre-LN the "
        "feed-forward reads LN(x + MHSA(LN(x))), the stream after attention": (
            x + attn(ln(1, x)) + ffn(ln(1, x))
        ),
        "this is the handwritten notes' 'standard' formula x + FFN(LN(x + MHSA(x))), which "
        "drops the attention's residual term and the norm before attention": (
            x + ffn(ln(2, x + attn(x)))
        ),
        "the attention's output is missing from the final sum: add the feed-forward output to "
        "x + MHSA(LN(x)), not to x": x + ffn(ln(2, x1)),
        "the residual connections are missing: each branch's output is added to its input": (
            ffn(ln(2, attn(ln(1, x))))
        ),
        "the norms are missing: apply norm1 before attention and norm2 before the feed-forward": (
            x + attn(x)
        )
        + ffn(x + attn(x)),
    }


@guarded
def pre_ln_block(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(x, params)`` is the pre-LN block of :data:`PRE_LN_CONFIG`.

    ``params`` holds ``norm1_gain, norm1_bias, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o,
    norm2_gain, norm2_bias, w_1, b_1, w_2, b_2`` (see :func:`course_lib.block.params.layout`).
    """
    rng = seeded(SEED)
    shapes = [(5, 8), (2, 4, 8), (1, 8)]
    cases = []
    for s in shapes:
        x, p = rng.standard_normal(s), _params(rng)
        cases.append((f"x of shape {s}", (x, p), (x, p)))

    def compare(got: object, case: tuple) -> str | None:
        x, p = case
        expected = ref.transformer_block(x, p, PRE_LN_CONFIG)
        if _close(got, expected):
            return None
        for why, wrong in _variants(x, p).items():
            if _close(got, wrong):
                return why
        return diagnose(got, expected)

    return check_cases("a pre-LN block from its parts", fn, cases, compare=compare, require=require)


# ------------------------------------------------------------------ counting parameters
def _gpt_config(n_layers: int, d_model: int, vocab_size: int, context_length: int):
    block = BlockConfig(d_model=d_model, n_heads=1, d_ff=4 * d_model, norm_position="pre")
    return DecoderConfig(vocab_size, context_length, n_layers, block)


@guarded
def gpt_parameters(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(n_layers, d_model, vocab_size, context_length)`` counts a GPT exactly.

    The model: learned token and position embeddings, ``n_layers`` pre-LN blocks (LayerNorm with
    gain and bias, attention with biases, FFN of width ``4 d_model`` with biases), a final
    LayerNorm, and an output projection tied to the token embedding.

    >>> gpt_parameters(lambda n, d, V, C: 12 * n * d * d + (V + C) * d).details[0][:22]
    'on GPT-2 small (n_laye'
    """
    sizes = [
        ("GPT-2 small (n_layers=12, d_model=768, V=50257, n_ctx=1024)", (12, 768, 50257, 1024)),
        ("a tiny model (2, 8, 10, 4)", (2, 8, 10, 4)),
        ("the smallest model (1, 1, 1, 1)", (1, 1, 1, 1)),
        ("GPT-3 Medium (24, 1024, 50257, 2048)", (24, 1024, 50257, 2048)),
    ]

    def compare(got: object, s: tuple[int, int, int, int]) -> str | None:
        n, d, V, C = s
        want = count_parameters(_gpt_config(n, d, V, C))
        if is_tensor(got) and got.ndim == 0:  # a 0-d tensor from torch arithmetic
            got = got.item()
        if isinstance(got, float | np.floating) and float(got).is_integer():
            got = int(got)
        if not isinstance(got, int | np.integer) or isinstance(got, bool):
            return f"return the count as an int, got {type(got).__name__}"
        if got == want:
            return None
        mistakes = {
            12 * n * d * d + (V + C) * d: "that is the rule of thumb 12 n d^2 + (V + n_ctx) d; "
            "count the biases and norms too (13 d per block) and the final LayerNorm (2 d)",
            want - 2 * d: "you left out the final LayerNorm (gain and bias: 2 d)",
            want + V * d: "the output projection is tied to the token embedding: do not count "
            "it twice",
            want - C * d: "you left out the position embeddings (n_ctx x d)",
            want - n * 9 * d: "you left out the biases of the linear layers (9 d per block)",
            want - n * 4 * d - 2 * d: "you left out the LayerNorms (2 per block and a final one, "
            "2 d parameters each)",
            want - (V + C) * d: "you left out the embeddings ((V + n_ctx) x d)",
            want - n * 4 * d: "you left out the two LayerNorms of each block (4 d per block)",
        }
        hint = mistakes.get(int(got), "")
        return f"you count {int(got):,} parameters, the right count is {want:,}" + (
            f": {hint}" if hint else ""
        )

    return check_cases(
        "the exact parameter count of a GPT",
        fn,
        [(desc, s, s) for desc, s in sizes],
        compare=compare,
        require=require,
    )


# ------------------------------------------------------------- a decoder block, post-LN
def _decoder_variants(y, m, p) -> dict[str, np.ndarray]:
    """Typical wrong decoder blocks, each with the explanation the checker gives."""
    L = y.shape[-2]
    causal = np.tril(np.ones((L, L), dtype=bool))

    def ln(i, z):
        return ref.layer_norm(z, p[f"norm{i}_gain"], p[f"norm{i}_bias"])

    def att(x_q, x_kv, prefix="", mask=None):
        w = [p[prefix + n] for n in ("w_q", "w_k", "w_v", "w_o")]
        b = {n: p[prefix + n] for n in ("b_q", "b_k", "b_v", "b_o")}
        return multi_head_attention(x_q, x_kv, x_kv, *w, mask=mask, **b)

    def ffn(z):
        return ref.feed_forward(z, p["w_1"], p["w_2"], p["b_1"], p["b_2"])

    def post(self_mask, kv="memory", cross_residual=True, ffn_residual=True):
        y1 = ln(1, y + att(y, y, mask=self_mask))
        c = att(y1, {"memory": m, "y1": y1, "y": y}[kv], "cross_")
        y2 = ln(2, (y1 if cross_residual else 0) + c)
        return ln(3, (y2 if ffn_residual else 0) + ffn(y2))

    pre = BlockConfig(**{**DECODER_CONFIG.__dict__, "norm_position": "pre"})
    own_states = (
        "the cross-attention reads the decoder's own states: its keys and values must come "
        "from the memory (the encoder's output), only its queries from the decoder"
    )
    return {
        "the self-attention is not masked: target position i must not see the tokens after "
        "it (pass a causal mask to the first attention only)": post(None),
        own_states: post(causal, kv="y1"),
        own_states + " (here they come from the block's input y)": post(causal, kv="y"),
        "the cross-attention has no residual connection: add its output to its input before "
        "the second norm": post(causal, cross_residual=False),
        "the feed-forward network has no residual connection: add its output to its input "
        "before the third norm": post(causal, ffn_residual=False),
        "this is the pre-LN decoder block; the exercise asks for post-LN (norm after each "
        "residual addition, as in the original Transformer)": (
            ref.decoder_block(y, m, p, pre, self_mask=causal)
        ),
    }


@guarded
def decoder_block(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(y, memory, params)`` is the post-LN decoder block of :data:`DECODER_CONFIG`.

    Masked (causal) self-attention over ``y`` with ``norm1``, cross-attention (``cross_w_q``
    ...) with queries from the decoder and keys and values from ``memory`` with ``norm2``, the
    feed-forward network with ``norm3``; no source padding.

    >>> decoder_block(lambda y, m, p: ref.decoder_block(
    ...     y, m, p, DECODER_CONFIG, self_mask=np.tril(np.ones((y.shape[-2],) * 2, bool)))).passed
    True
    """
    rng = seeded(SEED + 1)
    cases = []
    for ys, ms in (((4, 8), (6, 8)), ((2, 3, 8), (2, 5, 8)), ((1, 8), (1, 8))):
        p = init_decoder_block(DECODER_CONFIG, rng)
        p = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in p.items()}
        y, m = rng.standard_normal(ys), rng.standard_normal(ms)
        cases.append((f"y of shape {ys} and memory of shape {ms}", (y, m, p), (y, m, p)))

    def compare(got: object, case: tuple) -> str | None:
        y, m, p = case
        L = y.shape[-2]
        expected = ref.decoder_block(
            y, m, p, DECODER_CONFIG, self_mask=np.tril(np.ones((L, L), dtype=bool))
        )
        if _close(got, expected):
            return None
        for why, wrong in _decoder_variants(y, m, p).items():
            if _close(got, wrong):
                return why
        return diagnose(got, expected)

    return check_cases(
        "a decoder block with cross-attention", fn, cases, compare=compare, require=require
    )
