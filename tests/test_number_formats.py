"""Chapter 12 (number formats): exhaustive parity with ml_dtypes and PyTorch, hand-derived values,
rounding, sums, quantisation, the NF4 code book, bad input, widgets and exercise checkers."""

from __future__ import annotations

import importlib.metadata
import math

import bitsandbytes.functional as bnb
import ml_dtypes
import numpy as np
import pytest
import torch

import course_lib.number_formats.accelerated as fast
import course_lib.number_formats.reference as ref
from course_lib.number_formats import exercises as check
from course_lib.number_formats.formats import FORMAT_NAMES, FORMATS, format_table, get_format
from course_lib.number_formats.widget import (
    bit_editor,
    bit_fields,
    parse_number,
    render_bits_html,
    render_value_html,
    value_box,
    value_rows,
)

PINNED_BNB = importlib.metadata.version("bitsandbytes") == "0.50.2"

ML = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
UINT = {32: np.uint32, 16: np.uint16, 8: np.uint8}
SMALL = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]

# The NF4 code book as published with QLoRA: T. Dettmers et al., "QLoRA: Efficient Finetuning of
# Quantized LLMs", NeurIPS 2023, arXiv:2305.14314, appendix E, and bitsandbytes'
# bitsandbytes/functional.py (get_4bit_type "nf4"). Typed in here as the independent reference.
PUBLISHED_NF4 = [
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
]


def ml_values(bits: np.ndarray, name: str) -> np.ndarray:
    """ml_dtypes' (or NumPy's) reading of bit patterns, as float64."""
    nbits = get_format(name).bits
    with np.errstate(invalid="ignore"):
        return bits.astype(UINT[nbits]).view(ML[name]).astype(np.float64)


def ml_bits(x: np.ndarray, name: str) -> np.ndarray:
    """ml_dtypes' (or NumPy's) conversion of float32/float64 values, as unsigned patterns."""
    nbits = get_format(name).bits
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(ML[name]).view(UINT[nbits]).astype(np.int64)


def same_values(a: np.ndarray, b: np.ndarray) -> None:
    """Equal elementwise, NaNs as NaNs, and the signs of zeros too."""
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)]))


def same_patterns(ours: np.ndarray, theirs: np.ndarray, name: str) -> None:
    """Equal bit patterns, except that any NaN equals any NaN."""
    a, b = ref.decode(ours, name), ref.decode(theirs, name)
    both_nan = np.isnan(a) & np.isnan(b)
    bad = ~both_nan & (ours != theirs)
    assert not bad.any(), (
        f"{name}: {bad.sum()} patterns differ, e.g. {ours[bad][:5]} vs {theirs[bad][:5]}"
    )


# ----------------------------------------------------------------------------- hand-derived
def test_the_notes_example_step_by_step():
    bits = 0 << 31 | 124 << 23 | 1 << 21  # sign 0, exponent 124, fraction bit b21
    assert bits == 0x3E200000
    assert ref.decode(bits, "float32") == 2.0**-3 * 1.25 == 0.15625
    assert fast.decode(torch.tensor([bits]), "float32").item() == 0.15625
    assert int(ref.encode(0.15625, "float32")) == bits
    assert fast.encode(torch.tensor([0.15625]), "float32").item() == bits
    assert ref.decode(124 << 23 | 1 << 22, "float32") == 0.1875  # b22 would be 1.5 x 2**-3
    d = bit_fields(bits, "float32")
    assert (d["sign"], d["exponent"], d["fraction"]) == ("0", "01111100", "01" + "0" * 21)


@pytest.mark.parametrize(
    ("name", "bits", "value"),
    [
        ("float32", 0x3F800000, 1.0),
        ("float32", 0x00000001, 2.0**-149),
        ("float32", 0x00800000, 2.0**-126),
        ("float32", 0x7F7FFFFF, (2 - 2.0**-23) * 2.0**127),
        ("float16", 0x3C00, 1.0),
        ("float16", 0x7BFF, 65504.0),
        ("float16", 0x0001, 2.0**-24),
        ("float16", 0x0400, 2.0**-14),
        ("float16", 0xC000, -2.0),
        ("bfloat16", 0x3F80, 1.0),
        ("bfloat16", 0x4049, 3.140625),
        ("bfloat16", 0x0001, 2.0**-133),
        ("float8_e4m3fn", 0x7E, 448.0),
        ("float8_e4m3fn", 0x78, 256.0),  # exponent all ones is a normal number here
        ("float8_e4m3fn", 0x01, 2.0**-9),
        ("float8_e4m3fn", 0x08, 2.0**-6),
        ("float8_e5m2", 0x7B, 57344.0),
        ("float8_e5m2", 0x01, 2.0**-16),
        ("float8_e5m2", 0x7C, math.inf),
        ("float8_e5m2", 0xFC, -math.inf),
    ],
)
def test_hand_decoded_patterns(name, bits, value):
    assert ref.decode(bits, name) == value
    assert fast.decode(torch.tensor([bits]), name).item() == value
    assert int(ref.encode(value, name)) == bits


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_zeros_and_nans(name):
    f = get_format(name)
    assert (
        np.signbit(ref.decode(1 << f.sign_shift, name)) and ref.decode(1 << f.sign_shift, name) == 0
    )
    assert np.isnan(ref.decode(f.nan_pattern, name))
    assert int(ref.encode(np.nan, name)) == f.nan_pattern
    assert int(ref.encode(-np.nan, name)) == f.nan_pattern | 1 << f.sign_shift
    assert int(ref.encode(-0.0, name)) == 1 << f.sign_shift


