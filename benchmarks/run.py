"""Run benchmarks, print each as a table and write it as JSON to ``benchmarks/results/``.

    python -m benchmarks.run               # every benchmark
    python -m benchmarks.run matmul        # one (a module name in benchmarks/)
    python -m benchmarks.run --quick       # smaller sizes, for a smoke test
    python -m benchmarks.run nanogpt_race --nanogpt PATH   # needs a nanoGPT checkout

A benchmark is a module ``benchmarks/<name>.py`` with ``TITLE`` and ``run(quick: bool)`` returning
a list of flat dicts (one per row); an optional ``summary(rows) -> str`` adds lines after the table.
A module with ``NEEDS = "VAR"`` reads an outside path from that environment variable; when it is
unset, running every benchmark skips that one (naming it explicitly runs it and says what to do).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import sys
from pathlib import Path

import torch

import benchmarks
from course_lib.device import describe_device
from course_lib.measure import timed

RESULTS = Path(__file__).resolve().parent / "results"


def available() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if m.name not in ("run",) and not m.name.startswith("_")
    )


def format_table(rows: list[dict]) -> str:
    """Render rows as an aligned plain-text table (floats to 4 significant digits).

    >>> print(format_table([{"n": 8, "gflops": 1.23456}, {"n": 16, "gflops": 12.5}]))
    n   gflops
    --  ------
    8    1.235
    16    12.5
    """
    if not rows:
        return "(no rows)"
    cols = list(rows[0])

    def cell(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    cells = [[cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    numeric = [all(isinstance(r.get(c), int | float) for r in rows) for c in cols]

    def fmt(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    lines = [
        "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    return "\n".join([*lines, *(fmt(row) for row in cells)])


def machine() -> dict[str, str]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "device": describe_device(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default: all of {available()})"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--nanogpt", default=None, help="a nanoGPT checkout (for nanogpt_race)")
    args = parser.parse_args(argv)
    if args.nanogpt:
        os.environ["NANOGPT"] = args.nanogpt
    names = args.names or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {available()}")
    RESULTS.mkdir(exist_ok=True)
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        needs = getattr(module, "NEEDS", None)
        if needs and not os.environ.get(needs) and not args.names:
            print(f"\n== {module.TITLE}  [{name}: skipped, set {needs} or pass --nanogpt]")
            continue
        run = timed(lambda module=module: module.run(quick=args.quick))
        rows, elapsed = run.result, run.wall
        print(f"\n== {module.TITLE}  [{name}, {elapsed:.1f} s]")
        print(format_table(rows))
        if hasattr(module, "summary"):
            print(module.summary(rows))
        out = RESULTS / f"{name}.json"
        out.write_text(
            json.dumps(
                {
                    "benchmark": name,
                    "title": module.TITLE,
                    "machine": machine(),
                    "quick": args.quick,
                    "rows": rows,
                },
                indent=2,
            )
        )
        print(
            f"(written to {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
