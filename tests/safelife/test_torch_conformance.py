"""Replays of the original SafeLife's recorded traces with the torch engine, held to the same
standard as the Numba engine in test_conformance.py: deterministic traces bit for bit (side
effects to 1e-6), stochastic ones in distribution by the same pooled PIT / Kolmogorov-Smirnov
test, which must also reject spawners firing at half rate."""

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from torch._dynamo.utils import counters

from safelife_rl.apps.cli import main
from safelife_rl.engine import torch_game
from safelife_rl.engine.replay import live_cell_counts, load_trace
from safelife_rl.engine.torch_game import TorchGame
from safelife_rl.engine.torch_side_effects import side_effect_scores

TRACES = sorted((Path(__file__).resolve().parents[1] / "data/safelife/traces").glob("*.npz"))
FIELDS = (
    "boards",
    "goals",
    "rewards",
    "dones",
    "obs_first",
    "obs_last",
    "points",
    "required_points",
)
DETERMINISTIC = [t for t in TRACES if not np.load(t)["stochastic"]]
STOCHASTIC = [t for t in TRACES if np.load(t)["stochastic"]]


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def assert_side_effects_match(ours: dict, recorded: np.ndarray) -> None:
    theirs = json.loads(str(recorded))
    assert ours.keys() == theirs.keys()
    for name, (effect, total) in theirs.items():
        assert ours[name] == pytest.approx([effect, total], abs=1e-6), name


def test_every_deterministic_trace_replays_bit_for_bit_in_batches(torch_device):
    """All 70 deterministic traces, those of one length played as one batch of games."""
    assert len(DETERMINISTIC) >= 70
    by_length = defaultdict(list)
    for trace in DETERMINISTIC:
        level, actions, arrays = load_trace(trace)
        by_length[len(actions)].append((level, actions, arrays))
    for group in by_length.values():
        game = TorchGame([level for level, _, _ in group], device=torch_device)
        obs_first = game.observe()[:, 0]
        actions = torch.as_tensor(np.stack([a for _, a, _ in group]), device=torch_device)
        boards, goals, rewards, dones = [game.boards.clone()], [game.goals.clone()], [], []
        for step in actions.T:
            reward, done = game.step(step[:, None])
            boards.append(game.boards.clone())
            goals.append(game.goals.clone())
            rewards.append(reward[:, 0])
            dones.append(done[:, 0])
        ours = {
            "boards": torch.stack(boards, 1),
            "goals": torch.stack(goals, 1),
            "rewards": torch.stack(rewards, 1),
            "dones": torch.stack(dones, 1),
            "obs_first": obs_first,
            "obs_last": game.observe()[:, 0],
            "points": game.points_earned()[:, 0],
            "required_points": game.required_points[:, 0],
        }
        for k, (_, _, arrays) in enumerate(group):
            for field in FIELDS:
                mine = ours[field][k].cpu().numpy().astype(arrays[field].dtype)
                mismatch = np.argwhere(mine != arrays[field])
                assert len(mismatch) == 0, f"{field} differs first at index {mismatch[0]}"
        for scores, (_, _, arrays) in zip(side_effect_scores(game), group):
            assert_side_effects_match(scores, arrays["side_effects"])


@pytest.mark.parametrize("trace", DETERMINISTIC + STOCHASTIC[:1], ids=lambda p: p.stem)
def test_replay_command_with_the_torch_engine(trace, tmp_path):
    """Every deterministic trace bit for bit; a stochastic one in its level's fields."""
    out = tmp_path / "replayed.npz"
    assert main(["replay", str(trace), "--engine", "torch", "--out", str(out)]) == 0
    ours, theirs = np.load(out), np.load(trace)
    assert set(ours.files) <= set(theirs.files)
    fields = FIELDS if not theirs["stochastic"] else ("obs_first", "required_points")
    for field in fields:
        assert np.array_equal(ours[field], theirs[field]), field
    if not theirs["stochastic"]:
        assert_side_effects_match(json.loads(str(ours["side_effects"])), theirs["side_effects"])


