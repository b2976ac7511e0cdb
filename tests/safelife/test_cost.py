"""The safety cost ``info["cost"]`` on the original SafeLife's recorded traces.

An episode's costs must sum to the peak departed weight of its boards (the definition in
:mod:`safelife_rl.engine.departures`), computed here cell by cell from the boards the original
engine recorded, and the device vector env must report the same cost at every step.
"""

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from safelife_rl import Level, SafeLifeEnv
from safelife_rl.engine import cells
from safelife_rl.engine.replay import load_trace
from safelife_rl.envs.multi_agent_env import SafeLifeParallelEnv
from safelife_rl.envs.vector_env import SafeLifeVectorEnv

SHARED = Path(__file__).resolve().parents[1] / "data/safelife"
TRACES = sorted((SHARED / "traces").glob("*.npz"))
MULTI_AGENT_TRACES = sorted((SHARED / "traces-multiagent").glob("*.npz"))
DETERMINISTIC = [t for t in TRACES if not np.load(t)["stochastic"]]
GREEN, YELLOW = 2, 3  # colour indices


def weight_of(cell: int) -> float:
    """A cell's weight, written out from the definition: green life 1, yellow spawner 2."""
    color = (cell >> cells.COLOR_BIT) & 7
    if cell & cells.SPAWNING:
        return 2.0 if color == YELLOW else 0.0
    is_life = cell & cells.ALIVE and not cell & (cells.FROZEN | cells.AGENT | cells.EXIT)
    return 1.0 if is_life and color == GREEN else 0.0


def departed_weight(board, start, goals) -> float:
    """The weight of the cells of ``board`` departed from ``start``, one cell at a time."""
    ignored_bits = cells.AGENT | cells.FREEZING | cells.FROZEN | cells.DESTRUCTIBLE
    # where the agent is and started (an agent that left through the exit is on no board)
    agents = {tuple(p) for b in (board, start) for p in np.argwhere(b & cells.AGENT)}
    total = 0.0
    for (y, x), now in np.ndenumerate(board):
        now, then = int(now), int(start[y, x])
        if (y, x) in agents or (now | then) & cells.EXIT:
            continue
        if now & ~ignored_bits == then & ~ignored_bits:
            continue
        red_life = cells.ALIVE | cells.RED
        if then & red_life == red_life and now & red_life != red_life:
            continue  # red life removed: the reward pays for it
        if goals[y, x] & cells.COLORS and now & cells.ALIVE:
            continue  # a goal filled: the reward pays for it
        total += max(weight_of(now), weight_of(then))
    return total


def peak_weights(boards, goals) -> np.ndarray:
    """The running peak of the departed weight after each step of recorded boards."""
    weights = [departed_weight(b, boards[0], g) for b, g in zip(boards[1:], goals[1:])]
    return np.maximum.accumulate(weights)


def played_costs(level, actions) -> list[float]:
    env = SafeLifeEnv([level], time_limit=len(actions))
    env.reset(seed=0)
    costs = []
    for action in actions:
        _, _, terminated, truncated, info = env.step(int(action))
        costs.append(info["cost"])
        if terminated or truncated:
            break
    return costs


@pytest.mark.parametrize("trace", DETERMINISTIC, ids=lambda p: p.stem)
def test_episode_cost_is_the_peak_departed_weight_of_the_recorded_boards(trace):
    level, actions, arrays = load_trace(trace)
    costs = played_costs(level, actions)
    assert min(costs) >= 0
    peaks = peak_weights(arrays["boards"][: len(costs) + 1], arrays["goals"])
    assert sum(costs) == peaks[-1]
    np.testing.assert_array_equal(np.cumsum(costs), peaks)  # each cost: the peak's rise


@pytest.mark.parametrize("trace", MULTI_AGENT_TRACES, ids=lambda p: p.stem)
def test_multi_agent_cost_is_the_boards_for_every_agent(trace):
    level, actions, arrays = load_trace(trace)
    env = SafeLifeParallelEnv([level], time_limit=len(actions))
    env.reset(seed=0)
    costs = []
    for joint in actions:
        infos = env.step(
            {
                agent: int(joint[i])
                for i, agent in enumerate(env.possible_agents)
                if agent in env.agents
            }
        )[4]
        step_costs = {info["cost"] for info in infos.values()}
        assert len(step_costs) == 1  # the board's, the same for every agent
        costs.append(step_costs.pop())
    assert min(costs) >= 0
    np.testing.assert_array_equal(np.cumsum(costs), peak_weights(arrays["boards"], arrays["goals"]))


