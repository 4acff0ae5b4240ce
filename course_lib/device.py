"""Pick the device PyTorch code runs on: CUDA, then Apple MPS, then CPU.

The environment variable ``COURSE_DEVICE`` overrides the choice (``cpu``, ``cuda``, ``cuda:1``,
``mps``). Asking for a device that is not available is an error, not a silent fallback.

Apple MPS has no float64: :func:`device_for` gives the device for tensors of a dtype, the CPU
for float64 on MPS, and every float64 tensor of the course is made through it.
"""

from __future__ import annotations

import os

import torch

ENV_VAR = "COURSE_DEVICE"


def _choose() -> tuple[torch.device, str]:
    wanted = os.environ.get(ENV_VAR, "").strip()
    if wanted:
        try:
            device = torch.device(wanted)
        except RuntimeError as exc:
            raise ValueError(
                f"{ENV_VAR}={wanted!r} is not a device name; use cpu, cuda, cuda:N or mps"
            ) from exc
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"{ENV_VAR}={wanted!r} but CUDA is not available on this machine")
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(f"{ENV_VAR}={wanted!r} but Apple MPS is not available on this machine")
        return device, f"set by the environment variable {ENV_VAR}={wanted!r}"
    if torch.cuda.is_available():
        return torch.device("cuda"), "CUDA is available"
    if torch.backends.mps.is_available():
        return torch.device("mps"), "Apple MPS is available and CUDA is not"
    return torch.device("cpu"), "neither CUDA nor Apple MPS is available"


def get_device() -> torch.device:
    """Return the device the course's PyTorch code should use.

    >>> import os
    >>> os.environ["COURSE_DEVICE"] = "cpu"
    >>> get_device()
    device(type='cpu')
    >>> del os.environ["COURSE_DEVICE"]
    """
    return _choose()[0]


def device_for(dtype: torch.dtype, device: torch.device | str | None = None) -> torch.device:
    """The device for tensors of ``dtype``: ``device`` (default :func:`get_device`), except that
    float64 lives on the CPU when that device is Apple MPS, which has no float64.

    >>> device_for(torch.float64, "mps"), device_for(torch.float32, "mps")
    (device(type='cpu'), device(type='mps'))
    """
    d = get_device() if device is None else torch.device(device)
    return torch.device("cpu") if d.type == "mps" and dtype == torch.float64 else d


def describe_device() -> str:
    """Say which device will be used and why, in one line.

    >>> import os
    >>> os.environ["COURSE_DEVICE"] = "cpu"
    >>> describe_device()
    "cpu (set by the environment variable COURSE_DEVICE='cpu')"
    >>> del os.environ["COURSE_DEVICE"]
    """
    device, why = _choose()
    name = str(device)
    if device.type == "cuda":
        name += f" ({torch.cuda.get_device_name(device)})"
    return f"{name} ({why})"
