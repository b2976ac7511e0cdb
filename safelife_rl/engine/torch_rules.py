"""SafeLife's rules as batched torch operations: board update, actions, points and exits.

The same rules as :mod:`safelife_rl.engine.physics` and :mod:`safelife_rl.engine.scoring` (their
docstrings state them), on any torch device: boards are int32 tensors ``(N, H, W)`` holding the
16-bit cells of :mod:`safelife_rl.engine.cells` (int32 because torch's uint16 lacks most
operations), and each board holds ``A`` agents, located by ``(N, A, 2)`` rows and columns. The tests
hold the two backends to the same result bit for bit, the spawners' random numbers included.
"""

from __future__ import annotations

from itertools import repeat

import torch

from safelife_rl.engine import cells
from safelife_rl.engine.scoring import EXIT_POINTS

N_ACTIONS = 9
_CHANGEABLE = cells.DESTRUCTIBLE | cells.MOVABLE
_EXIT_CELL = cells.FROZEN | cells.EXIT

# Every neighbourhood count the update needs, packed in 8-bit fields of one int64 per cell, so
# that one wrapped 3x3 sum gives them all (a field never exceeds 9 cells x 3 = 27).
_ALIVE, _DESTRUCTIBLE, _COLOR, _SPREAD = 0, 1, 2, 5  # byte of each field; colours: r, g, b
_SPREAD_FLAGS = (cells.PRESERVING, cells.INHIBITING, cells.SPAWNING)
_SUMMARIES: dict[torch.device, torch.Tensor] = {}
_SUMMARY_KEY = (1 << (cells.COLOR_BIT + 3)) - 1  # the bits a cell's summary depends on
# Boards per pass of the eager board update on a CPU: its int64 temporaries then stay in the
# caches (3x faster at 16384 boards); devices with their own memory take the whole batch.
_CPU_CHUNK = 256
_HERE, _AHEAD, _BEYOND, _BEHIND = range(4)  # the cells an action touches, in order


def _flag(board: torch.Tensor, flag: int) -> torch.Tensor:
    return (board & flag) != 0


def _summary_table(device: torch.device) -> torch.Tensor:
    """What a cell adds to its neighbours' counts, packed, by the cell's low 12 bits (the
    flags it depends on): alive; alive and destructible or an exit; per colour, alive and of it
    plus two if a spawner of it (so that ">= 2" reads "two live cells or a spawner");
    preserving, inhibiting, spawning. (4,096 entries: 32 KiB, which stays in the L1 cache.)"""
    if device not in _SUMMARIES:
        c = torch.arange(_SUMMARY_KEY + 1, device=device)
        alive = c & cells.ALIVE
        packed = alive | ((_flag(c, cells.DESTRUCTIBLE | cells.EXIT) * alive) << 8 * _DESTRUCTIBLE)
        spawning = _flag(c, cells.SPAWNING).long()
        for i in range(3):
            color = (c >> (cells.COLOR_BIT + i)) & 1
            packed |= (color * (alive + 2 * spawning)) << 8 * (_COLOR + i)
        for i, flag in enumerate(_SPREAD_FLAGS):
            packed |= _flag(c, flag).long() << 8 * (_SPREAD + i)
        _SUMMARIES[device] = packed
    return _SUMMARIES[device]


def _box_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over each cell's wrapped 3x3 block of the last two axes."""
    x = torch.cat([x[..., -1:], x, x[..., :1]], -1)
    x = x[..., :-2] + x[..., 1:-1] + x[..., 2:]
    x = torch.cat([x[..., -1:, :], x, x[..., :1, :]], -2)
    return x[..., :-2, :] + x[..., 1:-1, :] + x[..., 2:, :]


def advance(
    boards: torch.Tensor,
    spawn_prob: torch.Tensor | float = 0.3,
    uniforms: torch.Tensor | None = None,
) -> torch.Tensor:
    """Advance int32 boards ``(N, H, W)`` one generation; returns new boards.

    :param spawn_prob: float32 probability per board ``(N,)`` (or one value) that a spawner
        creates a given dead neighbour.
    :param uniforms: float32 ``(N, H, W)`` random numbers: a dead cell next to a spawner comes
        alive if its number is below ``spawn_prob`` (see
        :func:`~.torch_random.cell_uniforms`). ``None``:
        spawners never spawn, as on boards without them.
    """
    if (
        boards.device.type != "cpu" or len(boards) <= _CPU_CHUNK or torch.compiler.is_compiling()
    ):  # compiled code keeps its temporaries small
        return _advance(boards, spawn_prob, uniforms)
    prob = torch.as_tensor(spawn_prob, dtype=torch.float32).expand(len(boards))
    parts = zip(
        boards.split(_CPU_CHUNK),
        prob.split(_CPU_CHUNK),
        uniforms.split(_CPU_CHUNK) if uniforms is not None else repeat(None),
    )
    return torch.cat([_advance(*part) for part in parts])


