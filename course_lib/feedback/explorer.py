"""Chapter 10's reward explorer on the website: three scorers on kinds of answers, precomputed.

The same :func:`course_lib.feedback.widget.scores_html` the notebook's ``reward_explorer("abcd",
"dcbaeee")`` calls; instead of a text box the page offers kinds of response (right, padded,
copied, ...), made from the chosen word; see :mod:`course_lib.static_explorer`.

>>> response("abcd", "padded, no full stop")
'dcbaeee'
>>> j, g, f = explorer().value(word="abcd", kind="padded, no full stop")
>>> j, round(g, 4), round(f, 4)  # not right; 4 of 7 letters, less 0.25; 4/4 + 0.1 x 7
(False, 0.3214, 1.7)
"""

from __future__ import annotations

import html

from course_lib.feedback.tasks import flawed_reward, grade, judge
from course_lib.feedback.widget import scores_html
from course_lib.static_explorer import Control, Explorer

CALL = "reward_explorer("
WORDS = ("abcd", "cafe", "bead")
KINDS = {
    "right": lambda r: r + ".",
    "padded, no full stop": lambda r: r + "eee",  # the notebook's "dcbaeee" for "abcd"
    "padded, then a full stop": lambda r: r + "eeeeee.",
    "copied, not reversed": lambda r: r[::-1] + ".",
    "two letters swapped": lambda r: r[1] + r[0] + r[2:] + ".",
    "one letter short": lambda r: r[:-1] + ".",
    "never stops": lambda r: r,
}


def response(word: str, kind: str) -> str:
    """The response of that kind to ``word``."""
    return KINDS[kind](word[::-1])


def render(word: str, kind: str) -> str:
    r = response(word, kind)
    return f"<p>response: <code>{html.escape(r)}</code></p>" + scores_html(word, r)


def scores(word: str, kind: str) -> list:
    """[judge, grade, flawed proxy reward] of the response."""
    r = response(word, kind)
    return [judge(word, r), grade(word, r), flawed_reward(word, r)]


def explorer() -> Explorer:
    return Explorer(
        "feedback",
        "Explore three scorers of an answer",
        (
            Control("word", "word", WORDS, kind="select"),
            Control("kind", "response", tuple(KINDS), "padded, no full stop", kind="select"),
        ),
        render=render,
        value=scores,
    )
