"""The machine-sensitive tests, run once more with another CPU's kernels.

PyTorch picks its CPU kernels by the instruction sets it finds (AVX-512, AVX2, ...), and results
of training differ in the last bits between them, which a few hundred optimiser steps can grow.
``ATEN_CPU_CAPABILITY=default`` makes PyTorch use its portable kernels instead, as a CPU without
AVX would: the tests marked ``portability`` (training reproductions, shipped models) and the
notebooks that train must pass under it too. It runs in a subprocess because the capability is
read once, when PyTorch starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Notebooks whose stored outputs depend on training (checked by nbval in the subprocess).
TRAINING_NOTEBOOKS = [
    "notebooks/05_transformer_block.ipynb",
    "notebooks/06_positional_encodings.ipynb",
    "notebooks/08_gpt.ipynb",
    "notebooks/09_bert.ipynb",
    "notebooks/10_feedback_distillation.ipynb",
    "notebooks/11_long_sequences.ipynb",
    "notebooks/13_peft.ipynb",
]


@pytest.mark.slow
@pytest.mark.parametrize("capability", ["default"])
def test_machine_sensitive_tests_pass_with_another_cpus_kernels(capability):
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "COURSE_DEVICE": "cpu"}
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
        "-m", "portability", "tests", "notebooks",  # notebooks: see conftest.py
    ]  # fmt: skip
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, f"ATEN_CPU_CAPABILITY={capability}:\n{tail}"
    assert " passed" in run.stdout and "deselected" in run.stdout, tail
