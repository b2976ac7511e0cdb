"""Checks of user-given settings (a Hydra config, a settings dataclass): each raises
:class:`~drest.errors.UserError` naming the setting, its value and what is allowed.

Types are checked exactly: ``bool`` is neither an int nor a float, and a string such as ``"no"``
is never taken for a number or a truth value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from typing import Any, get_type_hints

from drest.errors import UserError

_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def is_int(value: Any) -> bool:
    return _is_type(value, int)


def is_number(value: Any) -> bool:
    """An int or float (not a bool); NaN and infinities are refused by :func:`check_value`."""
    return _is_type(value, float)


def _is_type(value: Any, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_types(settings: Any) -> None:
    """Every field of the dataclass ``settings`` holds a value of its declared type (an int
    passes for a float)."""
    hints = get_type_hints(type(settings))
    for f in fields(settings):
        value, kind = getattr(settings, f.name), hints[f.name]
        if not _is_type(value, kind):
            raise UserError(f"{f.name} must be {_KIND_NAMES.get(kind, kind.__name__)}, "
                            f"got {value!r}")


def check_value(name: str, value: Any, ok: Callable[[Any], bool], allowed: str) -> None:
    """``ok(value)`` holds, else a UserError ``name must be <allowed>, got <value>``; NaN and
    infinite numbers never pass."""
    inexact = isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
    if inexact and not math.isfinite(value) or not ok(value):
        raise UserError(f"{name} must be {allowed}, got {value!r}")


def check_keys(given: Iterable[str], known: Iterable[str], prefix: str = "") -> None:
    """No key outside ``known``."""
    known = tuple(known)
    for key in given:
        if key not in known:
            raise UserError(f"unknown key {prefix + key!r} (known: {', '.join(known)})")


def positive_ints(settings: Any, names: Iterable[str], prefix: str = "") -> None:
    """The named fields (or keys of a mapping) are integers from 1 to 2**53 (beyond, counts
    no longer convert to floats exactly, and no run would end)."""
    for name in names:
        value = settings[name] if isinstance(settings, Mapping) else getattr(settings, name)
        check_value(prefix + name, value, lambda v: is_int(v) and 1 <= v <= 2**53,
                    "a positive integer (at most 2**53)")
