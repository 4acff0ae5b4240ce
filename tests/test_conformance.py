"""The conformance suite: every registered NumPy reference agrees with its PyTorch twin.

Specs live in each chapter's ``course_lib/<chapter>/spec.py``; nothing here changes when a chapter
adds functions.
"""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from course_lib.conformance import (
    assert_agree,
    chapters_with_specs,
    load_all,
    prepare,
)
from course_lib.device import get_device

SPECS = load_all()
DEVICE = get_device()
CASES = [(s, d) for s in SPECS for d in s.dtypes]
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)


def _supported(dtype: str) -> bool:
    return not (DEVICE.type == "mps" and dtype == "float64")


@pytest.mark.parametrize(("spec", "dtype"), CASES, ids=[f"{s.key}-{d}" for s, d in CASES])
def test_reference_and_pytorch_agree(spec, dtype):
    if not _supported(dtype):
        pytest.skip(f"{DEVICE.type} has no {dtype}")
    ref_fn, acc_fn = spec.functions()
    rtol, atol = spec.tol(dtype)

    @SETTINGS
    @given(case=spec.inputs)
    def check(case):
        t_args, t_kwargs, r_args, r_kwargs = prepare(spec, case, dtype, DEVICE)
        expected = ref_fn(*r_args, **r_kwargs)
        got = acc_fn(*t_args, **t_kwargs)
        # a function without tensor inputs (a constant table such as nf4_codebook) has no
        # device to follow; one with tensor inputs must keep them where they are
        has_tensors = any(isinstance(a, torch.Tensor) for a in (*t_args, *t_kwargs.values()))
        for out in got if isinstance(got, tuple) else (got,):
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                assert out.dtype == spec.output_dtype(dtype), (
                    f"{spec.key} returned {out.dtype} for {dtype} inputs"
                )
                assert not has_tensors or out.device.type == DEVICE.type, (
                    f"{spec.key} moved the result to {out.device}"
                )
        assert_agree(expected, got, rtol, atol, f"{spec.key} [{dtype}]")

    check()


#: inputs up to this many elements have their whole Jacobian checked, column by column; a
#: larger input is checked in random directions (test_pytorch_gradients)
FULL_JACOBIAN_UP_TO = 100


@pytest.mark.parametrize("spec", [s for s in SPECS if s.gradcheck], ids=lambda s: s.key)
def test_pytorch_gradients(spec):
    _, acc_fn = spec.functions()

    @settings(max_examples=3, deadline=None, derandomize=True)
    @given(case=spec.inputs)
    def check(case):
        t_args, t_kwargs, _, _ = prepare(spec, case, "float64", torch.device("cpu"), True)
        inputs = [a for a in t_args if isinstance(a, torch.Tensor) and a.requires_grad]

        def f(*xs):
            it = iter(xs)
            args = [
                next(it) if isinstance(a, torch.Tensor) and a.requires_grad else a for a in t_args
            ]
            return acc_fn(*args, **t_kwargs)

        # every column of the Jacobian of a small function; past FULL_JACOBIAN_UP_TO inputs
        # (a block's or a stack's parameters), torch's fast mode: the Jacobian against random
        # directions (vᵀJu, analytic against numerical), one perturbation instead of one per
        # input element (the 74 checks: 26 s to 7 s on one core). It finds a wrong element
        # with high probability, not certainty; the directions are seeded, so a run repeats.
        torch.manual_seed(0)
        fast = sum(x.numel() for x in inputs) > FULL_JACOBIAN_UP_TO
        # gradcheck perturbs memory: an expanded (stride 0) input gets its own
        inputs = [x.detach().contiguous().requires_grad_() for x in inputs]
        assert torch.autograd.gradcheck(f, tuple(inputs), eps=1e-6, atol=1e-5, fast_mode=fast)

    check()


def test_the_fast_gradient_check_finds_one_wrong_element():
    """What test_pytorch_gradients relies on past FULL_JACOBIAN_UP_TO: torch's fast mode fails
    a backward that is wrong in one element of a large input (with high probability; here
    with a fixed seed)."""

    class Wrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x**2).sum()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            g = 2 * x
            g[123] += 1.0  # one element's gradient wrong
            return grad * g

    torch.manual_seed(0)  # fast mode's directions are random: it finds such an error with
    # high probability, not always (the wrong element's weight in a random direction)
    x = torch.randn(FULL_JACOBIAN_UP_TO * 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: (t**2).sum(), (x,), fast_mode=True)
    from torch.autograd.gradcheck import GradcheckError

    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(Wrong.apply, (x,), eps=1e-6, atol=1e-5, fast_mode=True)


def _reference_modules():
    for chapter in chapters_with_specs():
        try:
            module = importlib.import_module(f"course_lib.{chapter}.reference")
        except ModuleNotFoundError:  # a text-only chapter: nothing to mirror
            continue
        yield chapter, module


@pytest.mark.parametrize(("topic", "module"), list(_reference_modules()), ids=lambda x: str(x))
def test_every_public_function_is_mirrored_and_registered(topic, module):
    registered = {s.name for s in SPECS if s.topic == topic}
    acc = importlib.import_module(f"course_lib.{topic}.accelerated")
    assert sorted(module.__all__) == sorted(acc.__all__), "the two sides export different names"
    for name in module.__all__:
        ref_sig = inspect.signature(getattr(module, name))
        acc_sig = inspect.signature(getattr(acc, name))
        assert list(ref_sig.parameters) == list(acc_sig.parameters), f"{name}: signatures differ"
        for p in ref_sig.parameters.values():
            assert p.default == acc_sig.parameters[p.name].default, f"{name}: default of {p.name}"
        assert name in registered, f"{topic}.{name} has no conformance spec"


def test_specs_are_exactly_the_mirrored_functions():
    """No spec for a function that is not exported, and every mirrored chapter is found."""
    exported = {f"{t}.{n}" for t, m in _reference_modules() for n in m.__all__}
    assert {s.key for s in SPECS} == exported
    chapters = {t for t, _ in _reference_modules()}
    assert {"matmul", "softmax", "attention", "block", "positions", "number_formats"} <= chapters
