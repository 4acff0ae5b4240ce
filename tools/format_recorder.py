"""Record every number a notebook rounds for printing, with its unrounded value.

Run inside a notebook's kernel before its first cell (``tools/portability.py`` does it, with
``runpy.run_path``), with ``COURSE_PORTABILITY_RECORD`` naming a file. From then on the code
of every cell, and of every ``course_lib`` module imported after it, is rewritten as it is
compiled so that these calls go through a recorder that returns exactly what they return:

* f-strings and ``format(x, spec)`` with a precision (``f"{loss:.3f}"``, ``{p:.1%}``, ``.3g``);
* ``str.format`` (``"{:.2f}".format(x)``, also on a template held in a variable);
* ``%``-formatting of a literal template (``"%.3f" % x``);
* ``round(x, n)`` and ``.round(n)`` / ``np.round(a, n)`` / ``torch.round(t, decimals=n)``
  (arrays, tensors, data frames: the element nearest its rounding edge is kept).

Each call appends one JSON line to the file: the notebook cell (nbval's numbering, the code
cells counted from 0), where the call is (``cell:LINE`` or ``course_lib/....py:LINE``), the
spec, the unrounded value, the text it printed, and the value's distance from the nearest
rounding edge in units of the last printed digit (0: on the edge, 0.5: in the middle).

What it does not see: numbers printed by a ``repr`` (tensors, arrays, data frames, plain
``print(x)``); ``tools/portability.py`` compares those between two runs instead.
"""

from __future__ import annotations

import ast
import builtins
import importlib.abc
import json
import os
import re
import string
import sys
import types
from decimal import Decimal, InvalidOperation

#: the format-spec mini-language: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
SPEC = re.compile(r"^(?:.?[<>=^])?[-+ ]?z?#?0?\d*[,_]?(?:\.(?P<p>\d+))?(?P<t>[a-zA-Z%])?$")
FLOAT_TYPES = set("eEfFgGn%")
PERCENT = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?:\*|\d+)?(?:\.(?P<p>\*|\d+))?[hlL]?(?P<t>[diouxXeEfFgGcrsa%])"
)
NEAR = 0.05  # an array's elements counted as near their edge (units of the last digit)


# -- the arithmetic of a rounding edge ------------------------------------------------------


def number(value) -> float | None:
    """``value`` as a float if it is a non-integer real number (a 0-d array or tensor too)."""
    if isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return value
    dtype = str(getattr(value, "dtype", ""))
    if "float" in dtype or "bfloat" in dtype:
        try:
            if getattr(value, "ndim", 0) == 0 or getattr(value, "size", 2) == 1:
                return float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError, RuntimeError):
            return None
    if type(value).__name__ in ("Fraction", "Decimal"):
        return float(value)
    return None


def last_digit(value: float, spec: str) -> tuple[Decimal, int] | None:
    """(the value as printed before rounding, the power of ten of its last printed digit)
    for a float format spec with a rounding; None where the spec does not round."""
    m = SPEC.match(spec)
    if not m:
        return None
    kind, prec = m["t"], m["p"]
    if kind is None and prec is None or kind is not None and kind not in FLOAT_TYPES:
        return None
    p = 6 if prec is None else int(prec)
    exact = Decimal(value)
    if kind == "%":
        return exact * 100, -p
    if kind in ("f", "F"):
        return exact, -p
    if exact == 0 or not exact.is_finite():
        return None
    exponent = exact.copy_abs().adjusted()  # floor(log10 |value|)
    if kind in ("e", "E"):
        return exact, exponent - p
    return exact, exponent - max(p, 1) + 1  # g, G, n, or a precision without a type


def margin(scaled: Decimal, q: int) -> float:
    """How far ``scaled`` is from the nearest rounding edge at the digit ``10**q``, in units
    of that digit: 0 on the edge (the half-way point), 0.5 on a printed value exactly.

    >>> margin(Decimal("0.8449"), -2), margin(Decimal("0.84"), -2), margin(Decimal("0.845"), -2)
    (0.01, 0.5, 0.0)
    """
    try:
        units = scaled.copy_abs().scaleb(-q)
        frac = units - int(units)
    except (InvalidOperation, OverflowError, ValueError):
        return 0.5
    return float(abs(frac - Decimal("0.5")))


# -- recording --------------------------------------------------------------------------------


