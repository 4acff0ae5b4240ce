"""The process a challenge entry runs in (``python -m tools.challenge_child FILE FUNCTION``).

It imports the entry's file, prints ``ready``, then for each task line read from its input (JSON:
``args``, ``arrays`` (argument index -> ``.npy`` path), ``out``, ``kind``) calls the function,
writes the result to ``out`` and prints ``done`` (or ``error MESSAGE``). The parent
(:mod:`tools.challenge`) times each call from the task line to ``done``, so the import and any
set-up before ``ready`` are not timed, and it reads results as JSON or ``.npz`` without pickle.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path


def _write(result: object, kind: str, out: str) -> None:
    import numpy as np

    if kind == "merges":
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError("train_bpe must return (vocab, merges)")
        merges = [[bytes(a).hex(), bytes(b).hex()] for a, b in result[1]]
        Path(out).write_text(json.dumps(merges))
    elif kind == "float":
        Path(out).write_text(json.dumps(float(result)))  # type: ignore[arg-type]
    elif kind == "arrays":
        if not isinstance(result, tuple | list):
            raise TypeError(f"expected a tuple of arrays, got {type(result).__name__}")
        np.savez(out, *[np.asarray(a) for a in result])
    else:
        raise ValueError(f"unknown result kind {kind!r}")


def main(argv: list[str]) -> int:
    import numpy as np

    path, name = argv
    spec = importlib.util.spec_from_file_location("challenge_entry", path)
    if spec is None or spec.loader is None:
        print(f"error cannot import {path}", flush=True)
        return 1
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, name)
    except Exception as err:  # the entry's own error, reported to the parent in one line
        print(f"error {path} did not import: {type(err).__name__}: {err}", flush=True)
        return 1
    print("ready", flush=True)
    for line in sys.stdin:
        task = json.loads(line)
        args = list(task["args"])
        for i, p in task.get("arrays", {}).items():
            args[int(i)] = np.load(p, allow_pickle=False)
        try:
            _write(fn(*args), task["kind"], task["out"])
        except Exception as err:
            last = traceback.format_exception_only(type(err), err)[-1].strip()
            print("error " + json.dumps(last), flush=True)
            continue
        print("done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
