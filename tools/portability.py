"""Does a chapter print the same on every CPU? Run it on two code paths and compare.

    python -m tools.portability notebooks/10_feedback_distillation.ipynb
    python -m tools.portability 08_gpt 10_feedback_distillation --json report.json
    python -m tools.portability --all                 # every chapter
    python -m tools.portability 04_attention --paths alternate

The notebook runs (in fresh kernels, every cell, errors kept) once per code path of
``tools/code_paths.py``, by default two: ``pinned``, the path its stored outputs are written
and checked under (one thread, MKL's COMPATIBLE branch, AVX2 kernels), and ``alternate``,
another path on this machine (MKL's own branch for this CPU, PyTorch's portable kernels, other
OpenBLAS and NumPy kernels, two threads). Then it prints:

1. every output line that differs from the stored notebook, per path, compared as nbval does
   (the same tags, sanitiser and output keys);
2. every printed number near its rounding edge. ``tools/format_recorder.py`` records, in the
   kernel, the unrounded value of each number the cells or ``course_lib`` round for printing
   (f-strings and ``format`` with a precision, ``str.format``, ``%``, ``round``,
   ``np.round``/``.round``); a number is listed when the two paths print it differently, when
   it sits closer to the edge than a few times the difference between the two paths, or
   within 1 % of a digit of the edge. Numbers printed by a ``repr`` (a tensor, an array, a
   data frame) are not recorded: a line where they differ between the two paths is listed as
   it is.

Exit status 1 if a path's outputs differ from the stored ones, else 0 (a number near its
edge is a warning). How to read the result and what to do about an edge: the README,
"Portable". ``tests/test_portability.py`` runs the machine-sensitive chapters this way on
the alternate path.
"""

from __future__ import annotations

import argparse
import atexit
import configparser
import difflib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tools import code_paths

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RECORDER = Path(__file__).resolve().parent / "format_recorder.py"
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
#: nbval's keys that are never compared (plugin.py, without --nbdime)
SKIP_COMPARE = (
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
)
#: a number whose two paths differ by s is listed when it is within RISK * s of its edge
RISK = 4.0
#: ... and any number within this fraction of a digit of its edge
NEAR = 0.01
#: closer than this, and the same on both paths: the float nearest a decimal tie (0.745 from
#: 149/200), computed exactly; it prints the same on every IEEE-754 CPU
TIE = 1e-6
SETUP_ID = "course-portability-setup"
FINISH_ID = "course-portability-finish"
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?%?")


# -- the notebook's cells, as nbval sees them -----------------------------------------------


@dataclass
class Cell:
    number: int  # nbval's "Cell N": the code cells counted from 0
    index: int  # the index among all cells
    source: str
    tags: list[str]

    @property
    def skipped(self) -> bool:
        return "nbval-skip" in self.tags or "skip-execution" in self.tags

    @property
    def checked(self) -> bool:
        return not (
            self.skipped or "nbval-ignore-output" in self.tags or "colab-setup" in self.tags
        )


def code_cells(nb) -> list[Cell]:
    cells, number = [], 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            tags = list(cell.get("metadata", {}).get("tags", []))
            cells.append(Cell(number, index, cell.source, tags))
            number += 1
    return cells


def sanitizers(path: Path = SANITIZE) -> list[tuple[re.Pattern, str]]:
    parser = configparser.ConfigParser()
    parser.read(path, encoding="utf-8")
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections()]


def comparable(outputs, subs) -> dict[str, list]:
    """What nbval compares of a cell's outputs: key -> values (streams coalesced, sanitised)."""
    import nbformat
    from nbval.plugin import coalesce_streams, transform_streams_for_comparison

    outputs = [nbformat.from_dict(o) for o in outputs]
    outputs = transform_streams_for_comparison(coalesce_streams(outputs))
    flat: dict[str, list] = defaultdict(list)

    def clean(value):
        if isinstance(value, list):  # nbformat may keep multi-line strings as lists
            value = "".join(value)
        if isinstance(value, str):
            for regex, replace in subs:
                value = regex.sub(replace, value)
        return value

    for out in outputs:
        for key, value in out.items():
            if key in SKIP_COMPARE:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIP_COMPARE:
                        flat[mime].append(clean(data))
            else:
                flat[key].append(clean(value))
    return dict(flat)


def text_of(values: dict[str, list]) -> str:
    """The cell's compared outputs as lines of text (for diffs and for finding a number)."""
    parts = []
    for key in sorted(values):
        for value in values[key]:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            parts.append(f"[{key}]\n{text}")
    return "\n".join(parts)


# -- one run --------------------------------------------------------------------------------


