"""Plain data across the grader's boundary: a format that cannot carry code, and its frames.

The grader (:mod:`tools.grade`) and a submission's process (:mod:`tools.grade_runner`) talk
through pipes in frames: a 4-byte big-endian length, then that many bytes of UTF-8 JSON. Values
in a frame are *plain data*, decoded into exact built-in types:

* JSON's own: ``None``, ``bool``, ``int``, ``float`` (NaN and infinities too), ``str``, and
  ``list`` (a JSON array);
* tagged objects ``{"$": tag, ...}``: ``tuple``, ``dict`` (keys are plain hashable values),
  ``set``, ``frozenset``, ``bytes``, ``bytearray``, ``complex``, ``Ellipsis``, a NumPy array
  of a simple numeric, boolean or fixed-width string dtype (dtype, shape and the raw bytes), a
  NumPy scalar, a PyTorch tensor (dtype, shape, raw bytes and ``requires_grad``), a NumPy or
  PyTorch dtype, a PyTorch device, a compiled ``re``/``regex`` pattern (its text and flags),
  an instance of a dataclass or named tuple defined in ``course_lib`` (its class named by
  module and name, built from its fields: only a class the reading process has already
  imported from ``course_lib``), and a *reference* to an object that stays in the
  submission's process (``{"$": "r", "id": n, "type": name, "call": bool}``).

Decoding is strict: an unknown tag, a missing or extra field, a wrong type, a dtype outside the
list, a byte count that does not match the shape, nesting deeper than :data:`MAX_DEPTH` or more
than :data:`MAX_ITEMS` values raise :class:`WireError`. Nothing is ever unpickled, imported or
evaluated. :func:`decode` is what the grader runs on everything a submission sends.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import select
import struct
import sys
import time
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_FRAME",
    "MAX_ITEMS",
    "Ref",
    "WireError",
    "decode",
    "encode",
    "read_frame",
    "write_frame",
]

#: Largest frame either side reads (bytes).
MAX_FRAME = 64 * 2**20
#: Deepest nesting of containers a value may have.
MAX_DEPTH = 64
#: Most values (containers, arrays, scalars) one decoded value may hold.
MAX_ITEMS = 1_000_000

_NP_DTYPE = re.compile(r"^[<>|=]?([biufc]\d{1,2}|[US]\d{1,7})$")
_TORCH_DTYPES = (
    "float64 float32 float16 bfloat16 complex128 complex64 complex32 int64 int32 int16 int8 "
    "uint8 uint16 uint32 uint64 bool float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz"
).split()
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_COURSE_CLASS = re.compile(r"^(course_lib(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)$")


class WireError(ValueError):
    """A frame or a value that is not plain data in this format."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """An object that stays in the submission's process, named by its number there."""

    id: int
    type: str = "object"
    callable: bool = False


# -- encoding ---------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _course_class_name(obj: Any) -> str | None:
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    if not (module == "course_lib" or module.startswith("course_lib.")):
        return None
    if dataclasses.is_dataclass(obj) or (isinstance(obj, tuple) and hasattr(cls, "_fields")):
        return f"{module}:{cls.__qualname__}"
    return None