# ----------------------------------------------------------------------------- the format table
@pytest.mark.parametrize("row", format_table(), ids=lambda r: r["format"])
def test_format_table_matches_three_libraries(row):
    ml = ml_dtypes.finfo(ML[row["format"]])
    pt = torch.finfo(getattr(torch, row["format"]))
    assert row["largest finite"] == float(ml.max) == pt.max
    assert row["smallest normal"] == float(ml.smallest_normal) == pt.smallest_normal
    assert row["smallest subnormal"] == float(ml.smallest_subnormal)
    assert row["machine epsilon"] == float(ml.eps) == pt.eps
    assert row["bits"] == ml.bits == pt.bits
    assert row["fraction bits"] == -int(ml.machep)
    if row["format"] in ("float32", "float16"):
        np_info = np.finfo(ML[row["format"]])
        assert row["largest finite"] == float(np_info.max)
        assert row["smallest subnormal"] == float(np_info.smallest_subnormal)
    assert row["decimal digits"] == pytest.approx((row["fraction bits"] + 1) * math.log10(2))


def test_table_special_patterns():
    e4m3 = FORMATS["float8_e4m3fn"]
    assert (e4m3.max_finite_pattern, e4m3.nan_pattern, e4m3.inf_pattern) == (0x7E, 0x7F, None)
    assert FORMATS["float16"].inf_pattern == 0x7C00 and FORMATS["bfloat16"].nan_pattern == 0x7FC0


# ----------------------------------------------------------------------------- exhaustive decode
@pytest.mark.parametrize("name", SMALL)
def test_decode_every_pattern_agrees_with_ml_dtypes_and_torch(name):
    every = np.arange(2 ** get_format(name).bits)  # all 65,536 or all 256 patterns
    ours = ref.decode(every, name)
    same_values(ours, ml_values(every, name))  # ml_dtypes / NumPy
    torch_dtype, container = fast.TORCH_FORMATS[name]
    signed = torch.from_numpy(
        every.astype(UINT[get_format(name).bits]).view(container_np(container))
    )
    pytorch = signed.view(torch_dtype).to(torch.float64).numpy()  # PyTorch's own reading
    same_values(ours, pytorch)
    same_values(fast.decode(torch.from_numpy(every), name).double().numpy(), ours)


def container_np(container: torch.dtype):
    return {torch.int32: np.int32, torch.int16: np.int16, torch.uint8: np.uint8}[container]


def test_decode_float32_random_patterns():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 10**6, dtype=np.int64)
    same_values(ref.decode(bits, "float32"), ml_values(bits, "float32"))
    same_values(
        fast.decode(torch.from_numpy(bits), "float32").double().numpy(), ml_values(bits, "float32")
    )


# ----------------------------------------------------------------------------- encode round trip
@pytest.mark.parametrize("name", SMALL)
def test_encoding_round_trips_every_finite_value(name):
    every = np.arange(2 ** get_format(name).bits)
    values = ref.decode(every, name)
    finite = np.isfinite(values)
    np.testing.assert_array_equal(ref.encode(values[finite], name), every[finite])
    got = fast.encode(torch.from_numpy(values[finite]), name).numpy()
    np.testing.assert_array_equal(got, every[finite])
    got32 = fast.encode(torch.from_numpy(values[finite].astype(np.float32)), name).numpy()
    np.testing.assert_array_equal(got32, every[finite])


def test_encoding_round_trips_random_finite_float32():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 10**6, dtype=np.int64)
    values = ref.decode(bits, "float32")
    finite = np.isfinite(values)
    np.testing.assert_array_equal(ref.encode(values[finite], "float32"), bits[finite])


# ----------------------------------------------------------------------------- rounding
def random_float32(n: int, seed: int) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    return bits.view(np.float32)


