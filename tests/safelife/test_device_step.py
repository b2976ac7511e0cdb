"""The device vector env's step without stopping: no sync and no host<->device copy per step
(with and without restarts), one compiled graph that is the eager step bit for bit, invalid
actions caught at the boundary; and the op counter that measures it."""

import numpy as np
import pytest
import torch

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safety_rl_common.torch_counts import count_ops, counting

from .test_vector_env import WRAPPERS

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_the_counter_counts_kernels_syncs_and_copies():
    x = torch.arange(6)
    with counting() as counts:
        y = torch.tensor([1, 2])  # host data to a tensor: a copy
        x.view(2, 3)  # a view launches nothing
        z = x + 1  # one kernel
        bool(z.any())  # a kernel, then the host reads its value: a sync
        x.nonzero()  # the output's shape depends on the data: a sync
        y.numpy()  # to host memory: a copy
    assert (counts.kernels, counts.syncs, counts.copies) == (2, 2, 2), counts.named
    assert counts.named == {"lift_fresh": 1, "_local_scalar_dense": 1, "nonzero": 1, "numpy": 1}


def test_the_counter_counts_the_operations_an_operation_runs():
    """``torch.multinomial`` runs its checks, an exponential draw, a division and an argmax
    through the dispatcher: counted, where a counter that looked at the top level only saw one
    operation (the blind spot that hid a population's per-member sampling); a convolution that
    picks its backend's kernel and an addition stay one each; the CPU's own checks (an
    ``_assert_async`` reading its value) are no sync."""
    probs = torch.softmax(torch.randn(16, 9), -1)
    counts = count_ops(torch.multinomial, probs, 1, True)
    assert counts.kernels >= 10 and (counts.syncs, counts.copies) == (0, 0), counts
    images, weight = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    assert count_ops(torch.nn.functional.conv2d, images, weight).kernels == 1
    assert count_ops(torch.add, probs, 1).kernels == 1


@pytest.mark.parametrize(
    "name, run, syncs, copies",
    [
        ("mask assignment", lambda x: x.__setitem__(x > 2, x[0]), 1, 0),
        ("repeat_interleave", lambda x: torch.repeat_interleave(x, x.long()), 1, 0),
        ("bincount", lambda x: torch.bincount(x.long()), 1, 0),
        ("histc", lambda x: torch.histc(x), 1, 0),
        ("allclose", lambda x: torch.allclose(x, x), 1, 0),
        ("repeat_interleave by a number", lambda x: torch.repeat_interleave(x, 2), 0, 0),
        (".cpu()", lambda x: x.cpu(), 0, 1),
        (
            "kernels only",
            lambda x: torch.where(x > 2, x, 0).index_select(0, x[:2].long()) * 2,
            0,
            0,
        ),
        (
            "repeat_interleave with output_size",
            lambda x: torch.repeat_interleave(x, x.long(), output_size=15),
            0,
            0,
        ),
    ],
)
def test_the_counter_sees_each_way_a_step_can_wait_for_the_host(name, run, syncs, copies):
    x = torch.arange(6.0)
    counts = count_ops(run, x)
    assert (counts.syncs, counts.copies) == (syncs, copies), (name, counts.named)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_device_tensors_cpu_is_one_copy():
    """A CUDA tensor's ``.cpu()`` dispatches a copy across devices: counted once, as ``cpu``."""
    x = torch.arange(6.0, device="cuda")
    counts = count_ops(lambda: (x.cpu(), x.to("cpu")))
    assert (counts.syncs, counts.copies) == (0, 2), counts.named
    assert counts.named == {"cpu": 1, "_to_copy": 1}


def vector_env(n: int, side_effects: bool = False, **kwargs) -> SafeLifeVectorEnv:
    """Levels with spawners, drawn at random, under every training wrapper, 3-step episodes."""
    levels = load_levels(suite_file("append-spawn"))
    env = SafeLifeEnv(
        levels, time_limit=3, shuffle=True, view_shape=(9, 9), side_effects=side_effects
    )
    return SafeLifeVectorEnv(env, n, training_wrappers=WRAPPERS, **kwargs)


@pytest.mark.parametrize("side_effects", [False, True], ids=["plain", "side-effects"])
def test_a_step_makes_no_sync_and_no_copy_with_or_without_restarts(side_effects):
    """Side effects scored too: the inaction baseline steps with the game, the scores wait."""
    vec = vector_env(8, side_effects)
    assert_no_sync_or_copy_per_step(vec, side_effects)


