"""Checks of user-given settings, in one style for all three packages: a bad value is one line
``NAME must be ALLOWED, got VALUE``, an unknown key ``unknown key 'NAME' (known: ...)``, raised
as the one :class:`~safety_rl_common.errors.UserError` by :data:`check`. This module imports
only the standard library and :mod:`.errors`, so importing it loads nothing heavy (no
Gymnasium, no SafeLife ids, no Numba).

Types are checked exactly: ``bool`` is neither an int nor a float, and a string such as ``"no"``
is never taken for a number or a truth value. NumPy's integers and floats pass for ints and
numbers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from typing import Any, get_type_hints

from safety_rl_common.errors import UserError

_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
#: The largest count a setting may hold: beyond, counts no longer convert to floats exactly
#: (and no run would end).
MAX_COUNT = 2**53
#: The largest learning rate taken: Adam moves each weight by about the learning rate per
#: update, so past 1 the updates outgrow the weights (``1e308`` sends them to NaN at once).
MAX_LEARNING_RATE = 1.0


def is_int(value: Any) -> bool:
    """An int or NumPy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or float (NumPy's too), not a bool; NaN and infinities are refused by
    :meth:`Checks.value`."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def kind_name(kind: Any) -> str:
    """What a value of the type ``kind`` is, in words (``int``: "an integer")."""
    return _KIND_NAMES.get(kind, getattr(kind, "__name__", str(kind)))


def _is_type(value: Any, kind: type) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return is_int(value)
    if kind is float:
        return is_number(value)
    return isinstance(value, kind)


class Checks:
    """The checks, raising ``error`` (a package's user error) with the message."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def refuse(self, name: str, value: Any, allowed: str) -> None:
        """Raise ``name must be <allowed>, got <value>``."""
        raise self.error(f"{name} must be {allowed}, got {value!r}")

    def value(self, name: str, value: Any, ok: Callable[[Any], bool], allowed: str) -> None:
        """``ok(value)`` holds, else :meth:`refuse`; NaN and infinite numbers never pass."""
        inexact = isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
        if inexact and not math.isfinite(value) or not ok(value):
            self.refuse(name, value, allowed)

    def keys(self, given: Iterable[Any], known: Iterable[str], prefix: str = "") -> None:
        """No key outside ``known``."""
        known = tuple(known)
        for key in given:
            if key not in known:
                raise self.error(f"unknown key {prefix + str(key)!r} (known: {', '.join(known)})")

    def types(self, settings: Any) -> None:
        """Every field of the dataclass ``settings`` holds a value of its declared type (an
        int passes for a float)."""
        hints = get_type_hints(type(settings))
        for f in fields(settings):
            value, kind = getattr(settings, f.name), hints[f.name]
            if not _is_type(value, kind):
                self.refuse(f.name, value, kind_name(kind))

    def count(self, name: str, value: Any, minimum: int = 1) -> int:
        """``value``, an integer from ``minimum`` to :data:`MAX_COUNT`, as an int."""
        allowed = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        self.value(
            name,
            value,
            lambda v: is_int(v) and minimum <= v <= MAX_COUNT,
            f"{allowed} (at most 2**53)",
        )
        return int(value)

    def counts(self, settings: Any, names: Iterable[str], prefix: str = "") -> None:
        """The named fields (or keys of a mapping) are positive integers (:meth:`count`)."""
        for name in names:
            value = settings[name] if isinstance(settings, Mapping) else getattr(settings, name)
            self.count(prefix + name, value)

    def learning_rate(self, name: str, value: Any) -> float:
        """``value``, a positive number up to :data:`MAX_LEARNING_RATE`, as a float."""
        self.value(
            name,
            value,
            lambda v: is_number(v) and 0 < v <= MAX_LEARNING_RATE,
            f"a positive number up to {MAX_LEARNING_RATE:g} (a learning rate)",
        )
        return float(value)

    def finite(self, name: str, value: Any) -> float:
        """``value``, a finite number, as a float (NaN and infinities pass every ``<``/``>``
        range check unnoticed otherwise)."""
        self.value(name, value, is_number, "a finite number")
        return float(value)

    def finite_everywhere(self, node: Any, key: str = "") -> None:
        """No NaN or infinite number anywhere in ``node`` (plain dicts and lists, as a config
        resolved to containers), naming its key (``a.b.0``)."""
        if isinstance(node, float):
            self.finite(key, node)
        children = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for name, value in children:
            self.finite_everywhere(value, f"{key}.{name}" if key else str(name))


#: The checks of all three packages, raising the one :class:`~.errors.UserError`.
check = Checks(UserError)
