"""The machinery every exercise checker is built from.

A chapter's ``exercises.py`` builds each checker from these pieces: :func:`seeded` for the
random test inputs (the same on every run in a notebook), :func:`check_cases` to run the
learner's function on named cases, :func:`diagnose` / :func:`diagnose_number` to say what is
off, and :func:`first_mistake` to name a known wrong answer ("you forgot the 1/sqrt(d_k)").

**Writing a checker that ``./course grade`` can use** (tools/grade_judge.py). When a class is
graded, a checker runs in the grader's process and the learner's function runs in the
submission's sandboxed process: the function the checker receives is a proxy, and every call
of it sends the arguments across a pipe and brings the result back. So a checker must:

* take the learner's objects as its arguments (``check.NAME(fn1, fn2, value)``) and make every
  input itself; in the worksheet, a checker call names only the learner's objects or literals;
* pass the learner's function *plain data* only: ``None``, ``bool``, ``int``, ``float``,
  ``complex``, ``str``, ``bytes``, tuples, lists, dicts, sets, NumPy arrays of numbers, PyTorch
  tensors, NumPy/PyTorch dtypes, and dataclasses or named tuples defined in ``course_lib``
  (rebuilt from their fields). A model, a tokenizer, an open file or a callback cannot cross:
  pass its weights (``model.parameter_dict()``), its config and the data instead;
* expect back plain data in the same types (a NumPy subclass arrives as a plain array, a
  tensor detached) or, for anything else (a generator, an instance of the learner's class),
  a proxy whose methods, ``len``, indexing and iteration work but which never equals anything
  but itself; changes the function makes to a list, dict, array or tensor argument come back
  into it, as in one process;
* compute every expected value itself: never from something the learner's function returned
  or changed (:func:`check_cases` passes the function copies of each case's arguments);
* draw random inputs from :func:`seeded`, which a grading run seeds afresh
  (:func:`fresh_inputs`), so that answers cannot be hard-coded; keep tolerances wide enough
  for any seed;
* measure memory only with ``tracemalloc`` around the call (``course_lib.measure.
  peak_numpy_memory``): the grader reports the submission's resident growth there.

A predict-then-check exercise calls :func:`check_prediction` with the learner's variable as
its first argument; the grader takes every other argument (``actual``) from its own run of the
worksheet, so ``actual`` must be computed by the worksheet's cells, never from the learner's
own functions. ``tests/test_grade_checkers.py`` grades every chapter's key this way.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import html
import inspect
import json
import math
import numbers
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from course_lib.checks import is_tensor


@dataclass
class Outcome:
    """The verdict of a checker: truthy when the exercise is solved; displays itself in Jupyter."""

    title: str
    passed: bool
    details: list[str] = field(default_factory=list)
    exercise: tuple[str, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.exercise is None:
            self.exercise = _which_exercise(self.title)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = f"{'✅ Correct' if self.passed else '❌ Not yet'}: {self.title}"
        return "\n".join([head, *(f"   - {d}" for d in self.details)])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        _note_progress(self)  # shown to the learner in a notebook: their progress counts it
        colour = "#0a7d36" if self.passed else "#b3261e"
        items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        verdict = "✅ Correct" if self.passed else "❌ Not yet"
        return (
            f'<div class="course-check" style="border-left:4px solid {colour};padding:4px 10px">'
            f"<b>{verdict}</b>: {html.escape(self.title)}<ul>{items}</ul></div>"
        )


_EXERCISES = re.compile(r"course_lib\.(\w+)\.exercises$")


def _which_exercise(title: str) -> tuple[str, str] | None:
    """(chapter package, checker) of the checker that is making this outcome, from the stack:
    the checker :func:`guarded` is running, else the first ``course_lib.<package>.exercises``
    function, else a ``check_prediction`` called from a notebook whose ``check`` is a chapter's
    exercises module."""
    running = _RUNNING.get()
    if running is not None:
        return running
    frame = sys._getframe(2)
    predicted = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        found = _EXERCISES.match(module)
        if found:
            return found.group(1), frame.f_code.co_name
        if frame.f_code.co_name == "check_prediction" and module == __name__:
            predicted = title.removeprefix("your prediction of ")
        elif predicted is not None:
            check = getattr(frame.f_globals.get("check"), "__name__", "")
            found = _EXERCISES.match(check)
            return (found.group(1), f"prediction: {predicted}") if found else None
        frame = frame.f_back
    return None


def _note_progress(outcome: Outcome) -> None:
    """Record a shown verdict in the learner's progress file (course_lib.progress)."""
    from course_lib import progress

    if outcome.exercise is None or not progress.enabled():
        return
    try:
        progress.record(*outcome.exercise, outcome.passed)
    except OSError:
        pass  # a read-only cache folder never breaks an exercise


