"""What the browser tests share: a page visit that records errors and requests, and a server.

:class:`Visit` opens one URL in a fresh browser context, records every request that would
leave 127.0.0.1 (the browser of tests/conftest.py refuses them all: its proxy is not there),
and records console errors (less the ones a test names as known, each
with its reason). The website's pages (tests/test_book.py), JupyterLab (tests/test_lab.py) and
the slide decks (tests/test_lab_slides.py) are all visited through it. :func:`serve` serves a
folder on 127.0.0.1 for as long as a ``with`` block lasts.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LOCAL_HOSTS = {"127.0.0.1"}
#: The chapter RISE presents in JupyterLab (tests/test_lab_slides.py): math, figures, a widget.
RISE_CHAPTER = "02_softmax"
#: The chapter whose quiz (its last code cell, course_lib.quiz.show) the Lab test runs and
#: answers (the other chapters' quiz cells are shown there, not run: tests/test_lab.py), and
#: whose page's quiz the website's browser test answers and prints (tests/test_book.py).
QUIZ_LAB_CHAPTER = "01_matmul"
#: Schemes that never leave the machine.
LOCAL_SCHEMES = {"file", "data", "blob"}


def is_local(url: str, schemes: frozenset[str] | set[str] = LOCAL_SCHEMES) -> bool:
    parts = urlsplit(url)
    return parts.scheme in schemes or parts.hostname in LOCAL_HOSTS


class Visit:
    """One URL open in a fresh context, with its console errors and every request recorded.

    ``ignored`` holds regular expressions of console messages that are not the course's (each
    needs a reason where it is defined); ``schemes`` are the URL schemes allowed besides
    127.0.0.1 (JupyterLab and the decks have no business with ``file:``). ``goto`` options go
    to ``page.goto``; ``url`` None opens nothing yet (the test navigates itself).
    """

    def __init__(
        self,
        browser,
        url: str | None,
        *,
        ignored: tuple[str, ...] = (),
        schemes: frozenset[str] | set[str] = LOCAL_SCHEMES,
        viewport: tuple[int, int] = (1280, 900),
        **goto,
    ) -> None:
        self.ignored, self.schemes = ignored, schemes
        self.context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("request", lambda req: self.requests.append(req.url))
        self.response = None
        if url is not None:
            self.response = self.page.goto(url, **{"wait_until": "load", "timeout": 60_000, **goto})

    def _console(self, msg) -> None:
        if msg.type == "error" and not any(re.search(p, msg.text) for p in self.ignored):
            self.errors.append(f"console error: {msg.text} ({msg.location.get('url')})")

    @property
    def blocked(self) -> list[str]:
        """The requests for other hosts or schemes: the browser refused them (its proxy is
        not there, and a page on 127.0.0.1 may not read ``file:``)."""
        return [u for u in self.requests if not is_local(u, self.schemes)]

    def remote_requests(self) -> list[str]:
        return self.blocked

    def check(self, name: str) -> None:
        """No console error, nothing blocked, no request that left 127.0.0.1."""
        assert not self.errors, f"{name}: errors in the browser console:\n" + "\n".join(self.errors)
        assert not self.blocked, f"{name}: requests to other hosts (blocked): {self.blocked}"
        assert not self.remote_requests(), f"{name}: requests left 127.0.0.1"

    def close(self) -> None:
        self.context.close()

    def __enter__(self) -> Visit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (a free port); yields ``http://127.0.0.1:PORT/``."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


# -- the chapters' widgets, for JupyterLab ------------------------------------------------------


def is_progress_bar(nb: dict, model_id: str) -> bool:
    """Whether a displayed widget is a progress bar (tqdm's HBox around a FloatProgress): it
    has no control to move, and a live run may draw it as text instead."""
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    model = state.get(model_id, {})
    children = [c.removeprefix("IPY_MODEL_") for c in model.get("state", {}).get("children", [])]
    return model.get("model_name") == "HBoxModel" and any(
        state.get(c, {}).get("model_name") == "FloatProgressModel" for c in children
    )


def is_quiz_cell(cell: dict) -> bool:
    """Whether a cell is a chapter's quiz (``quiz.show("NN_topic")``, the lesson's last code
    cell): a widget the Lab test leaves out of "the chapter's widgets" (see
    :func:`up_to_last_widget`), so that it does not make the test run the whole chapter."""
    from course_lib.quiz import quiz_called_in

    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    return cell["cell_type"] == "code" and quiz_called_in(source) is not None


def widget_cells(nb: dict) -> list[int]:
    """Indices of the cells that display an interactive widget (progress bars and the quiz
    excluded)."""
    return [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code"
        and not is_quiz_cell(c)
        and any(
            WIDGET_VIEW in o.get("data", {})
            and not is_progress_bar(nb, o["data"][WIDGET_VIEW]["model_id"])
            for o in c.get("outputs", [])
        )
    ]


def widget_views(nb: dict) -> int:
    """How many interactive widgets the chapter displays (outputs with a widget view), its
    quiz left out."""
    return sum(
        WIDGET_VIEW in o.get("data", {})
        and not is_progress_bar(nb, o["data"][WIDGET_VIEW]["model_id"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and not is_quiz_cell(c)
        for o in c.get("outputs", [])
    )


def up_to_last_widget(nb: dict, *, keep_quiz: bool = False) -> dict | None:
    """The notebook as the Lab test runs it (None: it shows no widget): every markdown cell
    kept (the MyST check reads them all), the code cells up to the last one that displays a
    widget kept without their stored outputs and prompts (so what the page shows after "Run
    All" is this run's), and the code cells after it made raw cells (shown, never run).

    The chapter's quiz, its last code cell, is not "the last widget" (else every chapter would
    run whole); with ``keep_quiz`` it stays a code cell all the same (it needs nothing from the
    cells above it), so that the test also runs and answers it."""
    shows = widget_cells(nb)
    if not shows:
        return None
    cells = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "code":
            cells.append(c)
        elif i <= shows[-1] or (keep_quiz and is_quiz_cell(c)):
            cells.append({**c, "outputs": [], "execution_count": None})
        else:
            cells.append(
                {"cell_type": "raw", "metadata": c.get("metadata", {}), "source": c["source"]}
            )
    return {**nb, "cells": cells}
