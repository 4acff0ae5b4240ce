"""Concept quizzes (course_lib.quiz): well formed, answers computed by course_lib, and the same
verdicts in the page's script as in Python."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from course_lib import quiz

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def test_every_chapter_has_a_quiz():
    assert quiz.quiz_names() == CHAPTERS


def sections(chapter: str) -> dict[str, bool]:
    """A notebook's numbered sections, ``{'2.3': True, ...}`` (True where the heading says
    core), from its ``## N.M Title (core, 6 min)`` headings."""
    text = (ROOT / "notebooks" / f"{chapter}.py").read_text(encoding="utf-8")
    found = re.findall(r"^# ## (\d+\.\d+) .*\((core|optional)[,)]", text, flags=re.M)
    return {number: kind == "core" for number, kind in found}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_quiz_covers_every_core_section(chapter):
    """At least 12 questions, each naming the section it tests, and every core section named."""
    questions = quiz.load(chapter)
    assert len(questions) >= 12, f"{chapter}: {len(questions)} questions, want at least 12"
    known = sections(chapter)
    assert known, f"{chapter}: no numbered sections found"
    named = [str(q.get("section", "")) for q in questions]
    unknown = [s for s in named if s not in known]
    assert not unknown, f"{chapter}: questions name sections the notebook lacks: {unknown}"
    missed = [s for s, core in known.items() if core and s not in named]
    assert not missed, f"{chapter}: core sections without a question: {missed}"


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^\w$\\.]+", " ", str(text).lower()).split())


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", str(text))]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_question_gives_away_another(chapter):
    """No prompt states another question's answer: the right option's text (three words or
    more), or a numeric answer that is not a small whole number."""
    questions = quiz.load(chapter)
    for i, q in enumerate(questions):
        others = [(j, p) for j, p in enumerate(questions) if j != i]
        if q["kind"] == "choice":
            right = _words(next(o["text"] for o in q["options"] if o.get("correct")))
            if len(right.split()) >= 3:
                for j, p in others:
                    assert right not in _words(p["prompt"]), (
                        f"{chapter}: question {j + 1}'s prompt answers question {i + 1}"
                    )
        else:
            answer = q["answer"]
            if float(answer).is_integer() and abs(answer) < 20:
                continue
            for j, p in others:
                near = [n for n in _numbers(p["prompt"]) if abs(n - answer) <= q["tolerance"]]
                assert not near, f"{chapter}: question {j + 1}'s prompt answers question {i + 1}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_quiz_is_well_formed(chapter):
    questions = quiz.load(chapter)  # validates: one correct option, a why for every option
    kinds = {q["kind"] for q in questions}
    assert kinds == {"choice", "numeric"}, f"{chapter}: mix multiple choice and numeric"
    positions = [
        next(i for i, o in enumerate(q["options"]) if o.get("correct"))
        for q in questions
        if q["kind"] == "choice"
    ]
    assert len(set(positions)) > 1, f"{chapter}: the right option is always option {positions[0]}"
    for q in questions:  # a $ inside `code` would start math on the page
        texts = [q["prompt"], q.get("why", "")] + [
            v for o in q.get("options", []) for v in o.values()
        ]
        code = [c for t in texts if isinstance(t, str) for c in re.findall(r"`([^`]*)`", t)]
        assert not any("$" in c for c in code), f"{chapter}: a $ inside code: {code}"
    for q in questions:
        if q["kind"] == "choice":
            for o in q["options"]:
                assert len(o["why"].split()) >= 4, f"{chapter}: explain option {o['text']!r}"
            whys = [o["why"].strip() for o in q["options"]]
            assert len(set(whys)) == len(whys), f"{chapter}: {q['prompt'][:50]}: one why twice"
            texts = [_words(o["text"]) for o in q["options"]]
            assert len(set(texts)) == len(texts), f"{chapter}: {q['prompt'][:50]}: same option"
        else:
            assert len(q["why"].split()) >= 6, f"{chapter}: explain {q['prompt'][:50]!r}"
            for wrong in q.get("mistakes", []):
                assert len(wrong["why"].split()) >= 4, f"{chapter}: explain {wrong['value']}"


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
    key = pg.locator(".course-quiz-key")
    assert not key.is_visible(), "the answers show on screen"
    pg.emulate_media(media="print")  # course.pdf ends with the quizzes, answers included
    assert key.is_visible() and not numeric.locator("button.course-quiz-check").is_visible()
    assert key.locator("li").count() == len(questions)
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


def test_quiz_pages_are_titled_after_their_chapters(tmp_path):
    """The heading (hence the browser's tab and the sidebar's entry) is "Quiz: " and the
    chapter's title, read from the notebook's first heading, not from its Colab cell."""
    from tools.build_book import chapter_titles

    titles = chapter_titles()
    assert sorted(titles) == quiz.quiz_names()
    for name, title in titles.items():
        assert title.startswith(f"{int(name[:2])}. ") and "Colab" not in title, (name, title)
    headings = [p.read_text().splitlines()[1] for p in quiz.write_pages(tmp_path, titles)]
    assert headings == [f"# Quiz: {titles[n]}" for n in quiz.quiz_names()]
    assert len(set(headings)) == len(headings), "two quiz pages with one title"


def test_the_answers_are_printed_at_the_end():
    """The page's answer key (print only) gives every question's answer and why, in order."""
    import html as _html

    questions = quiz.load("05_transformer_block")
    key = quiz.answer_key_html(questions)
    assert key.count("<li>") == len(questions) and "mathjax_process" in key
    text = _html.unescape(key)
    at = 0
    for q in questions:
        at = text.index(_html.unescape(quiz._math_html(quiz.answer(q))), at)  # in order
    assert "38,597,376" in text and "1,536" in text  # whole numbers with thousands marks
    css = quiz.QUIZ_CSS
    assert ".course-quiz-key { display: none; }" in css and "@media print" in css
    from tools.pdf import pages_in_order

    pages = pages_in_order()
    quizzes = [p for p in pages if p.startswith("book/quizzes/")]
    assert quizzes == [f"book/quizzes/{n}" for n in quiz.quiz_names()]
    assert pages[-len(quizzes) :] == quizzes, "the quizzes close the PDF"