_RUN_SEED: int | None = None  # set by a grading run: fresh inputs that cannot be hard-coded


def fresh_inputs(run_seed: int | None) -> None:
    """Make :func:`seeded` mix ``run_seed`` into every checker's seed (``./course grade`` does,
    once per grading run); ``None`` restores the fixed inputs of a notebook."""
    global _RUN_SEED
    _RUN_SEED = None if run_seed is None else int(run_seed)


def seeded(seed: int) -> np.random.Generator:
    """The generator of a checker's random inputs: a fixed seed, so feedback is reproducible
    (in a grading run, the seed mixed with the run's own: see :func:`fresh_inputs`).

    >>> int(seeded(0).integers(100)) == int(seeded(0).integers(100))
    True
    """
    return np.random.default_rng(seed if _RUN_SEED is None else [seed, _RUN_SEED])


def first_mistake(
    got: Any, mistakes: Iterable[tuple[Any, str]], *, rtol: float = 1e-6, atol: float = 1e-8
) -> str | None:
    """The hint of the first known wrong answer that ``got`` equals, or None.

    ``mistakes`` holds ``(wrong answer, hint)`` pairs, most telling first; arrays are compared
    by shape and values.

    >>> first_mistake([2.0, 4.0], [(np.array([1.0, 2.0]), "unscaled"), (np.array([2.0, 4.0]), "doubled")])
    'doubled'
    >>> first_mistake([0.0], [(np.array([1.0]), "off by one")]) is None
    True
    """
    arr = to_array(got)
    if arr is None:
        return None
    for wrong, hint in mistakes:
        w = np.asarray(wrong, dtype=np.float64)
        if arr.shape == w.shape and np.allclose(arr, w, rtol=rtol, atol=atol):
            return hint
    return None


def to_array(x: Any) -> np.ndarray | None:
    """The learner's output as a float64 array, or None if it is not numeric array-like."""
    if is_tensor(x):
        x = x.detach().cpu()
        x = x.double() if x.is_floating_point() else x
        return x.numpy().astype(np.float64)
    try:
        arr = np.asarray(x)
    except Exception:
        return None
    if arr.dtype.kind not in "biuf":
        return None
    return arr.astype(np.float64)


