"""JupyterLab as learners and lecturers use it, in a real browser (headless Chromium).

    pytest tests/test_lab.py -m browser          # every chapter (slow: each one runs)
    pytest tests/test_lab.py -k 07_bpe           # one chapter

``jupyter lab`` (tools/lab.py) serves a temporary copy of the notebooks on 127.0.0.1, on a random
free port, with a token and settings of its own; the committed notebooks are never opened. For
each chapter the test opens one copy of the notebook (every markdown cell; the code up to its
last widget, without stored outputs; the code after it as raw cells), checks that the MyST
markup renders (citations, exercise directives: jupyterlab-myst), runs every code cell in the
kernel it opened with, and asserts: no error output, every widget rendered, one control per
widget moved and its output changed, no console error, no request outside 127.0.0.1. The cells after the last widget (exercises, the quiz, the testing appendix) are
not run here, except the quiz of ``QUIZ_LAB_CHAPTER`` (tests/browser.py), which is answered: nbval runs every cell of every chapter and compares their outputs; this test
checks what only a browser can see. The chapters not in ``WIDGETS_RUN`` are rendered and
checked without running their code (the budget of ./course test; ``COURSE_LAB_ALL=1`` runs
them). A screenshot of each chapter goes to ``tests/artifacts/lab-<chapter>.png``
(as the test left it: after the run, or rendered).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from tests.browser import QUIZ_LAB_CHAPTER, Visit, widget_views
from tools.lab import LabServer

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
LAB_SCHEMES = {"data", "blob"}  # besides 127.0.0.1: JupyterLab has no business with file:
RUN_TIMEOUT_S = 600  # a chapter's budget is 60 s on 2 cores; Lab and the browser share them

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.lab]


def chapters() -> list[str]:
    return [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]


#: The chapters whose code the test runs in Lab, moving one control of each widget (a slider
#: where it has one) and answering the quiz (QUIZ_LAB_CHAPTER), at 14 to 21 s each in the full
#: run. Their widgets hold every kind of control the course's widgets have but chapter 13's
#: selection slider (integer, float and log-scale sliders, dropdowns, a text area, a check box),
#: so JupyterLab draws each kind from a live kernel; moving one control per widget shows that
#: the kernel answers. Every chapter's widgets run on the same JupyterLab and ipywidgets code;
#: what differs is course_lib's Python behind them, which the topics' tests call
#: (tests/test_<topic>.py) and tests/test_explorers.py renders at every setting, while the
#: website's browser test moves each chapter's explorer. The other chapters are rendered and
#: checked without a kernel (MyST, no console error, no outside request): their code up to the
#: last widget took 17 to 65 s a chapter in the full run, together beyond the 20-minute budget
#: of ./course test. COURSE_LAB_ALL=1 runs every chapter's widgets.
WIDGETS_RUN = frozenset(
    {"01_matmul", "02_softmax", "03_text_metrics", "05_transformer_block_stacks"}
)  # fmt: skip


def runs_widgets(chapter: str) -> bool:
    """Whether the Lab test runs the chapter's code and moves its widgets (else: renders it)."""
    return chapter in WIDGETS_RUN or os.environ.get("COURSE_LAB_ALL") == "1"


def myst_counts(nb: dict) -> dict[str, int]:
    """The MyST markup of the chapter's shown markdown cells: citations and exercises.

    A folded cell (``jupyter.source_hidden``: a solution block) shows a placeholder in Lab.
    """
    text = "\n".join(
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
        and not c.get("metadata", {}).get("jupyter", {}).get("source_hidden")
    )
    return {
        "cite": len(re.findall(r"\{cite(?::[a-z]+)?\}`", text)),
        "exercise": len(re.findall(r"^(`{3,}|:{3,})\{exercise\}", text, re.M)),
    }


# -- the browser ---------------------------------------------------------------------------


