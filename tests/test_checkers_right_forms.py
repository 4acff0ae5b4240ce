"""Issue 44, item 2, for every chapter's implement checkers: a right answer passes in every form
the exercise texts allow. Each chapter's right answer (the one ``test_grade_checkers`` grades)
is returned as NumPy float64 (as written), a nested list, a float32 array, a float64 tensor and
a float32 tensor; a tuple of results also as a list. Checkers whose answer is a number, a str, a
dict or the learner's pick take their forms in their chapter's tests."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from tests.test_grade_checkers import RIGHT

FORMS = {
    "list": lambda a: a.tolist(),
    "float32 array": lambda a: a.astype(np.float32) if a.dtype == np.float64 else a,
    "float64 tensor": torch.from_numpy,
    "float32 tensor": lambda a: (
        torch.from_numpy(a).float() if a.dtype == np.float64 else torch.from_numpy(a)
    ),
}
#: Forms an exercise's text rules out, and checkers whose forms their chapter's tests cover
#: at a cost of seconds (a model or many cases per call).
NOT_HERE = {
    ("gpt", "cached_step"): {"list", "float32 array", "float64 tensor"},  # tensors; 1 s a call
    ("gpt", "sampling_probs"): {"list", "float64 tensor", "float32 tensor"},  # 2 s a call
    ("long_sequences", "window_attention"): set(FORMS),  # test_long_sequences: 4 forms, 1 s each
}

#: The checkers whose right answer is one number (their forms: the second test).
NUMBERS = {
    ("matmul", "layer_flops"), ("block", "gpt_parameters"), ("gpt", "next_token_loss"),
    ("number_formats", "decode_bfloat16"), ("number_formats", "round_to_bfloat16"),
    ("peft", "top_r_energy"), ("peft", "qlora_gb"), ("text_metrics", "corpus_brevity_penalty"),
    ("text_metrics", "rouge_n_eq12"),
}  # fmt: skip
SLOW = {("gpt", "sampling_probs")}  # 2 s


def _arrays_in(x) -> bool:
    if isinstance(x, tuple | list):
        return any(_arrays_in(v) for v in x)
    return isinstance(x, np.ndarray | torch.Tensor) and np.ndim(x) > 0


def _convert(x, form: str, outer: bool = True):
    if isinstance(x, tuple):
        items = [_convert(v, form, outer=False) for v in x]
        return items if (outer and form == "list") else tuple(items)
    if isinstance(x, torch.Tensor):
        x = x.detach().numpy()
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return FORMS[form](np.ascontiguousarray(x))
    return x


def _cases():
    out = []
    for chapter, right in sorted(RIGHT.items()):
        for name, answers in right().items():
            if len(answers) == 1 and callable(answers[0]) and (chapter, name) not in NUMBERS:
                skip = NOT_HERE.get((chapter, name), set())
                marks = [pytest.mark.slow] if (chapter, name) in SLOW else []
                out.extend(
                    pytest.param(chapter, name, form, marks=marks)
                    for form in FORMS
                    if form not in skip
                )
    return out


@pytest.mark.parametrize(("chapter", "name", "form"), _cases())
def test_a_right_array_answer_passes_in_every_form(chapter, name, form):
    module = importlib.import_module(f"course_lib.{chapter}.exercises")
    (right,) = RIGHT[chapter]()[name]
    returned = []

    def answer(*args, **kwargs):
        result = right(*args, **kwargs)
        returned.append(_arrays_in(result))
        return _convert(result, form)

    outcome = getattr(module, name)(answer)
    if not any(returned):
        return  # a number or a str: its chapter's tests take its forms
    assert outcome.passed, str(outcome)


NUMBER_FORMS = {
    "NumPy": lambda v: np.int64(v) if isinstance(v, int) else np.float64(v),
    "float32 or a whole float": lambda v: float(v) if isinstance(v, int) else np.float32(v),
    "0-d tensor": torch.tensor,
}

#: A bit pattern is an int: its text asks for one, and a float is not a pattern of bits.
NOT_A_NUMBER_FORM = {("number_formats", "round_to_bfloat16"): {"float32 or a whole float"}}


def _number_cases():
    return [
        (chapter, name, form)
        for chapter, name in sorted(NUMBERS)
        for form in NUMBER_FORMS
        if form not in NOT_A_NUMBER_FORM.get((chapter, name), set())
    ]


@pytest.mark.parametrize(("chapter", "name", "form"), _number_cases())
def test_a_right_number_passes_in_every_form(chapter, name, form):
    """A count as an int, a NumPy int, a whole float or a 0-d tensor; a value as a float, NumPy
    float64 or float32 or a 0-d tensor."""
    module = importlib.import_module(f"course_lib.{chapter}.exercises")
    (right,) = RIGHT[chapter]()[name]
    numbers = []

    def answer(*args, **kwargs):
        result = right(*args, **kwargs)
        if isinstance(result, torch.Tensor) and result.ndim == 0:
            result = result.item()
        is_number = isinstance(result, int | float) and not isinstance(result, bool)
        numbers.append(is_number)
        return NUMBER_FORMS[form](result) if is_number else result

    outcome = getattr(module, name)(answer)
    assert numbers and all(numbers), "not a number: take it out of NUMBERS"
    assert outcome.passed, str(outcome)
