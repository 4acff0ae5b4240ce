"""Issue 44, item 1: no checker ever crashes.

Every public checker of every chapter (a function of ``course_lib/<chapter>/exercises.py`` whose
return annotation is ``Outcome``) is found automatically, so a checker added later is covered
too, and fed garbage where the learner's answer goes: None, a function that raises, one without
``return``, wrong types and shapes, NaN, generators, bytes, a wrong signature, its arguments
swapped, an object that breaks on every use, special tokens and lone surrogates where text is
expected. Each must give a failed :class:`~course_lib.checker.Outcome` whose message names what
was wrong (a word of it, per kind of garbage below), never an exception of the checker's own,
and quickly.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import time

import numpy as np
import pytest

import course_lib
from course_lib.checker import Outcome


def _checkers() -> list[tuple[str, str]]:
    found = []
    for info in pkgutil.iter_modules(course_lib.__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"course_lib.{info.name}.exercises")
        except ModuleNotFoundError as err:
            if err.name == f"course_lib.{info.name}.exercises":
                continue
            raise
        for name, obj in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(obj):
                continue
            if obj.__module__ != module.__name__:
                continue
            if inspect.signature(obj).return_annotation in ("Outcome", Outcome):
                found.append((info.name, name))
    return sorted(found)


CHECKERS = _checkers()

#: Arguments that are not the learner's answer (the value the notebook passes), per checker.
FIXED = {
    ("positions", "scheme_prediction"): {"actual": "alibi"},
}


class Hostile:
    """An object that breaks on every use: what a remote proxy of a dead process might do."""

    def _boom(self, *args, **kwargs):
        raise RuntimeError("hostile object")

    __len__ = __iter__ = __getitem__ = __float__ = __int__ = __index__ = _boom
    __array__ = __bool__ = __eq__ = __lt__ = __add__ = __mul__ = __matmul__ = _boom
    __hash__ = None


def _raises(*args, **kwargs):
    raise RuntimeError("garbage-error")


def _no_return(*args, **kwargs):
    _ = args


def _nan_like(*args, **kwargs):
    for a in args:
        try:
            arr = np.asarray(a, dtype=float)
        except (TypeError, ValueError):
            continue
        if arr.ndim:
            return np.full_like(arr, np.nan)
    return float("nan")


def _mutates(*args, **kwargs):
    """Writes NaN into every array it is given (a checker must not reuse them), returns None."""
    for a in args:
        if isinstance(a, np.ndarray) and a.flags.writeable and a.dtype.kind == "f":
            a[...] = np.nan
        elif hasattr(a, "fill_") and getattr(a, "is_floating_point", lambda: False)():
            a.detach().fill_(float("nan"))


def _swapped(*args, **kwargs):
    return args[::-1] if len(args) > 1 else args[0] if args else None


#: (name, the learner's function, a pattern its message must match)
GARBAGE_FUNCTIONS = [
    ("None instead of a function", None, r"function|None"),
    ("a number instead of a function", 3, r"function|int"),
    ("a function that raises", _raises, r"garbage-error|RuntimeError|raise"),
    ("a function without return", _no_return, r"None|return"),
    ("a function returning a str", lambda *a, **k: "abc", r"\bstr\b|text|string|'abc'"),
    ("a function returning a dict", lambda *a, **k: {"a": 1}, r"dict"),
    ("a function returning an object", lambda *a, **k: object(), r"object"),
    ("a function returning bytes", lambda *a, **k: b"abc", r"bytes|b'abc'"),
    ("a function returning a generator", lambda *a, **k: (i for i in range(3)), r"generator"),
    ("a function returning a hostile object", lambda *a, **k: Hostile(), r"Hostile|hostile"),
    ("a function of no arguments", lambda: 0, r"argument|signature"),
    ("a function of seven arguments", lambda a, b, c, d, e, f, g: 0, r"argument|signature"),
    # NaN in the shape of the first argument: the shape may be what is wrong
    ("a function returning NaN", _nan_like, r"NaN|nan|inf|finite|shape|float|array|\d+ numbers"),
    (
        "a function returning a wrong shape",
        lambda *a, **k: np.zeros((7, 3, 5)),
        r"shape|array|\d+ numbers",
    ),
    ("a function returning an empty list", lambda *a, **k: [], r"."),
    ("a function returning its arguments swapped", _swapped, r"."),
    ("a function that writes NaN into its inputs", _mutates, r"None|return"),
    ("a function returning a special token", lambda *a, **k: "<|endoftext|>", r"."),
    ("a function returning a lone surrogate", lambda *a, **k: "\ud800", r"."),
]

#: (name, the learner's answer where it is a value, a pattern its message must match)
GARBAGE_VALUES = [
    ("None", None, r"."),
    ("an int", 3, r"int|number|str"),
    ("bytes", b"abc", r"bytes|b'abc'"),
    ("a generator", (i for i in range(3)), r"generator"),
    ("NaN", float("nan"), r"."),
    ("a hostile object", Hostile(), r"Hostile|hostile"),
    ("a list of str", ["abc"], r"list|str"),
    ("a special token", "<|endoftext|>", r"."),
    ("a lone surrogate", "\ud800", r"."),
    ("an empty str", "", r"."),
]


def _is_function_parameter(p: inspect.Parameter) -> bool:
    return "Callable" in str(p.annotation)


def _trials(package: str, name: str):
    """Each garbage argument list for one checker: (what, args, pattern)."""
    fn = getattr(importlib.import_module(f"course_lib.{package}.exercises"), name)
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    fixed = FIXED.get((package, name), {})
    answers = [p for p in params if p.name not in fixed]
    assert answers, f"{package}.{name}: no parameter takes the learner's answer"
    trials = []
    functional = any(_is_function_parameter(p) for p in answers)
    garbage = GARBAGE_FUNCTIONS if functional else GARBAGE_VALUES
    for what, value, pattern in garbage:
        if functional:
            combos = [dict.fromkeys((p.name for p in answers), value)]  # every function
        else:
            combos = [{answers[0].name: value, **{p.name: value for p in answers[1:]}}]
        for combo in combos:
            args = [combo.get(p.name, fixed.get(p.name)) for p in params]
            trials.append((what, fn, args, pattern))
    return trials


def test_every_chapter_has_checkers():
    packages = {p for p, _ in CHECKERS}
    assert {"matmul", "softmax", "attention", "bpe", "gpt", "peft"} <= packages
    assert len(CHECKERS) >= 30


@pytest.mark.parametrize(("package", "name"), CHECKERS, ids=[f"{p}.{n}" for p, n in CHECKERS])
def test_garbage_gets_a_failed_verdict_that_names_it(package, name):
    problems = []
    start = time.perf_counter()
    for what, fn, args, pattern in _trials(package, name):
        try:
            outcome = fn(*args)
        except Exception as exc:  # the checker's own exception escaped
            problems.append(f"{what}: raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(outcome, Outcome):
            problems.append(f"{what}: returned {type(outcome).__name__}, not an Outcome")
            continue
        text = " ".join(outcome.details)
        try:
            str(outcome).encode("utf-8")
            outcome._repr_html_().encode("utf-8")
        except Exception as exc:
            problems.append(f"{what}: the verdict cannot be shown: {type(exc).__name__}: {exc}")
        if outcome.passed:
            problems.append(f"{what}: passed")
        elif not re.search(pattern, text):
            problems.append(f"{what}: the message does not name it ({pattern}): {text!r}")
    took = time.perf_counter() - start
    assert not problems, "\n".join(problems)
    assert took < 20, f"{took:.1f} s for the garbage of one checker"


@pytest.mark.parametrize(("package", "name"), CHECKERS, ids=[f"{p}.{n}" for p, n in CHECKERS])
def test_every_checker_is_guarded(package, name):
    """course_lib.checker.guarded: the safety net, and progress under the checker's own name."""
    fn = getattr(importlib.import_module(f"course_lib.{package}.exercises"), name)
    assert getattr(fn, "guarded", False), f"decorate {package}.{name} with @guarded"


@pytest.mark.parametrize(
    ("what", "prediction", "pattern"),
    [(w, v, p) for w, v, p in GARBAGE_VALUES if w != "None"]
    + [("a function", _raises, r"function"), ("an array", np.zeros((7, 3)), r".")],
)
def test_a_prediction_of_garbage_fails_and_shows_it(what, prediction, pattern):
    from course_lib.checker import check_prediction

    for actual in (16.0, (4, 2, 5, 6), "alibi", ([0.5, 0.5], [float("nan")] * 2), True):
        outcome = check_prediction(prediction, actual, what="x", mistakes={3: "a mistake"})
        assert isinstance(outcome, Outcome)
        str(outcome).encode("utf-8")
        assert not outcome.passed or (what == "an int" and actual == 3), (what, actual)
        assert outcome.details[0].startswith("you predicted "), outcome.details
        if what in ("a generator", "a hostile object", "a function"):  # shown by its type
            assert re.search(pattern, outcome.details[0]), outcome.details
