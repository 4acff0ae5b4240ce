"""Chapter 1 (matrix multiplication): hand-derived values, bad input, cost, widget, exercises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import course_lib.matmul.accelerated as fast
import course_lib.matmul.reference as ref
from course_lib.matmul import exercises as check
from course_lib.matmul.cost import (
    ONE_THREAD,
    SWEEP_SIZES,
    PeakEstimate,
    compare_with_nominal,
    estimate_peak,
    gflops_sweep,
    load_stored_sweep,
    make_stored_sweep,
    matmul_flops,
    matmul_setups,
    naive_matmul,
    practical_peak,
    steady_sweep,
)
from course_lib.matmul.widget import explorer, highlight, render_html

VIEWS = ["matmul_entries", "matmul_columns", "matmul_rows", "matmul_outer"]
X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])
Y = np.array([[1.0, 4.0], [2.0, 0.0], [1.0, 1.0]])
XY_BY_HAND = np.array([[5.0, 4.0], [5.0, 3.0]])  # 1*1+2*2, 1*4; 2+3, 3


@pytest.mark.parametrize("name", VIEWS)
@pytest.mark.parametrize("side", ["reference", "accelerated"])
def test_hand_derived_product(name, side):
    fn = getattr(ref if side == "reference" else fast, name)
    out = fn(X, Y) if side == "reference" else fn(torch.tensor(X), torch.tensor(Y))
    np.testing.assert_array_equal(np.asarray(out), XY_BY_HAND)


def test_outer_terms_by_hand():
    terms = ref.outer_terms(X, Y)
    np.testing.assert_array_equal(terms[0], [[1, 4], [0, 0]])
    np.testing.assert_array_equal(terms[1], [[4, 0], [2, 0]])
    np.testing.assert_array_equal(terms[2], [[0, 0], [3, 3]])


@pytest.mark.parametrize("name", VIEWS)
def test_reference_broadcasts_batches_like_matmul(name):
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((3, 1, 2, 4)), rng.standard_normal((5, 4, 2))
    np.testing.assert_allclose(getattr(ref, name)(A, B), A @ B, rtol=1e-12)


@pytest.mark.parametrize("name", VIEWS)
def test_accelerated_preserves_dtype_and_gradients(name):
    A = torch.randn(2, 3, 4, dtype=torch.float32, requires_grad=True)
    B = torch.randn(4, 5, dtype=torch.float32, requires_grad=True)
    out = getattr(fast, name)(A, B)
    assert out.dtype == torch.float32
    out.sum().backward()
    torch.testing.assert_close(A.grad, torch.ones(2, 3, 5) @ B.detach().T)


@pytest.mark.parametrize("module", [ref, fast], ids=["reference", "accelerated"])
@pytest.mark.parametrize("name", [*VIEWS, "outer_terms"])
def test_incompatible_shapes_name_both_shapes_and_the_rule(module, name):
    a, b = np.ones((2, 3)), np.ones((4, 5))
    if module is fast:
        a, b = torch.ones(2, 3), torch.ones(4, 5)
    with pytest.raises(ValueError) as err:
        getattr(module, name)(a, b)
    msg = str(err.value)
    assert (
        "(2, 3)" in msg and "(4, 5)" in msg and "columns of X (3)" in msg and "rows of Y (4)" in msg
    )


@pytest.mark.parametrize(
    ("a", "b", "error", "words"),
    [
        (np.ones(3), np.ones((3, 2)), ValueError, "at least 2 dimensions"),
        (np.ones((0, 3)), np.ones((3, 2)), ValueError, "empty"),
        (np.array([["a", "b"]]), np.ones((2, 2)), TypeError, "real numbers"),
        (np.ones((2, 2), dtype=complex), np.ones((2, 2)), TypeError, "complex"),
        (np.ones((2, 2, 2)), np.ones((3, 2, 2)), ValueError, "do not broadcast"),
    ],
)
def test_reference_bad_input(a, b, error, words):
    with pytest.raises(error, match=words):
        ref.matmul_rows(a, b)


def test_accelerated_bad_dtypes_and_devices():
    with pytest.raises(TypeError, match="floating-point tensor, got dtype torch.int64"):
        fast.matmul_rows(torch.ones(2, 2, dtype=torch.int64), torch.ones(2, 2))
    with pytest.raises(TypeError, match="same dtype"):
        fast.matmul_rows(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="empty"):
        fast.matmul_outer(torch.ones(2, 0), torch.ones(0, 2))


def test_flop_count_and_naive_loop():
    assert matmul_flops(2, 3, 4) == 48
    with pytest.raises(ValueError, match="m must be at least 1"):
        matmul_flops(2, 0, 4)
    assert naive_matmul(X.tolist(), Y.tolist()) == XY_BY_HAND.tolist()
    with pytest.raises(ValueError, match="cannot multiply"):
        naive_matmul([[1, 2]], [[1, 2]])


def test_peak_estimate_from_cpuinfo_text():
    info = "model name : Some CPU @ 3.00GHz\nflags : sse avx2 fma avx512f\ncpu MHz : 1200.0\n"
    peak = estimate_peak(info, cores=4)
    assert peak.ghz == 3.0 and peak.simd.startswith("AVX-512")
    assert peak.gflops("float32") == 4 * 3.0 * 64
    assert peak.gflops("float64") == 4 * 3.0 * 32
    assert estimate_peak("flags : sse2\ncpu MHz : 1000.0", cores=1).gflops("float64") == 4.0


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_steady_sweep_records_the_best_time_and_its_spread(clock):
    setups = {
        name: setup
        for name, setup in matmul_setups(("cpu",)).items()
        if name in ("NumPy row view (eq. 3)", "np.matmul float64")
    }
    records = steady_sweep(setups, [4, 300], rounds=2, min_time=1e-4, clock=clock)
    assert {(r["implementation"], r["n"]) for r in records} == {
        ("NumPy row view (eq. 3)", 4),
        ("np.matmul float64", 4),
        ("np.matmul float64", 300),  # the row view stops at its max_n, 256
    }
    for r in records:
        assert r["seconds"] > 0 and r["spread"] >= 1.0
        assert r["gflops"] == pytest.approx(2 * r["n"] ** 3 / r["seconds"] / 1e9)
    with pytest.raises(ValueError, match="clock must be 'wall' or 'cpu'"):
        steady_sweep(setups, [4], clock="gpu")
    with pytest.raises(ValueError, match="rounds"):
        steady_sweep(setups, [4], rounds=1)


def test_the_stored_sweep_is_complete_and_one_threaded():
    """data/matmul_gflops.json (section 1.8): every implementation at every size it allows,
    made on one thread with the CPU clock; sanity ranges only, not the chapter's conclusions."""
    stored = load_stored_sweep()
    assert stored["threads"] == 1 and "thread_time" in stored["clock"]
    got = {(r["implementation"], r["n"]) for r in stored["records"]}
    want = {
        (name, n)
        for name, (_, max_n) in matmul_setups(("cpu",)).items()
        for n in SWEEP_SIZES
        if n <= max_n
    }
    assert got == want
    assert all(0 < r["gflops"] < 1e5 and r["spread"] >= 1.0 for r in stored["records"])
    assert set(stored["machine"]["nominal_gflops"]) == {"float32", "float64"}


