"""The settings checks all three packages share (safety_rl_common.checks): one wording, one
user error."""

import math
import re

import numpy as np
import pytest

from extended_envs.checks import check as extended_envs_check
from safety_rl_common.checks import MAX_COUNT, Checks, check, is_int, is_number
from safety_rl_common.errors import UserError


def test_the_packages_share_one_check_and_one_user_error():
    """One wording and one error for all three packages: the check each uses is the same."""
    assert extended_envs_check is check
    with pytest.raises(UserError) as caught:
        check.value("steps", 0, lambda v: v > 0, "positive")
    assert caught.value.args == ("steps must be positive, got 0",)
    check.value("steps", 3, lambda v: v > 0, "positive")
    with pytest.raises(KeyError, match="x must be a string, got 1"):
        Checks(KeyError).value("x", 1, lambda v: isinstance(v, str), "a string")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_non_finite_numbers_never_pass(value):
    with pytest.raises(ValueError, match=f"^x must be anything, got {re.escape(repr(value))}$"):
        Checks(ValueError).value("x", value, lambda v: True, "anything")


def test_unknown_keys_are_named_with_the_known_ones():
    check = Checks(ValueError)
    check.keys(["a"], ["a", "b"])
    with pytest.raises(ValueError, match=r"^unknown key 'agent.c' \(known: a, b\)$"):
        check.keys(["a", "c"], ["a", "b"], "agent.")


@pytest.mark.parametrize(
    "value, ok",
    [
        (1, True),
        (np.int64(7), True),
        (MAX_COUNT, True),
        (MAX_COUNT + 1, False),
        (0, False),
        (True, False),
        (2.0, False),
        ("3", False),
        (None, False),
    ],
)
def test_counts_are_integers_from_one_to_2_53(value, ok):
    check = Checks(ValueError)
    if ok:
        assert check.count("n", value) == value and type(check.count("n", value)) is int
    else:
        with pytest.raises(
            ValueError, match=r"^n must be a positive integer \(at most 2\*\*53\), got "
        ):
            check.count("n", value)
    with pytest.raises(ValueError, match=r"^n must be an integer >= 2 \(at most 2\*\*53\), got 1$"):
        check.count("n", 1, minimum=2)


def test_finite_everywhere_names_the_path_to_a_bad_number():
    check = Checks(ValueError)
    check.finite_everywhere({"a": [1.0, {"b": 2}], "c": "nan"})
    with pytest.raises(ValueError, match=r"^a\.1\.b must be a finite number, got inf$"):
        check.finite_everywhere({"a": [1.0, {"b": math.inf}]})


def test_types_are_exact():
    assert is_int(np.uint8(3)) and not is_int(True) and not is_int(3.0)
    assert is_number(np.float32(1.5)) and is_number(3) and not is_number(False)
    assert not is_number("1")
