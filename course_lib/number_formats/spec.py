"""Conformance specs for Chapter 12 (number formats, rounding, sums, quantisation).

Rounding is exact arithmetic on both sides, so most tolerances are zero: the NumPy reference and
PyTorch must produce the same bit patterns, the same rounded values and the same integer codes.
Inputs whose arguments are bit patterns or codes are integer arrays, which the registry passes
through unconverted; for those functions the dtype axis does not apply and only one dtype is
listed. None of the rounding or quantising functions is differentiable (their outputs are
piecewise constant or integers), so ``gradcheck`` runs only on the dequantisers, which are linear
in their scales.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from course_lib.conformance import ALL_DTYPES, Case, Spec, batch_shapes, dims, seeded_rng
from course_lib.number_formats.formats import FORMAT_NAMES, get_format

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []

formats = st.sampled_from(FORMAT_NAMES)
#: magnitudes that reach every regime: subnormals and underflow, normal numbers, overflow
scales = st.sampled_from([1e-9, 1e-6, 1e-3, 1.0, 30.0, 1e3, 1e5, 1e40])
EXACT = {d: (0.0, 0.0) for d in ALL_DTYPES}


def _shape(draw: st.DrawFn) -> tuple[int, ...]:
    return (*draw(batch_shapes), draw(dims))


@st.composite
def bit_patterns(draw: st.DrawFn) -> Case:
    """Uniformly random patterns of a random format (NaNs, infinities, subnormals included)."""
    fmt = draw(formats)
    bits = seeded_rng(draw).integers(
        0, 2 ** get_format(fmt).bits, size=_shape(draw), dtype=np.int64
    )
    return Case((bits, fmt))


@st.composite
def values(draw: st.DrawFn, with_saturate: bool = False) -> Case:
    """Normal numbers at a random scale, with a few exact ties, zeros and infinities mixed in."""
    fmt = draw(formats)
    rng = seeded_rng(draw)
    x = draw(scales) * rng.standard_normal(_shape(draw))
    special = rng.random(x.shape)
    x = np.where(special < 0.05, 0.0, x)
    x = np.where((special > 0.05) & (special < 0.08), np.where(x < 0, -np.inf, np.inf), x)
    # exact ties between two neighbours of the format: 1 + (2k+1)/2 steps
    M = get_format(fmt).mantissa_bits
    ties = (1 + (2 * rng.integers(0, 2**M, x.shape) + 1) * 2.0 ** (-M - 1)) * np.sign(x)
    x = np.where((special > 0.08) & (special < 0.2), ties, x)
    kwargs = {"saturate": draw(st.booleans())} if with_saturate else {}
    return Case((x, fmt), kwargs)


@st.composite
def values_and_uniforms(draw: st.DrawFn) -> Case:
    fmt = draw(formats)
    rng = seeded_rng(draw)
    shape = _shape(draw)
    x = draw(scales) * rng.standard_normal(shape)
    u = 0.99 * rng.random(shape)  # stays below 1 after rounding to float32
    return Case((x, fmt, u))


@st.composite
def addends(draw: st.DrawFn) -> Case:
    fmt = draw(formats)
    rng = seeded_rng(draw)
    n = draw(st.integers(1, 40))
    x = draw(st.sampled_from([1e-3, 1.0, 10.0])) * rng.standard_normal((*draw(batch_shapes), n))
    return Case((x, fmt))


@st.composite
def weights(draw: st.DrawFn, nf4: bool = False) -> Case:
    rng = seeded_rng(draw)
    W = draw(st.sampled_from([0.02, 1.0, 50.0])) * rng.standard_normal(_shape(draw))
    block = draw(st.sampled_from([1, 2, 3, 4, 7, 64]))
    if nf4:
        return Case((W, block))
    return Case((W,), {"block_size": draw(st.sampled_from([None, block])), "bits": 8})


@st.composite
def int8_codes(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    q = rng.integers(-127, 128, size=_shape(draw)).astype(np.int8)
    block = draw(st.sampled_from([1, 3, 4, 64]))
    nb = -(-q.size // block)
    return Case((q, 0.5 + rng.random(nb), block))


@st.composite
def nf4_codes(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    codes = rng.integers(0, 16, size=_shape(draw)).astype(np.uint8)
    block = draw(st.sampled_from([1, 3, 4, 64]))
    nb = -(-codes.size // block)
    return Case((codes, 0.5 + rng.random(nb), block))


@st.composite
def nibbles(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), 2 * draw(dims))
    return Case((rng.integers(0, 16, size=shape).astype(np.uint8),))


@st.composite
def bytes_(draw: st.DrawFn) -> Case:
    return Case((seeded_rng(draw).integers(0, 256, size=_shape(draw)).astype(np.uint8),))


ONE_DTYPE = ("float64",)  # integer inputs and outputs: the dtype axis does not apply

# Bit patterns in, float32 values out (every value of the five formats is a float32).
SPECS.append(
    Spec(
        "number_formats",
        "decode",
        bit_patterns(),
        dtypes=("float32",),
        tolerance=EXACT,
        gradcheck=False,  # integer input
        float_args=(),
    )
)
# Values in, bit patterns out: exactly the same patterns from every input dtype (float64 inputs
# included, thanks to rounding to odd before PyTorch's cast).
SPECS.append(
    Spec(
        "number_formats",
        "encode",
        values(with_saturate=True),
        dtypes=ALL_DTYPES,
        tolerance=EXACT,
        gradcheck=False,  # integer output
    )
)
# PyTorch returns the rounded value in the input dtype; float16/bfloat16 inputs cannot hold
# every format's values, so only the wide dtypes are compared.
SPECS.append(
    Spec(
        "number_formats",
        "round_to_format",
        values(with_saturate=True),
        tolerance=EXACT,
        gradcheck=False,  # piecewise constant: the derivative is 0 or undefined
    )
)
SPECS.append(
    Spec(
        "number_formats",
        "stochastic_round",
        values_and_uniforms(),
        tolerance=EXACT,
        gradcheck=False,  # piecewise constant
        float_args=(0, 2),  # u is rounded like x, and the reference sees the same u
    )
)
for _name in ("naive_sum", "pairwise_sum", "kahan_sum"):
    SPECS.append(
        Spec(
            "number_formats",
            _name,
            addends(),
            tolerance=EXACT,  # every operation is rounded to the format on both sides
            gradcheck=False,  # piecewise constant
        )
    )
SPECS.append(
    Spec(
        "number_formats",
        "absmax_quantize",
        weights(),
        dtypes=ALL_DTYPES,
        # codes must match exactly; the scale is absmax / 127 in float64 or float32
        tolerance={d: (1e-15 if d == "float64" else 1e-7, 0.0) for d in ALL_DTYPES},
        gradcheck=False,  # integer codes
        widens_16bit=True,
    )
)
SPECS.append(
    Spec(
        "number_formats",
        "absmax_dequantize",
        int8_codes(),
        float_args=(1,),
    )
)
# The reference builds the code book in float64; PyTorch reproduces bitsandbytes' float32 path
# bit for bit. The two differ by less than 2**-23, one float32 step just below 1.
NF4_TOL = {"float64": (0.0, 2.0**-23 * 1.5), "float32": (1e-6, 2.0**-23 * 1.5)}
SPECS.append(
    Spec(
        "number_formats",
        "nf4_codebook",
        st.just(Case(())),
        dtypes=("float32",),
        tolerance={"float32": (0.0, 2.0**-23)},
        gradcheck=False,  # no inputs
    )
)
SPECS.append(
    Spec(
        "number_formats",
        "nf4_quantize",
        weights(nf4=True),
        dtypes=ALL_DTYPES,
        tolerance={d: (1e-15 if d == "float64" else 1e-7, 0.0) for d in ALL_DTYPES},
        gradcheck=False,  # integer codes
        widens_16bit=True,
    )
)
SPECS.append(
    Spec(
        "number_formats",
        "nf4_dequantize",
        nf4_codes(),
        tolerance=NF4_TOL,  # absmax < 1.5: the code books differ by < 2**-23
        float_args=(1,),
    )
)
SPECS.append(
    Spec(
        "number_formats",
        "pack_4bit",
        nibbles(),
        dtypes=ONE_DTYPE,
        tolerance=EXACT,
        gradcheck=False,  # integers
    )
)
SPECS.append(
    Spec(
        "number_formats",
        "unpack_4bit",
        bytes_(),
        dtypes=ONE_DTYPE,
        tolerance=EXACT,
        gradcheck=False,  # integers
    )
)