def test_float32_to_bfloat16_agrees_with_torch_on_a_million_random_values_and_all_ties():
    x = random_float32(10**6, 2)
    ties = (np.arange(2**16, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # every tie
    for values in (x, ties):
        with np.errstate(invalid="ignore"):
            ours = ref.encode(values, "bfloat16")
        theirs = (
            torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().astype(np.int64)
            & 0xFFFF
        )
        same_patterns(ours, theirs, "bfloat16")
        same_patterns(fast.encode(torch.from_numpy(values), "bfloat16").numpy(), theirs, "bfloat16")
        same_patterns(ours, ml_bits(values, "bfloat16"), "bfloat16")


@pytest.mark.parametrize("name", ["float16", "float8_e4m3fn", "float8_e5m2"])
def test_float32_to_narrow_formats_agrees_with_ml_dtypes(name):
    x = random_float32(10**6, 3)
    with np.errstate(invalid="ignore"):
        ours = ref.encode(x, name)
    same_patterns(ours, ml_bits(x, name), name)
    same_patterns(fast.encode(torch.from_numpy(x), name).numpy(), ours, name)


@pytest.mark.parametrize("name", SMALL)
def test_every_tie_between_neighbours_rounds_to_even(name):
    every = np.arange(2 ** (get_format(name).bits - 1))  # positive patterns
    values = ref.decode(every, name)
    ok = np.isfinite(values[:-1]) & np.isfinite(values[1:])
    lo, hi = values[:-1][ok], values[1:][ok]
    mid = (lo + hi) / 2  # exact in float64 (and in float32)
    even = np.where(every[:-1][ok] % 2 == 0, every[:-1][ok], every[1:][ok])
    np.testing.assert_array_equal(ref.encode(mid, name), even)
    np.testing.assert_array_equal(ref.encode(-mid, name), even | 1 << get_format(name).sign_shift)
    np.testing.assert_array_equal(
        fast.encode(torch.from_numpy(mid.astype(np.float32)), name).numpy(), even
    )
    np.testing.assert_array_equal(ml_bits(mid.astype(np.float32), name), even)


@pytest.mark.parametrize("name", SMALL + ["float32"])
def test_float64_inputs_round_once(name):
    """Values just off a tie: PyTorch's own cast rounds twice (through float32), ours once."""
    f = get_format(name)
    one_step = 2.0**-f.mantissa_bits
    x = np.array([1 + one_step / 2 + 2.0**-40, 1 + 3 * one_step / 2 - 2.0**-40, 1 + one_step / 2])
    want = np.array([1 + one_step, 1 + one_step, 1.0])
    np.testing.assert_array_equal(ref.round_to_format(x, name), want)
    np.testing.assert_array_equal(fast.round_to_format(torch.from_numpy(x), name).numpy(), want)
    if name != "float32":
        plain = torch.from_numpy(x).to(fast.TORCH_FORMATS[name][0]).double().numpy()
        assert plain[0] == 1.0  # the double rounding the library avoids
    if name in ("float16", "float32"):
        np.testing.assert_array_equal(x.astype(ML[name]).astype(np.float64), want)  # NumPy: once


def test_float64_random_values_agree_between_the_two_sides():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(10**5) * 10.0 ** rng.integers(-45, 40, 10**5)
    for name in FORMAT_NAMES:
        for saturate in (False, True):
            same_patterns(
                fast.encode(torch.from_numpy(x), name, saturate).numpy(),
                ref.encode(x, name, saturate),
                name,
            )


def test_overflow_underflow_and_saturation():
    assert list(ref.round_to_format([65519.0, 65520.0, -65520.0], "float16")) == [
        65504,
        np.inf,
        -np.inf,
    ]
    e4 = ref.round_to_format([464.0, 465.0, np.inf, -1e9], "float8_e4m3fn")
    assert e4[0] == 448 and np.isnan(e4[1:]).all()
    sat = ref.round_to_format([465.0, np.inf, -1e9, np.nan], "float8_e4m3fn", saturate=True)
    assert list(sat[:3]) == [448, 448, -448] and np.isnan(sat[3])
    # PyTorch 2.13 (the pinned version) saturates its cast, PyTorch 2.11 gave NaN: we agree with
    # whichever this PyTorch does, in the matching mode, and the pinned one must saturate
    x = torch.tensor([465.0, 1e9, math.inf, -math.inf])
    theirs = x.to(torch.float8_e4m3fn).double().numpy()
    saturates = not np.isnan(theirs[0])
    np.testing.assert_array_equal(
        ref.round_to_format(x.numpy(), "float8_e4m3fn", saturates), theirs
    )
    if torch.__version__.startswith("2.13."):
        assert saturates
    assert ref.round_to_format(3.39e38, "bfloat16") == 2.0**127 * (2 - 2.0**-7)  # below the tie
    assert ref.round_to_format(3.4e38, "bfloat16") == np.inf
    assert ref.round_to_format(65504.0 * 4, "float8_e5m2") == np.inf
    assert ref.round_to_format(2.0**-25, "float16") == 0  # a tie with 0: to even
    assert ref.round_to_format(2.0**-25 * 1.0001, "float16") == 2.0**-24
    assert (
        ref.round_to_format(1e-300, "float32") == 0 and ref.round_to_format(5e-324, "float16") == 0
    )


def test_round_to_format_keeps_dtype_and_device():
    x = torch.randn(3, 4, dtype=torch.float32)
    for name in FORMAT_NAMES:
        y = fast.round_to_format(x, name)
        assert y.dtype == torch.float32 and y.shape == x.shape
    assert fast.round_to_format(x.bfloat16(), "float8_e4m3fn").dtype == torch.bfloat16


# ----------------------------------------------------------------------------- stochastic rounding
def test_stochastic_rounding_is_unbiased_and_picks_neighbours():
    gen = torch.Generator().manual_seed(0)
    x = torch.tensor([1 + 2**-10, -3.3, 1e-6, 100.0], dtype=torch.float64).repeat(50_000, 1)
    u = torch.rand(x.shape, generator=gen, dtype=torch.float64)
    for name in FORMAT_NAMES:
        y = fast.stochastic_round(x, name, u)
        lo = np.minimum(ref.round_to_format(x[0].numpy(), name), x[0].numpy())
        vals = y.numpy()
        # at most two distinct results per column, and they bracket x
        for j in range(x.shape[1]):
            distinct = np.unique(vals[:, j])
            assert len(distinct) <= 2 and distinct.min() <= x[0, j].item() <= distinct.max()
        step = np.abs(vals.max(0) - vals.min(0))
        sem = step / 2 / math.sqrt(x.shape[0])
        np.testing.assert_array_less(np.abs(vals.mean(0) - x[0].numpy()), 5 * sem + 1e-300)
        assert lo.shape == (4,)


def test_stochastic_rounding_keeps_representable_values_and_matches_the_reference():
    rng = np.random.default_rng(5)
    for name in FORMAT_NAMES:
        exact = ref.decode(rng.integers(0, get_format(name).max_finite_pattern, 100), name)
        u = rng.random(100)
        np.testing.assert_array_equal(ref.stochastic_round(exact, name, u), exact)
        x = rng.standard_normal(1000)
        u = rng.random(1000)
        np.testing.assert_array_equal(
            fast.stochastic_round(torch.from_numpy(x), name, torch.from_numpy(u)).numpy(),
            ref.stochastic_round(x, name, u),
        )
    with np.errstate(invalid="ignore"):
        special = ref.stochastic_round([np.inf, np.nan, 1e9], "float16", [0.5, 0.5, 0.5])
    assert special[0] == np.inf and np.isnan(special[1]) and special[2] == np.inf


def test_low_precision_updates_need_stochastic_rounding():
    gen = torch.Generator().manual_seed(1)
    w_rn, w_sr = torch.tensor(1.0), torch.ones(32)
    for _ in range(500):
        w_rn = fast.round_to_format(w_rn + 1e-3, "bfloat16")
        w_sr = fast.stochastic_round(w_sr + 1e-3, "bfloat16", torch.rand(32, generator=gen))
    assert w_rn.item() == 1.0 and abs(w_sr.mean().item() - 1.5) < 0.05


# ----------------------------------------------------------------------------- sums
def test_sums_by_hand():
    x = np.full(512, 0.01)
    assert ref.naive_sum(x, "bfloat16") == 4.0  # stalls: the step at 4 is 2**-5 > 2 * 0.01
    assert ref.pairwise_sum(x, "bfloat16") == ref.kahan_sum(x, "bfloat16") == 5.125
    assert ref.naive_sum([1.0, 2.0**-8, 2.0**-8], "bfloat16") == 1.0  # two ties to even
    assert ref.kahan_sum([1.0, 2.0**-8, 2.0**-8], "bfloat16") == 1 + 2.0**-7  # compensated
    assert ref.pairwise_sum([1.0, 2.0, 3.0], "float32") == 6.0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_sums_agree_across_input_dtypes(dtype):
    rng = np.random.default_rng(6)
    x = torch.from_numpy(rng.random((3, 200))).to(dtype)
    fmt = {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(dtype, "float16")
    for name in ("naive_sum", "pairwise_sum", "kahan_sum"):
        got = getattr(fast, name)(x, fmt)
        assert got.dtype == dtype and got.shape == (3,)
        want = getattr(ref, name)(x.double().numpy(), fmt)
        np.testing.assert_array_equal(got.double().numpy(), want)


def test_summation_errors_are_ordered_in_bfloat16():
    x = np.random.default_rng(7).random(2048)
    exact = math.fsum(ref.round_to_format(x, "bfloat16"))
    err = {
        n: abs(getattr(ref, n)(x, "bfloat16") - exact) / exact
        for n in ("naive_sum", "pairwise_sum", "kahan_sum")
    }
    assert err["kahan_sum"] <= err["pairwise_sum"] < 0.02 < 0.5 < err["naive_sum"]


# ----------------------------------------------------------------------------- quantisation
def test_absmax_by_hand():
    q, scale = ref.absmax_quantize([[0.5, -1.0], [0.25, 0.0]])
    np.testing.assert_array_equal(q, [[64, -127], [32, 0]])  # 63.5 -> 64 (even), 31.75 -> 32
    np.testing.assert_allclose(scale, [1 / 127])
    q, scale = ref.absmax_quantize([0.5, -1.0, 0.25, 0.0, 0.0], block_size=2)  # ragged last block
    np.testing.assert_array_equal(q, [64, -127, 127, 0, 0])
    np.testing.assert_allclose(scale, [1 / 127, 0.25 / 127, 0.0])
    np.testing.assert_allclose(
        ref.absmax_dequantize(q, scale, block_size=2), [0.503937, -1, 0.25, 0, 0], atol=1e-6
    )
    q4, s4 = ref.absmax_quantize([0.7, -0.35, 0.1], bits=4)
    np.testing.assert_array_equal(q4, [7, -4, 1])  # -3.5 -> -4 (even), 1.0 -> 1
    np.testing.assert_allclose(s4, [0.1])


def test_absmax_error_bound_and_torch_agreement():
    W = torch.randn(64, 96, generator=torch.Generator().manual_seed(2))
    for block in (None, 64, 100):
        q, scale = fast.absmax_quantize(W, block_size=block)
        assert q.dtype == torch.int8 and q.shape == W.shape and int(q.abs().max()) == 127
        W_hat = fast.absmax_dequantize(q, scale, block_size=block)
        B = block or W.numel()
        step = scale.repeat_interleave(B)[: W.numel()].view(W.shape)
        assert ((W - W_hat).abs() <= step / 2 + 1e-7).all()
        q_ref, s_ref = ref.absmax_quantize(W.double().numpy(), block_size=block)
        np.testing.assert_array_equal(q.numpy(), q_ref)


def test_nf4_code_book_equals_the_published_values():
    published = np.array(PUBLISHED_NF4)
    np.testing.assert_allclose(ref.nf4_codebook(), published, rtol=0, atol=2.0**-23)
    assert torch.equal(fast.nf4_codebook(), torch.tensor(PUBLISHED_NF4, dtype=torch.float32))
    # float32 precision: the float64 construction rounds to within 2 float32 steps of each value
    ulp32 = np.spacing(np.abs(published).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(ref.nf4_codebook() - published) <= 16 * ulp32 + 1e-12)
    assert list(ref.nf4_codebook()).index(0.0) == 7 and ref.nf4_codebook()[-1] == 1.0


def test_nf4_quantise_is_nearest_level_and_round_trips_levels():
    rng = np.random.default_rng(8)
    W = rng.standard_normal((8, 64))
    codes, absmax = ref.nf4_quantize(W, block_size=64)
    levels = ref.nf4_codebook()
    x = W / absmax.repeat(64).reshape(W.shape)
    nearest = np.abs(x[..., None] - levels).min(axis=-1)
    np.testing.assert_allclose(np.abs(x - levels[codes]), nearest)
    exact = levels[rng.integers(0, 16, (4, 64))] * 3.0
    exact[:, 0] = 3.0  # make the absmax of every block 3
    c, a = fast.nf4_quantize(torch.from_numpy(exact), block_size=64)
    np.testing.assert_allclose(fast.nf4_dequantize(c, a, block_size=64).numpy(), exact, atol=1e-6)
    np.testing.assert_array_equal(c.numpy(), ref.nf4_quantize(exact, block_size=64)[0])


def test_nf4_memory_with_double_quantisation():
    W = torch.randn(256, 256, generator=torch.Generator().manual_seed(3))
    codes, absmax = fast.nf4_quantize(W, block_size=64)
    packed = fast.pack_4bit(codes)
    assert packed.shape == (256, 128) and packed.dtype == torch.uint8
    assert torch.equal(fast.unpack_4bit(packed), codes)
    q2, s2 = fast.absmax_quantize(absmax - absmax.mean(), block_size=256)
    bits = 8 * (packed.numel() + q2.numel()) + 32 * (s2.numel() + 1)
    assert bits / W.numel() == pytest.approx(4 + 8 / 64 + 32 / (64 * 256) + 32 / W.numel())
    absmax_hat = fast.absmax_dequantize(q2, s2, block_size=256) + absmax.mean()
    assert (absmax_hat - absmax).abs().max() <= s2.max() / 2 + 1e-6


def test_packing_by_hand():
    np.testing.assert_array_equal(ref.pack_4bit([1, 2, 15, 0]), [0x12, 0xF0])
    np.testing.assert_array_equal(ref.unpack_4bit([0x12, 0xF0]), [1, 2, 15, 0])


def test_dequantisers_are_differentiable_in_the_scales():
    q = torch.tensor([3, -5, 7, 1], dtype=torch.int8)
    scale = torch.tensor([0.5, 2.0], requires_grad=True)
    fast.absmax_dequantize(q, scale, block_size=2).sum().backward()
    torch.testing.assert_close(scale.grad, torch.tensor([-2.0, 8.0]))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("module", [ref, fast], ids=["reference", "accelerated"])
def test_bad_bit_patterns(module):
    wrap = (lambda v: torch.tensor(v)) if module is fast else (lambda v: np.array(v))
    with pytest.raises(ValueError, match=r"wider than float16's 16 bits.*0xFFFF"):
        module.decode(wrap([0x10000]), "float16")
    with pytest.raises(ValueError, match="wider than float8_e5m2's 8 bits"):
        module.decode(wrap([256]), "float8_e5m2")
    with pytest.raises(ValueError, match="unsigned"):
        module.decode(wrap([-1]), "bfloat16")
    with pytest.raises(TypeError, match="integers"):
        module.decode(wrap([1.5]), "float32")


@pytest.mark.parametrize("module", [ref, fast], ids=["reference", "accelerated"])
def test_unknown_format_names(module):
    x = torch.ones(2) if module is fast else np.ones(2)
    for call in (
        lambda: module.decode(np.array([1]), "fp8"),
        lambda: module.encode(x, "float8"),
        lambda: module.round_to_format(x, "half"),
        lambda: module.naive_sum(x, "int8"),
    ):
        with pytest.raises(ValueError, match="fmt must be one of 'float32'"):
            call()
    with pytest.raises(TypeError, match="format name"):
        module.encode(x, torch.float16)
    with pytest.raises(TypeError, match="saturate must be True or False"):
        module.round_to_format(x, "float16", saturate="yes")


@pytest.mark.parametrize("module", [ref, fast], ids=["reference", "accelerated"])
def test_quantisers_refuse_nan_and_bad_shapes(module):
    wrap = torch.tensor if module is fast else np.array
    with pytest.raises(ValueError, match=r"W contains nan \(first at flat index 2\)"):
        module.absmax_quantize(wrap([1.0, 2.0, math.nan]))
    with pytest.raises(ValueError, match="W contains inf"):
        module.nf4_quantize(wrap([1.0, math.inf, 0.0, 1.0]), block_size=2)
    with pytest.raises(ValueError, match="one value per block"):
        module.absmax_dequantize(
            wrap([1, 2, 3]).to(torch.int8) if module is fast else np.array([1, 2, 3]),
            wrap([1.0]),
            block_size=2,
        )
    with pytest.raises(ValueError, match="codes from 0 to 15|values from 0 to 15"):
        module.nf4_dequantize(wrap([16]) if module is ref else torch.tensor([16]), wrap([1.0]))
    with pytest.raises(ValueError, match="even length"):
        module.pack_4bit(wrap([1, 2, 3]) if module is ref else torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="block_size must be at least 1"):
        module.nf4_quantize(wrap([1.0, 2.0]), block_size=0)
    with pytest.raises(ValueError, match="bits must be at most 8"):
        module.absmax_quantize(wrap([1.0, 2.0]), bits=9)
    with pytest.raises(ValueError, match=r"u must hold uniform numbers in \[0, 1\)"):
        module.stochastic_round(wrap([1.0]), "bfloat16", wrap([1.0]))
    with pytest.raises(ValueError, match="u must have the shape of x"):
        module.stochastic_round(wrap([1.0, 2.0]), "bfloat16", wrap([0.1, 0.2, 0.3]))
    with pytest.raises(TypeError, match="integer"):
        module.absmax_dequantize(wrap([1.5]), wrap([1.0]))


def test_quantisers_accept_zeros():
    q, scale = ref.absmax_quantize(np.zeros(4), block_size=2)
    assert not q.any() and not scale.any()
    codes, absmax = fast.nf4_quantize(torch.zeros(4), block_size=2)
    assert (codes == 7).all() and not absmax.any()  # code 7 is the level 0.0


# ----------------------------------------------------------------------------- widgets
def test_widget_bit_fields():
    d = bit_fields(0x3E200000, "float32")
    assert d["kind"] == "normal" and d["value"] == 0.15625 and "2^(124 - 127)" in d["formula"]
    assert bit_fields(0x0001, "float16")["kind"] == "subnormal"
    assert bit_fields(0x8000, "bfloat16")["kind"] == "zero"
    assert bit_fields(0x7C00, "float16")["kind"] == "infinity"
    assert bit_fields(0x7F, "float8_e4m3fn")["kind"] == "NaN"
    assert bit_fields(0x7E, "float8_e4m3fn")["kind"] == "normal"
    with pytest.raises(ValueError, match="wider"):
        bit_fields(0x100, "float8_e5m2")


def test_widget_value_rows():
    rows = {r["format"]: r for r in value_rows(70000.0)}
    assert rows["float32"]["note"] == "exact"
    assert rows["float16"]["note"] == "overflow to infinity"
    assert "NaN" in rows["float8_e4m3fn"]["note"]
    assert value_rows(1e-9)[1]["note"] == "underflow to zero"
    assert value_rows(1e-7)[1]["note"] == "rounded (subnormal)"
    assert value_rows(0.1)[2]["stored"] == 0.10009765625
    assert all(r["note"] == "NaN" for r in value_rows(math.nan))
    assert parse_number("nan") != parse_number("nan")
    with pytest.raises(ValueError, match="not a number"):
        parse_number("1,5")


def test_widgets_build_and_react():
    assert "0.15625" in render_bits_html(0x3E200000, "float32")
    assert "overflow to infinity" in render_value_html(1e6)
    editor = bit_editor("float16", 0x3C00)
    choose, row, out = editor.children
    assert len(row.children) == 16 and "1" in out.value
    for button in row.children[1:6]:  # set every exponent bit: 0x7C00 is infinity
        if button.description == "0":
            button.click()
    assert "infinity" in out.value
    choose.value = "float8_e5m2"
    assert len(row.children) == 8
    box = value_box("0.1")
    box.children[0].value = "not a number"
    assert "not a number" in box.children[1].value
    box.children[0].value = "65520"
    assert "overflow to infinity" in box.children[1].value


# ----------------------------------------------------------------------------- exercises
def _decode_bf16(bits):
    s, e, f = bits >> 15, (bits >> 7) & 0xFF, bits & 0x7F
    sign = -1.0 if s else 1.0
    if e == 0xFF:
        return sign * math.inf if f == 0 else math.nan
    if e == 0:
        return sign * f / 2**7 * 2.0**-126
    return sign * (1 + f / 2**7) * 2.0 ** (e - 127)


def _to_bf16(bits):
    """float32 pattern -> bfloat16 pattern, round to nearest even, NaN kept NaN."""
    if (bits >> 23) & 0xFF == 0xFF and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40  # a quiet NaN of the same sign
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def _absmax_f32(W, B):
    blocks = W.float().view(-1, B)  # float32 inside
    scale = blocks.abs().amax(dim=1) / 127
    safe = torch.where(scale > 0, scale, 1.0)
    return torch.round(blocks / safe[:, None]).to(torch.int8).view(W.shape), scale


def _absmax_bf16(W, B):
    blocks = W.view(-1, B)  # computed in bfloat16: the bug
    scale = blocks.abs().amax(dim=1) / 127
    safe = torch.where(scale > 0, scale, 1.0)
    return torch.round(blocks / safe[:, None]).to(torch.int8).view(W.shape), scale.float()


def _nf4(W, B):
    blocks = W.reshape(-1, B)
    absmax = np.abs(blocks).max(axis=1)
    x = blocks / np.where(absmax > 0, absmax, 1.0)[:, None]
    codes = np.abs(x[..., None] - ref.nf4_codebook()).argmin(axis=-1)
    return codes.reshape(W.shape), absmax


def test_checkers_accept_solutions():
    assert check.decode_bfloat16(_decode_bf16, require=True)
    assert check.round_to_bfloat16(_to_bf16, require=True)
    assert check.round_to_bfloat16(lambda b: np.uint16(_to_bf16(b)), require=True)  # NumPy int
    assert check.round_to_bfloat16(lambda b: torch.tensor(_to_bf16(b)), require=True)  # tensor
    assert check.absmax_int8_in_float32(_absmax_f32, require=True)
    assert check.absmax_int8_in_float32(  # NumPy arrays, float64 scales, a list pair
        lambda W, B: [x.numpy().astype(np.float64) for x in _absmax_f32(W, B)], require=True
    )
    assert check.nf4_codes(_nf4, require=True)
    assert check.nf4_codes(lambda W, B: tuple(torch.as_tensor(x) for x in _nf4(W, B)), require=True)


def _no_subnormals(bits):
    s, e, f = bits >> 15, (bits >> 7) & 0xFF, bits & 0x7F
    if e == 0xFF:
        return math.nan if f else (-1.0) ** s * math.inf
    return (-1.0) ** s * (1 + f / 2**7) * 2.0 ** (e - 127)


def _even_nf4(W, B):
    codes, absmax = _nf4(W, B)
    x = W.reshape(-1, B) / np.where(absmax > 0, absmax, 1.0)[:, None]
    return np.clip(np.rint((x + 1) * 7.5), 0, 15).reshape(W.shape), absmax


@pytest.mark.parametrize(
    ("checker", "wrong", "words"),
    [
        (
            check.decode_bfloat16,
            lambda b: _decode_bf16(b) / 2 if b & 0x7F80 not in (0, 0x7F80) else _decode_bf16(b),
            "bias",
        ),
        (check.decode_bfloat16, _no_subnormals, "subnormal"),
        (check.decode_bfloat16, lambda b: abs(_decode_bf16(b)), "sign"),
        (check.decode_bfloat16, lambda b: "one", "float"),
        (check.decode_bfloat16, lambda b: 0.0 if b == 0x8000 else _decode_bf16(b), "sign of zero"),
        (check.round_to_bfloat16, lambda b: b >> 16, "truncates"),
        (check.round_to_bfloat16, lambda b: (b + 0x8000) >> 16, "ties go to even"),
        (
            check.round_to_bfloat16,
            lambda b: (b + 0x7FFF + ((b >> 16) & 1)) >> 16,
            "handle NaN first",
        ),
        (check.round_to_bfloat16, lambda b: float(_to_bf16(b)), "as one int"),
        (check.round_to_bfloat16, lambda b: b, "not a 16-bit pattern"),
        (check.absmax_int8_in_float32, _absmax_bf16, "rounded to bfloat16"),
        (
            check.absmax_int8_in_float32,
            lambda W, B: (_absmax_bf16(W, B)[0], _absmax_f32(W, B)[1]),  # only the codes in bf16
            "computation in bfloat16",
        ),
        (
            check.absmax_int8_in_float32,
            lambda W, B: (_absmax_f32(W, B)[0], _absmax_f32(W, B)[1] * 127 / 128),
            "127, not 128",
        ),
        (
            check.absmax_int8_in_float32,
            lambda W, B: (_absmax_f32(W, B)[0], _absmax_f32(W, B)[1].bfloat16()),
            "rounded to bfloat16",
        ),
        (
            check.absmax_int8_in_float32,
            lambda W, B: (  # float codes, and a block of zeros divided by its scale 0
                torch.round(W.float().view(-1, B) / _absmax_f32(W, B)[1][:, None]).view(W.shape),
                _absmax_f32(W, B)[1],
            ),
            "NaN or inf",
        ),
        (check.absmax_int8_in_float32, lambda W, B: _absmax_f32(W, B)[0], "pair"),
        (check.nf4_codes, lambda W, B: _nf4(W, W.size), "own absmax"),
        (check.nf4_codes, _even_nf4, "evenly"),
        (
            check.nf4_codes,
            lambda W, B: (ref.nf4_codebook()[_nf4(W, B)[0]], _nf4(W, B)[1]),
            "level values",
        ),
        (
            check.nf4_codes,
            lambda W, B: (_nf4(W, B)[0], W.reshape(-1, B).max(axis=1)),
            "np.abs",
        ),
    ],
)
def test_checkers_explain_mistakes(checker, wrong, words):
    outcome = checker(wrong)
    assert not outcome and words in str(outcome), str(outcome)
    with pytest.raises(AssertionError):
        checker(wrong, require=True)


def _no_return(*args):
    pass


def _raises(*args):
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    "checker", [check.round_to_bfloat16, check.absmax_int8_in_float32, check.nf4_codes]
)
@pytest.mark.parametrize(
    ("garbage", "words"),
    [
        (None, "expected a function"),
        (_no_return, "returned None"),
        (_raises, "RuntimeError: boom"),
        (lambda *a: (x for x in range(3)), ""),
        (lambda *a: float("nan"), ""),
        (lambda *a: b"bytes", ""),
        (lambda: 0, "TypeError"),
    ],
)
def test_checkers_answer_garbage_with_a_message(checker, garbage, words):
    outcome = checker(garbage)
    assert not outcome.passed and words in str(outcome), str(outcome)


# ----------------------------------------------------------------------------- benchmark module
def test_benchmark_runs_on_quick_sizes():
    from benchmarks import number_formats as bench

    rows = bench.run(quick=True)
    tasks = {r["task"] for r in rows}
    assert "ref.decode, every float16 pattern" in tasks
    both = [r for r in rows if r["task"].endswith(": both") and r["task"].startswith("NF4")]
    assert [r["bits/param"] for r in both] == [4.5, pytest.approx(4.127, abs=1e-3)]
    text = bench.summary(rows)
    assert "decode target" in text and "not measured (quick run)" in text


# --- 16-bit inputs to the quantisers (computed in float32, checked against float64) ----------
QUANT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def _weights(dtype: torch.dtype, n: int = 64 * 257) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    return (0.7 * torch.randn(n, generator=g, dtype=torch.float64)).to(dtype)


@pytest.mark.parametrize("dtype", QUANT_DTYPES, ids=str)
def test_absmax_codes_are_round_w_over_scale_in_float64_for_every_input_dtype(dtype):
    """Each code is W / scale rounded to the nearest integer, W / scale computed in float64 from
    the very values the quantiser saw and the scale it returned. Only ties (W / absmax a power of
    two puts W / scale on k + 1/2, up to float32 rounding) may round either way: the float32 division
    decides them, as it does in bitsandbytes. Computed in 16 bits, thousands of codes were off."""
    W = _weights(dtype)
    q, scale = fast.absmax_quantize(W, block_size=64)
    assert scale.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    W64 = W.double().view(-1, 64)  # the values the quantiser was given, exactly
    scale64 = W64.abs().amax(dim=1) / 127
    torch.testing.assert_close(scale.double(), scale64, rtol=1e-7, atol=0)
    ratio = W64 / scale.double()[:, None]  # (n_blocks, 64)
    slack = 2**-22 * ratio.abs()  # a float32 division can move a near-tie by this much
    off = (q.view(-1, 64).double() - ratio).abs()
    assert bool((off <= 0.5 + slack).all()), "a code is not the nearest integer to W / scale"
    not_a_tie = (ratio - ratio.floor() - 0.5).abs() > slack
    want = torch.round(ratio).clamp(-127, 127)
    assert torch.equal(q.view(-1, 64).double()[not_a_tie], want[not_a_tie])
    back = fast.absmax_dequantize(q, scale, block_size=64)
    eps = torch.finfo(back.dtype).eps  # the dequantised value's own rounding, in its dtype
    err = (back.double().view(-1, 64) - W64).abs()
    assert bool((err <= scale64[:, None] / 2 + eps * W64.abs()).all()), (
        "the round trip must be within half a step"
    )


@pytest.mark.parametrize("dtype", QUANT_DTYPES, ids=str)
def test_nf4_codes_are_the_nearest_level_for_every_input_dtype(dtype):
    W = _weights(dtype)
    codes, absmax = fast.nf4_quantize(W, block_size=64)
    x = (W.double().view(-1, 64) / absmax.double()[:, None]).reshape(-1)  # exact ratios
    levels = fast.nf4_codebook().double()
    dist = (x[:, None] - levels[None, :]).abs()  # (n, 16)
    nearest = dist.min(dim=1).values
    chosen = dist.gather(1, codes.reshape(-1, 1).long()).squeeze(1)
    assert torch.equal(chosen, nearest), "every code must name a nearest level"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_nf4_equals_bitsandbytes_codes_and_values(dtype):
    """bitsandbytes' own NF4 (quantize_4bit/dequantize_4bit, on the CPU): the same packed
    bytes, the same absmax, the same dequantised values."""
    W = _weights(dtype).view(257, 64)
    packed, state = bnb.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=False)
    codes, absmax = fast.nf4_quantize(W, block_size=64)
    assert torch.equal(fast.pack_4bit(codes).reshape(-1), packed.reshape(-1))
    assert torch.equal(absmax, state.absmax)
    theirs = bnb.dequantize_4bit(packed, state)  # in W's dtype
    ours = fast.nf4_dequantize(codes, absmax, block_size=64)  # in float32, absmax's dtype
    if dtype == torch.float32 or PINNED_BNB and torch.__version__[:5] == "2.13.":
        assert torch.equal(ours.to(theirs.dtype), theirs)  # the pinned versions: bit for bit
    else:  # other builds may multiply in the 16-bit type: one rounding more, one ulp at most
        ulp = torch.finfo(dtype).eps * ours.abs()
        assert bool(((theirs.float() - ours).abs() <= ulp).all())
    torch.testing.assert_close(theirs.float(), ours, rtol=2**-7, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="bitsandbytes' CUDA kernels need a GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_nf4_equals_bitsandbytes_on_cuda(dtype):
    """On a GPU, bitsandbytes' CUDA kernels and the chapter's PyTorch code (run on the GPU)
    choose the same codes and the same absmax."""
    W = _weights(dtype).view(257, 64).cuda()
    packed, state = bnb.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=False)
    codes, absmax = fast.nf4_quantize(W, block_size=64)
    assert codes.device.type == "cuda"
    assert torch.equal(fast.pack_4bit(codes).reshape(-1), packed.reshape(-1))
    assert torch.equal(absmax, state.absmax)
    theirs = bnb.dequantize_4bit(packed, state)
    ours = fast.nf4_dequantize(codes, absmax, block_size=64)
    torch.testing.assert_close(theirs.float(), ours, rtol=2**-7, atol=0)


def test_bitsandbytes_double_quantisation_is_another_format():
    """bitsandbytes' double quantisation stores absmax minus its mean in its 8-bit dynamic
    code (blocks of 256); the chapter's stores it with int8 absmax: the codes of W agree, the
    second-level statistics do not (chapter 12 says why)."""
    W = _weights(torch.float32, 64 * 512).view(512, 64)
    packed, state = bnb.quantize_4bit(W, blocksize=64, quant_type="nf4", compress_statistics=True)
    codes, _ = fast.nf4_quantize(W, block_size=64)
    assert torch.equal(fast.pack_4bit(codes).reshape(-1), packed.reshape(-1))
    assert state.nested and state.absmax.dtype == torch.uint8 and state.state2.blocksize == 256
    assert state.offset is not None  # the mean of absmax, subtracted before the second level


# ----------------------------------------------------------------- the quantisation explorer
def test_quantisation_summary_counts_bits_and_contains_outliers_per_block():
    from course_lib.number_formats.quantisation_widget import quantisation_summary, render_html

    assert quantisation_summary("int8", 64, 0)["bits"] == 8.5
    assert quantisation_summary("NF4", 256, 0)["bits"] == 4.125
    whole = quantisation_summary("int8", 0, 16)
    blocks = quantisation_summary("int8", 64, 16)
    assert whole["zeroed"] > 0.1 > blocks["zeroed"]  # one scale: most weights round to 0
    assert blocks["rms"] < whole["rms"] / 5
    assert quantisation_summary("NF4", 64, 0)["rms"] < quantisation_summary("int4", 64, 0)["rms"]
    with pytest.raises(ValueError, match="block must be one of"):
        quantisation_summary("NF4", 32, 0)
    with pytest.raises(ValueError, match="scheme"):
        quantisation_summary("fp4", 64, 0)
    assert "outliers" in render_html("int4", 16, 256)