class LabVisit(Visit):
    """One chapter open in JupyterLab, recording console errors and every request."""

    #: Console messages that are not the course's; each pattern needs a reason beside it.
    IGNORED: tuple[str, ...] = (
        # JupyterLab's debugger asks a kernel for its state as the notebook opens; the restart
        # cancels that request (Lab 4.6, whatever the notebook; the debugger is not used here)
        r"Could not restore the debugger state: Canceled future for debug_request",
    )

    def __init__(self, browser, lab: LabServer, name: str) -> None:
        url = lab.url(f"notebooks/{name}.ipynb", reset=True)  # this notebook's tab only
        super().__init__(browser, url, ignored=self.IGNORED, schemes=LAB_SCHEMES, timeout=120_000)
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
        self.page.wait_for_selector(
            ".jp-Notebook-ExecutionIndicator, .jp-KernelStatus", timeout=60_000
        )

    def run_all(self) -> None:
        """Run every cell in the kernel the notebook opened with (a fresh one: each visit's
        kernels are shut down after it), as a person would: the Run menu."""
        pg = self.page
        pg.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        pg.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

    def restart_and_run_all(self) -> None:
        """Restart the kernel and run every cell, as a person would: the notebook toolbar's
        button, or the Kernel menu where a toolbar has no such button."""
        pg = self.page
        button = pg.locator(
            '.jp-NotebookPanel:not(.lm-mod-hidden) [data-command="notebook:restart-run-all"]'
        )
        if button.count():
            button.first.click()
        else:
            pg.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
            pg.locator(".lm-Menu-itemLabel", has_text="Restart Kernel and Run All Cells").click()
        accept = pg.locator(".jp-Dialog .jp-mod-accept")  # only if the dialog is not skipped
        try:
            accept.wait_for(state="visible", timeout=3_000)
            accept.click()
        except Exception:  # the settings skip the restart dialog: nothing to accept
            pass


# -- what is checked on the page ---------------------------------------------------------------

RENDERED_MARKDOWN = ".jp-MarkdownCell:not(.jp-mod-collapsed) .jp-Cell-inputWrapper"

JS_RAW_MYST = """() => [...document.querySelectorAll('.jp-MarkdownCell .myst')]
    .map(e => e.innerText).filter(t => /\\{(cite|exercise|solution)[^}]*\\}/.test(t))
    .map(t => t.slice(0, 120))"""

# jupyterlab-myst draws a citation as <cite> when it can resolve it (DOIs only) and otherwise as
# the key marked "Citation Not Found": it reads no .bib file (executablebooks/jupyterlab-myst#127)
JS_MYST = """() => ({
    myst: document.querySelectorAll('.jp-MarkdownCell .myst').length,
    cite: document.querySelectorAll(
        '.jp-MarkdownCell .myst cite, .jp-MarkdownCell .myst [title="Citation Not Found"]').length,
    exercise: document.querySelectorAll('.jp-MarkdownCell .myst aside.myst-exercise').length,
})"""

# the prompts of the code cells whose input is shown (folded solutions show a placeholder)
JS_RUN_STATE = """() => {
    const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
        .map(e => e.textContent.trim());
    const numbers = prompts.map(t => (t.match(/\\[(\\d+)\\]/) || [])[1]).filter(Boolean).map(Number);
    return {n: prompts.length, busy: prompts.filter(t => t.includes('*')).length,
            done: numbers.length, first: numbers[0] || 0, last: Math.max(0, ...numbers)};
}"""

JS_KERNEL_IDLE = """() => [...document.querySelectorAll('.jp-StatusBar-Widget, .jp-StatusBar-Item')]
    .some(e => /\\|\\s*Idle\\b/.test(e.textContent))"""

# JupyterLab draws an error output as stderr text (mime type application/vnd.jupyter.stderr,
# like warnings and progress bars): an error is a stderr output holding a traceback
JS_ERRORS = """() => [...document.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')]
    .map(e => e.innerText).filter(t => /Traceback|^\\w*(Error|Exception)\\b/m.test(t))
    .map(t => t.slice(0, 400))"""