def diagnose(
    got: Any, expected: np.ndarray, *, rtol: float = 1e-6, atol: float = 1e-8
) -> str | None:
    """Compare an output with the expected array; return None if it matches, else what is off.

    >>> print(diagnose(np.ones((3, 2)), np.ones((2, 3))))
    the result has shape (3, 2) but should have shape (2, 3): it looks transposed
    >>> print(diagnose(2 * np.eye(2), np.eye(2)))
    the values are off by a constant factor: yours are 2 times the expected ones
    >>> diagnose(np.eye(2), np.eye(2)) is None
    True
    """
    expected = np.asarray(expected, dtype=np.float64)
    if got is None:
        return "the function returned None: did you forget a `return` statement?"
    arr = to_array(got)
    if arr is None:
        return f"the function returned a {type(got).__name__}, not an array of numbers"
    if arr.shape != expected.shape:
        msg = f"the result has shape {arr.shape} but should have shape {expected.shape}"
        if arr.ndim >= 2 and arr.shape == expected.swapaxes(-1, -2).shape:
            msg += ": it looks transposed"
        elif arr.size == expected.size:
            msg += (
                ": the right number of values, arranged wrongly (a reshape instead of a transpose?)"
            )
        return msg
    if not np.all(np.isfinite(arr)) and np.all(np.isfinite(expected)):
        return "the result contains NaN or inf where every expected value is finite"
    if np.allclose(arr, expected, rtol=rtol, atol=atol):
        return None
    if (
        arr.ndim >= 2
        and arr.shape[-1] == arr.shape[-2]
        and np.allclose(arr, expected.swapaxes(-1, -2), rtol=rtol, atol=atol)
    ):
        return "the result is the transpose of the expected one"
    flat_e, flat_a = expected.ravel(), arr.ravel()
    nz = np.abs(flat_e) > 1e-12
    if nz.any():
        ratio = flat_a[nz] / flat_e[nz]
        if np.allclose(ratio, ratio[0], rtol=1e-6) and not np.isclose(ratio[0], 1):
            r = ratio[0]
            return f"the values are off by a constant factor: yours are {r:.4g} times the expected ones"
    err = np.abs(arr - expected)
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    return (
        f"wrong values: at index {tuple(int(i) for i in idx)} you return {arr[idx]:.6g} "
        f"but the expected value is {expected[idx]:.6g}"
    )


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
    """Call the learner's function; return (result, None) or (None, a description of the error).

    The result is remembered, so that :func:`guarded` can name it if the checker cannot use it.
    """
    if not callable(fn):
        return None, f"expected a function, got {describe(fn)}"
    try:
        result = fn(*args, **kwargs)
        _LAST_RETURN.set(result)
        return result, None
    except NotImplementedError:
        return None, "the function is not implemented yet (it raises NotImplementedError)"
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        if frame.filename == __file__:  # raised by the call itself, before the function ran
            where = "when called: do its parameters match the exercise's?"
        else:
            where = f"line {frame.lineno}"
        return None, f"it raised {type(exc).__name__}: {exc} ({where})"


