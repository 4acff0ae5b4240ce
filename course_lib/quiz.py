"""Concept quizzes: one YAML file per chapter, shown as a widget in Jupyter and as a static page.

A chapter's quiz lives in ``data/quizzes/NN_topic.yml``: a list of questions, each either

* ``kind: choice``: a ``prompt`` and ``options``, each option with its ``text``, ``correct:
  true`` on exactly one, and a ``why`` that says why it is right or wrong; or
* ``kind: numeric``: a ``prompt``, the ``answer``, a ``tolerance`` (absolute), a ``why``, a
  ``compute`` expression that ``course_lib`` evaluates (the tests hold ``answer`` equal to it),
  and optionally ``mistakes``: common wrong values with the ``why`` of each.

Each question also names the ``section`` of the notebook it tests (``"2.3"``), shown beside it so
that a learner knows where to read again; the tests hold every core section named.

:func:`check_answer` grades one answer and says why; :func:`show` is the widget (the last code
cell of every chapter's lesson, ``quiz.show("02_softmax")``), :func:`page_html` the website's
quiz page (plain HTML and a small script, no kernel and no request off the page), built by
``tools/build_book.py``, and :func:`chapter_html` the copy that takes the widget's place on the
chapter's own page (``tools/chapter_quizzes.py``).

>>> q = {"kind": "numeric", "prompt": "2 + 2?", "answer": 4, "tolerance": 0, "why": "Sum."}
>>> check_answer(q, 4)
(True, 'Right. Sum.')
>>> check_answer(q, 5)[0]
False
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

from course_lib.paths import data_path

__all__ = [
    "chapter_html",
    "check_answer",
    "load",
    "page_html",
    "quiz_called_in",
    "quiz_names",
    "show",
    "validate",
]


def quiz_names() -> list[str]:
    """The chapters that have a quiz, e.g. ``['01_matmul', ...]``."""
    return sorted(p.stem for p in data_path("quizzes").glob("[0-9][0-9]_*.yml"))


def load(chapter: str) -> list[dict[str, Any]]:
    """A chapter's questions, validated (:func:`validate`)."""
    import yaml

    if not isinstance(chapter, str):
        raise TypeError(
            f"chapter must be a name such as '02_softmax', got {type(chapter).__name__}"
        )
    path = data_path("quizzes", f"{chapter}.yml", must_exist=False)
    if not path.is_file():
        raise ValueError(f"no quiz for chapter {chapter!r}; quizzes exist for {quiz_names()}")
    questions = yaml.safe_load(path.read_text(encoding="utf-8"))["questions"]
    validate(questions, where=path.name)
    return questions


def validate(questions: list[dict[str, Any]], where: str = "quiz") -> None:
    """Raise ValueError naming the first question that is malformed."""
    if not isinstance(questions, list) or not questions:
        raise ValueError(f"{where}: expected a non-empty list of questions")
    for i, q in enumerate(questions, 1):
        at = f"{where}, question {i}"
        if not str(q.get("prompt", "")).strip():
            raise ValueError(f"{at}: no prompt")
        if "section" in q and not re.fullmatch(r"\d+\.\d+", str(q["section"])):
            raise ValueError(f"{at}: section must be a number such as '2.3', got {q['section']!r}")
        if q.get("kind") == "choice":
            options = q.get("options") or []
            if len(options) < 2:
                raise ValueError(f"{at}: a choice question needs at least two options")
            if sum(bool(o.get("correct")) for o in options) != 1:
                raise ValueError(f"{at}: exactly one option must be correct")
            if any(
                not str(o.get("why", "")).strip() or not str(o.get("text", "")) for o in options
            ):
                raise ValueError(f"{at}: every option needs a text and a why")
        elif q.get("kind") == "numeric":
            for key in ("answer", "tolerance", "why", "compute"):
                if key not in q:
                    raise ValueError(f"{at}: a numeric question needs {key!r}")
            if not isinstance(q["answer"], int | float) or q["tolerance"] < 0:
                raise ValueError(f"{at}: answer must be a number and tolerance >= 0")
        else:
            raise ValueError(f"{at}: kind must be 'choice' or 'numeric', got {q.get('kind')!r}")