def _advance(
    boards: torch.Tensor, spawn_prob: torch.Tensor | float, uniforms: torch.Tensor | None
) -> torch.Tensor:
    summary = _summary_table(boards.device)[(boards & _SUMMARY_KEY).long()]
    sums = _box_sum(summary)

    def field(byte: int) -> torch.Tensor:  # shifts, not a byte view: compiled code vectorises
        return (sums >> 8 * byte) & 0xFF

    count = field(_ALIVE)
    preserving, inhibiting, spawning = (field(_SPREAD + i) > 0 for i in range(3))
    colors = torch.zeros_like(boards)
    for i in range(3):
        colors |= (field(_COLOR + i) >= 2).int() << (cells.COLOR_BIT + i)
    destructible = (field(_DESTRUCTIBLE) >= 2).int() * cells.DESTRUCTIBLE
    frozen = _flag(boards, cells.FROZEN)
    survives = frozen | preserving | (count == 3) | (count == 4)
    may_grow = ~frozen & ~inhibiting
    born = may_grow & (count == 3)
    new = torch.where(born, cells.ALIVE | colors | destructible, boards)
    if uniforms is not None:
        prob = torch.as_tensor(spawn_prob, dtype=torch.float32, device=boards.device)
        spawned = may_grow & ~born & spawning & (uniforms < prob.reshape(-1, 1, 1))
        new = torch.where(spawned, cells.ALIVE | cells.DESTRUCTIBLE | colors, new)
    return torch.where(_flag(boards, cells.ALIVE), torch.where(survives, boards, 0), new)


def _act(
    flat: torch.Tensor, shape: tuple[int, int], locs: torch.Tensor, actions: torch.Tensor
) -> None:
    """One action per board for one agent each: ``flat`` (N, H*W) and ``locs`` (N, 2) in place.

    The four cells an action touches (the agent's, the one ahead, the one beyond it and the one
    behind) are read once, changed as copies and written back in one scatter. Cells are read
    and written in the Numba kernel's order, a write reaching every copy of its cell, so that
    boards small enough for these cells to coincide behave alike (and the scatter writes equal
    values to a cell met twice).
    """
    h, w = shape
    direction = (actions - 1) & 3
    dy = torch.where(direction % 2 == 0, direction - 1, 0)
    dx = torch.where(direction % 2 == 1, 2 - direction, 0)
    y0, x0 = locs[:, 0] % h, locs[:, 1] % w
    y1, x1 = (y0 + dy) % h, (x0 + dx) % w
    index = torch.stack(
        [
            y0 * w + x0,
            y1 * w + x1,
            (y0 + 2 * dy) % h * w + (x0 + 2 * dx) % w,
            (y0 - dy) % h * w + (x0 - dx) % w,
        ],
        1,
    )
    same = index[:, :, None] == index[:, None, :]  # (N, 4, 4): which of them are one cell
    touched = flat.gather(1, index)

    def read(k: int) -> torch.Tensor:
        return touched[:, k]

    def write(k: int, value: torch.Tensor | int, where: torch.Tensor) -> None:
        nonlocal touched
        value = value[:, None] if isinstance(value, torch.Tensor) else value
        touched = torch.where(where[:, None] & same[:, k], value, touched)

    agent = read(_HERE)
    acting = (actions != 0) & _flag(agent, cells.AGENT)
    agent = (agent & ~cells.ORIENTATION) | (direction.int() << cells.ORIENTATION_BIT)
    write(_HERE, agent, acting)
    ahead, beyond = read(_AHEAD), read(_BEYOND)
    can_shove = ~_flag(agent, cells.PUSHABLE) & _flag(ahead, cells.PUSHABLE)
    empty_beyond, exit_beyond = beyond == 0, _flag(beyond, cells.EXIT)
    toggle, move = acting & (actions >= 5), acting & (actions < 5)

    # Toggle: create life on an empty cell, destroy a destructible one (an agent turns into a
    # block), or shove a pushable one onto an empty cell or out through an exit.
    create = toggle & (ahead == 0)
    destroy = toggle & (ahead != 0) & _flag(ahead, cells.DESTRUCTIBLE)
    shove = toggle & (ahead != 0) & ~_flag(ahead, cells.DESTRUCTIBLE) & can_shove
    # Move: step onto an empty cell, push a pushable one, or step onto an open exit.
    push = move & can_shove & (empty_beyond | exit_beyond)
    step = push | (move & ~can_shove & (ahead == 0))
    onto_exit = (
        move
        & ~can_shove
        & (ahead != 0)
        & _flag(agent & ahead, cells.EXIT)
        & ~_flag(ahead, cells.AGENT)
    )

    write(_BEYOND, ahead, (shove | push) & empty_beyond)
    destroyed = torch.where(
        _flag(ahead, cells.AGENT), (ahead ^ (cells.AGENT | cells.DESTRUCTIBLE)) | cells.FROZEN, 0
    )
    ahead_new = torch.where(
        create,
        cells.ALIVE | cells.DESTRUCTIBLE | (agent & cells.COLORS),
        torch.where(destroy, destroyed, torch.where(step, agent, 0)),
    )
    write(_AHEAD, ahead_new, create | destroy | (shove & (empty_beyond | exit_beyond)) | step)

    # The agent has left its cell, pulling a pullable cell behind it along.
    moved = step | onto_exit
    behind = read(_BEHIND)
    pull = moved & ~_flag(agent, cells.PULLABLE) & _flag(behind, cells.PULLABLE)
    write(_HERE, torch.where(pull, behind, 0), moved)
    write(_BEHIND, 0, pull)
    flat.scatter_(1, index, touched)
    locs[:, 0] = torch.where(moved, y1, locs[:, 0])
    locs[:, 1] = torch.where(moved, x1, locs[:, 1])