class Recorder:
    def __init__(self, path: str, cells: dict[str, int], order: list[int]) -> None:
        self.out = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (kernel-long)
        self.cells, self.order, self.count = cells, order, 0
        self.cell: int | None = None

    def pre_run_cell(self, info) -> None:
        cell_id = getattr(info, "cell_id", None)
        if cell_id in self.cells:
            self.cell = self.cells[cell_id]
        else:  # no cell id from the client: the code cells run in order
            self.cell = self.order[self.count] if self.count < len(self.order) else None
        self.count += 1

    def where(self) -> str:
        """The caller outside this file and the string module: a cell's line or a module's."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename in (__file__, string.__file__):
            frame = frame.f_back
        if frame is None:
            return "?"
        name = frame.f_code.co_filename.replace("\\", "/")
        if "course_lib/" in name:
            return f"course_lib/{name.split('course_lib/', 1)[1]}:{frame.f_lineno}"
        return f"cell:{frame.f_lineno}"

    def write(self, **fields) -> None:
        fields = {"cell": self.cell, "where": self.where(), **fields}
        self.out.write(json.dumps(fields) + "\n")

    def formatted(self, value, spec: str, text: str) -> None:
        v = number(value)
        if v is None or v != v or v in (float("inf"), float("-inf")):
            return
        found = last_digit(v, spec)
        if found is None:
            return
        scaled, q = found
        self.write(spec=spec, value=v, text=text, q=q, margin=margin(scaled, q))

    def rounded(self, data, decimals, result) -> None:
        if not isinstance(decimals, int) or isinstance(decimals, bool):
            return
        v = number(data)
        if v is not None:
            if v == v and abs(v) != float("inf"):
                text = str(result)
                m = margin(Decimal(v), -decimals)
                self.write(spec=f"round {decimals}", value=v, text=text, q=-decimals, margin=m)
            return
        arr = as_array(data)
        if arr is None or arr.size == 0:
            return
        import numpy as np

        flat = arr.ravel()
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return
        units = np.abs(flat) * 10.0**decimals
        dist = np.abs(units - np.floor(units) - 0.5)
        i = int(np.argmin(dist))
        self.write(
            spec=f"round {decimals}",
            value=float(flat[i]),
            text=str(round(float(flat[i]), decimals)),
            q=-decimals,
            margin=float(dist[i]),
            elements=int(flat.size),
            near=int((dist < NEAR).sum()),
        )


def as_array(data):
    """A float64 NumPy array of ``data`` (array, tensor, data frame, list), or None."""
    try:
        import numpy as np

        mod = type(data).__module__
        if mod.startswith("torch"):
            if not data.dtype.is_floating_point:
                return None
            data = data.detach().to("cpu").double().numpy()
        elif mod.startswith("pandas"):
            data = data.select_dtypes("number") if hasattr(data, "select_dtypes") else data
            data = data.to_numpy(dtype=float, na_value=float("nan"))
        arr = np.asarray(data)
        if arr.dtype.kind != "f":
            return None
        return arr.astype(np.float64)
    except Exception:  # anything unexpected: nothing recorded, never an error in the notebook
        return None


RECORDER: Recorder | None = None


def _safely(fn, *args) -> None:
    if RECORDER is None:
        return
    try:
        fn(*args)
    except Exception:  # recording must never change what the notebook does
        pass


class RecordingFormatter(string.Formatter):
    def format_field(self, value, format_spec):
        text = super().format_field(value, format_spec)
        _safely(RECORDER.formatted if RECORDER else None, value, format_spec, text)
        return text


FORMATTER = RecordingFormatter()


def fmt(value, spec):
    """``format(value, spec)``, recorded."""
    text = format(value, spec)
    _safely(RECORDER.formatted if RECORDER else None, value, spec, text)
    return text


def method_format(template, *args, **kwargs):
    """``template.format(*args, **kwargs)``, recorded where ``template`` is a str."""
    if type(template) is not str:
        return template.format(*args, **kwargs)
    text = template.format(*args, **kwargs)  # the real one decides the text and any error
    try:
        FORMATTER.vformat(template, args, kwargs)
    except Exception:
        pass
    return text


def percent(template, values):
    """``template % values`` for a literal str template, recorded."""
    text = template % values
    if RECORDER is None:
        return text
    try:
        seq = values if isinstance(values, tuple) else (values,)
        i = 0
        for m in PERCENT.finditer(template):
            if m["t"] == "%":
                continue
            if m["key"] is not None:
                value = values[m["key"]]
            else:
                if m.group(0).count("*"):
                    i += m.group(0).count("*")
                value = seq[i]
                i += 1
            if m["t"] in "eEfFgG":
                spec = f".{m['p'] if m['p'] not in (None, '*') else 6}{m['t']}"
                RECORDER.formatted(value, spec, format(value, spec))
    except Exception:
        pass
    return text


def round_(value, ndigits=None):
    """``round(value, ndigits)``, recorded."""
    result = round(value) if ndigits is None else round(value, ndigits)
    if ndigits is not None:
        _safely(RECORDER.rounded if RECORDER else None, value, ndigits, result)
    return result


def round_method(owner, name, *args, **kwargs):
    """``owner.round(...)`` / ``np.round(a, n)`` / ``torch.round(t, decimals=n)``, recorded."""
    result = getattr(owner, name)(*args, **kwargs)
    if RECORDER is None:
        return result
    if isinstance(owner, types.ModuleType):
        data, rest = (args[0], args[1:]) if args else (kwargs.get("a", kwargs.get("input")), ())
    else:
        data, rest = owner, args
    decimals = rest[0] if rest else kwargs.get("decimals", 0)
    _safely(RECORDER.rounded, data, decimals, result)
    return result


def finish() -> None:
    """The kernel's CPU time so far (the last cell the tool runs)."""
    if RECORDER is not None:
        import time

        RECORDER.out.write(json.dumps({"cpu": time.process_time()}) + "\n")
        RECORDER.out.flush()


