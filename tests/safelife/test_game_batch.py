"""The batch-of-games interface: both backends satisfy it and, driven through it alone on the
same levels and actions, agree on boards, rewards, points, exits, views and episode info."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from safelife_rl import SafeLifeGame, load_levels
from safelife_rl.engine.game_batch import GameBatch, episode_info
from safelife_rl.engine.replay import load_trace
from safelife_rl.engine.torch_game import TorchGame

SHARED = Path(__file__).resolve().parents[1] / "data/safelife"
MULTI_AGENT_TRACES = sorted((SHARED / "traces-multiagent").glob("*.npz"))
EXIT_TRACES = sorted((SHARED / "traces").glob("exit-*.npz"))

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def host(array) -> np.ndarray:
    """A copy (the games update their arrays in place)."""
    return np.array(array.numpy() if isinstance(array, torch.Tensor) else array)


def play(game: GameBatch, actions: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Everything the interface shows, before the first step and after each."""

    def state(rewards=None, dones=None) -> dict[str, np.ndarray]:
        seen = {
            name: host(getattr(game, name))
            for name in (
                "boards",
                "goals",
                "agent_locs",
                "points",
                "can_exit",
                "active",
                "available_points",
                "required_points",
            )
        }
        seen |= {
            name: host(getattr(game, name)())
            for name in ("agent_present", "has_exited", "points_earned", "performance")
        }
        seen["observe"] = host(game.observe((9, 11), (0, 1, 8, 9, 25)))
        seen["info"] = [
            episode_info(game, k, a)
            for k in range(len(game))
            for a in range(seen["agent_locs"].shape[1])
        ]
        if rewards is not None:
            seen["rewards"], seen["dones"] = host(rewards), host(dones)
        return seen

    states = [state()]
    for step_actions in actions:
        states.append(state(*game.step(step_actions)))
    assert game.num_steps == len(actions)
    return states


def assert_same(ours: list[dict], theirs: list[dict]) -> None:
    assert len(ours) == len(theirs)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert a.keys() == b.keys()
        for key in a:
            if key == "info":
                assert a[key] == b[key], (step, key)
            else:
                assert np.array_equal(a[key], b[key]), (step, key)


def random_actions(levels, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (len(levels), len(levels[0].agent_locs))
    return rng.choice(9, size=(steps,) + shape, p=[0.1] + [0.15] * 4 + [0.075] * 4)


def test_both_backends_satisfy_the_interface(benchmarks):
    levels = load_levels(benchmarks / "prune-still.npz")[:2]
    for game in (SafeLifeGame(levels), TorchGame(levels)):
        assert isinstance(game, GameBatch)
    assert not isinstance(levels[0], GameBatch)


@pytest.mark.parametrize("task", ["append-still", "prune-still", "prune-dynamic"])
def test_backends_agree_through_the_interface_on_single_agent_levels(benchmarks, task):
    levels = [
        replace(level, min_performance=-1.0) if i % 2 else level
        for i, level in enumerate(load_levels(benchmarks / f"{task}.npz")[:8])
    ]
    actions = random_actions(levels, 150, seed=len(task))
    numba, device = play(SafeLifeGame(levels), actions), play(TorchGame(levels), actions)
    assert_same(numba, device)
    assert numba[-1]["rewards"].shape == (8, 1) and numba[0]["observe"].shape == (8, 1, 9, 11, 5)


def test_backends_agree_through_the_interface_as_agents_exit():
    """The original's exit traces (most walk to the exit), played as one batch, waiting once
    a trace has ended."""
    traces = [load_trace(t) for t in EXIT_TRACES]
    levels = [level for level, _, _ in traces]
    actions = np.zeros((max(len(a) for _, a, _ in traces), len(levels), 1), np.int64)
    for k, (_, trace_actions, _) in enumerate(traces):
        actions[: len(trace_actions), k, 0] = trace_actions
    numba, device = play(SafeLifeGame(levels), actions), play(TorchGame(levels), actions)
    assert_same(numba, device)
    exited = [info["success"] for info in numba[-1]["info"]]
    assert exited == [bool(arrays["dones"][-1]) for _, _, arrays in traces] and sum(exited) >= 18


def test_backends_agree_through_the_interface_on_multi_agent_levels():
    levels = [replace(load_trace(t)[0], min_performance=-1.0) for t in MULTI_AGENT_TRACES] * 2
    actions = random_actions(levels, 300, seed=1)
    numba, device = play(SafeLifeGame(levels), actions), play(TorchGame(levels), actions)
    assert_same(numba, device)
    assert numba[-1]["rewards"].shape == (50, 2)
    assert any(info["success"] for info in numba[-1]["info"])  # agents exited