@dataclass
class Run:
    path: str
    described: str
    seconds: float = 0.0
    cpu_seconds: float | None = None
    outputs: dict[int, dict[str, list]] = field(default_factory=dict)  # cell number -> compared
    records: list[dict] = field(default_factory=list)
    error: str = ""


def execute(notebook: Path, path: str, workdir: Path, timeout: int = 900) -> Path:
    """Run ``notebook`` on ``path`` in a fresh kernel; write the executed notebook and the
    records under ``workdir``; return the JSON summary's path (runs in its own process)."""
    import nbformat
    from nbclient import NotebookClient

    from tools.execute_notebooks import kernel_env

    nb = nbformat.read(notebook, as_version=4)
    cells = code_cells(nb)
    run_nb = nbformat.v4.new_notebook(metadata=nb.metadata)
    setup = f"import runpy\nrunpy.run_path({str(RECORDER)!r})"
    run_nb.cells.append(nbformat.v4.new_code_cell(setup, id=SETUP_ID))
    for cell in cells:
        source = "" if cell.skipped else cell.source
        run_nb.cells.append(nbformat.v4.new_code_cell(source, id=f"c{cell.number}"))
    finish = "__course_finish__()"
    run_nb.cells.append(nbformat.v4.new_code_cell(finish, id=FINISH_ID))
    records = workdir / f"{path}.records.jsonl"
    records.unlink(missing_ok=True)
    env = kernel_env(path) | {
        "COURSE_PORTABILITY_RECORD": str(records),
        "COURSE_PORTABILITY_CELLS": json.dumps({f"c{c.number}": c.number for c in cells}),
        "COURSE_PORTABILITY_ORDER": json.dumps([c.number for c in cells if c.source.strip()]),
    }
    client = NotebookClient(
        run_nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    start, error = time.perf_counter(), ""
    try:
        client.execute(env=env)
    except Exception as exc:  # a time-out or a dead kernel: report it, compare what ran
        atexit.unregister(client._cleanup_kernel)  # nbclient's hook fails where none started
        error = f"{type(exc).__name__}: {str(exc)[-1500:]}"
    seconds = time.perf_counter() - start
    outputs = {c.number: run_nb.cells[i + 1].get("outputs", []) for i, c in enumerate(cells)}
    summary = workdir / f"{path}.json"
    summary.write_text(
        json.dumps(
            {
                "path": path,
                "described": code_paths.describe(path),
                "seconds": seconds,
                "outputs": outputs,
                "error": error,
            }
        )
    )
    return summary


def load_run(summary: Path) -> Run:
    data = json.loads(summary.read_text())
    subs = sanitizers()
    run = Run(data["path"], data["described"], data["seconds"], error=data["error"])
    run.outputs = {int(k): comparable(v, subs) for k, v in data["outputs"].items()}
    records = summary.with_name(f"{data['path']}.records.jsonl")
    if records.exists():
        for line in records.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if "cpu" in rec:
                run.cpu_seconds = rec["cpu"]
            else:
                run.records.append(rec)
    return run


def run_paths(
    notebook: Path, paths: list[str], workdir: Path, jobs: int = 2, timeout: int = 900
) -> list[Run]:
    """Each path in its own process (the code-path variables are read as libraries start)."""

    def one(path: str) -> Run:
        cmd = [sys.executable, "-m", "tools.portability", "--execute-one", path, str(notebook)]
        cmd += ["--workdir", str(workdir), "--timeout", str(timeout)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        summary = workdir / f"{path}.json"
        if proc.returncode != 0 or not summary.exists():
            return Run(path, code_paths.describe(path), error=(proc.stdout + proc.stderr)[-3000:])
        return load_run(summary)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, paths))


# -- comparing ------------------------------------------------------------------------------


@dataclass
class Difference:
    cell: int
    path: str
    lines: list[str]  # a unified diff, stored -> this path


def differences(stored: dict[int, dict], run: Run, cells: list[Cell]) -> list[Difference]:
    out = []
    for cell in cells:
        if not cell.checked:
            continue
        want, got = stored.get(cell.number, {}), run.outputs.get(cell.number, {})
        if want == got:
            continue
        diff = difflib.unified_diff(
            text_of(want).splitlines(),
            text_of(got).splitlines(),
            "stored",
            run.path,
            n=0,
            lineterm="",
        )
        lines = [d for d in diff if not d.startswith(("---", "+++", "@@"))]
        out.append(Difference(cell.number, run.path, lines or ["(the outputs differ in kind)"]))
    return out