HELPERS = {
    "__course_finish__": finish,
    "__course_fmt__": fmt,
    "__course_method_format__": method_format,
    "__course_percent__": percent,
    "__course_round__": round_,
    "__course_round_method__": round_method,
}


# -- the rewrite ------------------------------------------------------------------------------


def _call(name: str, args: list, keywords=(), like=None) -> ast.Call:
    node = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=list(keywords))
    return ast.copy_location(node, like) if like is not None else node


class Rewriter(ast.NodeTransformer):
    """Routes formatting and rounding calls through the recorder (same results)."""

    def visit_FormattedValue(self, node):
        self.generic_visit(node)
        if node.format_spec is None or node.conversion != -1:
            return node
        call = _call("__course_fmt__", [node.value, node.format_spec], like=node)
        return ast.copy_location(ast.FormattedValue(value=call, conversion=-1), node)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
            if isinstance(node.left.value, str):
                return _call("__course_percent__", [node.left, node.right], like=node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func, args, kw = node.func, node.args, node.keywords
        if isinstance(func, ast.Name) and not kw and len(args) == 2:
            if func.id == "format" and not any(isinstance(a, ast.Starred) for a in args):
                return _call("__course_fmt__", args, like=node)
            if func.id == "round" and not any(isinstance(a, ast.Starred) for a in args):
                return _call("__course_round__", args, like=node)
        if isinstance(func, ast.Attribute) and func.attr == "format":
            return _call("__course_method_format__", [func.value, *args], kw, like=node)
        if isinstance(func, ast.Attribute) and func.attr in ("round", "around"):
            name = ast.Constant(value=func.attr)
            return _call("__course_round_method__", [func.value, name, *args], kw, like=node)
        return node


class SafeRewriter(ast.NodeTransformer):
    """IPython's AST transformer: the rewrite, or the cell unchanged if anything goes wrong."""

    def visit(self, node):
        try:
            return ast.fix_missing_locations(Rewriter().visit(node))
        except Exception:
            return node


class RewritingLoader(importlib.machinery.SourceFileLoader):
    """Compiles a course_lib module with the rewrite (never from a cached .pyc)."""

    def get_code(self, fullname):
        source = self.get_data(self.path)
        tree = ast.parse(source, self.path)
        tree = ast.fix_missing_locations(Rewriter().visit(tree))
        return compile(tree, self.path, "exec", dont_inherit=True)


class CourseLibFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "course_lib" and not name.startswith("course_lib."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if isinstance(loader, importlib.machinery.SourceFileLoader):
                spec.loader = RewritingLoader(loader.name, loader.path)
            return spec
        return None


def install(path: str, cells: dict[str, int], order: list[int]) -> None:
    """Start recording into ``path`` (called once, in the kernel)."""
    global RECORDER
    RECORDER = Recorder(path, cells, order)
    for name, helper in HELPERS.items():
        setattr(builtins, name, helper)
    sys.meta_path.insert(0, CourseLibFinder())
    ip = get_ipython()  # noqa: F821 (run inside an IPython kernel)
    ip.events.register("pre_run_cell", RECORDER.pre_run_cell)
    ip.ast_transformers.append(SafeRewriter())


if __name__ == "__main__" or __name__ == "<run_path>":
    _cells = json.loads(os.environ.get("COURSE_PORTABILITY_CELLS", "{}"))
    _order = json.loads(os.environ.get("COURSE_PORTABILITY_ORDER", "[]"))
    install(os.environ["COURSE_PORTABILITY_RECORD"], _cells, _order)
