"""The one helper every widget is wired with (course_lib.interact)."""

from __future__ import annotations

import ipywidgets as w

from course_lib.interact import error_html, live_html


def test_live_html_renders_now_and_on_every_change():
    a, b = w.IntSlider(1), w.IntSlider(2)
    calls = []
    out = live_html([a, b], lambda: f"<b>{a.value + b.value}</b>", before=lambda: calls.append(1))
    assert out.value == "<b>3</b>" and len(calls) == 1
    a.value = 5
    assert out.value == "<b>7</b>"
    b.value = 0
    assert out.value == "<b>5</b>" and len(calls) == 3


def test_live_html_shows_errors_in_words():
    box = w.Text("1, 2")

    def render() -> str:
        return str(sum(float(x) for x in box.value.split(",")))

    out = live_html([box], render)
    assert out.value == "3.0"
    box.value = "1, x"
    assert out.value == error_html(ValueError("could not convert string to float: ' x'"))
    assert "course-error" in out.value
    box.value = "4"
    assert out.value == "4.0"
