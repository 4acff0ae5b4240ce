"""What a notebook's Colab set-up cell calls once the course library is installed.

Every notebook starts with a hidden cell (written by ``tools/publish.py``) that does nothing
outside Google Colab; on Colab it ``pip install``\\ s ``course-lib[course]`` from the published
repository and calls :func:`setup` with the chapter's name, which

* fetches exactly the data the chapter reads (:mod:`course_lib.fetch`, the same command
  ``./course setup`` runs), and
* turns on Colab's manager for third-party widgets, which ipywidgets 8 needs there.

>>> setup("08 gpt")
Traceback (most recent call last):
...
ValueError: chapter must look like 08_gpt, got '08 gpt'
"""

from __future__ import annotations

import re

from course_lib import fetch

__all__ = ["setup"]


def _enable_widgets() -> bool:
    try:
        from google.colab import output  # type: ignore[import-not-found]
    except ImportError:  # not on Colab (the simulated-Colab test)
        return False
    output.enable_custom_widget_manager()
    return True


def setup(chapter: str) -> tuple[str, ...]:
    """Prepare the runtime for chapter ``chapter`` (``"08_gpt"``); returns the data fetched."""
    if not isinstance(chapter, str) or not re.fullmatch(r"\d\d_[a-z0-9_]+", chapter):
        raise ValueError(f"chapter must look like 08_gpt, got {chapter!r}")
    fetched = fetch.fetch(chapter)
    _enable_widgets()
    import course_lib

    data = ", ".join(fetched) if fetched else "no data to fetch"
    print(f"course_lib {course_lib.__version__} ready for {chapter} ({data})")
    return fetched