def test_a_step_on_a_level_bank_makes_no_sync_and_no_copy(tmp_path):
    """A bank's restarts turn and shift their levels on the device too."""
    from safelife_rl.procgen.bank import LevelBank

    bank = LevelBank("prune-still", size=3, cache_dir=tmp_path, progress=False)
    env = SafeLifeEnv(bank, time_limit=3, view_shape=(9, 9), side_effects=True)
    vec = SafeLifeVectorEnv(env, 8, training_wrappers=WRAPPERS)
    assert vec.env_params.translations and len(vec.levels.symmetries) == 8
    assert_no_sync_or_copy_per_step(vec, True)
    # every env has just restarted: its game is its drawn level turned and shifted on the host
    from safelife_rl.engine.symmetry import transform_level
    from safelife_rl.engine.torch_game import TorchGame

    state, turns = vec.state, vec.levels.symmetries
    played = [
        transform_level(bank.levels[v // len(turns)], turns[v % len(turns)], tuple(shift))
        for v, shift in zip(state["variant"].tolist(), state["shift"].tolist())
    ]
    assert len({tuple(shift) for shift in state["shift"].tolist()}) > 1
    host = TorchGame(played)
    for name in ("boards", "goals", "agent_locs"):
        assert torch.equal(host.game[name], state[name]), name
    for k in range(8):  # the exits (flat cell indices), padded apart, as sets
        exits = [{e for e in x[k].tolist() if e >= 0} for x in (host.exits, state["exits"])]
        assert exits[0] == exits[1] != set(), k


def test_no_two_entries_of_a_state_are_one_tensor():
    """Else the compiled step sees other aliasing after its first step and compiles again."""
    vec = vector_env(4, side_effects=True)
    vec.reset(seed=0)
    actions = torch.tensor([1, 2, 3, 0])
    for step in range(4):  # after the reset, steps without restarts and a step with them
        values = [*vec.state.values(), *vec.params.values()]  # all the step's inputs
        pointers = [value.untyped_storage().data_ptr() for value in values]
        assert len(set(pointers)) == len(pointers), step
        vec.step(actions)


def assert_no_sync_or_copy_per_step(vec: SafeLifeVectorEnv, side_effects: bool) -> None:
    """Three steps, the last ending every episode, counted; then the side effects, if any
    (append-spawn's and prune-still's levels both hold green life)."""
    vec.reset(seed=0)
    actions = torch.tensor([1, 2, 3, 4, 5, 6, 7, 0])
    ended = []
    for _ in range(3):  # the third step ends every episode
        counts = count_ops(vec.step, actions)
        assert (counts.syncs, counts.copies) == (0, 0), counts.named
        ended.append(vec.state["episodes"].tolist())
    assert ended == [[1] * 8, [1] * 8, [2] * 8]
    if side_effects:  # every env's ended episode waits to be scored, once
        reports = vec.side_effect_reports(samples=10)
        assert sorted(reports) == list(range(8))
        assert all("life-green" in report for report in reports.values()), reports
        assert vec.side_effect_reports() == {}


def test_the_inaction_baseline_is_the_start_advanced_without_the_agent():
    """On spawner levels each env's baseline is its start board advanced one generation per
    step without the agent, its spawners drawing from their own stream of the seed."""
    from safelife_rl.engine.torch_random import INACTION_SPAWNS, cell_uniforms, keys
    from safelife_rl.engine.torch_rules import advance

    vec = vector_env(8, side_effects=True)
    vec.reset(seed=0)
    board, prob, envs = vec.state["boards"].clone(), vec.state["spawn_prob"], vec.state["envs"]
    unspawned = board
    for t in range(2):
        vec.step(torch.zeros(8, dtype=torch.int64))
        uniforms = cell_uniforms(
            keys(vec.params["seed"], INACTION_SPAWNS, envs, torch.full_like(envs, t)),
            vec.levels.shape,
        )
        board, unspawned = advance(board, prob, uniforms), advance(unspawned, prob)
    assert torch.equal(vec.state["inaction"], board)
    assert not torch.equal(board, unspawned)  # spawners fired
    assert not torch.equal(board, vec.state["boards"])  # the agent's own board is another


@pytest.fixture(scope="module")
def compiled_and_eager():
    """The same 14 steps (restarts every 3) eager and compiled, with their states and the
    number of graphs compiled."""
    runs = []
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters["stats"]
    before = counters["unique_graphs"]  # other tests of this worker may have compiled
    for compile in (False, True):
        vec = vector_env(16, side_effects=True, compile=compile)  # the baseline compiled too
        obs, _ = vec.reset(seed=3)
        actions = torch.randint(0, 9, (14, 16), generator=torch.Generator().manual_seed(0))
        outputs = [obs]
        for a in actions:
            obs, rewards, terminated, truncated, info = vec.step(a)
            outputs += [
                obs,
                rewards,
                terminated,
                truncated,
                info["final_obs"],
                *(v for v in info["final_info"].values() if isinstance(v, torch.Tensor)),
            ]
        runs.append((outputs, vec.state))
    return runs, counters["unique_graphs"] - before


def test_the_step_compiles_to_one_graph_that_is_the_eager_step_bit_for_bit(compiled_and_eager):
    ((eager, eager_state), (compiled, compiled_state)), graphs = compiled_and_eager
    assert graphs == 1  # once, whatever the steps and restarts
    assert len(eager) == len(compiled)
    for k, (a, b) in enumerate(zip(eager, compiled)):
        assert a.dtype == b.dtype and torch.equal(a, b), k
    assert eager_state.keys() == compiled_state.keys()
    for name, value in eager_state.items():
        assert torch.equal(value, compiled_state[name]), name
    assert eager_state["episodes"].min() == 5  # 14 steps of 3-step episodes: 4 restarts
    assert (eager_state["boards"] & (1 << 15)).any()  # spawners in play (cells.SPAWNING)


def test_invalid_actions_are_caught_at_the_boundary():
    vec = vector_env(2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action 9"):
        vec.step([0, 9])  # host data: checked on the host, before anything runs
    with pytest.raises(ValueError, match="actions must be integers"):
        vec.step(np.array([0.0, 1.0]))
    vec.step(torch.tensor([0, 9]))  # a device tensor: remembered, not read back
    with pytest.raises(ValueError, match="an invalid action was given since the last reset"):
        vec.check_actions()
    vec.reset(seed=0)
    vec.check_actions()  # a reset forgets it
    checked = vector_env(2, check_actions=True)
    checked.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action -1"):
        checked.step(torch.tensor([-1, 0]))
