"""Repository-wide pytest configuration: what is collected, and how."""

import os

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")
# checkers run by tests, nbval and the browser tests are nobody's progress (course_lib.progress)
os.environ.setdefault("COURSE_PROGRESS", "off")

# Property tests draw the same examples on every run and machine (a failure is reproducible, and
# CI cannot go red on a draw nobody saw locally), with no per-example deadline (the machine is
# small and shared).
settings.register_profile("course", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("course")

# notebook sources are jupytext files, not modules
collect_ignore_glob = ["notebooks/*.py", "book/*", ".venv/*"]

# Notebooks whose stored outputs come from training: their nbval items count as
# machine-sensitive, so tests/test_portability.py re-runs them with another CPU's kernels.
PORTABILITY_NOTEBOOKS = {
    "04_attention.ipynb",
    "05_transformer_block.ipynb",
    "06_positional_encodings.ipynb",
    "08_gpt.ipynb",
    "09_bert.ipynb",
    "10_feedback_distillation.ipynb",
    "11_long_sequences.ipynb",
    "13_peft.ipynb",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in PORTABILITY_NOTEBOOKS:
            item.add_marker(pytest.mark.portability)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (the system's, or Playwright's), shared by a test module's visits."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from course_lib.doctor import find_chromium

    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
    ]
    with sync_api.sync_playwright() as p:
        path = find_chromium()
        launch = {"executable_path": path} if path else {}
        b = p.chromium.launch(args=args, **launch)
        yield b
        b.close()