@dataclass
class Edge:
    cell: int
    where: str
    spec: str
    texts: tuple[str, ...]
    values: tuple[float, ...]
    margin: float  # the smaller of the paths' distances to the edge, in units of the last digit
    spread: float  # |difference| of the paths' values, in the same units
    line: str = ""  # the printed line it appears in (the first path's output)
    kind: str = ""  # "differs", "close", "near" or "tie" (see edges())

    def describe(self, paths: list[str]) -> str:
        vals = ", ".join(f"{p} {v!r}" for p, v in zip(paths, self.values, strict=True))
        printed = " / ".join(dict.fromkeys(self.texts))
        shown = self.line.strip() or printed
        return (
            f"cell {self.cell} {self.kind:7} {shown[:100]!r}\n"
            f"      printed {printed!r} ({self.spec}, {self.where}); unrounded: {vals}; "
            f"{self.margin:.3g} of a digit from the edge, the paths {self.spread:.3g} apart"
        )


def _units(rec: dict) -> float:
    q = rec["q"]
    value = rec["value"] * (100 if rec["spec"].endswith("%") else 1)
    return abs(value) / 10.0**q


def edges(runs: list[Run], risk: float = RISK, near: float = NEAR) -> list[Edge]:
    """The recorded numbers near their rounding edge, paired across the runs by cell, place,
    spec and occurrence (a single run: by its margin alone)."""
    keyed: list[dict] = []
    for run in runs:
        seen: dict[tuple, int] = defaultdict(int)
        table = {}
        for rec in run.records:
            base = (rec["cell"], rec["where"], rec["spec"])
            table[(*base, seen[base])] = rec
            seen[base] += 1
        keyed.append(table)
    found = []
    for key, first in keyed[0].items():
        recs = [first] + [t[key] for t in keyed[1:] if key in t]
        if len(recs) != len(runs):
            continue  # not reached on every path (a loop that stopped elsewhere)
        texts = tuple(r["text"] for r in recs)
        margin = min(r["margin"] for r in recs)
        units = [_units(r) for r in recs]
        spread = max(units) - min(units)
        if len(set(texts)) > 1:
            kind = "differs"
        elif spread > 0 and margin < risk * spread:
            kind = "close"
        elif spread == 0 and margin < TIE:
            kind = "tie"
        elif margin < near:
            kind = "near"
        else:
            continue
        values = tuple(r["value"] for r in recs)
        found.append(Edge(key[0], key[1], key[2], texts, values, margin, spread, kind=kind))
    return found


def compared_only(found: list[Edge], runs: list[Run], cells: list[Cell]) -> list[Edge]:
    """The edges nbval would see: in a checked cell, and printed in an output it compares
    (not in a figure's alt text, a file name, a cell tagged nbval-ignore-output ...); each
    with the line it appears in."""
    checked = {c.number for c in cells if c.checked}
    kept = []
    for edge in found:
        if edge.cell not in checked:
            continue
        for run, printed in zip(runs, edge.texts, strict=True):
            text = text_of(run.outputs.get(edge.cell, {}))
            token = re.compile(rf"(?<![\d.]){re.escape(printed.strip())}(?!\d)")
            line = next((ln for ln in text.splitlines() if token.search(ln)), "")
            if line:
                edge.line = line
                kept.append(edge)
                break
    return kept


def unrecorded(runs: list[Run], found: list[Edge], cells: list[Cell]) -> list[Difference]:
    """Lines that differ between the paths and hold no recorded number that explains them."""
    if len(runs) < 2:
        return []
    explained = defaultdict(set)
    for e in found:
        if e.kind == "differs":
            explained[e.cell].update(e.texts)
    out = []
    for cell in cells:
        if not cell.checked:
            continue
        a = text_of(runs[0].outputs.get(cell.number, {})).splitlines()
        b = text_of(runs[1].outputs.get(cell.number, {})).splitlines()
        if a == b:
            continue
        diff = difflib.unified_diff(a, b, runs[0].path, runs[1].path, n=0, lineterm="")
        lines = [d for d in diff if not d.startswith(("---", "+++", "@@"))]
        lines = [ln for ln in lines if not any(t in ln for t in explained[cell.number])]
        if lines:
            out.append(Difference(cell.number, f"{runs[0].path} vs {runs[1].path}", lines))
    return out


# -- the report -----------------------------------------------------------------------------


