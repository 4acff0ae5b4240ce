"""Conformance specs for Chapter 4 (attention): NumPy reference vs PyTorch, same random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from course_lib.conformance import ALL_DTYPES, Case, Spec, batch_shapes, dims, seeded_rng

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []

# Logits are sums of up to 6 products of N(0, 1) numbers; a rounding error e in a logit moves a
# weight by about e * weight, and the output is an average of N(0, 1) values.
ATTENTION_TOL = {"float32": (1e-4, 1e-5), "float16": (2e-2, 2e-2), "bfloat16": (5e-2, 1e-1)}
# Multi-head attention rounds twice more (the projections before, W_O after).
MHA_TOL = {"float32": (1e-4, 1e-4), "float16": (3e-2, 5e-2), "bfloat16": (1e-1, 3e-1)}


def _mask(draw: st.DrawFn, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray | None:
    """None, or a random boolean mask that broadcasts to ``shape`` (sometimes with empty rows)."""
    kind = draw(st.sampled_from(["none", "full", "last_two", "keys_only"]))
    if kind == "none":
        return None
    if kind == "full":
        mshape = shape
    elif kind == "last_two":
        mshape = shape[-2:]
    else:  # a padding-style mask: one row of keys, broadcast over queries
        mshape = (*shape[:-2], 1, shape[-1])
    return rng.random(mshape) < draw(st.sampled_from([0.5, 0.8, 1.0]))


def _bias(draw: st.DrawFn, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray | None:
    if not draw(st.booleans()):
        return None
    return rng.standard_normal(draw(st.sampled_from([shape, shape[-2:]])))


@st.composite
def attention_case(draw: st.DrawFn) -> Case:
    """q (..., L_q, d_k), k (..., L_k, d_k), v (..., L_k, d_v), a mask, a bias and a scale."""
    rng = seeded_rng(draw)
    batch = draw(batch_shapes)
    L_q, L_k, d_k, d_v = draw(dims), draw(dims), draw(dims), draw(dims)
    kv_batch = draw(st.sampled_from([batch, tuple(1 for _ in batch), ()]))
    q = rng.standard_normal((*batch, L_q, d_k))
    k = rng.standard_normal((*kv_batch, L_k, d_k))
    v = rng.standard_normal((*kv_batch, L_k, d_v))
    logits = (*batch, L_q, L_k)
    scale = draw(st.sampled_from([None, None, 1.0, 0.3]))
    return Case((q, k, v, _mask(draw, rng, logits), _bias(draw, rng, logits), scale))


@st.composite
def weights_case(draw: st.DrawFn) -> Case:
    case = draw(attention_case())
    q, k, _, mask, bias, scale = case.args
    return Case((q, k, mask, bias, scale))


@st.composite
def mha_case(draw: st.DrawFn) -> Case:
    """Self- or cross-attention inputs, per-head weights, optional biases, mask and bias."""
    rng = seeded_rng(draw)
    batch = draw(batch_shapes)
    h = draw(st.integers(1, 3))
    d_k, d_v, d_o = draw(dims), draw(dims), draw(dims)
    d_l = draw(dims)
    if draw(st.booleans()):  # self-attention: one source
        x = rng.standard_normal((*batch, d_l, draw(dims)))
        x_q, x_k, x_v = x, x.copy(), x.copy()  # copies: gradcheck perturbs each separately
        d_s = d_l
    else:  # cross-attention: d_l != d_s in general, three widths
        d_s = draw(dims)
        x_q = rng.standard_normal((*batch, d_l, draw(dims)))
        x_k = rng.standard_normal((*batch, d_s, draw(dims)))
        x_v = rng.standard_normal((*batch, d_s, draw(dims)))
    w_q = rng.standard_normal((h, x_q.shape[-1], d_k)) / np.sqrt(x_q.shape[-1])
    w_k = rng.standard_normal((h, x_k.shape[-1], d_k)) / np.sqrt(x_k.shape[-1])
    w_v = rng.standard_normal((h, x_v.shape[-1], d_v)) / np.sqrt(x_v.shape[-1])
    w_o = rng.standard_normal((h * d_v, d_o)) / np.sqrt(h * d_v)
    logits = (*batch, h, d_l, d_s)
    mask, bias = _mask(draw, rng, logits), _bias(draw, rng, logits)
    biases = (None,) * 4
    if draw(st.booleans()):
        biases = tuple(rng.standard_normal(s) for s in ((h, d_k), (h, d_k), (h, d_v), (d_o,)))
    return Case((x_q, x_k, x_v, w_q, w_k, w_v, w_o, mask, bias, *biases))


@st.composite
def heads_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    h = draw(st.integers(1, 4))
    x = rng.standard_normal((*draw(batch_shapes), draw(dims), h * draw(dims)))
    return Case((x, h))


@st.composite
def merge_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    return Case((rng.standard_normal((*draw(batch_shapes), draw(dims), draw(dims), draw(dims))),))


@st.composite
def head_weights_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    return Case((rng.standard_normal((draw(st.integers(1, 4)), draw(dims), draw(dims))),))


@st.composite
def lengths_case(draw: st.DrawFn) -> Case:
    L = draw(st.integers(1, 8))
    lengths = draw(st.lists(st.integers(1, L), min_size=1, max_size=4))
    return Case((np.array(lengths, dtype=np.int64), L))


for _name, _inputs in (
    ("scaled_dot_product_attention", attention_case()),
    ("attention_per_query", attention_case()),
    ("attention_weights", weights_case()),
):
    SPECS.append(
        Spec(
            topic="attention",
            name=_name,
            inputs=_inputs,
            dtypes=ALL_DTYPES,
            tolerance=ATTENTION_TOL,
        )
    )

SPECS.append(
    Spec(
        topic="attention",
        name="multi_head_attention",
        inputs=mha_case(),
        dtypes=ALL_DTYPES,
        tolerance=MHA_TOL,
    )
)

# Reshapes are exact in every dtype.
_EXACT = {d: (0.0, 0.0) for d in ALL_DTYPES}
SPECS.append(Spec("attention", "split_heads", heads_case(), ALL_DTYPES, _EXACT))
SPECS.append(Spec("attention", "merge_heads", merge_case(), ALL_DTYPES, _EXACT))
SPECS.append(Spec("attention", "fuse_head_weights", head_weights_case(), ALL_DTYPES, _EXACT))

# Masks are boolean outputs of integer inputs: there is nothing to differentiate, and no float
# dtype to vary (float64 is listed only because every spec names at least one dtype).
SPECS.append(
    Spec(
        "attention",
        "causal_mask",
        st.integers(1, 9).map(lambda L: Case((L,))),
        dtypes=("float64",),
        gradcheck=False,
    )
)
SPECS.append(
    Spec("attention", "padding_mask", lengths_case(), dtypes=("float64",), gradcheck=False)
)