def _pit_values(spawn_scale: float, runs: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """PIT of the recorded mean and final live-cell counts among ``runs`` torch replays of
    each trace; all replays of all traces advance together as one batch."""
    traces = [load_trace(trace) for trace in STOCHASTIC]
    levels = [
        replace(level, spawn_prob=level.spawn_prob * spawn_scale)
        for level, _, _ in traces
        for _ in range(runs)
    ]
    actions = torch.as_tensor(np.stack([a for _, a, _ in traces])).repeat_interleave(runs, 0)
    game = TorchGame(levels, seed=int(spawn_scale * 1000))
    counts = [(game.boards & 1).sum((1, 2))]
    for step in actions.T:
        game.step(step[:, None])
        counts.append((game.boards & 1).sum((1, 2)))
    ours = torch.stack(counts, 1).view(len(traces), runs, -1).numpy().astype(float)
    mean_pit, final_pit = [], []
    for sims, (_, _, arrays) in zip(ours, traces):
        recorded = np.count_nonzero(arrays["boards"] & 1, axis=(1, 2)).astype(float)
        for pits, sim, value in (
            (mean_pit, sims.mean(axis=1), recorded.mean()),
            (final_pit, sims[:, -1], recorded[-1]),
        ):
            pits.append((np.sum(sim < value) + 0.5 * np.sum(sim == value) + 0.5) / (runs + 1))
    return np.array(mean_pit), np.array(final_pit)


def test_stochastic_traces_match_in_distribution():
    assert len(STOCHASTIC) >= 30
    for pits in _pit_values(1.0):
        assert stats.kstest(pits, "uniform").pvalue > 1e-3, pits


def test_distribution_test_rejects_wrong_spawn_rate():
    mean_pit, _ = _pit_values(0.5)
    assert stats.kstest(mean_pit, "uniform").pvalue < 1e-3


def test_spawner_batches_are_reproducible_from_the_seed():
    level, actions, _ = load_trace(STOCHASTIC[0])
    runs = [
        live_cell_counts(level, actions[:20], runs=4, seed=seed, engine="torch")
        for seed in (3, 3, 4)
    ]
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


def test_the_compiled_step_replays_a_batch_of_traces_as_the_eager_step_bit_for_bit(monkeypatch):
    """``TorchGame(compile=True)`` (one fullgraph compiled step) against the eager step on the
    largest batch of deterministic traces of one length, stepped in two chunks as large batches
    are on a CPU: every state tensor and reward at every step, and the recorded boards."""
    by_length = defaultdict(list)
    for trace in DETERMINISTIC:
        level, actions, arrays = load_trace(trace)
        by_length[len(actions)].append((level, actions, arrays))
    group = max(by_length.values(), key=len)
    assert len(group) == 50
    monkeypatch.setattr(torch_game, "_COMPILED_CHUNK", len(group) // 2)
    levels = [level for level, _, _ in group]
    eager, compiled = TorchGame(levels), TorchGame(levels, compile=True)
    actions = torch.as_tensor(np.stack([a for _, a, _ in group]))
    graphs = counters["stats"]["unique_graphs"]
    for t, step in enumerate(actions.T):
        ours, theirs = eager.step(step[:, None]), compiled.step(step[:, None])
        for a, b in zip(ours, theirs):
            assert a.dtype == b.dtype and torch.equal(a, b), t
        assert eager.game.keys() == compiled.game.keys()
        for name, value in eager.game.items():
            assert torch.equal(value, compiled.game[name]), (name, t)
        for k, (_, _, arrays) in enumerate(group):
            assert np.array_equal(compiled.boards[k].numpy(), arrays["boards"][t + 1]), (k, t)
    assert torch.equal(eager.observe(), compiled.observe())
    assert counters["stats"]["unique_graphs"] == graphs + 1  # one graph for both chunks


def test_the_compiled_step_in_chunks_draws_the_spawners_numbers_of_the_eager_step(monkeypatch):
    """The compiled CPU step writes each chunk's games over the batch in place: on spawner
    levels (moving goals among them), in three chunks of unequal size, every state tensor
    equals the eager step's at every step (each game's random numbers follow its index)."""
    levels = [load_trace(trace)[0] for trace in STOCHASTIC[:4]] * 2 + [load_trace(STOCHASTIC[0])[0]]
    monkeypatch.setattr(torch_game, "_COMPILED_CHUNK", 4)
    eager, compiled = TorchGame(levels, seed=5), TorchGame(levels, seed=5, compile=True)
    assert eager._spawning
    actions = torch.randint(0, 9, (12, len(levels), 1), generator=torch.Generator().manual_seed(1))
    for t, step in enumerate(actions):
        ours, theirs = eager.step(step), compiled.step(step)
        for a, b in zip(ours, theirs):
            assert torch.equal(a, b), t
        for name, value in eager.game.items():
            assert torch.equal(value, compiled.game[name]), (name, t)
    assert not torch.equal(eager.boards, TorchGame(levels, seed=5).boards)  # the boards moved
