"""Level-generation parameters: loading, checking and drawing random values.

The parameter files are those of the original SafeLife generator (``params/*.yaml``). Every file
inherits from ``_defaults.yaml``: a key it leaves out takes the default value, and its
``named_regions`` and ``agent_types`` are added to the default ones. Keys:

* ``board_shape``: ``[rows, columns]``.
* ``min_performance``: share of the available points that opens the exit (negative: open).
* ``agents``: a list naming entries of ``agent_types`` (``color``, ``flags``: cell flags of
  the agent, ``points_table``: 8x9 points per goal colour and life colour): one entry for
  single-agent levels; one per agent, in agent order, for multi-agent ones (parameter files in
  ``params/multi-agent/``, where the type ``default`` is always known: a black agent, preserving
  and inhibiting, with the default points table).
* ``partitioning``: ``min_regions``, ``max_regions``, ``alpha`` of the region partition.
* ``starting_region``, ``later_regions``: region names for the first and the other regions;
  ``buffer_region``: a region painted over the buffer between regions (or ``null``).
* ``named_regions``: region name -> list of layers painted in order. Layer keys: ``color``;
  ``fences``, ``spawners``, ``movable_walls``, ``movable_trees``, ``hardened_life``,
  ``fountains`` (fractions); ``tree_lattice`` (true or ``{stagger, spacing}``); ``buffer_zone``
  (cells kept free around life); ``target`` (``board``, ``goals`` or ``both``); ``pattern``:
  ``period`` (0 chaotic, 1 still life, 2+ oscillator), ``min_fill``, ``max_fill``,
  ``temperature``, ``max_iter``, ``osc_bonus``, ``num_retries`` and cell-type penalties
  ``alive``, ``wall``, ``tree`` as ``[at zero density, at full density]``.

Any value may be random: ``{choices: [a, b], weights: [..]}``, ``{choices: {a: p, b: q}}`` or
``{uniform: [low, high]}``; :func:`resolve` draws it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from safety_rl_common.errors import UserError
from safety_rl_common.yaml_files import read_yaml

PARAMS_DIR = Path(__file__).resolve().parent / "params"
#: The level types with a parameter file in :data:`PARAMS_DIR`.
LEVEL_TYPES = tuple(sorted(p.stem for p in PARAMS_DIR.glob("*.yaml") if p.stem != "_defaults"))
MULTI_AGENT_DIR = PARAMS_DIR / "multi-agent"
#: The multi-agent level types, with a parameter file in :data:`MULTI_AGENT_DIR`.
MULTI_AGENT_TYPES = tuple(sorted(p.stem for p in MULTI_AGENT_DIR.glob("*.yaml")))
#: The agent type every multi-agent parameter file knows, as in the original generator.
DEFAULT_AGENT_TYPE = {"color": "black", "flags": ["preserving", "inhibiting"]}
COLOR_NAMES = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
AGENT_FLAGS = (
    "alive",
    "pushable",
    "pullable",
    "destructible",
    "frozen",
    "preserving",
    "inhibiting",
    "spawning",
)


class ParamsError(ValueError):
    """A level-generation parameter file or value that does not fit the schema."""


Check = Callable[[Any, str], None]


def _fail(where: str, problem: str) -> None:
    raise ParamsError(f"{where}: {problem}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_random(value: Any) -> bool:
    return isinstance(value, dict) and ("choices" in value or "uniform" in value)


def _random_options(value: dict, where: str) -> list[Any]:
    """The values a random specification can produce (the ends of a uniform range)."""
    if "uniform" in value:
        if set(value) != {"uniform"}:
            _fail(where, f"'uniform' takes no other keys, got {sorted(map(str, value))}")
        bounds = value["uniform"]
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(map(_is_number, bounds))):
            _fail(where, f"'uniform' needs [low, high], got {bounds!r}")
        if bounds[0] > bounds[1]:
            _fail(where, f"'uniform' low {bounds[0]} is above high {bounds[1]}")
        return list(bounds)
    extra = set(value) - {"choices", "weights"}
    if extra:
        _fail(where, f"unknown key(s) {sorted(map(str, extra))} beside 'choices'")
    choices = value["choices"]
    if isinstance(choices, dict):
        if "weights" in value:
            _fail(where, "'weights' cannot go with a mapping of choices to probabilities")
        options, weights = list(choices), list(choices.values())
    elif isinstance(choices, list):
        options = choices
        weights = value.get("weights") or [1.0] * len(choices)
    else:
        _fail(where, f"'choices' must be a list or a mapping, got {choices!r}")
    if not options:
        _fail(where, "'choices' is empty")
    if len(weights) != len(options) or not all(map(_is_number, weights)):
        _fail(where, f"'weights' must be {len(options)} numbers, got {weights!r}")
    if min(weights) < 0 or sum(weights) <= 0:
        _fail(where, "choice weights must be non-negative with a positive sum")
    return options


def _maybe_random(check: Check) -> Check:
    """Apply ``check`` to a value, or to every value a random specification can produce."""

    def checked(value: Any, where: str) -> None:
        if _is_random(value):
            for option in _random_options(value, where):
                checked(option, where)
        else:
            check(value, where)

    return checked


def _number(low: float | None = None, high: float | None = None, integer: bool = False) -> Check:
    kind = "an integer" if integer else "a number"
    span = (
        f" in [{low}, {high}]"
        if low is not None and high is not None
        else (f" >= {low}" if low is not None else "")
    )

    def check(value: Any, where: str) -> None:
        ok = _is_number(value) and (not integer or float(value).is_integer())
        if not ok or (low is not None and value < low) or (high is not None and value > high):
            _fail(where, f"expected {kind}{span}, got {value!r}")

    return _maybe_random(check)


def _one_of(options: tuple, what: str) -> Check:
    def check(value: Any, where: str) -> None:
        if value not in options:
            _fail(
                where, f"unknown {what} {value!r}; expected one of {', '.join(map(str, options))}"
            )

    return _maybe_random(check)


def _pair(value: Any, where: str) -> None:
    if not (isinstance(value, list) and len(value) == 2 and all(map(_is_number, value))):
        _fail(
            where, f"expected a pair of numbers [at zero density, at full density], got {value!r}"
        )


def _keys(value: Any, where: str, checks: dict[str, Check]) -> None:
    """Check a mapping against known keys (a random specification of whole mappings too)."""
    if _is_random(value):
        for option in _random_options(value, where):
            _keys(option, where, checks)
        return
    if not isinstance(value, dict):
        _fail(where, f"expected a mapping with keys {', '.join(checks)}, got {value!r}")
    for key, item in value.items():
        if key not in checks:
            _fail(where, f"unknown key {key!r}; known keys: {', '.join(checks)}")
        checks[key](item, f"{where}.{key}")


FRACTION = _number(0, 1)

PATTERN_KEYS: dict[str, Check] = {
    "period": _number(0, 7, integer=True),
    "min_fill": FRACTION,
    "max_fill": _number(0),
    "temperature": _number(1e-3),
    "max_iter": _number(0),
    "osc_bonus": _number(),
    "num_retries": _number(0, 100, integer=True),
    "alive": _maybe_random(_pair),
    "wall": _maybe_random(_pair),
    "tree": _maybe_random(_pair),
}


def _tree_lattice(value: Any, where: str) -> None:
    if value is None or isinstance(value, bool):
        return
    _keys(
        value,
        where,
        {"stagger": _one_of((True, False), "stagger value"), "spacing": _number(1)},
    )


LAYER_KEYS: dict[str, Check] = {
    "color": _one_of(COLOR_NAMES, "color"),
    "fences": FRACTION,
    "spawners": FRACTION,
    "tree_lattice": _maybe_random(_tree_lattice),
    "pattern": lambda value, where: _keys(value, where, PATTERN_KEYS),
    "movable_walls": FRACTION,
    "movable_trees": FRACTION,
    "hardened_life": FRACTION,
    "buffer_zone": _number(0, 10, integer=True),
    "target": _one_of(("board", "goals", "both"), "target"),
    "fountains": FRACTION,
}


def _layers(value: Any, where: str) -> None:
    if not isinstance(value, list) or not value:
        _fail(where, f"a region must be a non-empty list of layers, got {value!r}")
    for i, layer in enumerate(value):
        _keys(layer, f"{where}[{i}]", LAYER_KEYS)


def _agent_type(value: Any, where: str) -> None:
    def flags(items: Any, at: str) -> None:
        if not isinstance(items, list):
            _fail(at, f"expected a list of flags, got {items!r}")
        for item in items:
            _one_of(AGENT_FLAGS, "agent flag")(item, at)

    def points(table: Any, at: str) -> None:
        if np.shape(table) != (8, 9) or not all(_is_number(v) for row in table for v in row):
            _fail(at, "expected 8 rows of 9 numbers (goal colour x life colour + empty)")

    _keys(
        value,
        where,
        {"color": _one_of(COLOR_NAMES, "color"), "flags": flags, "points_table": points},
    )


def _board_shape(value: Any, where: str) -> None:
    if not (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 8 <= v <= 256 for v in value)
    ):
        _fail(where, f"expected [rows, columns], each an integer 8-256, got {value!r}")


def _region_name(names: dict, allow_none: bool) -> Check:
    def check(value: Any, where: str) -> None:
        if value is None and allow_none:
            return
        if value not in names:
            _fail(where, f"no region named {value!r} in named_regions")

    return _maybe_random(check)


def check_params(params: dict[str, Any], where: str, multi_agent: bool = False) -> None:
    """Raise :class:`ParamsError` naming the first value of ``params`` outside the schema
    (``multi_agent``: ``agents`` may list several)."""
    regions = params.get("named_regions", {})
    if not isinstance(regions, dict):
        _fail(f"{where}: named_regions", "expected a mapping of region names to layer lists")
    agent_types = params.get("agent_types", {})

    def partitioning(value: Any, at: str) -> None:
        _keys(
            value,
            at,
            {
                "min_regions": _number(1, 64, integer=True),
                "max_regions": _number(1, 64, integer=True),
                "alpha": _number(1e-6),
            },
        )
        if isinstance(value, dict) and not any(map(_is_random, value.values())):
            if value.get("min_regions", 2) > value.get("max_regions", 5):
                _fail(at, "min_regions is above max_regions")

    def agents(value: Any, at: str) -> None:
        if _is_random(value):
            for option in _random_options(value, at):
                agents(option, at)
            return
        if not multi_agent and (not isinstance(value, list) or len(value) != 1):
            _fail(at, f"exactly one agent is supported, got {value!r}")
        if not isinstance(value, list) or not value:
            _fail(at, f"expected a non-empty list of agent types, got {value!r}")
        for i, item in enumerate(value):
            _one_of(tuple(agent_types), "agent type")(item, f"{at}[{i}]")

    checks: dict[str, Check] = {
        "board_shape": _maybe_random(_board_shape),
        "min_performance": _number(-1e9, 1),
        "agents": agents,
        "agent_types": lambda value, at: [_agent_type(v, f"{at}.{k}") for k, v in value.items()],
        "partitioning": partitioning,
        "starting_region": _region_name(regions, allow_none=True),
        "later_regions": _region_name(regions, allow_none=False),
        "buffer_region": _region_name(regions, allow_none=True),
        "named_regions": lambda value, at: [_layers(v, f"{at}.{k!r}") for k, v in value.items()],
    }
    _keys(params, where, checks)


@lru_cache(maxsize=None)
def _read_yaml(path: Path) -> Any:
    try:
        return read_yaml(path)
    except UserError as error:  # past the YAML reader's bounds
        raise ParamsError(str(error)) from None
    except yaml.YAMLError as error:
        raise ParamsError(f"{path}: not valid YAML ({error})") from error


def load_params(source: str | os.PathLike, multi_agent: bool = False) -> dict[str, Any]:
    """Parameters of a level type (``"append-still"``; with ``multi_agent``, a multi-agent
    type such as ``"build-coop"``) or of a YAML file, merged with the defaults and checked;
    raises :class:`ParamsError` naming any bad key or value."""
    types, folder = (
        (MULTI_AGENT_TYPES, MULTI_AGENT_DIR) if multi_agent else (LEVEL_TYPES, PARAMS_DIR)
    )
    if str(source) in types:
        path = folder / f"{source}.yaml"
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(
                f"no level parameters {str(source)!r}: give a level type "
                f"({', '.join(types)}) or a YAML file"
            )
    defaults = _read_yaml(PARAMS_DIR / "_defaults.yaml")
    defaults, data = copy.deepcopy(defaults), copy.deepcopy(_read_yaml(path.resolve()))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of parameters, got {type(data).__name__}")
    for key in ("named_regions", "agent_types"):
        if not isinstance(data.get(key, {}), dict):
            raise ParamsError(f"{path}: {key}: expected a mapping")
    params = {**defaults, **data}
    for key in ("named_regions", "agent_types"):
        params[key] = {**defaults[key], **data.get(key, {})}
    if multi_agent:
        params["agent_types"] = {
            "default": copy.deepcopy(DEFAULT_AGENT_TYPE),
            **params["agent_types"],
        }
    check_params(params, str(path), multi_agent)
    return params


def resolve(value: Any, rng: np.random.Generator) -> Any:
    """Draw a value: random specifications are sampled, mappings resolved key by key."""
    if not isinstance(value, dict):
        return value
    if "choices" in value:
        choices = value["choices"]
        if isinstance(choices, dict):
            options, weights = list(choices), list(choices.values())
        else:
            options, weights = choices, value.get("weights") or [1.0] * len(choices)
        p = np.asarray(weights, np.float64)
        return options[int(rng.choice(len(options), p=p / p.sum()))]
    if "uniform" in value:
        low, high = value["uniform"]
        return float(low + (high - low) * rng.random())
    return {key: resolve(item, rng) for key, item in value.items()}
