"""tests/browser.py without a browser: what a visit lets through, blocks and reports (fakes
stand in for Playwright's objects), and the static server."""

from __future__ import annotations

import urllib.request
from types import SimpleNamespace

import pytest

from tests.browser import Visit, serve, up_to_last_widget, widget_cells, widget_views


class FakePage:
    def __init__(self) -> None:
        self.handlers: dict[str, object] = {}

    def on(self, event, handler) -> None:
        self.handlers[event] = handler

    def goto(self, url, **options):
        self.options = options
        return SimpleNamespace(status=200, url=url)


class FakeBrowser:
    def new_context(self, viewport):
        page = FakePage()
        return SimpleNamespace(new_page=lambda: page, close=lambda: None, page=page)


def console(text: str, kind: str = "error"):
    return SimpleNamespace(type=kind, text=text, location={"url": "x.js"})


@pytest.mark.parametrize(
    ("schemes", "file_allowed"), [({"file", "data", "blob"}, True), ({"data", "blob"}, False)]
)
def test_a_visit_reports_other_hosts_and_errors(schemes, file_allowed):
    """Requests are recorded, not routed (the browser itself refuses other hosts:
    tests/conftest.py); those for another host, or a scheme not allowed, are reported."""
    visit = Visit(FakeBrowser(), "http://127.0.0.1:1/a.html", ignored=("known",), schemes=schemes)
    assert visit.response.status == 200 and visit.page.options["wait_until"] == "load"
    assert "route" not in visit.page.handlers
    page = visit.page
    for url in ("http://127.0.0.1:1/b.js", "https://cdn.example/c.js", "file:///d.html"):
        page.handlers["request"](SimpleNamespace(url=url))
    assert visit.blocked == ["https://cdn.example/c.js"] + (
        [] if file_allowed else ["file:///d.html"]
    )
    page.handlers["console"](console("a known message"))
    page.handlers["console"](console("just a log", kind="log"))
    with pytest.raises(AssertionError, match="requests to other hosts"):
        visit.check("page")
    page.handlers["console"](console("TypeError: x is undefined"))
    with pytest.raises(AssertionError, match="TypeError: x is undefined"):
        visit.check("page")
    assert len(visit.errors) == 1  # the known message and the log are not errors


def test_a_clean_visit_passes_its_check():
    with Visit(FakeBrowser(), None) as visit:
        assert visit.response is None
        visit.check("nothing")


def test_serve_serves_a_folder_on_localhost(tmp_path):
    (tmp_path / "index.html").write_text("hello")
    with serve(tmp_path) as base:
        assert base.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(base + "index.html", timeout=10) as r:
            assert r.read() == b"hello"


def test_up_to_last_widget_stops_the_code_after_the_last_widget_and_skips_progress_bars():
    view = "application/vnd.jupyter.widget-view+json"
    state = {
        "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_p"]}},
        "p": {"model_name": "FloatProgressModel", "state": {}},
        "w": {"model_name": "VBoxModel", "state": {}},
    }

    def cell(model=None):
        outputs = [{"data": {view: {"model_id": model}}}] if model else []
        return {"cell_type": "code", "outputs": outputs, "source": "", "execution_count": 1}

    nb = {
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": state}}},
        "cells": [cell(), cell("w"), cell(), cell("bar"), cell()],
    }
    cut = up_to_last_widget(nb)["cells"]
    assert [c["cell_type"] for c in cut] == ["code", "code", "raw", "raw", "raw"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in cut[:2])
    assert up_to_last_widget({**nb, "cells": [cell(), cell("bar")]}) is None


def test_the_quiz_is_not_the_last_widget_the_lab_test_runs_up_to():
    """A chapter's quiz (its last code cell) does not make the Lab test run the whole chapter:
    the cells between the last other widget and the quiz stay raw; the quiz cell itself is run
    only where it is asked for (one chapter, tests/browser.py QUIZ_LAB_CHAPTER)."""
    view = "application/vnd.jupyter.widget-view+json"
    state = {"w": {"model_name": "VBoxModel", "state": {}}, "q": {"model_name": "VBoxModel"}}

    def cell(model=None, source=""):
        outputs = [{"data": {view: {"model_id": model}}}] if model else []
        return {"cell_type": "code", "outputs": outputs, "source": source, "execution_count": 1}

    quiz = cell("q", 'from course_lib import quiz\n\nquiz.show("01_matmul")')
    nb = {
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": state}}},
        "cells": [cell(), cell("w"), cell(), quiz, cell()],
    }
    assert widget_cells(nb) == [1] and widget_views(nb) == 1
    assert [c["cell_type"] for c in up_to_last_widget(nb)["cells"]] == [
        "code", "code", "raw", "raw", "raw"
    ]  # fmt: skip
    kept = up_to_last_widget(nb, keep_quiz=True)["cells"]
    assert [c["cell_type"] for c in kept] == ["code", "code", "raw", "code", "raw"]
    assert kept[3]["outputs"] == [] and kept[3]["execution_count"] is None
    assert up_to_last_widget({**nb, "cells": [cell(), quiz]}) is None  # a quiz alone: no widget
