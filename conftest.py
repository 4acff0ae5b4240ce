"""Repository-wide pytest configuration: what is collected, and how."""

import matplotlib

matplotlib.use("Agg")

# notebook sources are jupytext files, not modules; the website and benchmarks have their own tests
collect_ignore_glob = ["notebooks/*.py", "book/*", ".venv/*"]