def encode(value: Any, *, fallback: Any = None, _depth: int = 0) -> Any:
    """``value`` as a JSON-ready tree of this format.

    Exact types are kept. Anything else goes to ``fallback(obj)``, which returns a tree (the
    submission's side registers the object and sends a reference); without one it is a
    ``TypeError`` naming the type (the grader's side: it sends plain data only).
    """
    if _depth > MAX_DEPTH:
        raise TypeError(f"a value nested deeper than {MAX_DEPTH} levels")
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value
    if t is list:
        return [encode(v, fallback=fallback, _depth=_depth + 1) for v in value]
    if t is tuple:
        return {"$": "t", "v": [encode(v, fallback=fallback, _depth=_depth + 1) for v in value]}
    if t is dict:
        items = [
            [
                encode(k, fallback=None, _depth=_depth + 1),
                encode(v, fallback=fallback, _depth=_depth + 1),
            ]
            for k, v in value.items()
        ]
        return {"$": "d", "v": items}
    if t is set or t is frozenset:
        tag = "s" if t is set else "fs"
        return {"$": tag, "v": [encode(v, fallback=None, _depth=_depth + 1) for v in value]}
    if t is bytes:
        return {"$": "b", "v": _b64(value)}
    if t is bytearray:
        return {"$": "ba", "v": _b64(bytes(value))}
    if t is complex:
        return {"$": "c", "re": value.real, "im": value.imag}
    if value is Ellipsis:
        return {"$": "e"}
    if isinstance(value, Ref):
        return {"$": "r", "id": value.id, "type": value.type, "call": value.callable}
    np = sys.modules.get("numpy")
    if np is not None:
        if t is np.ndarray:
            return _encode_array(np, value)
        if isinstance(value, np.generic) and t.__module__ == "numpy":
            arr = np.asarray(value)
            if _NP_DTYPE.match(arr.dtype.str):
                return {"$": "ns", "dtype": arr.dtype.str, "v": _b64(arr.tobytes())}
        if t is np.dtype or isinstance(value, np.dtype):
            if _NP_DTYPE.match(value.str):
                return {"$": "nd", "v": value.str}
    torch = sys.modules.get("torch")
    if torch is not None:
        if t is torch.Tensor or t is torch.nn.Parameter:  # a parameter crosses as its tensor
            return _encode_tensor(torch, value)
        if t is torch.dtype:
            name = str(value).removeprefix("torch.")
            if name in _TORCH_DTYPES:
                return {"$": "dt", "v": name}
        if t is torch.device:
            return {"$": "dev", "v": str(value)}
    for module in ("re", "regex"):
        mod = sys.modules.get(module)
        if mod is not None and t is getattr(mod, "Pattern", None):
            pattern = value.pattern
            return {"$": "re", "mod": module, "p": encode(pattern), "f": int(value.flags)}
    name = _course_class_name(value)
    if name is not None:
        if dataclasses.is_dataclass(value):
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        else:
            fields = dict(zip(type(value)._fields, value, strict=True))
        return {
            "$": "o",
            "cls": name,
            "v": {k: encode(v, fallback=fallback, _depth=_depth + 1) for k, v in fields.items()},
        }
    if fallback is not None:
        return fallback(value)
    raise TypeError(f"a {t.__name__} cannot cross to the other process (plain data only)")


def _encode_array(np: Any, arr: Any) -> dict:
    if not _NP_DTYPE.match(arr.dtype.str):
        raise TypeError(f"an array of dtype {arr.dtype} cannot cross (numbers only)")
    return {
        "$": "a",
        "dtype": arr.dtype.str,
        "shape": list(arr.shape),
        "v": _b64(np.ascontiguousarray(arr).tobytes()),
    }