def _built_page(quiz_output: bool = True) -> str:
    """A chapter page as myst-nb writes it: the widget state, a widget cell, the quiz cell."""
    import json

    state = {
        "w": {"state": {"layout": "IPY_MODEL_l"}},
        "l": {"state": {}},
        "q": {"state": {"children": ["IPY_MODEL_c"], "layout": "IPY_MODEL_ql"}},
        "c": {"state": {"layout": "IPY_MODEL_ql"}},
        "ql": {"state": {}},
    }

    def cell(source: str, model: str | None) -> str:
        view = json.dumps({"model_id": model, "version_major": 2, "version_minor": 0})
        out = (
            f'<script type="application/vnd.jupyter.widget-view+json">{view}</script>'
            if model
            else "<pre>text</pre>"
        )
        return (
            '<div class="cell docutils container">\n<div class="cell_input docutils container">'
            f"<pre>{source}</pre></div>\n"
            f'<div class="cell_output docutils container">{out}</div>\n</div>'
        )

    quiz_cell = 'from course_lib import quiz\n\nquiz.show("01_matmul")'
    return (
        '<head><script type="application/vnd.jupyter.widget-state+json">'
        f"{json.dumps({'state': state, 'version_major': 2})}</script></head>\n"
        + cell("explorer()", "w")
        + cell(quiz_cell.replace('"', "&quot;"), "q" if quiz_output else None)
    )


def test_the_website_puts_a_quiz_that_responds_in_place_of_the_frozen_widget():
    """tools/chapter_quizzes.py: the quiz cell's widget view becomes the page's own quiz, the
    models only it used go from the page's widget state, a second run replaces the first, and a
    page without the quiz (or without its stored widget) is an error naming the chapter."""
    import json

    from tools import chapter_quizzes as cq

    fragment = quiz.chapter_html("01_matmul", "1. Matrix multiplication", "../q.html")
    page, dropped = cq.place(_built_page(), "01_matmul", fragment)
    assert dropped == 3 and page.count('<div class="course-quiz-embed"') == 1
    assert '"model_id": "q"' not in page and '"model_id": "w"' in page
    state = json.loads(cq.WIDGET_STATE.search(page)[2])["state"]
    assert sorted(state) == ["l", "w"]
    again, dropped = cq.place(page, "01_matmul", fragment)
    assert again == page and dropped == 0
    with pytest.raises(cq.QuizPageError, match="02_softmax: expected exactly one code cell"):
        cq.place(_built_page(), "02_softmax", fragment)
    with pytest.raises(cq.QuizPageError, match="01_matmul: the quiz cell has no widget output"):
        cq.place(_built_page(quiz_output=False), "01_matmul", fragment)


def test_the_quiz_tool_keeps_a_model_another_widget_uses_and_names_a_broken_page(capsys):
    """drop_models drops the models only the quiz reaches, never one another view reaches
    too (a layout shared with the explorer); a start marker without its end marker, or a
    widget view that is not JSON, is an error naming the chapter, not a traceback; the
    command line says so on standard error."""
    import json

    from tools import chapter_quizzes as cq

    page = _built_page()
    state = json.loads(cq.WIDGET_STATE.search(page)[2])
    state["state"]["c"]["state"]["layout"] = "IPY_MODEL_l"  # the quiz's child shares w's layout
    page = cq.WIDGET_STATE.sub(lambda m: m[1] + json.dumps(state) + m[3], page)
    fragment = quiz.chapter_html("01_matmul", "1. Matrix multiplication", "../q.html")
    placed, dropped = cq.place(page, "01_matmul", fragment)
    assert dropped == 3  # q, c and ql; l stays: w's view reaches it
    assert sorted(json.loads(cq.WIDGET_STATE.search(placed)[2])["state"]) == ["l", "w"]

    begin, end = cq.marker("01_matmul")
    with pytest.raises(cq.QuizPageError, match="01_matmul: .*start marker.*not its end"):
        cq.place(placed.replace(end, ""), "01_matmul", fragment)
    broken = _built_page().replace('{"model_id": "q"', '{"model_id": q"', 1)
    with pytest.raises(cq.QuizPageError, match="01_matmul: a widget view is not JSON"):
        cq.place(broken, "01_matmul", fragment)
    assert cq.main(["01_matmol"]) == 1
    out, err = capsys.readouterr()
    assert not out and "error: ['01_matmol']: no such quiz" in err


def test_the_chapter_page_quiz_has_every_question_and_no_answer_key():
    """The chapter page's copy of the quiz: every question, graded by the page's script, a link
    to the quiz's own page, and no answer key (course.pdf prints it once, at the end); printed,
    only the line that says where the quiz is."""
    questions = quiz.load("02_softmax")
    text = quiz.chapter_html("02_softmax", "2. Softmax", "../book/quizzes/02_softmax.html")
    assert text.count('class="course-quiz-q mathjax_process"') == len(questions)
    assert '<a href="../book/quizzes/02_softmax.html">Quiz: 2. Softmax</a>' in text
    assert "course-quiz-key" not in text.replace(".course-quiz-key", "") and "$" not in text
    assert ".course-quiz-embed > :not(.course-quiz-print) { display: none; }" in text
    assert "at the end of this book: Quiz: 2. Softmax." in text