def _copies(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Copies of a case's arguments, so that a function that changes its inputs cannot change
    the case it is compared on."""
    try:
        return copy.deepcopy(tuple(args))
    except Exception:
        return tuple(args)


def check_cases(
    title: str,
    fn: Callable[..., Any],
    cases: Iterable[tuple[str, tuple[Any, ...], Any]],
    *,
    compare: Callable[[Any, Any], str | None] = diagnose,
    require: bool = False,
    success: str = "",
) -> Outcome:
    """Run ``fn`` on each ``(description, args, expected)`` case and stop at the first failure."""
    if not callable(fn):
        outcome = Outcome(title, False, [f"expected a function, got {type(fn).__name__}"])
    else:
        outcome = Outcome(title, True, [success] if success else [])
        n = 0
        for description, args, expected in cases:
            n += 1
            got, error = call(fn, *_copies(args))
            problem = error or compare(got, expected)
            if problem:
                outcome = Outcome(title, False, [f"on {description}: {problem}"])
                break
        else:
            outcome.details.append(f"passed all {n} test cases")
    if require and not outcome.passed:
        raise AssertionError(str(outcome))
    return outcome


def diagnose_number(
    got: Any,
    want: float,
    mistakes: dict[str, float] | None = None,
    *,
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-9,
) -> str | None:
    """Compare a scalar answer with ``want``; name the mistake when it equals a known wrong value.

    ``mistakes`` maps a hint to the value that mistake produces. The default tolerance lets a
    right answer computed in float32 pass (a relative error about 1e-7), and a NumPy number or
    a one-number array or tensor counts as a number.

    >>> diagnose_number(np.float32(1 / 3), 1 / 3) is None
    True

    >>> diagnose_number(0.5, 0.5) is None
    True
    >>> print(diagnose_number(1.0, 0.5, {"you forgot to halve": 1.0}))
    you return 1, the right value is 0.5: you forgot to halve
    >>> print(diagnose_number("0.5", 0.5))
    return a number, got str
    """
    if isinstance(got, bool | str | bytes | np.bool_):
        return f"return a number, got {type(got).__name__}"
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return f"return a number, got {describe(got)}"
    if math.isnan(value):
        return f"you return NaN, the right value is {want:.6g}"
    if math.isclose(value, want, rel_tol=rel_tol, abs_tol=abs_tol):
        return None
    message = f"you return {value:.6g}, the right value is {want:.6g}"
    for hint, wrong in (mistakes or {}).items():
        if math.isclose(value, wrong, rel_tol=rel_tol, abs_tol=abs_tol):
            return f"{message}: {hint}"
    return message


def check_prediction(
    prediction: Any,
    actual: Any,
    *,
    what: str,
    rtol: float = 0.05,
    atol: float = 0.0,
    explanation: str = "",
    mistakes: Iterable[tuple[Any, str]] | Mapping[Any, str] = (),
) -> Outcome:
    """A predict-then-check exercise: compare what the learner wrote down with what ran.

    ``prediction`` is the learner's answer (a number, a string, a bool, a tuple such as a shape,
    a pair of lists, or an array); ``actual`` the computed one. Numbers count as right within
    ``rtol``/``atol`` (a prediction is an estimate), in any form: int or NumPy int, float32 or
    float64, a list, a tuple, an array or a tensor, even a number typed as a string ("16");
    whole numbers in a tuple (a shape) must be equal; NaN matches NaN; strings and bools must be
    equal. ``None`` means "not predicted yet". The verdict says both values and, once the
    prediction is in, ``explanation`` (why the right value is what it is); ``mistakes`` pairs
    common wrong values with what each one means, said when the prediction is one of them.

    >>> check_prediction(None, 4, what="the number of heads").passed
    False
    >>> print(check_prediction(3.9, 4.0, what="the variance", explanation="d_k = 4"))
    ✅ Correct: your prediction of the variance
       - you predicted 3.9; the cell computed 4
       - d_k = 4
    >>> check_prediction((2, 3), (3, 2), what="the shape").passed
    False
    >>> check_prediction([2, 3], (2, 3), what="the shape").passed
    True
    >>> check_prediction((2, 3), (2, 4), what="the shape", rtol=0.5).passed  # a shape is exact
    False
    >>> check_prediction("16", 16.0, what="the variance").passed
    True
    >>> check_prediction(([0.5, 0.5], [float("nan")] * 2), ([0.5, 0.5], [np.nan] * 2), what="p").passed
    True
    >>> print(check_prediction(64.0, 16.0, what="the variance", mistakes={64: "not scaled"}))
    ❌ Not yet: your prediction of the variance
       - you predicted 64; the cell computed 16
       - 64 is what you get if not scaled
    """
    title = f"your prediction of {what}"
    if prediction is None or prediction is ...:
        return Outcome(title, False, ["write your prediction first (replace None), then run"])
    try:
        right = _same(prediction, actual, rtol, atol)
    except Exception:
        right = False
    details = [f"you predicted {_show(prediction)}; the cell computed {_show(actual)}"]
    if not right:
        pairs = mistakes.items() if isinstance(mistakes, Mapping) else mistakes
        for wrong, meaning in pairs:
            try:
                hit = _same(prediction, wrong, rtol, atol)
            except Exception:
                hit = False
            if hit:
                details.append(f"{_show(wrong)} is what you get if {meaning}")
                break
    if explanation:
        details.append(explanation)
    return Outcome(title, bool(right), details)


def _same(p: Any, a: Any, rtol: float, atol: float) -> bool:
    """Whether prediction ``p`` matches ``a`` (see :func:`check_prediction`)."""
    if isinstance(p, str) and not isinstance(a, str) and not isinstance(a, bool | np.bool_):
        try:
            p = float(p.strip().replace("_", ""))  # "16" for 16
        except ValueError:
            return False
    if isinstance(a, str) or isinstance(p, str):
        return isinstance(a, str) and isinstance(p, str) and p == a
    if isinstance(a, bool | np.bool_) or isinstance(p, bool | np.bool_):
        return isinstance(p, bool | np.bool_) and isinstance(a, bool | np.bool_) and p == a
    if isinstance(a, tuple | list) and isinstance(p, tuple | list):
        if len(a) != len(p):
            return False
        return all(
            x == y if _whole(x) and _whole(y) else _same(x, y, rtol, atol)  # a shape: exact
            for x, y in zip(p, a, strict=True)
        )
    x, y = to_array(p), to_array(a)
    if x is None or y is None or x.shape != y.shape:
        return False
    return bool(np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True))


def _whole(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool | np.bool_)


def _show(x: Any) -> str:
    try:
        if isinstance(x, float | np.floating):
            return f"{float(x):.4g}"
        if isinstance(x, str):
            return repr(x)
        return _short(str(x), 200)
    except Exception:
        return describe(x)


# -- the safety net of every checker ------------------------------------------------------------

_NOTHING = object()
_LAST_RETURN: contextvars.ContextVar[Any] = contextvars.ContextVar("last_return", default=_NOTHING)
_RUNNING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "running", default=None
)


def describe(value: Any) -> str:
    """A learner's value in a few words, for a message; never raises, whatever the value.

    >>> describe(None)
    'None'
    >>> describe(x for x in "ab")
    'a generator (return a list: list(...) around it)'
    >>> describe(np.zeros((2, 3)))
    'an array of shape (2, 3) (float64)'
    >>> describe(b"ab")
    "bytes b'ab'"
    """
    kind = type(value).__name__
    try:
        if value is None:
            return "None"
        if isinstance(value, bool | np.bool_):
            return f"the bool {bool(value)}"
        if isinstance(value, bytes | bytearray):
            return f"{kind} {_short(repr(bytes(value[:40])))}"
        if isinstance(value, str):
            return f"the str {_short(repr(value))}"
        if isinstance(value, np.ndarray) or is_tensor(value):
            shape = tuple(int(n) for n in value.shape)
            what = "an array" if isinstance(value, np.ndarray) else "a tensor"
            return f"{what} of shape {shape} ({str(value.dtype).removeprefix('torch.')})"
        if isinstance(value, np.generic):
            return f"the {kind} {_short(repr(value.item()))}"
        if isinstance(value, numbers.Number):
            return f"the {kind} {_short(repr(value))}"
        if isinstance(value, list | tuple | dict | set | frozenset):
            return f"a {kind} of {len(value)} item{'s' * (len(value) != 1)}"
        if kind == "generator" or inspect.isgenerator(value):
            return "a generator (return a list: list(...) around it)"
        if callable(value):
            return f"a function ({kind})" if inspect.isroutine(value) else f"a {kind}"
    except Exception:
        pass
    return f"a {kind} object"


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def guarded(checker: Callable[..., Outcome]) -> Callable[..., Outcome]:
    """Make ``checker`` (a public checker of a chapter's ``exercises.py``) safe on garbage.

    An exception that escapes the checker itself (garbage it did not foresee: a generator,
    bytes, an object that breaks on use, something else where a function belongs) becomes a
    failed verdict naming what the learner's function last returned, never a traceback from
    inside the course; a failed verdict that does not say what an odd return was (a str, bytes,
    a generator, an object) gets it added; and the verdicts the checker makes
    are recorded in the learner's progress under the checker's own name. ``require=True`` still
    raises ``AssertionError`` on a failed verdict. With ``COURSE_CHECK_LOG`` set to a file,
    every call appends its checker, time and verdict there as a line of JSON (a maintainer's
    measurement: ``tests/test_checkers_garbage.py`` and issue 44's table).

    >>> @guarded
    ... def total(fn: Callable, *, require: bool = False) -> Outcome:
    ...     got, error = call(fn, [1, 2])
    ...     return Outcome("a total", not error and got + 0 == 3, [error or "ok"])
    >>> print(total(lambda xs: (x for x in xs)))
    ❌ Not yet: check.total
       - the checker could not use what your function returned, a generator (return a list: \
list(...) around it) (TypeError: unsupported operand type(s) for +: 'generator' and 'int')
    >>> print(total(None))
    ❌ Not yet: a total
       - expected a function, got None
    """
    module = checker.__module__ or ""
    found = re.match(r"course_lib\.(\w+)\.exercises$", module)
    key = (found.group(1) if found else module, checker.__name__)
    signature = inspect.signature(checker)
    functions = [
        name for name, p in signature.parameters.items() if "Callable" in str(p.annotation)
    ]
    title = f"check.{checker.__name__}"

    @functools.wraps(checker)
    def safe(*args: Any, **kwargs: Any) -> Outcome:
        if not os.environ.get("COURSE_CHECK_LOG"):
            return guard(*args, **kwargs)
        start, outcome = time.perf_counter(), None
        try:
            outcome = guard(*args, **kwargs)
            return outcome
        finally:
            _log(key, outcome, time.perf_counter() - start)

    def guard(*args: Any, **kwargs: Any) -> Outcome:
        require = bool(kwargs.get("require"))
        outer = _RUNNING.get() is None
        running = _RUNNING.set(key) if outer else None
        last = _LAST_RETURN.set(_NOTHING)
        try:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:
                how = f"call it as check.{checker.__name__}{signature}"
                return _failed(title, [f"{how}: {exc}"], require)
            not_functions = [
                f"{name} must be a function, got {describe(bound.arguments[name])}"
                for name in functions
                if name in bound.arguments and not callable(bound.arguments[name])
            ]
            try:
                outcome = checker(*args, **kwargs)
                if not outcome.passed and outcome.details:
                    _name_odd_return(outcome, _LAST_RETURN.get())
                return outcome
            except AssertionError:
                if require:
                    raise
                problem = "the checker stopped on an assertion"
                returned = _LAST_RETURN.get()
                return _failed(title, [_could_not_use(returned, args, problem)], require)
            except Exception as exc:
                if not_functions:
                    return _failed(title, not_functions, require)
                returned = _LAST_RETURN.get()
                problem = f"{type(exc).__name__}: {_short(str(exc), 200)}"
                return _failed(title, [_could_not_use(returned, args, problem)], require)
        finally:
            _LAST_RETURN.reset(last)
            if running is not None:
                _RUNNING.reset(running)

    safe.guarded = True  # type: ignore[attr-defined]
    return safe


def _log(key: tuple[str, str], outcome: Outcome | None, seconds: float) -> None:
    """One line of JSON per checker call, to the file ``COURSE_CHECK_LOG`` names (a maintainer's
    measurement: how long each check takes, which verdicts the tests reach)."""
    line = {
        "checker": ".".join(key),
        "seconds": round(seconds, 4),
        "passed": None if outcome is None else outcome.passed,
        "details": None if outcome is None else outcome.details,
    }
    try:
        with open(os.environ["COURSE_CHECK_LOG"], "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=True) + "\n")
    except (OSError, TypeError, ValueError):
        pass


def _name_odd_return(outcome: Outcome, returned: Any) -> None:
    """Say what the learner's function returned when it was not numbers at all (a str, bytes, a
    dict, a generator, some object) and the checker's message does not say it already."""
    if returned is _NOTHING or returned is None:
        return
    if isinstance(returned, numbers.Number | np.generic | np.ndarray | list | tuple):
        return
    if is_tensor(returned):
        return
    kind = type(returned).__name__
    text = " ".join(outcome.details)
    if kind in text or (kind == "str" and "string" in text):
        return
    outcome.details[-1] += f" (your function returned {describe(returned)})"


def _could_not_use(returned: Any, args: tuple[Any, ...], problem: str) -> str:
    if returned is not _NOTHING:
        return f"the checker could not use what your function returned, {describe(returned)} ({problem})"
    answer = describe(args[0]) if args else "nothing"
    return f"the checker could not use your answer, {answer} ({problem})"


def _failed(title: str, details: list[str], require: bool = False) -> Outcome:
    outcome = Outcome(title, False, details, exercise=_RUNNING.get())
    if require:
        raise AssertionError(str(outcome))
    return outcome