def test_the_stored_sweep_refuses_to_run_on_unpinned_threads(monkeypatch):
    for var, value in ONE_THREAD.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    with pytest.raises(RuntimeError, match="OPENBLAS_NUM_THREADS is not 1"):
        make_stored_sweep(rounds=2)


def test_sweep_records_and_timer():
    setups = matmul_setups(("cpu",), with_slow=True)
    records = gflops_sweep(setups, [4, 256], repeats=1, min_time=0.0)
    names = {r["implementation"] for r in records}
    assert "pure Python triple loop" in names and "torch.matmul float32 (cpu)" in names
    assert all(r["gflops"] > 0 for r in records)
    assert not any(
        r["n"] == 256 and r["implementation"] == "pure Python triple loop" for r in records
    )


@pytest.mark.parametrize(
    ("view", "x_cells", "y_cells", "xy_cells"),
    [
        ("entry", 3, 3, 1),  # row i of X, column j of Y, one entry
        ("column", 6, 3, 2),  # all of X, column j of Y, column j
        ("row", 3, 6, 2),  # row i of X, all of Y, row i
        ("outer", 2, 2, 4),  # column l of X, row l of Y, every entry
    ],
)
def test_widget_highlight_counts(view, x_cells, y_cells, xy_cells):
    mx, my, mxy, formula = highlight(view, 1, 0, 2, 2, 3, 2)
    assert (mx.sum(), my.sum(), mxy.sum()) == (x_cells, y_cells, xy_cells)
    assert formula


def test_widget_rejects_bad_choices_and_builds():
    with pytest.raises(ValueError, match="view must be one of"):
        highlight("diagonal", 0, 0, 0, 2, 2, 2)
    with pytest.raises(ValueError, match="i must be at most 1"):
        highlight("entry", 2, 0, 0, 2, 2, 2)
    assert "term 1" in render_html(X, Y, "outer", l=1)
    w = explorer(X, Y)
    view = w.children[0]
    view.value = "outer"
    assert "term 0" in w.children[2].value


SOLUTIONS = {
    "outer": lambda X, Y: sum(np.outer(X[:, l], Y[l]) for l in range(X.shape[1])),
    "linear": lambda W: W.T,
    "flops": lambda b, L, di, do: 2 * b * L * di * do + b * L * do,
}


