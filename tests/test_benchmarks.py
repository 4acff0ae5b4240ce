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


def test_the_encoder_benchmark_alone_and_its_gpu_rows(capsys, monkeypatch):
    import torch

    from benchmarks import bert_encoder

    assert bert_encoder.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "cpu time" in out and "forward+backward" in out
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bert_encoder.main(["--device", "cuda"])
        assert "no CUDA device" in capsys.readouterr().err
    # the GPU rows' code path, on the CPU: every call waited for, wall-clock medians
    rows = bert_encoder._measure(*bert_encoder._cuda_sizes(True)[0], "cpu:0")
    assert [r["clock"] for r in rows] == ["wall (synchronised)"] * 2
    assert all(r["before ms"] > 0 and r["hf/fused"] > 0 for r in rows)


def test_the_cuda_script_runs_the_steps_asked_for_and_logs_each(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHON=sys.executable, STEPS="env", TAIL="5")
    cmd = ["bash", "benchmarks/cuda_check.sh", str(tmp_path), "unused"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["env.log"]
    assert "== env" in proc.stdout and "== race" not in proc.stdout
    with pytest.raises(subprocess.CalledProcessError):  # the two arguments are required
        subprocess.run(
            ["bash", "benchmarks/cuda_check.sh"], cwd=root, check=True, capture_output=True
        )
