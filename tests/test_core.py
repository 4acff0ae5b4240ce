"""The shared helpers: device choice, seeding, input checks, plotting, doctor."""

from __future__ import annotations

import math
from pathlib import Path

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


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_default_device_order(monkeypatch, cuda, mps, expected):
    """CUDA first, then Apple MPS, then the CPU, whatever this machine has."""
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert get_device().type == expected


def test_device_override_and_its_errors(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device().type == "cpu"
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        get_device()
    monkeypatch.setenv("COURSE_DEVICE", "mps")
    with pytest.raises(ValueError, match="Apple MPS is not available"):
        get_device()
    monkeypatch.setenv("COURSE_DEVICE", "gpu0")
    with pytest.raises(ValueError, match="is not a device name"):
        get_device()


def test_seeding_is_reproducible():
    rng = seed_everything(3)
    a = (rng.standard_normal(3), np.random.rand(2), torch.rand(2))
    rng = seed_everything(3)
    b = (rng.standard_normal(3), np.random.rand(2), torch.rand(2))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    torch.testing.assert_close(a[2], b[2])
    with pytest.raises(ValueError, match="seed must be at least 0, got -1"):
        seed_everything(-1)
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything(1.5)


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


@pytest.mark.parametrize("bad", [1, "yes", None, 1.0])
def test_check_bool_rejects_what_is_not_a_bool(bad):
    with pytest.raises(TypeError, match="flag must be True or False"):
        checks.check_bool(bad, "flag")
    assert checks.check_bool(np.bool_(True), "flag") is True


def test_check_real_kinds_and_bounds():
    # the wrong kind is a TypeError (lr=True used to be accepted as 1)
    for bad in (True, np.bool_(False), "1e-3", None, [1.0], 1j):
        with pytest.raises(TypeError, match="lr must be a real number"):
            checks.check_real(bad, "lr", low=0.0, low_open=True)
    # the wrong value is a ValueError that names the interval
    with pytest.raises(ValueError, match=r"lr must be in \(0.0, inf\], got 0"):
        checks.check_real(0, "lr", low=0.0, low_open=True)
    with pytest.raises(ValueError, match=r"p must be in \[0.0, 1.0\), got 1.0"):
        checks.check_real(1.0, "p", low=0.0, high=1.0, high_open=True)
    with pytest.raises(ValueError, match="got nan"):
        checks.check_real(float("nan"), "x")
    with pytest.raises(ValueError, match="got inf"):
        checks.check_real(float("inf"), "base", low=0.0, low_open=True, high_open=True)
    assert checks.check_real(np.float32(0.5), "p", low=0.0, high=1.0) == 0.5
    assert checks.check_real(math.inf, "x") == math.inf  # closed infinite end admits inf


def test_check_choice_and_same_shape():
    with pytest.raises(TypeError, match="norm must be a str"):
        checks.check_choice(1, "norm", ["layer", "rms"])
    with pytest.raises(ValueError, match="norm must be one of 'layer', 'rms'; got 'batch'"):
        checks.check_choice("batch", "norm", ["layer", "rms"])
    with pytest.raises(ValueError, match=r"grad must have the shape of x \(2,\), got \(3,\)"):
        checks.check_same_shape((2,), (3,), "x", "grad")


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
    assert doctor.main([]) == 1
    assert "FAIL  no-such-package-xyz" in capsys.readouterr().out
    req.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="not pinned"):
        doctor.pinned_requirements(req)


def test_doctor_finds_playwrights_chromium_when_there_is_no_system_browser(monkeypatch):
    """Set-up falls back to `playwright install chromium` (macOS without Chrome, non-Debian
    Linux, or not root): the doctor must then report that browser, not 'not found'."""
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    monkeypatch.setattr(
        doctor.os.path, "exists", lambda path: path == "/cache/ms-playwright/chrome"
    )
    monkeypatch.setattr(doctor, "playwright_chromium", lambda: "/cache/ms-playwright/chrome")
    assert doctor.find_chromium() == "/cache/ms-playwright/chrome"
    monkeypatch.setattr(doctor, "playwright_chromium", lambda: None)
    assert doctor.find_chromium() is None
    monkeypatch.setenv("CHROMIUM", "/opt/my/chrome")
    assert doctor.find_chromium() is None  # CHROMIUM names no file: no browser, said so
    monkeypatch.setattr(doctor.os.path, "isfile", lambda path: path == "/opt/my/chrome")
    assert doctor.find_chromium() == "/opt/my/chrome"


def test_playwright_chromium_is_none_or_an_existing_file():
    path = doctor.playwright_chromium()
    assert path is None or Path(path).exists()