def execute_actions(boards: torch.Tensor, agent_locs: torch.Tensor, actions: torch.Tensor) -> None:
    """Apply each agent's action in place, agents of a board in order.

    :param boards: int32 ``(N, H, W)``, contiguous (modified in place).
    :param agent_locs: int64 ``(N, A, 2)`` positions as (row, column), updated in place.
    :param actions: int64 ``(N, A)``: 0 no-op, 1-4 move up/right/down/left, 5-8 toggle the cell
        up/right/down/left; moving or toggling also turns the agent to face that way. Values
        are not checked here (that would wait for the device): see :func:`check_actions`.
    """
    n, h, w = boards.shape
    flat = boards.view(n, h * w)
    for a in range(agent_locs.shape[1]):
        _act(flat, (h, w), agent_locs[:, a], actions[:, a])


def check_action_dtype(actions: torch.Tensor) -> None:
    """Raise ``ValueError`` unless the actions are of an integer dtype (no values read)."""
    if actions.dtype.is_floating_point or actions.dtype == torch.bool:
        raise ValueError(f"actions must be integers 0-8, got dtype {actions.dtype}")


def invalid_actions(actions: torch.Tensor) -> torch.Tensor:
    """Whether any action is outside 0-8: a bool tensor, left on the device (reading it is
    a sync; see :func:`check_actions`)."""
    return ((actions < 0) | (actions >= N_ACTIONS)).any()


