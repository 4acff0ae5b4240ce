"""Speed and memory benchmarks: ``python -m benchmarks.run [NAME ...]`` (or ``./course bench``)."""
