"""Issue 44, items 2 and 4 for what every chapter shares: a right answer in any form the text
allows passes, and a wrong prediction is explained."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.checker import check_prediction, describe


@pytest.mark.parametrize(
    ("prediction", "actual"),
    [
        ((4, 2, 5, 6), (4, 2, 5, 6)),
        ([4, 2, 5, 6], (4, 2, 5, 6)),  # a shape as a list
        ((np.int64(4), 2, 5, 6), (4, 2, 5, 6)),  # NumPy ints
        (torch.Size([4, 2, 5, 6]), (4, 2, 5, 6)),
        (([0.5, 0.5], [float("nan"), float("nan")]), ([0.5, 0.5], [np.nan, np.nan])),  # a pair
        ([np.array([0.5, 0.5]), [np.nan, np.nan]], ([0.5, 0.5], [np.nan, np.nan])),
        ("16", 16.0),  # a number typed as a string
        (" 16 ", 16),
        (np.float32(15.9), 16.0),
        (torch.tensor(16.0), 16.0),
        (np.int64(2000), 2000.0),
        (1.585, float(np.log2(3))),
        (True, True),
        (np.True_, True),
        ("alibi", "alibi"),
    ],
)
def test_a_right_prediction_in_any_form_passes(prediction, actual):
    assert check_prediction(prediction, actual, what="x", rtol=0.01).passed


@pytest.mark.parametrize(
    ("prediction", "actual"),
    [
        ((4, 2, 5, 7), (4, 2, 5, 6)),  # a shape is exact, whatever the tolerance
        ((4, 2, 5), (4, 2, 5, 6)),
        ("16", "sixteen"),
        (1, True),  # a bool is a bool
        ("abc", 16.0),
        (17.0, 16.0),
        ([0.5, 0.5], ([0.5, 0.5], [np.nan, np.nan])),
    ],
)
def test_a_wrong_prediction_fails(prediction, actual):
    assert not check_prediction(prediction, actual, what="x", rtol=0.01).passed


def test_a_wrong_prediction_is_explained_and_a_common_one_named():
    out = check_prediction(
        64, 16.0, what="v", explanation="why: 16", mistakes=[(64, "you did not scale")]
    )
    assert not out.passed
    assert out.details == [
        "you predicted 64; the cell computed 16",
        "64 is what you get if you did not scale",
        "why: 16",
    ]
    out = check_prediction("16", 17.0, what="v")
    assert out.details[0] == "you predicted '16'; the cell computed 17"  # a str shows as one


def test_describe_names_any_value():
    assert describe(np.zeros((2, 3), np.float32)) == "an array of shape (2, 3) (float32)"
    assert describe(torch.zeros(2)) == "a tensor of shape (2,) (float32)"
    assert describe("x" * 100).endswith("...") and describe(b"ab") == "bytes b'ab'"
    assert describe({1: 2}) == "a dict of 1 item" and describe(np.int64(3)) == "the int64 3"
