"""The benchmark runner works end to end on its quick sizes (speed itself is never asserted)."""

from __future__ import annotations

import json

from benchmarks import run


def test_runner_prints_a_table_and_writes_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    monkeypatch.setattr("benchmarks.matmul.run.__defaults__", (True,))
    assert run.main(["matmul", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "gflops" in out and "estimated CPU peak" in out
    data = json.loads((tmp_path / "matmul.json").read_text())
    assert data["rows"] and {"implementation", "n", "gflops"} <= set(data["rows"][0])
