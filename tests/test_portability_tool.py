"""tools/portability.py and its recorder: the numbers near a rounding edge, the paths, a run."""

from __future__ import annotations

import ast
import builtins
import json
from decimal import Decimal

import nbformat
import numpy as np
import pytest
import torch

from tools import code_paths, portability
from tools import format_recorder as fr


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    """The recorder writing to a file, its helpers in builtins, as in a kernel."""
    path = tmp_path / "records.jsonl"
    monkeypatch.setattr(fr, "RECORDER", fr.Recorder(str(path), {}, []))
    for name, helper in fr.HELPERS.items():
        monkeypatch.setattr(builtins, name, helper, raising=False)

    def run(src: str) -> tuple[dict, dict, list[dict]]:
        plain: dict = {"np": np, "torch": torch}
        exec(compile(src, "<plain>", "exec"), plain)
        tree = ast.fix_missing_locations(fr.Rewriter().visit(ast.parse(src)))
        rewritten: dict = {"np": np, "torch": torch}
        exec(compile(tree, "<cell>", "exec"), rewritten)
        fr.RECORDER.out.flush()
        records = [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []
        return plain, rewritten, records

    return run


SOURCE = """
x = 0.8449999; y = np.float32(2.675); t = torch.tensor(0.125)
a = f"{x:.2f} {y:.2f} {t:.2f} {x!r:>10} {x} {3:5d} {x:{'.3'}}"
b = "{:.1%} {v:8.3e}".format(x, v=y)
template = "{0:.3g}|{0}"
c = template.format(x)
d = "%.2f and %5.1f %d %s" % (x, 2.25, 3, "s")
e = round(x, 2), round(2.5), round(np.float64(1.005), 2)
f = str(np.round(np.array([0.125, 0.3333]), 2)) + str(torch.tensor([1.25, 2.35]).round(decimals=1))
g = format(x, ".4f")
h = 17 % 5, "{} {}".format(1, "a"), str.format("{:.1f}", 0.25)
out = (a, b, c, d, e, f, g, h)
"""


def test_the_rewrite_changes_no_result_and_records_every_rounding(recorder):
    plain, rewritten, records = recorder(SOURCE)
    assert plain["out"] == rewritten["out"]
    by_text = {(r["spec"], r["text"]) for r in records}
    assert {(".2f", "0.84"), (".2f", "2.67"), (".2f", "0.12"), (".3", "0.845")} <= by_text
    assert {(".1%", "84.5%"), ("8.3e", "2.675e+00"), (".3g", "0.845"), (".4f", "0.8450")} <= by_text
    assert (".1f", "2.2") in by_text  # "%5.1f" % 2.25
    assert ("round 2", "0.84") in by_text and ("round 2", "1.0") in by_text
    arrays = [r for r in records if "elements" in r]
    assert [(r["value"], r["margin"]) for r in arrays] == [(0.125, 0.0), (1.25, 0.0)]
    assert all(r["where"].startswith("cell:") for r in records)
    assert not any(r["text"] == "3" for r in records)  # integers are never rounded
    f = next(r for r in records if r["spec"] == ".2f" and r["text"] == "0.84")
    assert f["q"] == -2 and f["margin"] == pytest.approx(1e-5, rel=1e-6)


def test_the_distance_to_the_edge_in_units_of_the_last_digit():
    assert fr.margin(Decimal("0.8449"), -2) == pytest.approx(0.01)
    assert fr.margin(Decimal("0.84"), -2) == 0.5
    assert fr.margin(Decimal("-0.845"), -2) == 0.0
    assert fr.last_digit(0.05, ".1%") == (Decimal(0.05) * 100, -1)
    assert fr.last_digit(1234.5, ".3g")[1] == 1  # the tens: "1.23e+03"
    assert fr.last_digit(0.0123, ".2g")[1] == -3
    assert fr.last_digit(3.0, "d") is None and fr.last_digit(3.0, ">10") is None
    assert fr.number(True) is None and fr.number(3) is None and fr.number(np.int64(3)) is None
    assert fr.number(np.float32(0.5)) == 0.5 and fr.number(torch.tensor(0.25)) == 0.25


def _run(path, records, outputs=None):
    run = portability.Run(path, path)
    run.records = records
    run.outputs = outputs or {}
    return run


def _rec(value, text, margin, cell=1):
    return {"cell": cell, "where": "cell:1", "spec": ".2f", "value": value, "text": text,
            "q": -2, "margin": margin}  # fmt: skip


def test_edges_are_classified_by_the_two_paths():
    a = [_rec(0.8413, "0.84", 0.37), _rec(0.3242, "0.32", 0.08), _rec(0.745, "0.74", 4e-16),
         _rec(0.50004, "0.50", 0.496), _rec(0.12501, "0.13", 0.001)]  # fmt: skip
    b = [_rec(0.8350, "0.83", 0.0), _rec(0.3246, "0.32", 0.04), _rec(0.745, "0.74", 4e-16),
         _rec(0.50004, "0.50", 0.496), _rec(0.12501, "0.13", 0.001)]  # fmt: skip
    found = portability.edges([_run("pinned", a), _run("alternate", b)])
    kinds = [(e.texts[0], e.kind) for e in found]
    assert kinds == [("0.84", "differs"), ("0.32", "close"), ("0.74", "tie"), ("0.13", "near")]
    cells = [portability.Cell(1, 3, "x", []), portability.Cell(2, 4, "y", ["nbval-ignore-output"])]
    outputs = {1: {"stream": ["score 0.84\nother 0.32\n"]}}
    runs = [_run("pinned", a, outputs), _run("alternate", b, outputs)]
    kept = portability.compared_only(portability.edges(runs), runs, cells)
    assert [e.texts[0] for e in kept] == ["0.84", "0.32"]  # the others are not printed
    assert kept[0].line == "score 0.84"


def test_outputs_are_compared_as_nbval_compares_them():
    subs = portability.sanitizers()
    stored = [
        {"output_type": "stream", "name": "stdout", "text": "a 0x7f00\n"},
        {"output_type": "stream", "name": "stdout", "text": "b\n"},
        {"output_type": "display_data", "data": {"image/png": "AAA", "text/plain": "<Figure>"},
         "metadata": {}},
    ]  # fmt: skip
    again = [
        {"output_type": "stream", "name": "stdout", "text": "a 0x1234\nb\n"},
        {"output_type": "display_data", "data": {"image/png": "BBB", "text/plain": "<Figure>"},
         "metadata": {}},
    ]  # fmt: skip
    assert portability.comparable(stored, subs) == portability.comparable(again, subs)


def test_the_paths_set_different_kernels_and_unset_what_they_leave_out():
    pinned = code_paths.path_env(code_paths.PINNED, machine="x86_64", avx2=True)
    other = code_paths.path_env(code_paths.ALTERNATE, machine="x86_64", avx2=True)
    for knob in ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE"):
        assert pinned[knob] and other[knob] and pinned[knob] != other[knob], knob
    assert pinned["OMP_NUM_THREADS"] == "1" and other["OMP_NUM_THREADS"] == "2"
    env = code_paths.apply({"MKL_CBWR": "AVX2", "KEEP": "1"}, code_paths.PINNED, machine="arm64")
    assert env == {"KEEP": "1", **code_paths.threads(1)}  # no x86 switch on Apple silicon
    assert code_paths.path_env(code_paths.PINNED, machine="x86_64", avx2=False)["MKL_CBWR"] is None
    with pytest.raises(ValueError, match="path must be one of"):
        code_paths.path_env("fast")


@pytest.mark.slow
def test_the_tool_runs_a_notebook_on_two_paths_and_reports_what_moved(tmp_path):
    """A three-cell notebook: one output stored right, one stored wrong, one number on an edge
    that only the recorder sees (about 10 s: two kernels)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch\nprint(f'{0.745:.2f}')"),
        nbformat.v4.new_code_cell("print(f'{torch.get_num_threads()} threads')"),
        nbformat.v4.new_code_cell("print(f'{1/3:.3f}')"),
    ]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="0.74\n")]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1 threads\n")]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="0.334\n")]
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    report = portability.check(path, jobs=2, timeout=120)
    assert not report.ok
    assert [(d.cell, d.path) for d in report.diffs] == [
        (2, "pinned"),
        (1, "alternate"),  # two threads there
        (2, "alternate"),
    ]
    assert [(e.cell, e.kind, e.texts[0]) for e in report.edges] == [(0, "tie", "0.74")]
    assert all(r.cpu_seconds and r.cpu_seconds > 0 for r in report.runs)
    assert "-0.334" in report.text() and "+0.333" in report.text()
    assert json.dumps(report.as_json())


def test_the_command_line(tmp_path, monkeypatch, capsys):
    seen = []

    def check(path, paths, **kwargs):
        seen.append((path.name, paths))
        return portability.Report(path.name, [_run(p, []) for p in paths], [], [], [])

    monkeypatch.setattr(portability, "check", check)
    out = tmp_path / "r.json"
    assert portability.main(["02_softmax", "--paths", "pinned", "--json", str(out)]) == 0
    assert seen == [("02_softmax.ipynb", ["pinned"])]
    assert json.loads(out.read_text())[0]["ok"] is True
    assert "1 notebook(s): 0 with outputs that differ" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        portability.main(["02_softmax", "--paths", "fast"])
    with pytest.raises(SystemExit, match="no notebook"):
        portability.main(["99_nothing"])
