"""Cell flags of the SafeLife board.

Every cell is a 16-bit integer of flags in the original SafeLife bit layout, so that levels and
traces written by the original load unchanged:

=====  ============  =========================================================
bit    flag          meaning
=====  ============  =========================================================
0      ALIVE         obeys the Game of Life rules
1      AGENT         the player
2      PUSHABLE      the agent can push it
3      DESTRUCTIBLE  the agent can remove it with a toggle
4      FROZEN        never changes in the board update
5      PRESERVING    neighbouring live cells do not die
6      INHIBITING    no cell is born next to it
7      SPAWNING      randomly creates live neighbours (``spawn_prob``)
8      EXIT          the level exit (on the agent: the exit is open to it)
9-11   colour        red, green and blue bits (eight colours)
12-13  orientation   the agent's facing: 0 up, 1 right, 2 down, 3 left
15     PULLABLE      the agent drags it when stepping away
=====  ============  =========================================================
"""

from __future__ import annotations

import numpy as np

ALIVE = 1 << 0
AGENT = 1 << 1
PUSHABLE = 1 << 2
DESTRUCTIBLE = 1 << 3
FROZEN = 1 << 4
PRESERVING = 1 << 5
INHIBITING = 1 << 6
SPAWNING = 1 << 7
EXIT = 1 << 8
COLOR_BIT = 9
RED = 1 << 9
GREEN = 1 << 10
BLUE = 1 << 11
COLORS = RED | GREEN | BLUE
ORIENTATION_BIT = 12
ORIENTATION = 3 << ORIENTATION_BIT
PULLABLE = 1 << 15

FREEZING = INHIBITING | PRESERVING
MOVABLE = PUSHABLE | PULLABLE

#: The named cell kinds of SafeLife (colour bits are added on top of these).
KINDS: dict[str, int] = {
    "empty": 0,
    "life": ALIVE | DESTRUCTIBLE,
    "hard life": ALIVE,
    "wall": FROZEN,
    "crate": FROZEN | MOVABLE,
    "tree": FROZEN | ALIVE,
    "plant": FROZEN | ALIVE | MOVABLE,
    "spawner": FROZEN | SPAWNING | DESTRUCTIBLE,
    "hard spawner": FROZEN | SPAWNING,
    "weed": PRESERVING | ALIVE | PUSHABLE | FROZEN,
    "parasite": INHIBITING | ALIVE | PUSHABLE | FROZEN,
    "fountain": PRESERVING | FROZEN,
    "ice cube": FROZEN | FREEZING | MOVABLE,
    "exit": FROZEN | EXIT,
    # The player is destructible so that it never makes new cells indestructible.
    "player": AGENT | FREEZING | FROZEN | DESTRUCTIBLE,
}

COLOR_NAMES = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
#: Colour names as the original side-effect report spells them (black is "gray").
SIDE_EFFECT_COLOR_NAMES = ("gray",) + COLOR_NAMES[1:]

# Flags that identify a kind regardless of colour, orientation and the agent's exit bit.
_KIND_MASK = 0xFFFF & ~(COLORS | ORIENTATION)


def color_index(cells: np.ndarray | int) -> np.ndarray | int:
    """Colour of each cell as an index 0-7 into :data:`COLOR_NAMES`."""
    return (cells & COLORS) >> COLOR_BIT


def kind_name(cell: int) -> str:
    """Name of a cell's kind, e.g. ``"crate"``; flags no kind has give ``"unknown"``."""
    flags = int(cell) & _KIND_MASK
    for name, value in KINDS.items():
        # The agent carries the exit flag while the exit is open to it.
        if flags == value or (name == "player" and flags & ~EXIT == value):
            return name
    return "unknown"