@dataclass
class Report:
    notebook: str
    runs: list[Run]
    diffs: list[Difference]
    edges: list[Edge]
    unrecorded: list[Difference]

    @property
    def ok(self) -> bool:
        return not self.diffs and not any(r.error for r in self.runs)

    def text(self) -> str:
        paths = [r.path for r in self.runs]
        lines = [f"== {self.notebook}"]
        for r in self.runs:
            cpu = f", {r.cpu_seconds:.1f} s CPU in the kernel" if r.cpu_seconds else ""
            n = len({d.cell for d in self.diffs if d.path == r.path})
            lines.append(f"  {r.described} ({r.seconds:.1f} s{cpu}): {n} cells differ from stored")
            if r.error:
                lines.append("    did not finish: " + r.error.replace("\n", "\n    "))
        for d in self.diffs:
            lines.append(f"  cell {d.cell}, {d.path} against the stored output:")
            lines += [f"    {ln[:160]}" for ln in d.lines[:40]]
            if len(d.lines) > 40:
                lines.append(f"    ... {len(d.lines) - 40} more lines")
        risky = [e for e in self.edges if e.kind != "tie"]
        ties = [e for e in self.edges if e.kind == "tie"]
        if risky:
            lines.append(f"  printed numbers near a rounding edge ({len(risky)}):")
            order = {"differs": 0, "close": 1, "near": 2}
            for e in sorted(risky, key=lambda e: (order[e.kind], e.cell, e.margin)):
                lines.append("    " + e.describe(paths).replace("\n", "\n    "))
        else:
            lines.append("  no recorded number near a rounding edge")
        if ties:
            shown = ", ".join(f"cell {e.cell} {e.texts[0].strip()!r}" for e in ties[:12])
            more = f" and {len(ties) - 12} more" if len(ties) > 12 else ""
            lines.append(
                f"  exact decimal ties ({len(ties)}; the same on every CPU while the counts "
                f"behind them are): {shown}{more}"
            )
        for d in self.unrecorded:
            lines.append(f"  cell {d.cell}: printed differently by the two paths (not recorded):")
            lines += [f"    {ln[:160]}" for ln in d.lines[:20]]
        return "\n".join(lines)

    def markdown(self) -> str:
        """The report as a section of a Markdown audit: the cells that differ, then a table of
        the numbers near their edge (ties counted, not listed)."""
        paths = [r.path for r in self.runs]
        lines = [f"### `{self.notebook}`", ""]
        for r in self.runs:
            n = len({d.cell for d in self.diffs if d.path == r.path})
            cpu = f"{r.cpu_seconds:.1f} s CPU" if r.cpu_seconds else "CPU not measured"
            state = f"did not finish: {r.error.splitlines()[0][:120]}" if r.error else ""
            lines.append(f"- {r.path}: {n} cells differ from the stored outputs ({cpu}) {state}")
        for d in self.diffs:
            shown = "; ".join(f"`{ln.strip()[:90]}`" for ln in d.lines[:4])
            lines.append(f"  - cell {d.cell} on {d.path}: {shown}")
        risky = [e for e in self.edges if e.kind != "tie"]
        ties = [e for e in self.edges if e.kind == "tie"]
        if risky:
            lines += [
                "",
                "| cell | kind | printed line | printed | format, where | "
                + " | ".join(f"unrounded on {p}" for p in paths)
                + " | from the edge (digits) | paths apart (digits) |",
                "| --- | --- | --- | --- | --- | "
                + " | ".join("---" for _ in paths)
                + " | --- | --- |",
            ]
            order = {"differs": 0, "close": 1, "near": 2}
            for e in sorted(risky, key=lambda e: (order[e.kind], e.cell, e.margin)):
                line = e.line.strip().replace("|", "\\|")[:80]
                printed = " / ".join(dict.fromkeys(t.strip() for t in e.texts))
                values = " | ".join(f"{v:.6g}" for v in e.values)
                lines.append(
                    f"| {e.cell} | {e.kind} | `{line}` | {printed} | `{e.spec}`, {e.where} | "
                    f"{values} | {e.margin:.3g} | {e.spread:.3g} |"
                )
        else:
            lines += ["", "No recorded number near its rounding edge."]
        if ties:
            shown = ", ".join(f"cell {e.cell} `{e.texts[0].strip()}`" for e in ties[:10])
            more = f" and {len(ties) - 10} more" if len(ties) > 10 else ""
            lines += ["", f"Exact decimal ties (same on every CPU): {len(ties)}: {shown}{more}."]
        for d in self.unrecorded:
            shown = "; ".join(f"`{ln.strip()[:90]}`" for ln in d.lines[:6])
            lines.append(
                f"\nPrinted differently by the two paths, not recorded (cell {d.cell}): {shown}"
            )
        return "\n".join(lines) + "\n"

    def as_json(self) -> dict:
        paths = [r.path for r in self.runs]
        return {
            "notebook": self.notebook,
            "ok": self.ok,
            "runs": [
                {
                    "path": r.path,
                    "described": r.described,
                    "seconds": r.seconds,
                    "cpu_seconds": r.cpu_seconds,
                    "error": r.error,
                    "records": len(r.records),
                }
                for r in self.runs
            ],
            "differences": [d.__dict__ for d in self.diffs],
            "edges": [
                {**e.__dict__, "paths": paths, "texts": list(e.texts), "values": list(e.values)}
                for e in self.edges
            ],
            "unrecorded": [d.__dict__ for d in self.unrecorded],
        }


