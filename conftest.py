"""Repository-wide pytest configuration: what is collected, and how."""

import matplotlib
from hypothesis import settings

matplotlib.use("Agg")

# Property tests draw the same examples on every run and machine (a failure is reproducible, and
# CI cannot go red on a draw nobody saw locally), with no per-example deadline (the machine is
# small and shared).
settings.register_profile("course", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("course")

# notebook sources are jupytext files, not modules
collect_ignore_glob = ["notebooks/*.py", "book/*", ".venv/*"]