def visible_code(nb: dict) -> tuple[int, int, int]:
    """(code cells whose input is shown, 1-based execution numbers of the first and the last of
    them: a hidden cell before them, such as the Colab set-up cell, runs first but shows no
    prompt)."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    shown = [
        i + 1
        for i, c in enumerate(code)
        if not c.get("metadata", {}).get("jupyter", {}).get("source_hidden")
    ]
    return len(shown), shown[0], shown[-1]


def wait_for_run(visit: LabVisit, nb: dict, since: float) -> None:
    """Wait until every code cell has run after a kernel restart (prompts numbered 1..n)."""
    n_shown, first, last = visible_code(nb)
    pg = visit.page
    deadline = since + RUN_TIMEOUT_S
    state = {}
    while time.monotonic() < deadline:
        state = pg.evaluate(JS_RUN_STATE)
        done = state["done"] == n_shown and state["first"] == first and state["last"] == last
        if state["busy"] == 0 and done:
            return
        time.sleep(1)
    pytest.fail(f"the cells did not all run within {RUN_TIMEOUT_S} s: {state}")


def widget_roots(pg):
    """The widgets displayed by the cells: the outermost ``.jupyter-widgets`` of each output
    (progress bars and the quiz left out: :func:`check_quiz` answers it)."""
    pg.evaluate(
        """() => document.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').forEach(e => {
            if (!e.parentElement.closest('.jupyter-widgets') && !e.querySelector('.widget-progress')
                && !e.classList.contains('course-quiz'))
                e.setAttribute('data-course-widget', '');
        })"""
    )
    return pg.locator("[data-course-widget]")


def output_of(root) -> str:
    """What a widget shows besides its controls: its HTML outputs and images."""
    return root.evaluate(JS_OUTPUT)


def move_one_control(root, attempt: int = 0) -> str:
    """Change the first control of a widget as a person would; return what was done.

    ``attempt`` 0 moves a slider to its maximum (End key), 1 to its minimum (Home): a small
    step may leave the output as it was (200 or 202 BPE merges can cut a sentence alike).
    """
    slider = root.locator(".widget-slider .noUi-handle, .widget-slider input[type=range]").first
    if slider.count():
        key = "End" if attempt == 0 else "Home"
        slider.focus()
        slider.press(key)
        return f"slider {key}"
    select = root.locator("select").first
    if select.count():
        options = select.locator("option").all_inner_texts()
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        other = [o for o in options if o != current][attempt % max(1, len(options) - 1)]
        select.select_option(label=other)
        return f"dropdown -> {other!r}"
    toggles = root.locator(".widget-toggle-buttons button:not(.mod-active)").first
    if toggles.count():
        toggles.click()
        return "toggle button"
    box = root.locator(".widget-checkbox input").first
    if box.count():
        box.click()
        return "checkbox"
    text = root.locator(".widget-text input, textarea").first
    if text.count():
        text.fill(text.input_value() + " x" * (attempt + 1))
        text.press("Enter")
        return "text edited"
    raise AssertionError("a widget with no control this test knows how to move")


JS_OUTPUT = """r => [...r.querySelectorAll('.widget-html-content, .widget-output, img')]
    .map(e => e.tagName === 'IMG' ? e.src.slice(0, 200) : e.innerHTML).join('\\n')"""


def output_changes(pg, root, before: str, timeout_ms: int) -> bool:
    try:
        pg.wait_for_function(
            f"([r, b]) => ({JS_OUTPUT})(r) !== b",
            arg=[root.element_handle(), before],
            timeout=timeout_ms,
        )
    except Exception:  # playwright's TimeoutError
        return False
    return True


@pytest.mark.parametrize("chapter", chapters())
def test_chapter_in_jupyterlab(lab: LabServer, browser, chapter: str) -> None:
    # what the server serves: a copy taken when it started (never the committed file); the
    # test opens NN_x.widgets.ipynb, the chapter as up_to_last_widget (tests/browser.py) makes it
    nb = json.loads((lab.root / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    assert lab.root.resolve() != ROOT.resolve()
    copy = lab.root / "notebooks" / f"{chapter}.widgets.ipynb"
    assert copy.is_file(), f"{chapter} displays no widget"
    run_nb = json.loads(copy.read_text(encoding="utf-8"))
    expected = myst_counts(nb)
    visit = LabVisit(browser, lab, f"{chapter}.widgets")
    pg = visit.page
    try:
        check_myst(pg, chapter, nb, expected)
        if runs_widgets(chapter):
            run_widgets(visit, chapter, run_nb, widget_views(nb))
            if chapter == QUIZ_LAB_CHAPTER:
                check_quiz(pg, chapter)
    finally:
        pg.screenshot(path=str(ARTIFACTS / f"lab-{chapter}.png"))
        visit.close()
        lab.shutdown_kernels()  # one chapter's kernel at a time
    visit.check(chapter)


def check_myst(pg, chapter: str, nb: dict, expected: dict[str, int]) -> None:
    """MyST renders (jupyterlab-myst): no directive or role left as raw text."""
    n_md = sum(  # an empty markdown cell stays an (empty) editor in Lab: not counted
        c["cell_type"] == "markdown"
        and "".join(c["source"]).strip() != ""
        and not c.get("metadata", {}).get("jupyter", {}).get("source_hidden")
        for c in nb["cells"]
    )
    pg.wait_for_function(
        f"() => document.querySelectorAll('.jp-MarkdownCell .myst').length >= {n_md}",
        timeout=120_000,
    )
    raw = pg.evaluate(JS_RAW_MYST)
    assert not raw, f"{chapter}: MyST markup shown raw in JupyterLab: {raw[:3]}"
    myst = pg.evaluate(JS_MYST)
    assert myst["exercise"] == expected["exercise"], (
        f"{chapter}: {expected['exercise']} exercise directives, {myst['exercise']} rendered"
    )
    if expected["cite"]:
        assert myst["cite"] >= expected["cite"], f"{chapter}: citations not rendered ({myst})"


def run_widgets(visit: LabVisit, chapter: str, nb: dict, n_widgets: int) -> None:
    """Run every code cell of the open copy, then move one control of every widget."""
    pg = visit.page
    # run every cell in the fresh kernel the notebook opened with, once it is idle (the
    # previous chapter's kernels were shut down; no restart: a chapter starts one kernel here)
    pg.wait_for_function(JS_KERNEL_IDLE, timeout=120_000)
    start = time.monotonic()
    visit.run_all()
    wait_for_run(visit, nb, start)
    errors = pg.evaluate(JS_ERRORS)
    assert not errors, f"{chapter}: error output in JupyterLab:\n" + "\n---\n".join(errors)

    # every widget rendered, and one control of each moves its output
    pg.wait_for_function(
        f"() => document.querySelectorAll('.jp-OutputArea-output .jupyter-widgets').length > 0"
        f" && document.querySelectorAll('.jp-OutputArea-output .widget-html-content, "
        f".jp-OutputArea-output .widget-output').length >= {n_widgets}",
        timeout=60_000,
    )
    roots = widget_roots(pg)
    assert roots.count() == n_widgets, f"{chapter}: {n_widgets} widgets, {roots.count()} shown"
    failed = pg.locator(".jp-OutputArea-output", has_text="Error displaying widget")
    assert failed.count() == 0, f"{chapter}: a widget failed to render"
    for i in range(n_widgets):
        root = roots.nth(i)
        root.scroll_into_view_if_needed()
        before = output_of(root)
        assert before, f"{chapter}: widget {i} shows nothing"
        actions = [move_one_control(root, 0)]
        changed = output_changes(pg, root, before, 20_000)
        if not changed:
            actions.append(move_one_control(root, 1))
            changed = output_changes(pg, root, before, 20_000)
        assert changed, f"{chapter}: widget {i}: output unchanged after {actions}"
    roots.first.scroll_into_view_if_needed()
    pg.wait_for_timeout(500)


def check_quiz(pg, chapter: str) -> None:
    """The chapter's quiz, run in the same visit (its cell needs nothing from the cells above
    it): every question shown; a wrong letter, checked, says why it is wrong, and the right one
    says it is right, as course_lib.quiz.check_answer does."""
    from course_lib import quiz

    questions = quiz.load(chapter)
    box = pg.locator(".jp-OutputArea-output .course-quiz")
    box.wait_for(state="visible", timeout=30_000)
    rows = box.locator(":scope > .widget-vbox")
    assert rows.count() == len(questions), f"{chapter}: {rows.count()} of {len(questions)} shown"
    i = next(k for k, q in enumerate(questions) if q["kind"] == "choice")
    right = next(k for k, o in enumerate(questions[i]["options"]) if o.get("correct"))
    row = rows.nth(i)
    row.scroll_into_view_if_needed()
    feedback = row.locator(".widget-htmlmath").nth(1)
    for option, verdict in ((1 - min(right, 1), "Not quite."), (right, "Right.")):
        row.locator(".widget-toggle-buttons button").nth(option).click()
        row.locator("button", has_text="Check").click()
        pg.wait_for_function(
            "([e, v]) => e.innerText.trim().startsWith(v)",
            arg=[feedback.element_handle(), verdict],
            timeout=20_000,
        )
        expected = quiz.check_answer(questions[i], option)[1]
        assert expected.startswith(verdict), expected


def test_the_test_sees_an_error_output(lab: LabServer, browser) -> None:
    """The error check above is not vacuous: a cell raising ZeroDivisionError is caught."""
    visit = LabVisit.__new__(LabVisit)  # the probe is not a chapter: no waiting as for one
    Visit.__init__(visit, browser, lab.url("probe_error.ipynb", reset=True), timeout=120_000)
    try:
        visit.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
        visit.page.wait_for_function(JS_KERNEL_IDLE, timeout=120_000)
        visit.restart_and_run_all()
        visit.page.wait_for_function(f"() => ({JS_ERRORS})().length > 0", timeout=120_000)
        assert "ZeroDivisionError" in "".join(visit.page.evaluate(JS_ERRORS))
    finally:
        visit.close()
        lab.shutdown_kernels()