def check(
    notebook: Path,
    paths: list[str] | None = None,
    *,
    jobs: int = 2,
    timeout: int = 900,
    risk: float = RISK,
    near: float = NEAR,
) -> Report:
    """Run ``notebook`` on each of ``paths`` and compare with its stored outputs."""
    import nbformat

    paths = paths or [code_paths.PINNED, code_paths.ALTERNATE]
    notebook = Path(notebook).resolve()
    nb = nbformat.read(notebook, as_version=4)
    cells = code_cells(nb)
    subs = sanitizers()
    stored = {c.number: comparable(nb.cells[c.index].get("outputs", []), subs) for c in cells}
    with tempfile.TemporaryDirectory(prefix="portability-") as tmp:
        runs = run_paths(notebook, paths, Path(tmp), jobs=jobs, timeout=timeout)
    diffs = [d for r in runs if not r.error or r.outputs for d in differences(stored, r, cells)]
    found = compared_only(edges(runs, risk, near), runs, cells)
    try:
        name = notebook.relative_to(ROOT).as_posix()
    except ValueError:
        name = str(notebook)
    return Report(name, runs, diffs, found, unrecorded(runs, found, cells))


def from_json(data: dict) -> Report:
    """A report back from :meth:`Report.as_json` (to write it again in another form)."""
    runs = []
    for r in data["runs"]:
        run = Run(r["path"], r["described"], r["seconds"], r["cpu_seconds"], error=r["error"])
        runs.append(run)
    diffs = [Difference(**d) for d in data["differences"]]
    found = []
    for e in data["edges"]:
        fields = {k: v for k, v in e.items() if k != "paths"}
        fields["texts"], fields["values"] = tuple(e["texts"]), tuple(e["values"])
        found.append(Edge(**fields))
    return Report(
        data["notebook"], runs, diffs, found, [Difference(**d) for d in data["unrecorded"]]
    )


def resolve(name: str) -> Path:
    path = Path(name)
    if path.suffix != ".ipynb":
        path = NOTEBOOKS / f"{path.name.removesuffix('.py')}.ipynb"
    if not path.exists():
        raise SystemExit(f"error: no notebook {name} (expected {path})")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks/NN_topic.ipynb or NN_topic")
    parser.add_argument("--all", action="store_true", help="every chapter")
    parser.add_argument(
        "--paths",
        default=f"{code_paths.PINNED},{code_paths.ALTERNATE}",
        help="comma-separated code paths (pinned, alternate, native); default: %(default)s",
    )
    parser.add_argument("--jobs", type=int, default=2, help="paths run at once (default 2)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--json", type=Path, help="also write the reports as JSON here")
    parser.add_argument("--markdown", type=Path, help="... and as Markdown (an audit) here")
    parser.add_argument(
        "--execute-one", nargs=2, metavar=("PATH", "NOTEBOOK"), help=argparse.SUPPRESS
    )
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_one:
        path, notebook = args.execute_one
        execute(Path(notebook), path, args.workdir, args.timeout)
        return 0
    names = args.notebooks or []
    if args.all:
        names = sorted(str(p) for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        parser.error("name a notebook (or --all)")
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    for p in paths:
        if p not in code_paths.PATHS:
            parser.error(f"unknown path {p!r}: choose from {', '.join(code_paths.PATHS)}")
    reports, failed = [], 0
    for name in names:
        report = check(resolve(name), paths, jobs=args.jobs, timeout=args.timeout)
        print(report.text(), flush=True)
        reports.append(report)
        failed += not report.ok
    if args.json:
        args.json.write_text(json.dumps([r.as_json() for r in reports], indent=1))
    if args.markdown:
        args.markdown.write_text("\n".join(r.markdown() for r in reports), encoding="utf-8")
    n_edges = sum(e.kind != "tie" for r in reports for e in r.edges)
    print(
        f"\n{len(reports)} notebook(s): {failed} with outputs that differ from the stored ones; "
        f"{n_edges} printed number(s) near a rounding edge"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
