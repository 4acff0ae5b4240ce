"""Concept quizzes (course_lib.quiz): well formed, answers computed by course_lib, and the same
verdicts in the page's script as in Python."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from course_lib import quiz

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_every_chapter_has_a_quiz():
    assert quiz.quiz_names() == CHAPTERS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_quiz_is_well_formed(chapter):
    questions = quiz.load(chapter)  # validates: one correct option, a why for every option
    assert len(questions) >= 5
    kinds = {q["kind"] for q in questions}
    assert kinds == {"choice", "numeric"}, f"{chapter}: mix multiple choice and numeric"
    positions = [
        next(i for i, o in enumerate(q["options"]) if o.get("correct"))
        for q in questions
        if q["kind"] == "choice"
    ]
    assert len(set(positions)) > 1, f"{chapter}: the right option is always option {positions[0]}"
    for q in questions:
        if q["kind"] == "choice":
            for o in q["options"]:
                assert len(o["why"].split()) >= 4, f"{chapter}: explain option {o['text']!r}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_numeric_answers_are_what_course_lib_computes(chapter):
    for q in quiz.load(chapter):
        if q["kind"] != "numeric":
            continue
        assert "course_lib" in q["compute"], (
            f"{chapter}: {q['prompt'][:40]}: compute with course_lib"
        )
        scope = {"np": np, "math": math}
        exec(q["compute"], scope)
        value = float(scope["value"])
        assert abs(value - q["answer"]) <= max(q["tolerance"], 1e-9), (
            f"{chapter}: {q['prompt'][:60]}: the quiz says {q['answer']}, course_lib computes {value}"
        )
        for wrong in q.get("mistakes", []):
            assert abs(wrong["value"] - value) > q["tolerance"], "a 'mistake' that is right"


def test_check_answer_says_why():
    q = quiz.load("02_softmax")[1]  # the stable-softmax question, option 1 right
    ok, text = quiz.check_answer(q, 1)
    assert ok and text.startswith("Right. ")
    ok, text = quiz.check_answer(q, 0)
    assert not ok and text.startswith("Not quite. ") and "cancels" in text
    numeric = quiz.load("02_softmax")[0]
    assert quiz.check_answer(numeric, "0.5")[0]
    assert "uniform" in quiz.check_answer(numeric, 0.333)[1]
    assert quiz.check_answer(numeric, "half") == (False, "Enter a number (got 'half').")
    with pytest.raises(ValueError, match="option index 0..2"):
        quiz.check_answer(q, 7)


def test_bad_quizzes_are_named():
    with pytest.raises(ValueError, match="no quiz for chapter '99_x'"):
        quiz.load("99_x")
    with pytest.raises(TypeError):
        quiz.load(2)
    bad = [{"kind": "choice", "prompt": "p", "options": [{"text": "a", "why": "w"}] * 2}]
    with pytest.raises(ValueError, match="question 1: exactly one option must be correct"):
        quiz.validate(bad)
    with pytest.raises(ValueError, match="needs 'compute'"):
        quiz.validate([{"kind": "numeric", "prompt": "p", "answer": 1, "tolerance": 0, "why": "w"}])


def test_the_widget_grades_a_choice():
    box = quiz.show("01_matmul")
    first = box.children[0]
    prompt, options, button, feedback = first.children
    options.value = 0  # the entry view: wrong
    button.click()
    assert "Not quite" in feedback.value and "entry view" in feedback.value
    options.value = 1
    button.click()
    assert "Right" in feedback.value


def test_the_page_has_no_raw_dollar_math_and_the_answers_it_grades():
    html = quiz.page_html("04_attention")
    assert "$" not in html  # math went to \\( \\), which MathJax typesets on the site
    assert html.count('class="course-quiz-q mathjax_process"') == len(quiz.load("04_attention"))


def _shown(text: str) -> str:
    """A verdict as the page shows it before MathJax runs (math as \\( \\), tags gone)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", quiz._math_html(text)))


@pytest.mark.browser
def test_the_page_grades_in_a_browser(browser, tmp_path):
    """The static page, no server and no kernel: a wrong choice explains, the right one says so,
    a number is graded, and nothing is requested from anywhere."""
    page = tmp_path / "quiz.html"
    page.write_text(
        f"<!doctype html><meta charset=utf-8><body>{quiz.page_html('02_softmax')}</body>"
    )
    questions = quiz.load("02_softmax")
    pg = browser.new_page()
    requests = []
    pg.on("request", lambda r: requests.append(r.url))
    pg.goto(page.as_uri())
    stable = pg.locator("#quiz-q2")
    stable.locator("button.course-quiz-option").nth(0).click()
    text = stable.locator(".course-quiz-feedback").inner_text()
    assert text == _shown(quiz.check_answer(questions[1], 0)[1])
    assert stable.get_attribute("data-answered") == "wrong"
    stable.locator("button.course-quiz-option").nth(1).click()
    assert stable.locator(".course-quiz-feedback").inner_text().startswith("Right.")
    numeric = pg.locator("#quiz-q1")
    for typed in ["0.333", "0.5", "x"]:
        numeric.locator("input").fill(typed)
        numeric.locator("button.course-quiz-check").click()
        shown = numeric.locator(".course-quiz-feedback").inner_text()
        if typed == "x":
            assert shown == "Enter a number."
        else:
            assert shown == _shown(quiz.check_answer(questions[0], typed)[1])
    pg.close()
    assert all(u.startswith("file://") for u in requests), requests


def test_every_quiz_has_a_page_in_the_toc(tmp_path):
    import yaml

    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "Quizzes")
    assert [c["file"] for c in part["chapters"]] == [f"book/quizzes/{n}" for n in quiz.quiz_names()]
    pages = quiz.write_pages(tmp_path, {"01_matmul": "1. Matrix multiplication"})
    text = pages[0].read_text()
    assert text.startswith("<!-- generated") and "# Quiz: 1. Matrix multiplication" in text
    assert "```{raw} html" in text and 'course_lib.quiz.show("01_matmul")' in text
