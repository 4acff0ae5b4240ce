"""Every benchmark runs end to end on its quick sizes (speed itself is never asserted)."""

from __future__ import annotations

import json

import pytest

from benchmarks import run


def self_contained() -> list[str]:
    """The benchmarks that need nothing from outside the repository. nanogpt_race needs a
    nanoGPT checkout (``NEEDS``); tests/test_gpt_speedrun.py tests its parts on a stand-in."""
    import importlib

    return [
        name
        for name in run.available()
        if not getattr(importlib.import_module(f"benchmarks.{name}"), "NEEDS", None)
    ]


@pytest.mark.parametrize("name", self_contained())
def test_benchmark_runs_quick_and_writes_json(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    assert run.main([name, "--quick"]) == 0
    out = capsys.readouterr().out
    data = json.loads((tmp_path / f"{name}.json").read_text())
    assert data["quick"] is True and data["rows"], "a benchmark must return rows"
    assert data["title"] in out
    first = data["rows"][0]
    assert all(set(r) == set(first) for r in data["rows"]), "every row needs the same columns"


def test_matmul_summary_names_the_peak(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    assert run.main(["matmul", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "gflops" in out and "peak" in out


def test_only_the_nanogpt_race_needs_an_outside_checkout():
    assert set(run.available()) - set(self_contained()) == {"nanogpt_race"}


def test_unknown_benchmark_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        run.main(["no_such_benchmark"])
    assert "unknown benchmark(s) ['no_such_benchmark']" in capsys.readouterr().err