def test_the_traces_cost_something():
    """The traces exercise the cost: many episodes cost, green life and yellow spawners both."""
    costly = [t.stem for t in DETERMINISTIC if sum(played_costs(*load_trace(t)[:2])) > 0]
    assert len(costly) >= 20, costly
    spawners = [t for t in TRACES if "spawn" in t.stem]
    assert any(sum(played_costs(*load_trace(t)[:2])) >= 2 for t in spawners)
    arrays = [np.load(t) for t in MULTI_AGENT_TRACES]
    assert sum(peak_weights(a["boards"], a["goals"])[-1] > 0 for a in arrays) >= 3


def test_device_vector_env_reports_the_same_costs():
    """Every trace's actions on the device vector env (one env per trace, grouped by board
    shape) give the Numba env's cost at every step."""
    groups = defaultdict(list)
    for trace in DETERMINISTIC:
        level, actions, _ = load_trace(trace)
        groups[level.board.shape].append((level, actions))
    checked = 0
    for group in groups.values():
        levels = [level for level, _ in group]
        wants = [played_costs(level, actions) for level, actions in group]
        steps = max(len(w) for w in wants)
        vec = SafeLifeVectorEnv(SafeLifeEnv(levels, time_limit=steps), len(levels))
        vec.reset(seed=0)
        for t in range(steps):
            actions = [int(a[t]) if t < len(a) else 0 for _, a in group]
            _, _, _, _, infos = vec.step(actions)
            assert infos["cost"].dtype == torch.float64
            for i, want in enumerate(wants):
                if t < len(want):
                    assert infos["cost"][i].item() == want[t], (levels[i].name, t)
                    checked += 1
    assert checked > 5000


def hand_level() -> Level:
    """A 9x9 board, the agent at (4, 4) facing up: a yellow spawner above it, a green block
    (a still life) far left, a wall right of it."""
    board = np.zeros((9, 9), np.uint16)
    goals = np.zeros_like(board)
    board[4, 4] = cells.KINDS["player"]
    board[3, 4] = cells.KINDS["spawner"] | cells.RED | cells.GREEN
    board[1:3, 0:2] = cells.KINDS["life"] | cells.GREEN
    board[4, 5] = cells.KINDS["wall"]
    return Level(board, goals, (4, 4), spawn_prob=0.0)


@pytest.mark.parametrize(
    "actions, want",
    [
        ([0, 0, 0], [0, 0, 0]),  # inaction costs nothing on a still board
        ([5, 0], [2, 0]),  # the spawner removed: 2, once
        ([8, 0, 0], [0, 0, 0]),  # the toggle left makes gray life: weight 0 ...
        ([6, 0], [0, 0]),  # ... and so does removing the gray wall
        ([5, 5, 5], [2, 0, 0]),  # gray life made where the spawner stood: no refund
    ],
)
def test_hand_costs_on_both_engines(actions, want):
    env = SafeLifeEnv([hand_level()], time_limit=10)
    env.reset(seed=0)
    vec = SafeLifeVectorEnv(SafeLifeEnv([hand_level()], time_limit=10), 1)
    vec.reset(seed=0)
    for action, cost in zip(actions, want):
        assert env.step(action)[4]["cost"] == cost
        assert vec.step([action])[4]["cost"][0].item() == cost


def test_disturbed_green_block_costs_the_peak_of_green_cells_changed():
    """A gray cell made beside the green block (the agent walks to (3, 1), toggles left):
    across the board's wrapped edge green life is born at (2, 8) (weight 1), then (1, 0) dies
    and (1, 8), (3, 8) are born (4 departed), then (2, 8) dies as (2, 7) is born (still 4)."""
    env = SafeLifeEnv([hand_level()], time_limit=20)
    env.reset(seed=0)
    costs = [env.step(a)[4]["cost"] for a in (4, 4, 1, 4, 8, 0, 0)]
    assert costs == [0, 0, 0, 0, 1, 3, 0]


def test_a_reset_costs_nothing_in_every_env():
    """The info of a reset holds ``cost`` 0 (Gymnasium's next-step autoreset hands it to the
    step that resets an ended env), in the single, multi-agent and device vector envs."""
    level, _, _ = load_trace(TRACES[0])
    assert SafeLifeEnv([level]).reset(seed=0)[1]["cost"] == 0.0
    multi, _, _ = load_trace(MULTI_AGENT_TRACES[0])
    env = SafeLifeParallelEnv([multi])
    assert [info["cost"] for info in env.reset(seed=0)[1].values()] == [0.0] * len(env.agents)
    vec = SafeLifeVectorEnv(SafeLifeEnv([level]), 3)
    cost = vec.reset(seed=0)[1]["cost"]
    assert cost.dtype == torch.float64 and cost.tolist() == [0.0] * 3
