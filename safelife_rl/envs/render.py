"""Pictures of SafeLife boards: coloured text for terminals and RGB arrays for video.

In both, the background shows the goal colour under a cell and the glyph shows the cell's kind
in the cell's own colour.
"""

from __future__ import annotations

import numpy as np

from safelife_rl.engine import cells

# kind -> text glyph; the agent is an arrow in its facing direction.
GLYPHS = {
    "empty": " ",
    "life": "z",
    "hard life": "Z",
    "wall": "#",
    "crate": "%",
    "tree": "T",
    "plant": "&",
    "spawner": "s",
    "hard spawner": "S",
    "weed": "@",
    "parasite": "!",
    "fountain": "+",
    "ice cube": "=",
    "exit": "X",
    "unknown": "?",
}
AGENT_GLYPHS = "^>v<"
GLYPHS.update({arrow: arrow for arrow in AGENT_GLYPHS})
# ANSI 256-colour codes per colour index (black, red, green, yellow, blue, magenta, cyan, white).
_ANSI_BACK = (252, 224, 151, 230, 153, 219, 159, 255)
_ANSI_FORE = (16, 160, 28, 136, 21, 91, 30, 244)
# RGB cell colours and the lighter goal tints behind them.
_RGB_CELL = np.array(
    [
        (70, 70, 70),
        (210, 40, 40),
        (30, 160, 50),
        (210, 170, 20),
        (40, 80, 220),
        (170, 50, 190),
        (20, 170, 190),
        (235, 235, 235),
    ],
    np.uint8,
)
_RGB_GOAL = (0.25 * _RGB_CELL + 0.75 * 255).astype(np.uint8)
_RGB_GOAL[0] = (245, 245, 245)


def _kind(cell: int) -> str:
    """The cell's kind name, or for the agent the arrow of its facing."""
    if cell & cells.AGENT:
        return AGENT_GLYPHS[(cell & cells.ORIENTATION) >> cells.ORIENTATION_BIT]
    return cells.kind_name(cell)


def render_ansi(board: np.ndarray, goals: np.ndarray) -> str:
    """The board as lines of text, coloured with ANSI escape codes."""
    lines = []
    for row_cells, row_goals in zip(board, goals):
        parts = []
        for cell, goal in zip(row_cells.tolist(), row_goals.tolist()):
            back = _ANSI_BACK[cells.color_index(goal)]
            fore = _ANSI_FORE[cells.color_index(cell)]
            parts.append(f"\x1b[48;5;{back}m\x1b[38;5;{fore}m{GLYPHS[_kind(cell)]} ")
        lines.append("".join(parts) + "\x1b[0m")
    return "\n".join(lines) + "\n"


def _sprites(size: int) -> dict[str, np.ndarray]:
    """Boolean masks (size x size) for each kind of cell."""
    c = (np.arange(size) + 0.5) / size - 0.5
    y, x = np.meshgrid(c, c, indexing="ij")
    r = np.hypot(x, y)
    square = (np.abs(x) < 0.45) & (np.abs(y) < 0.45)
    border = square & ~((np.abs(x) < 0.3) & (np.abs(y) < 0.3))
    up = (y > -0.42) & (y < 0.38) & (np.abs(x) < (y + 0.42) * 0.55)
    sprites = {
        "empty": np.zeros((size, size), bool),
        "life": r < 0.33,
        "hard life": (r < 0.38) & (r > 0.18),
        "wall": square,
        "crate": border | (np.abs(x - y) < 0.08) & square,
        "tree": (r < 0.4) & ((np.abs(x) < 0.1) | (y < 0.05)),
        "plant": (r < 0.4) & (np.abs(x) < 0.12) | (r < 0.2),
        "spawner": border | (r < 0.15),
        "hard spawner": square & ~(r < 0.25),
        "weed": (np.abs(x) + np.abs(y) < 0.42),
        "parasite": (np.abs(np.abs(x) - np.abs(y)) < 0.1) & (r < 0.45),
        "fountain": ((np.abs(x) < 0.1) | (np.abs(y) < 0.1)) & square,
        "ice cube": border | (np.abs(x + y) < 0.08) & square,
        "exit": border | ((np.abs(x) < 0.15) & (np.abs(y) < 0.15)),
        "unknown": (r > 0.3) & (r < 0.42),
    }
    for turn, name in enumerate(AGENT_GLYPHS):
        sprites[name] = np.rot90(up, k=-turn)
    return sprites


_SPRITE_CACHE: dict[int, tuple[list[str], np.ndarray]] = {}


def render_rgb(board: np.ndarray, goals: np.ndarray, cell_px: int = 12) -> np.ndarray:
    """The board as an ``(H * cell_px, W * cell_px, 3)`` uint8 image."""
    if cell_px not in _SPRITE_CACHE:
        sprites = _sprites(cell_px)
        _SPRITE_CACHE[cell_px] = (list(sprites), np.stack(list(sprites.values())))
    names, masks = _SPRITE_CACHE[cell_px]
    index = {name: i for i, name in enumerate(names)}
    kinds = np.array([index[_kind(cell)] for cell in board.ravel().tolist()])
    kinds = kinds.reshape(board.shape)
    mask = masks[kinds]  # (H, W, px, px)
    fore = _RGB_CELL[cells.color_index(board)][:, :, None, None, :]
    back = _RGB_GOAL[cells.color_index(goals)][:, :, None, None, :]
    image = np.where(mask[..., None], fore, back)  # (H, W, px, px, 3)
    h, w = board.shape
    return image.transpose(0, 2, 1, 3, 4).reshape(h * cell_px, w * cell_px, 3)
