"""The repository's root conftest.py as a module, for tests of its tiers and work units.

``import conftest`` from a test finds tests/conftest.py (the browser fixtures) first.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


@cache
def root_conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