def check_answer(question: dict[str, Any], answer: Any) -> tuple[bool, str]:
    """(right?, what to tell the learner) for one answer: an option's index or a number."""
    if question["kind"] == "choice":
        options = question["options"]
        if not isinstance(answer, int) or not 0 <= answer < len(options):
            raise ValueError(
                f"answer must be an option index 0..{len(options) - 1}, got {answer!r}"
            )
        chosen = options[answer]
        return bool(chosen.get("correct")), (
            "Right. " if chosen.get("correct") else "Not quite. "
        ) + str(chosen["why"]).strip()
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return False, f"Enter a number (got {answer!r})."
    if not math.isfinite(value):
        return False, "Enter a finite number."
    if abs(value - question["answer"]) <= question["tolerance"]:
        return True, "Right. " + str(question["why"]).strip()
    for wrong in question.get("mistakes", []):
        if abs(value - wrong["value"]) <= max(question["tolerance"], 1e-9):
            return False, "Not quite. " + str(wrong["why"]).strip()
    return False, "Not quite: try again, or work it through on paper first."


def _math_html(text: str) -> str:
    """Escape text for HTML and turn $...$ into MathJax's \\(...\\), $$...$$ into \\[...\\]."""
    out = html.escape(str(text).strip(), quote=False)
    out = re.sub(r"\$\$(.+?)\$\$", r"\\[\1\\]", out, flags=re.S)
    out = re.sub(r"(?<!\\)\$(.+?)(?<!\\)\$", r"\\(\1\\)", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return out.replace("\n\n", "<br><br>")


QUIZ_JS = """
(function () {
  document.querySelectorAll(".course-quiz-q").forEach(function (q) {
    var data = JSON.parse(q.getAttribute("data-quiz"));
    var out = q.querySelector(".course-quiz-feedback");
    function say(ok, text) {
      out.innerHTML = text;  // the course's own HTML, made by course_lib.quiz at build time
      out.className = "course-quiz-feedback " + (ok ? "right" : "wrong");
      q.setAttribute("data-answered", ok ? "right" : "wrong");
      if (window.MathJax && MathJax.typesetPromise) { MathJax.typesetPromise([out]); }
    }
    if (data.kind === "choice") {
      q.querySelectorAll("button.course-quiz-option").forEach(function (b) {
        b.addEventListener("click", function () {
          var o = data.options[+b.getAttribute("data-index")];
          say(o.correct, (o.correct ? "Right. " : "Not quite. ") + o.why);
        });
      });
    } else {
      q.querySelector("button.course-quiz-check").addEventListener("click", function () {
        var raw = q.querySelector("input").value.trim(), v = Number(raw);
        if (raw === "" || !isFinite(v)) { say(false, "Enter a number."); return; }
        if (Math.abs(v - data.answer) <= data.tolerance) { say(true, "Right. " + data.why); return; }
        for (var i = 0; i < data.mistakes.length; i++) {
          var m = data.mistakes[i];
          if (Math.abs(v - m.value) <= Math.max(data.tolerance, 1e-9)) {
            say(false, "Not quite. " + m.why); return;
          }
        }
        say(false, "Not quite: try again, or work it through on paper first.");
      });
    }
  });
})();
"""

QUIZ_CSS = """
.course-quiz-q { border: 1px solid var(--pst-color-border, #ccc); border-radius: 6px;
  padding: 0.6em 1em; margin: 1em 0; }
.course-quiz-option { display: block; width: 100%; text-align: left; margin: 0.3em 0;
  padding: 0.4em 0.7em; border: 1px solid var(--pst-color-border, #999); border-radius: 4px;
  background: var(--pst-color-surface, #f7f7f7); color: var(--pst-color-text-base, #222);
  cursor: pointer; }
.course-quiz-feedback { margin-top: 0.5em; font-weight: 500; min-height: 1.2em; }
.course-quiz-feedback.right { color: var(--course-right, #0a5c2a); }
.course-quiz-feedback.wrong { color: var(--course-wrong, #8a1c14); }
.course-quiz-key { display: none; }
@media print {
  .course-quiz-q { break-inside: avoid; }
  .course-quiz-q label, .course-quiz-check, .course-quiz-feedback { display: none; }
  .course-quiz-key { display: block; break-before: page; }
}
"""


def _payload(q: dict[str, Any]) -> dict[str, Any]:
    """What the page's script needs to grade a question (the texts it shows, plain)."""
    if q["kind"] == "choice":
        return {
            "kind": "choice",
            "options": [
                {"correct": bool(o.get("correct")), "why": _math_html(o["why"])}
                for o in q["options"]
            ],
        }
    return {
        "kind": "numeric",
        "answer": q["answer"],
        "tolerance": q["tolerance"],
        "why": _math_html(q["why"]),
        "mistakes": [
            {"value": m["value"], "why": _math_html(m["why"])} for m in q.get("mistakes", [])
        ],
    }


def _section(q: dict[str, Any]) -> str:
    """`` (section 2.3)``, where the question names the section it tests."""
    return f" <em>(section {q['section']})</em>" if q.get("section") else ""


def question_html(q: dict[str, Any], number: int) -> str:
    """One question as static HTML (graded by QUIZ_JS)."""
    data = html.escape(json.dumps(_payload(q)), quote=True)
    parts = [
        # mathjax_process: the site's MathJax typesets only marked elements (myst's setting)
        f'<div class="course-quiz-q mathjax_process" id="quiz-q{number}" data-quiz="{data}">',
        f"<p><strong>Question {number}.</strong>{_section(q)} {_math_html(q['prompt'])}</p>",
    ]
    if q["kind"] == "choice":
        for i, o in enumerate(q["options"]):
            parts.append(
                f'<button type="button" class="course-quiz-option" data-index="{i}">'
                f"{_math_html(o['text'])}</button>"
            )
    else:
        parts.append(
            f'<label>Your answer: <input type="text" inputmode="decimal" '
            f'aria-label="answer to question {number}"></label> '
            '<button type="button" class="course-quiz-check">Check</button>'
        )
    parts.append('<div class="course-quiz-feedback" role="status" aria-live="polite"></div>')
    parts.append("</div>")
    return "\n".join(parts)


def answer(q: dict[str, Any]) -> str:
    """A question's answer as text: the right option's, or the number."""
    if q["kind"] == "choice":
        return str(next(o["text"] for o in q["options"] if o.get("correct")))
    value = q["answer"]
    return f"{value:,}" if float(value).is_integer() else f"{value:.10g}"


def answer_key_html(questions: list[dict[str, Any]]) -> str:
    """Every question's answer and why, for print only (course.pdf ends with the quizzes; the
    page on screen hides it, so that it gives nothing away there)."""
    items = "\n".join(
        f"<li><strong>{_math_html(answer(q))}</strong>{_section(q)}. {_math_html(_why(q))}</li>"
        for q in questions
    )
    return (
        '<div class="course-quiz-key mathjax_process">\n<p><strong>Answers</strong></p>\n'
        f"<ol>\n{items}\n</ol>\n</div>"
    )


def _why(q: dict[str, Any]) -> str:
    if q["kind"] == "choice":
        return str(next(o["why"] for o in q["options"] if o.get("correct")))
    return str(q["why"])


def page_html(chapter: str) -> str:
    """The body of a chapter's quiz page: every question, its style and its script, and the
    answers for print."""
    questions = load(chapter)
    body = "\n".join(question_html(q, i) for i, q in enumerate(questions, 1))
    key = answer_key_html(questions)
    return f"<style>{QUIZ_CSS}</style>\n{body}\n{key}\n<script>{QUIZ_JS}</script>"


#: How a notebook's quiz cell calls :func:`show` (``quiz.show("02_softmax")``, or
#: ``course_lib.quiz.show(...)``); :func:`quiz_called_in` reads the chapter from it.
QUIZ_CALL = re.compile(r"""(?<![\w])quiz\.show\(\s*["'](\d\d_\w+)["']\s*\)""")

#: The CSS class of the quiz's outermost widget (the Lab test tells it from the chapter's
#: other widgets by it).
WIDGET_CLASS = "course-quiz"


def quiz_called_in(source: str) -> str | None:
    """The chapter whose quiz a cell's code shows, or None.

    >>> quiz_called_in('from course_lib import quiz\\n\\nquiz.show("02_softmax")')
    '02_softmax'
    >>> quiz_called_in("my_quiz.show('02_softmax')") is None, quiz_called_in("x = 1") is None
    (True, True)
    """
    found = QUIZ_CALL.findall(source)
    return found[-1] if found else None


EMBED_CSS = """
.course-quiz-print { display: none; }
@media print {
  .course-quiz-embed > :not(.course-quiz-print) { display: none; }
  .course-quiz-print { display: block; }
}
"""


def chapter_html(chapter: str, title: str, page_href: str) -> str:
    """The quiz as it ends the chapter's page on the website, in place of the widget that
    would not respond there: every question, graded by the page's script as on the quiz's own
    page (``page_href``, titled "Quiz: " and ``title``), without its answer key. Printed (the
    chapter in course.pdf), it is one line saying where the quiz and its answers are."""
    questions = load(chapter)
    body = "\n".join(question_html(q, i) for i, q in enumerate(questions, 1))
    link = f'<a href="{html.escape(page_href)}">Quiz: {html.escape(title)}</a>'
    return (
        f'<div class="course-quiz-embed" data-chapter="{html.escape(chapter)}">\n'
        f"<style>{QUIZ_CSS}{EMBED_CSS}</style>\n"
        f'<p class="course-quiz-where">No kernel needed: choose or type an answer and check it '
        f"here. The same quiz is also a page of its own, {link}.</p>\n"
        f'<p class="course-quiz-print">The quiz of this chapter, with its answers, is at the end '
        f"of this book: Quiz: {html.escape(title)}.</p>\n"
        f"{body}\n<script>{QUIZ_JS}</script>\n</div>"
    )


LETTERS = "abcdefghij"


def show(chapter: str):
    """The quiz as ipywidgets: pick or type an answer, press Check, read why.

    A choice question lists its options under the prompt, lettered, with their math typeset
    (a radio button's label would show ``$X$`` as typed), and the learner picks a letter.
    Every question's widgets share one layout and one style per kind, so that a notebook that
    stores the quiz (the lesson's last code cell of every chapter) stores about 80 widget models, not 200.
    Its text form is ``Quiz('02_softmax')``: what nbval compares does not change with the
    wording of a question.
    """
    import ipywidgets as w
    from ipywidgets.widgets.widget_selection import ToggleButtonsStyle
    from ipywidgets.widgets.widget_string import HTMLMathStyle, TextStyle

    class Quiz(w.VBox):
        def __repr__(self) -> str:
            return f"Quiz({chapter!r})"

    plain, spaced = w.Layout(), w.Layout(margin="0 0 1.2em 0")  # a gap between questions
    html_style, text_style, button_style = HTMLMathStyle(), TextStyle(), w.ButtonStyle()
    letter_style = ToggleButtonsStyle(button_width="3em")
    rows = []
    for i, q in enumerate(load(chapter), 1):
        text = f"<b>Question {i}.</b>{_section(q)} {_math_html(q['prompt'])}"
        if q["kind"] == "choice":
            text += "".join(
                f'<div style="margin: 0.3em 0 0 1.5em"><b>{LETTERS[k]}.</b> '
                f"{_math_html(o['text'])}</div>"
                for k, o in enumerate(q["options"])
            )
            control = w.ToggleButtons(
                options=[(LETTERS[k], k) for k in range(len(q["options"]))],
                value=None,
                layout=plain,
                style=letter_style,
            )
        else:
            control = w.Text(
                placeholder="a number", description="answer", layout=plain, style=text_style
            )
        prompt = w.HTMLMath(text, layout=plain, style=html_style)
        button = w.Button(description="Check", layout=plain, style=button_style)
        feedback = w.HTMLMath(layout=plain, style=html_style)

        def on_click(_, q=q, control=control, feedback=feedback):
            if control.value is None or control.value == "":
                feedback.value = "Choose or type an answer first."
                return
            ok, text = check_answer(q, control.value)
            colour = "#0a5c2a" if ok else "#8a1c14"
            feedback.value = f'<span style="color:{colour}">{_math_html(text)}</span>'

        button.on_click(on_click)
        rows.append(w.VBox([prompt, control, button, feedback], layout=spaced))
    box = Quiz(rows, layout=plain)
    box.add_class(WIDGET_CLASS)
    return box


def write_pages(out: Path, titles: dict[str, str]) -> list[Path]:
    """``out/NN_topic.md`` for every chapter with a quiz (the website's quiz pages)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in quiz_names():
        title = titles.get(name, name)
        text = (
            "<!-- generated by tools/build_book.py from data/quizzes/"
            f"{name}.yml: edit that file -->\n"
            f"# Quiz: {title}\n\n"
            "Pick an answer (or type a number) and press it: the page says whether it is right "
            "and why, in the chapter's notation ($d_k$, $\\mathrm{softmax}$, ...). Nothing is sent "
            "anywhere. In JupyterLab or Colab the same quiz ends the chapter's lesson: "
            f'`course_lib.quiz.show("{name}")`.\n\n'
            f"```{{raw}} html\n{page_html(name)}\n```\n"
        )
        path = out / f"{name}.md"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