def test_checkers_accept_solutions():
    assert check.outer_product_sum(SOLUTIONS["outer"], require=True)
    assert check.linear_weight(SOLUTIONS["linear"], require=True)
    for form in (  # every form the text allows: a tensor, a list, float32, a view
        lambda W: torch.from_numpy(W).T,
        lambda W: W.T.tolist(),
        lambda W: W.T.astype(np.float32),
        lambda W: np.transpose(W),
    ):
        assert check.linear_weight(form, require=True)
    assert check.layer_flops(SOLUTIONS["flops"], require=True)


@pytest.mark.parametrize(
    ("checker", "wrong", "words"),
    [
        (check.outer_product_sum, lambda X, Y: (X @ Y).T, "transpose"),
        (check.outer_product_sum, lambda X, Y: None, "return"),
        (check.outer_product_sum, lambda X, Y: 2 * X @ Y, "constant factor"),
        (check.outer_product_sum, lambda X, Y: X.T @ Y.T, "wrong values"),
        (check.linear_weight, lambda W: W, "out_features, in_features"),
        (check.linear_weight, lambda W: W.reshape(W.shape[::-1]), "reshape keeps the numbers"),
        (
            check.linear_weight,
            lambda W: W.T if W.shape[0] != W.shape[1] else W,
            "you return W unchanged",
        ),
        (check.linear_weight, lambda W: None, "forget a `return`"),
        (check.linear_weight, lambda W: 1 / 0, "ZeroDivisionError"),
        (check.linear_weight, lambda: None, "positional argument"),
        (check.linear_weight, lambda W: (r for r in W), "generator"),
        (check.linear_weight, lambda W: b"W", "bytes"),
        (check.linear_weight, lambda W: np.full(W.T.shape, np.nan), "NaN"),
        (check.linear_weight, "W.T", "expected a function"),
        (check.layer_flops, lambda b, L, di, do: 2 * b * L * di * do, "bias"),
        (check.layer_flops, lambda b, L, di, do: b * L * di * do + b * L * do, "two FLOPs"),
        (check.layer_flops, lambda b, L, di, do: b * L * di * do, "bias adds one per output"),
        (check.layer_flops, lambda b, L, di, do: 2 * L * di * do + L * do, "batch size"),
        (check.layer_flops, lambda b, L, di, do: 2 * b * di * do + b * do, "seq_len"),
        (check.layer_flops, lambda b, L, di, do: "many", "int"),
    ],
)
def test_checkers_explain_mistakes(checker, wrong, words):
    outcome = checker(wrong)
    assert not outcome and words in str(outcome)
    with pytest.raises(AssertionError):
        checker(wrong, require=True)


def test_practical_peak_and_the_nominal_comparison_hold_on_any_machine():
    """On an AVX2 EPYC reporting its nominal 2.45 GHz, the old text claimed '118% of the float32
    peak'. The nominal estimate is now only compared with, and a share above 100% explained."""
    peak = PeakEstimate(
        cores=2, ghz=2.45, flops_per_cycle={"float32": 32, "float64": 16}, simd="AVX2"
    )
    records = [
        {"implementation": "np.matmul float32", "n": 1024, "gflops": 150.0},
        {"implementation": "torch.matmul float32 (cpu)", "n": 2048, "gflops": 184.8},
        {"implementation": "pure Python triple loop", "n": 64, "gflops": 0.07},
    ]
    best = practical_peak(records, "float32")
    assert best["gflops"] == 184.8 and best["n"] == 2048
    text = compare_with_nominal(best["gflops"], peak, "float32")
    assert "118% of the nominal 157 GFLOP/s" in text and "boost" in text
    assert "boost" not in compare_with_nominal(100.0, peak, "float32")
    with pytest.raises(ValueError, match="no np.matmul or torch.matmul record in float64"):
        practical_peak(records, "float64")


def test_outer_product_sum_names_the_typical_mistakes():
    def last_only(X, Y):
        total = None
        for k in range(X.shape[1]):
            total = np.outer(X[:, k], Y[k])  # overwritten, not added
        return total

    def unsummed(X, Y):
        return np.stack([np.outer(X[:, k], Y[k]) for k in range(X.shape[1])])

    def rows_with_columns(X, Y):
        return sum(np.outer(X[k], Y[:, k]) for k in range(X.shape[0]))

    for wrong, words in (
        (last_only, "kept only the last outer product"),
        (unsummed, "add them up"),
        (rows_with_columns, "paired row k of X with column k of Y"),
        (lambda X, Y: X * Y, "elementwise product"),
        (lambda X, Y: np.outer(X[:, 0], Y[0]), "stopped after the first outer product"),
    ):
        outcome = check.outer_product_sum(wrong)
        assert not outcome and words in str(outcome), (words, str(outcome))


def test_layer_flops_takes_every_form_of_a_right_count():
    flops = SOLUTIONS["flops"]
    for form in (int, np.int64, float, np.float64):
        assert check.layer_flops(lambda *s, form=form: form(flops(*s)), require=True)