def _encode_tensor(torch: Any, x: Any) -> dict:
    name = str(x.dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise TypeError(f"a tensor of dtype {x.dtype} cannot cross")
    t = x.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return {
        "$": "T",
        "dtype": name,
        "shape": list(t.shape),
        "v": _b64(raw),
        "grad": bool(x.requires_grad),
    }


# -- decoding ---------------------------------------------------------------------------------


class _Budget:
    def __init__(self) -> None:
        self.items = 0

    def take(self, n: int = 1) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise WireError(f"more than {MAX_ITEMS} values in one message")


def _fields(node: dict, *names: str) -> list[Any]:
    if set(node) != {"$", *names}:
        raise WireError(f"tag {node.get('$')!r} with fields {sorted(node)}")
    return [node[n] for n in names]


def _raw(text: Any) -> bytes:
    if type(text) is not str:
        raise WireError("raw bytes must be base64 text")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except Exception as exc:
        raise WireError(f"bad base64 ({type(exc).__name__})") from None


def _shape(shape: Any) -> tuple[int, ...]:
    if type(shape) is not list or len(shape) > 32:
        raise WireError("a shape must be a list of at most 32 sizes")
    if not all(type(n) is int and 0 <= n <= 2**40 for n in shape):
        raise WireError(f"bad shape {shape!r}")
    return tuple(shape)


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        raise WireError(f"a {type(value).__name__} cannot be a dict key or set member") from None
    return value


def decode(node: Any, *, refs: Any = None, _depth: int = 0, _budget: _Budget | None = None) -> Any:
    """The value a tree of this format stands for, in exact types (see the module docstring).

    ``refs(Ref)`` turns a reference into the object the reader wants for it (the grader: a
    proxy; the submission: its registered object); without it a reference is an error.
    """
    budget = _budget or _Budget()
    budget.take()
    if _depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels")
    t = type(node)
    if node is None or t is bool or t is int or t is float or t is str:
        return node
    if t is list:
        return [decode(v, refs=refs, _depth=_depth + 1, _budget=budget) for v in node]
    if t is not dict or type(node.get("$")) is not str:
        raise WireError(f"not a value of this format: a {t.__name__}")
    tag = node["$"]

    def sub(v: Any) -> Any:
        return decode(v, refs=refs, _depth=_depth + 1, _budget=budget)

    def items(v: Any) -> list:
        if type(v) is not list:
            raise WireError(f"tag {tag!r} needs a list")
        return [sub(x) for x in v]

    if tag == "t":
        return tuple(items(*_fields(node, "v")))
    if tag == "d":
        (pairs,) = _fields(node, "v")
        if type(pairs) is not list or not all(type(p) is list and len(p) == 2 for p in pairs):
            raise WireError("a dict is a list of [key, value] pairs")
        return {_hashable(sub(k)): sub(v) for k, v in pairs}
    if tag in ("s", "fs"):
        members = [_hashable(m) for m in items(*_fields(node, "v"))]
        return set(members) if tag == "s" else frozenset(members)
    if tag == "b":
        return _raw(*_fields(node, "v"))
    if tag == "ba":
        return bytearray(_raw(*_fields(node, "v")))
    if tag == "c":
        re_, im = _fields(node, "re", "im")
        if type(re_) not in (int, float) or type(im) not in (int, float):
            raise WireError("a complex needs two numbers")
        return complex(re_, im)
    if tag == "e":
        _fields(node)
        return Ellipsis
    if tag == "r":
        ident, typ, call = _fields(node, "id", "type", "call")
        if type(ident) is not int or type(typ) is not str or type(call) is not bool:
            raise WireError("a reference needs an int id, a type name and a bool")
        if refs is None:
            raise WireError("a reference where plain data was expected")
        name = typ if _NAME.match(typ) else "object"
        return refs(Ref(ident, name, call))
    if tag in ("a", "ns", "nd"):
        import numpy as np

        if tag == "nd":
            (dtype,) = _fields(node, "v")
            if type(dtype) is not str or not _NP_DTYPE.match(dtype):
                raise WireError(f"dtype {dtype!r} is not allowed")
            return np.dtype(dtype)
        if tag == "ns":
            dtype, raw = _fields(node, "dtype", "v")
            shape: tuple[int, ...] = ()
        else:
            dtype, shape_, raw = _fields(node, "dtype", "shape", "v")
            shape = _shape(shape_)
        if type(dtype) is not str or not _NP_DTYPE.match(dtype):
            raise WireError(f"dtype {dtype!r} is not allowed")
        dt = np.dtype(dtype)
        data = _raw(raw)
        count = 1
        for n in shape:
            count *= n
        if count * dt.itemsize != len(data):
            raise WireError(f"{len(data)} bytes for shape {shape} of {dt}")
        budget.take(max(0, count // 1024))
        arr = np.frombuffer(data, dtype=dt).reshape(shape).copy()
        return arr[()] if tag == "ns" else arr
    if tag == "T":
        import torch

        dtype, shape_, raw, grad = _fields(node, "dtype", "shape", "v", "grad")
        if dtype not in _TORCH_DTYPES or not hasattr(torch, dtype) or type(grad) is not bool:
            raise WireError(f"tensor dtype {dtype!r} is not allowed")
        shape = _shape(shape_)
        dt = getattr(torch, dtype)
        data = _raw(raw)
        count = 1
        for n in shape:
            count *= n
        size = torch.empty((), dtype=dt).element_size()
        if count * size != len(data):
            raise WireError(f"{len(data)} bytes for a tensor of shape {shape} and {dtype}")
        budget.take(max(0, count // 1024))
        if count == 0:
            out = torch.empty(shape, dtype=dt)
        else:
            out = torch.frombuffer(bytearray(data), dtype=dt).reshape(shape).clone()
        if grad and (out.is_floating_point() or out.is_complex()):
            out.requires_grad_(True)
        return out
    if tag == "dt":
        import torch

        (name,) = _fields(node, "v")
        if name not in _TORCH_DTYPES or not hasattr(torch, name):
            raise WireError(f"torch dtype {name!r} is not allowed")
        return getattr(torch, name)
    if tag == "dev":
        import torch

        (name,) = _fields(node, "v")
        if type(name) is not str or not re.match(r"^(cpu|cuda|mps|meta)(:\d{1,3})?$", name):
            raise WireError(f"device {name!r} is not allowed")
        return torch.device(name)
    if tag == "re":
        mod, pattern, flags = _fields(node, "mod", "p", "f")
        if mod not in ("re", "regex") or type(flags) is not int:
            raise WireError("a pattern needs a module name and int flags")
        text = sub(pattern)
        if type(text) not in (str, bytes):
            raise WireError("a pattern's text must be str or bytes")
        module = __import__(mod)
        try:
            return module.compile(text, flags)
        except Exception as exc:
            raise WireError(f"the pattern does not compile ({type(exc).__name__})") from None
    if tag == "o":
        name, fields = _fields(node, "cls", "v")
        found = _COURSE_CLASS.match(name) if type(name) is str else None
        module = sys.modules.get(found.group(1)) if found else None
        cls = getattr(module, found.group(2), None) if module is not None else None
        if not isinstance(cls, type) or type(fields) is not dict:
            raise WireError(f"{name!r} is not a course_lib class this process has loaded")
        values = {str(k): sub(v) for k, v in fields.items()}
        if dataclasses.is_dataclass(cls):
            allowed = {f.name for f in dataclasses.fields(cls) if f.init}
        elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
            allowed = set(cls._fields)
        else:
            raise WireError(f"{name} is neither a dataclass nor a named tuple")
        if not set(values) <= allowed:
            raise WireError(f"{name} has no field(s) {sorted(set(values) - allowed)}")
        try:
            return cls(**values)
        except Exception as exc:
            raise WireError(f"{name} rejected its fields ({type(exc).__name__})") from None
    raise WireError(f"unknown tag {tag!r}")


# -- frames -----------------------------------------------------------------------------------


def write_frame(fd: int, message: Any) -> None:
    """Send one JSON message (already encoded values inside) as a frame."""
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(data) > MAX_FRAME:
        raise WireError(f"a message of {len(data)} bytes is over the limit of {MAX_FRAME}")
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    parts, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer in time")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError("no answer in time")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(fd: int, deadline: float | None = None, limit: int = MAX_FRAME) -> Any:
    """One message from ``fd`` (a JSON value), waiting until ``deadline`` (time.monotonic()).

    Raises ``TimeoutError``, ``EOFError`` or :class:`WireError` (too long, not JSON).
    """
    (size,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if size > limit:
        raise WireError(f"a message of {size} bytes is over the limit of {limit}")
    data = _read_exact(fd, size, deadline)
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a message that is not JSON ({type(exc).__name__})") from None
