"""The shared helpers: device choice, seeding, input checks, plotting, doctor."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_lib import checks, doctor, get_device, seed_everything
from course_lib.device import describe_device
from course_lib.plotting import heatmap, new_axes


def test_device_override(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    assert "COURSE_DEVICE" in describe_device()
    monkeypatch.setenv("COURSE_DEVICE", "tpu7")
    with pytest.raises(ValueError, match="not a device name"):
        get_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv("COURSE_DEVICE", "cuda")
        with pytest.raises(ValueError, match="CUDA is not available"):
            get_device()


def test_default_device_order(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert get_device().type == expected


def test_seeding_is_reproducible():
    rng = seed_everything(3)
    a = (rng.standard_normal(3), np.random.rand(2), torch.rand(2))
    rng = seed_everything(3)
    b = (rng.standard_normal(3), np.random.rand(2), torch.rand(2))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    torch.testing.assert_close(a[2], b[2])
    with pytest.raises(ValueError, match="non-negative int"):
        seed_everything(-1)


def test_checks():
    assert checks.as_array(torch.ones(2, dtype=torch.float16), "x").dtype == np.float64
    with pytest.raises(TypeError, match="rectangular"):
        checks.as_array([[1, 2], [3]], "x")
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        checks.as_tensor(torch.ones(3), "x", min_ndim=2)
    assert checks.as_tensor(torch.zeros(0), "x", allow_empty=True).numel() == 0
    with pytest.raises(TypeError, match="must be an int"):
        checks.check_axis(1.0, 2)
    with pytest.raises(TypeError, match="must be an int"):
        checks.check_int(True, "n")
    with pytest.raises(ValueError, match="at most 3"):
        checks.check_int(4, "n", high=3)


def test_plot_helpers_require_titles_and_labels():
    with pytest.raises(ValueError, match="title and labels"):
        new_axes("", "x", "y")
    fig, ax = new_axes("t", "x", "y")
    im = heatmap(ax, np.eye(2), title="h", xlabel="j", ylabel="i", annotate=True)
    assert im.get_array().shape == (2, 2) and ax.get_title() == "h"
    with pytest.raises(ValueError, match="2-D"):
        heatmap(ax, np.ones(3), title="h", xlabel="j", ylabel="i")
    plt.close(fig)


def test_doctor_reports_and_exits_zero(capsys):
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert "OK    torch" in out and "torch on device" in out and "all checks passed" in out


def test_doctor_flags_missing_packages(tmp_path, monkeypatch, capsys):
    req = tmp_path / "requirements.txt"
    req.write_text("numpy==2.4.6\nno-such-package-xyz==1.0\n")
    monkeypatch.setattr(doctor, "REQUIREMENTS", req)
    monkeypatch.setattr(doctor.pinned_requirements, "__defaults__", (req,))
    assert doctor.main([]) == 1
    assert "FAIL  no-such-package-xyz" in capsys.readouterr().out
    req.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="not pinned"):
        doctor.pinned_requirements(req)