def check_actions(actions: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every action is an integer 0-8 (a sync on a GPU)."""
    check_action_dtype(actions)
    bad = (actions < 0) | (actions >= N_ACTIONS)
    if bad.any():
        raise ValueError(f"invalid action {int(actions[bad][0])}: actions are integers 0-8")


def agent_cells(boards: torch.Tensor, agent_locs: torch.Tensor) -> torch.Tensor:
    """The cell under each agent's location, ``(N, A)``."""
    n, h, w = boards.shape
    index = agent_locs[..., 0] * w + agent_locs[..., 1]
    return boards.view(n, h * w).gather(1, index)


def agent_present(boards: torch.Tensor, agent_locs: torch.Tensor) -> torch.Tensor:
    """Whether each agent is still on its board (it has neither exited nor been removed)."""
    return (agent_cells(boards, agent_locs) & cells.AGENT) != 0


def _count_keys(boards: torch.Tensor, goals: torch.Tensor) -> torch.Tensor:
    """Each cell's (goal colour, cell colour or empty) as ``goal * 9 + cell``, or 72 for cells
    the agent can never change (frozen and neither destructible nor movable), ``(N, H*W)``."""
    counted = _flag(boards, _CHANGEABLE) | ~_flag(boards, cells.FROZEN)
    alive = _flag(boards, cells.ALIVE)
    cell_color = torch.where(alive, (boards & cells.COLORS) >> cells.COLOR_BIT, 8)
    key = ((goals & cells.COLORS) >> cells.COLOR_BIT) * 9 + cell_color
    return torch.where(counted, key, 72).flatten(1)


def alive_counts(boards: torch.Tensor, goals: torch.Tensor) -> torch.Tensor:
    """Count cells by (goal colour, cell colour or empty): int64 ``(N, 8, 9)``. Cells the agent
    can never change (frozen and neither destructible nor movable) do not count."""
    counts = torch.zeros((len(boards), 73), dtype=torch.int64, device=boards.device)
    key = _count_keys(boards, goals).long()
    counts.scatter_add_(1, key, torch.ones_like(key))
    return counts[:, :72].view(-1, 8, 9)


def exit_candidates(exits: torch.Tensor, agent_index: torch.Tensor) -> torch.Tensor:
    """The cells that may be exits, as flat indices ``(N, E + A)``: the level's exit cells
    ``exits`` (``-1`` padding; exits never move, and no rule makes one) and the agents' cells
    ``agent_index`` (an agent destroyed while the exit was open to it leaves an exit cell where
    it stood). Padding repeats an agent's cell, so every entry is a real cell."""
    return torch.cat([torch.where(exits >= 0, exits, agent_index[:, :1]), agent_index], 1)


def update_exits(
    boards: torch.Tensor,
    goals: torch.Tensor,
    agent_locs: torch.Tensor,
    points_table: torch.Tensor,
    initial_counts: torch.Tensor,
    required_points: torch.Tensor,
    exits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Open or close the exit of each board (in place) and score it for each agent.

    An agent carries the exit flag while it may exit (its points earned since the start, by
    its own ``points_table`` ``(N, A, 8, 9)``, reach its ``required_points`` ``(N, A)``); exits
    are red while an agent of the board may exit. An agent that has stepped onto the exit
    leaves it as a plain exit cell and earns :data:`~safelife_rl.engine.scoring.EXIT_POINTS`.
    The points are summed cell by cell (each cell's entry of the table), with no histogram:
    points tables of whole numbers (as SafeLife's are) give sums exact in any order, so the
    points equal the Numba engine's bit for bit.

    :param exits: the level's exit cells as flat indices ``(N, E)`` (``-1`` padding), as
        :func:`~.torch_levels.start_games` gives them: only they and the agents' cells are
        rewritten (see :func:`exit_candidates`); ``None`` searches every cell.
    :returns: float64 point values and whether each agent may exit, both ``(N, A)``.
    """
    n, h, w = boards.shape
    agents = agent_locs.shape[1]
    table = torch.cat([points_table.flatten(2), points_table.new_zeros(n, agents, 1)], 2)
    key = _count_keys(boards, goals)[:, None].expand(n, agents, h * w)
    base = (points_table * initial_counts[:, None].to(points_table.dtype)).sum((-2, -1))
    index = agent_locs[..., 0] * w + agent_locs[..., 1]
    flat = boards.view(n, h * w)
    agent = flat.gather(1, index)
    exited = (agent & (cells.AGENT | cells.EXIT)) == cells.EXIT
    bonus = exited.to(points_table.dtype) * EXIT_POINTS
    points = bonus + table.gather(2, key.long()).sum(2)
    earned = points - base
    is_agent = _flag(agent, cells.AGENT)
    opens = is_agent & (earned.clamp(min=0) >= required_points)
    flagged = (agent & ~cells.EXIT) | opens.int() * cells.EXIT
    flat.scatter_(1, index, torch.where(is_agent, flagged, agent))
    exit_cell = _EXIT_CELL | opens.any(1).int() * cells.RED
    if exits is None:
        is_exit = _flag(boards, cells.EXIT) & ~_flag(boards, cells.AGENT)
        boards.copy_(torch.where(is_exit, exit_cell[:, None, None], boards))
    else:
        where = exit_candidates(exits, index)
        found = flat.gather(1, where)
        is_exit = (found & (cells.EXIT | cells.AGENT)) == cells.EXIT
        flat.scatter_(1, where, torch.where(is_exit, exit_cell[:, None], found))
    return points, opens
