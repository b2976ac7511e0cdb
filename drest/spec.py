"""Gridworld specifications: the data of one shutdown gridworld and its plain-text format.

The format, one file per gridworld::

    # comment lines start with '#'; '#' also starts a comment at the end of a line
    name: My world       # optional
    length: 4            # default number of moves before shutdown (required)
    gamma: 0.9           # optional temporal discount for USEFULNESS (default 1)
    bumps_use_moves: no  # optional: does a move into a wall or the edge use up one of the
                         # moves before shutdown? (default no: it has no effect but the time
                         # step it takes)
    grid:
      A  .  C1 .
      W  B4 .  C2

Grid tokens, separated by spaces: ``.`` empty, ``W`` wall, ``A`` agent start (exactly one),
``C<v>`` a coin of positive value v, ``B<d>`` a button that delays shutdown by d moves.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from safety_rl_common.errors import UserError

Cell = tuple[int, int]  # (row, col), row 0 at the top


class SpecError(UserError):
    """A malformed gridworld specification; the message names the source, line and column."""

    def __init__(
        self,
        message: str,
        source: str = "<spec>",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        where = source
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class GridSpec:
    """One shutdown gridworld. Coins and buttons are listed in reading order (row, then column);
    that order is the order of their presence flags in the observation."""

    walls: frozenset[Cell]
    coins: tuple[tuple[Cell, float], ...]
    buttons: tuple[tuple[Cell, int], ...]
    agent: Cell
    height: int
    width: int
    length: int
    gamma: float = 1.0
    bumps_use_moves: bool = False
    name: str = field(default="gridworld", compare=False)

    def __post_init__(self) -> None:
        if self.length < 1:
            raise SpecError(f"length must be a positive integer, got {self.length}", self.name)
        if not 0.0 < self.gamma <= 1.0:
            raise SpecError(f"gamma must be in (0, 1], got {self.gamma}", self.name)
        cells = [self.agent] + [c for c, _ in self.coins] + [c for c, _ in self.buttons]
        if len(set(cells)) != len(cells) or set(cells) & self.walls:
            raise SpecError("agent, coins, buttons and walls must occupy distinct cells", self.name)
        for r, c in cells + list(self.walls):
            if not (0 <= r < self.height and 0 <= c < self.width):
                raise SpecError(
                    f"cell {(r, c)} lies outside the {self.height}x{self.width} grid", self.name
                )
        if any(not (v > 0 and math.isfinite(v)) for _, v in self.coins):
            raise SpecError("coin values must be positive and finite", self.name)
        if not math.isfinite(sum(v for _, v in self.coins)):
            raise SpecError(
                "the coin values add up to more than the largest float "
                f"({sys.float_info.max:.3g}); scale them down",
                self.name,
            )
        if any(d < 1 for _, d in self.buttons):
            raise SpecError("button delays must be positive integers", self.name)
        row, col = self.agent
        neighbours = ((row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1))
        if not self.bumps_use_moves and not any(
            0 <= r < self.height and 0 <= c < self.width and (r, c) not in self.walls
            for r, c in neighbours
        ):
            raise SpecError(
                f"the agent at {self.agent} is walled in: it can never move, so it "
                "is never shut down (free a neighbouring cell, or set "
                "bumps_use_moves: yes)",
                self.name,
            )

    def to_text(self) -> str:
        """The spec in the plain-text format (``parse_spec(spec.to_text()) == spec``)."""
        grid = [["." for _ in range(self.width)] for _ in range(self.height)]
        for r, c in self.walls:
            grid[r][c] = "W"
        for (r, c), v in self.coins:
            grid[r][c] = f"C{v:g}" if float(f"{v:g}") == v else f"C{v!r}"
        for (r, c), d in self.buttons:
            grid[r][c] = f"B{d}"
        grid[self.agent[0]][self.agent[1]] = "A"
        widest = max(len(tok) for row in grid for tok in row)
        rows = ["  " + " ".join(tok.ljust(widest) for tok in row).rstrip() for row in grid]
        bumps = "yes" if self.bumps_use_moves else "no"
        return (
            f"name: {self.name}\nlength: {self.length}\ngamma: {self.gamma!r}\n"
            f"bumps_use_moves: {bumps}\ngrid:\n" + "\n".join(rows) + "\n"
        )


_NUMBER = re.compile(r"^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_KEYS = ("name", "length", "gamma", "bumps_use_moves")
_BOOLEANS = {"yes": True, "true": True, "no": False, "false": False}


def _positive_number(text: str, what: str, source: str, line: int, col: int) -> float:
    if not _NUMBER.match(text):
        raise SpecError(f"bad number {text!r} in {what}", source, line, col)
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise SpecError(f"{what} must be positive, got {text!r}", source, line, col)
    return value


def parse_spec(text: str, source: str = "<spec>") -> GridSpec:
    """Parse the plain-text gridworld format; any problem raises :class:`SpecError`."""
    header: dict[str, tuple[str, int, int]] = {}
    grid_rows: list[tuple[int, list[tuple[str, int]]]] = []  # (line number, [(token, column)])
    in_grid = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if in_grid:
            tokens = [(m.group(), m.start() + 1) for m in re.finditer(r"\S+", line)]
            grid_rows.append((lineno, tokens))
            continue
        key, sep, value = line.partition(":")
        key_col = len(line) - len(line.lstrip()) + 1
        key = key.strip()
        if not sep:
            raise SpecError(
                f"expected 'key: value' or 'grid:', got {line.strip()!r}", source, lineno, key_col
            )
        if key == "grid":
            if value.strip():
                raise SpecError(
                    "'grid:' must be alone on its line; rows follow below", source, lineno, key_col
                )
            in_grid = True
            continue
        if key not in _KEYS:
            raise SpecError(
                f"unknown key {key!r} (known: {', '.join(_KEYS)}, grid)", source, lineno, key_col
            )
        if key in header:
            raise SpecError(f"duplicate key {key!r}", source, lineno, key_col)
        value_col = line.index(":") + 2 + (len(value) - len(value.lstrip()))
        header[key] = (value.strip(), lineno, value_col)
    if not in_grid:
        raise SpecError("missing 'grid:' section", source)
    if not grid_rows:
        raise SpecError("the grid has no rows", source)
    if "length" not in header:
        raise SpecError("missing required key 'length'", source)

    value, line, col = header["length"]
    if not re.fullmatch(r"\d+", value) or int(value) < 1:
        raise SpecError(f"length must be a positive integer, got {value!r}", source, line, col)
    length = int(value)
    gamma = 1.0
    if "gamma" in header:
        value, line, col = header["gamma"]
        gamma = _positive_number(value, "gamma", source, line, col)
        if gamma > 1:
            raise SpecError(f"gamma must be in (0, 1], got {value!r}", source, line, col)
    bumps_use_moves = False
    if "bumps_use_moves" in header:
        value, line, col = header["bumps_use_moves"]
        if value.lower() not in _BOOLEANS:
            raise SpecError(f"bumps_use_moves must be yes or no, got {value!r}", source, line, col)
        bumps_use_moves = _BOOLEANS[value.lower()]
    name = header["name"][0] if "name" in header else Path(source).stem

    width = len(grid_rows[0][1])
    walls: set[Cell] = set()
    coins: list[tuple[Cell, float]] = []
    buttons: list[tuple[Cell, int]] = []
    agents: list[tuple[Cell, int, int]] = []
    for r, (lineno, tokens) in enumerate(grid_rows):
        if len(tokens) != width:
            col = tokens[min(len(tokens), width) - 1][1] if tokens else 1
            raise SpecError(
                f"ragged grid: row has {len(tokens)} cells, the first row has {width}",
                source,
                lineno,
                col,
            )
        for c, (tok, col) in enumerate(tokens):
            if tok == ".":
                continue
            if tok == "W":
                walls.add((r, c))
            elif tok == "A":
                agents.append(((r, c), lineno, col))
            elif tok.startswith("C"):
                coins.append(((r, c), _positive_number(tok[1:], "coin value", source, lineno, col)))
            elif tok.startswith("B"):
                if not re.fullmatch(r"\d+", tok[1:]) or int(tok[1:]) < 1:
                    raise SpecError(
                        f"bad button delay in {tok!r}: need a positive integer", source, lineno, col
                    )
                buttons.append(((r, c), int(tok[1:])))
            else:
                raise SpecError(
                    f"unknown token {tok!r} (use . W A C<value> B<delay>)", source, lineno, col
                )
    if not agents:
        raise SpecError("no agent start 'A' in the grid", source)
    if len(agents) > 1:
        _, line, col = agents[1]
        raise SpecError("more than one agent start 'A'", source, line, col)
    try:
        return GridSpec(
            walls=frozenset(walls),
            coins=tuple(coins),
            buttons=tuple(buttons),
            agent=agents[0][0],
            height=len(grid_rows),
            width=width,
            length=length,
            gamma=gamma,
            bumps_use_moves=bumps_use_moves,
            name=name,
        )
    except SpecError as error:  # name the file, not the world
        raise SpecError(error.message, source) from None


def load_spec(path: str | Path) -> GridSpec:
    """Read a gridworld spec file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read gridworld file: {exc}", str(path)) from exc
    return parse_spec(text, source=str(path))
