"""Put each chapter's quiz on its built page, in place of the frozen quiz widget.

    python -m tools.chapter_quizzes            # post-process book/_build/html (after a build)

Every chapter's lesson ends with its quiz: a code cell ``quiz.show("NN_topic")`` whose stored
output is the ipywidgets quiz. On the website no kernel runs, so that widget would show buttons
that do nothing. ``tools/build_book.py`` runs this after ``jupyter-book build`` (and after the
explorers, tools/explorer_pages.py): on each chapter's page it finds the one code cell that
shows the chapter's quiz and replaces its widget view with
:func:`course_lib.quiz.chapter_html`, the same questions graded by the page's own script (as
on the quiz's page, ``book/quizzes/NN_topic.html``, which it links to). The quiz's widget models
go from the page's stored widget state, which nothing else on the page uses. Printed (the
chapter in course.pdf), the quiz is one line saying that it closes the book with its answers.

It fails, naming the chapter, if a page is missing, if no cell or more than one cell shows
the chapter's quiz, if that cell has no widget output (the notebook was not executed with
its widget state), if a widget view or the widget state is not the JSON it should be, or if
a page has a start marker without its end marker. Running it again replaces the quizzes it
wrote before (between ``<!-- course-quiz:NN_topic -->`` markers).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tools.explorer_pages import widget_view_of_cell

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "book" / "_build" / "html"

WIDGET_STATE = re.compile(
    r'(<script type="application/vnd\.jupyter\.widget-state\+json">)(.*?)(</script>)', re.S
)
MODEL_REF = re.compile(r"IPY_MODEL_(\w+)")
VIEW_JSON = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)</script>', re.S
)


class QuizPageError(ValueError):
    """A chapter page where the quiz cannot be placed (named in the message)."""


def marker(chapter: str) -> tuple[str, str]:
    return f"<!-- course-quiz:{chapter} -->", f"<!-- /course-quiz:{chapter} -->"


def reachable(state: dict, roots: list[str]) -> set[str]:
    """The widget models ``roots`` refer to, directly or through their children, layouts and
    styles (``"IPY_MODEL_<id>"`` anywhere in a model's state), the roots included.

    >>> state = {"a": {"state": {"children": ["IPY_MODEL_b"]}}, "b": {"state": {}}, "c": {}}
    >>> sorted(reachable(state, ["a"]))
    ['a', 'b']
    """
    seen: set[str] = set()
    todo = [r for r in roots if r in state]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        todo += [m for m in MODEL_REF.findall(json.dumps(state[model])) if m in state]
    return seen


def view_model(view_json: str) -> str:
    """The model id of a widget view's JSON; a :class:`QuizPageError` naming what is wrong
    where the JSON is broken or has no model id."""
    try:
        return json.loads(view_json)["model_id"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise QuizPageError(
            f"a widget view is not JSON with a model_id ({err!r}): {view_json[:80]!r}"
        ) from err


def drop_models(page: str, quiz_model: str) -> tuple[str, int]:
    """``page`` without the widget models only the quiz used (those the remaining widget views
    do not reach); returns the page and how many models went."""
    found = WIDGET_STATE.search(page)
    if found is None:
        return page, 0
    try:
        data = json.loads(found.group(2))
    except json.JSONDecodeError as err:
        raise QuizPageError(f"the page's widget state is not JSON: {err}") from err
    state = data.get("state", {})
    views = [view_model(m.group(1)) for m in re.finditer(VIEW_JSON, page)]
    keep = reachable(state, views)
    gone = reachable(state, [quiz_model]) - keep
    if not gone:
        return page, 0
    data["state"] = {k: v for k, v in state.items() if k not in gone}
    text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return page[: found.start(2)] + text + page[found.end(2) :], len(gone)


def place(page: str, chapter: str, fragment: str) -> tuple[str, int]:
    """``page`` with the quiz ``fragment`` in place of the widget view of the cell that shows
    ``chapter``'s quiz, and without that widget's models; raises :class:`QuizPageError`
    naming ``chapter`` if it cannot. Returns the page and how many widget models went."""
    from course_lib.quiz import quiz_called_in

    begin, end = marker(chapter)
    wrapped = f"{begin}\n{fragment}\n{end}"
    if begin in page:  # placed by an earlier run: replace it
        i = page.index(begin)
        if end not in page[i:]:
            raise QuizPageError(
                f"{chapter}: the page has the quiz's start marker {begin} but not its end "
                f"marker {end} after it; rebuild the website (./course book)"
            )
        j = page.index(end, i) + len(end)
        return page[:i] + wrapped + page[j:], 0
    view = widget_view_of_cell(
        page,
        lambda source: quiz_called_in(source) == chapter,
        f"{chapter}: expected exactly one code cell showing its quiz "
        f'(quiz.show("{chapter}")), found {{found}}',
        f"{chapter}: the quiz cell has no widget output; was the notebook executed with "
        "its widget state stored?",
        QuizPageError,
    )
    try:
        model = view_model(VIEW_JSON.fullmatch(view.group())[1])
        page = page[: view.start()] + wrapped + page[view.end() :]
        return drop_models(page, model)
    except QuizPageError as err:
        raise QuizPageError(f"{chapter}: {err}") from err


def add_quizzes(
    html_dir: Path = HTML, chapters: list[str] | None = None, *, verbose: bool = False
) -> dict[str, dict]:
    """Place every chapter's quiz on its page; returns, per chapter, the questions, the bytes
    of the fragment and the widget models dropped (printed as each page is done if
    ``verbose``)."""
    from course_lib import quiz
    from tools.build_book import chapter_titles

    titles = chapter_titles()
    report = {}
    unknown = sorted(set(chapters or []) - set(quiz.quiz_names()))
    if unknown:
        raise QuizPageError(f"{unknown}: no such quiz; quizzes exist for {quiz.quiz_names()}")
    for chapter in chapters or quiz.quiz_names():
        path = html_dir / "notebooks" / f"{chapter}.html"
        if not path.is_file():
            raise QuizPageError(f"{chapter}: no built page at {path}")
        href = f"../book/quizzes/{chapter}.html"  # from notebooks/ to the quiz's page
        fragment = quiz.chapter_html(chapter, titles.get(chapter, chapter), href)
        page, dropped = place(path.read_text(encoding="utf-8"), chapter, fragment)
        path.write_text(page, encoding="utf-8")
        report[chapter] = {
            "questions": len(quiz.load(chapter)),
            "bytes": len(fragment.encode("utf-8")),
            "models_dropped": dropped,
        }
        if verbose:
            r = report[chapter]
            print(
                f"   quiz {chapter}: {r['questions']} questions, {r['bytes'] / 1024:.0f} KiB, "
                f"{dropped} widget models dropped",
                flush=True,
            )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="only these chapters (default: all)")
    args = parser.parse_args(argv)
    try:
        add_quizzes(HTML, args.chapters or None, verbose=True)
    except QuizPageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
