"""Population training (:mod:`safelife_rl.training.population`): a population of one is
DevicePPO bit for bit, each member of a larger one is its own single run (to the batched
network's rounding) whatever the others do, and every member saves as an ordinary SB3 run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from torch.utils._python_dispatch import _disable_current_modes

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.envs.registration import suite_file
from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.training import SafeLifeCNN
from safelife_rl.training.device import DevicePPO, GymnasiumTensorVecEnv
from safelife_rl.training.methods.ppo_lagrangian import DevicePPOLagrangian
from safelife_rl.training.population import PopulationPPO
from safelife_rl.training.precision import apply_precision
from safety_rl_common.errors import UserError
from safety_rl_common.torch_counts import OpCounts, counting

from .test_device_step import vector_env
from .test_device_syncs import ROLLOUT_END

pytestmark = pytest.mark.usefixtures("torch_one_thread")

N_ENVS, N_STEPS = 3, 8
SETTINGS = {"n_steps": N_STEPS, "batch_size": 6, "n_epochs": 2, "clip_range_vf": 0.2}
POLICY = {
    "features_extractor_class": SafeLifeCNN,
    "features_extractor_kwargs": {"features_dim": 32, "conv_channels": [4, 8, 8]},
    "net_arch": [],
    "optimizer_kwargs": {"fused": True},
}
RAMP = {"_target_": "safelife_rl.training.LinearRamp", "steps": [0, 1], "values": [1.0, 1.0]}


def wrappers(penalty: float) -> dict:
    return {
        "side_effect_penalty": {
            "_target_": "safelife_rl.training.SideEffectPenalty",
            "penalty": penalty,
            "ramp": RAMP,
        }
    }


def single_env(suite: str = "prune-still") -> SafeLifeEnv:
    # random levels and 12-step episodes: episode ends and time-limit cuts in every rollout
    levels = load_levels(suite_file(suite))[:5]
    return SafeLifeEnv(levels, time_limit=12, shuffle=True)


def single_run(seed: int, penalty: float, steps: int) -> DevicePPO:
    env = GymnasiumTensorVecEnv(SafeLifeVectorEnv(single_env(), N_ENVS, "cpu", wrappers(penalty)))
    model = DevicePPO("CnnPolicy", env, seed=seed, policy_kwargs=POLICY, **SETTINGS)
    return model.learn(steps)


def population(
    seeds: list[int],
    penalties: list[float],
    settings: dict | None = None,
    batching="auto",
    precision: str = "fp32",
) -> PopulationPPO:
    env = SafeLifeVectorEnv(
        single_env(), N_ENVS * len(seeds), "cpu", wrappers(0.0), groups=len(seeds)
    )

    def member(view, seed):
        model = DevicePPO(
            "CnnPolicy", view, seed=seed, policy_kwargs=POLICY, **(settings or SETTINGS)
        )
        apply_precision(precision, model.policy)  # before the stacks are built, as runs.py
        return model

    return PopulationPPO(env, member, seeds, penalties, batching)


def test_a_population_of_one_is_device_ppo_bit_for_bit():
    steps = N_ENVS * N_STEPS * 4
    single = single_run(4, 0.3, steps)
    pop = population([4], [0.3]).learn(steps)
    (member,) = pop.members
    assert member.num_timesteps == single.num_timesteps == steps
    moved = False
    for (name, p), q in zip(single.policy.named_parameters(), member.policy.parameters()):
        assert torch.equal(p, q), name
    initial = DevicePPO(
        "CnnPolicy", single.env, seed=4, policy_kwargs=POLICY, **SETTINGS
    ).policy.parameters()
    moved = any(not torch.equal(p, q) for p, q in zip(initial, member.policy.parameters()))
    assert moved
    assert [e["r"] for e in member.ep_info_buffer] == [e["r"] for e in single.ep_info_buffer]
    assert len(member.ep_info_buffer) >= 4


@pytest.mark.parametrize("batching", ["loop", "grouped", "vmap", "unfold"])
def test_each_member_is_its_own_single_run(batching):
    """Three members with their own seeds and penalties end where three single runs end, having
    played the same episodes: bit for bit member by member, to the batched kernels' rounding
    (a few 1e-7 here, after updates that move the weights by 6e-3) batched: written out
    (grouped convolutions and batched products) or by vmap (its convolutions grouped, or
    unfolded into batched matrix products)."""
    steps = N_ENVS * N_STEPS * 3
    seeds, penalties = [0, 7, 3], [0.0, 0.5, 0.2]
    pop = population(seeds, penalties, batching=batching).learn(steps)
    for member, seed, penalty in zip(pop.members, seeds, penalties):
        single = single_run(seed, penalty, steps)
        assert [e["l"] for e in member.ep_info_buffer] == [e["l"] for e in single.ep_info_buffer]
        np.testing.assert_allclose(
            [e["r"] for e in member.ep_info_buffer],
            [e["r"] for e in single.ep_info_buffer],
            rtol=1e-6,
        )
        for (name, p), q in zip(single.policy.named_parameters(), member.policy.parameters()):
            if batching == "loop":
                assert torch.equal(q, p), name
            else:
                torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6, msg=name)


#: PPO-Lagrangian's settings: a multiplier that moves at every update (costs above or below
#: the budgets), on standardized advantages
LAGRANGIAN = {"multiplier_init": 1.0, "multiplier_lr": 0.5, "standardize_advantages": True}
COSTLY = "navigation"  # levels whose random walks cost (destroy life) in most episodes


def lagrangian_single(seed: int, cost_limit: float, steps: int) -> DevicePPOLagrangian:
    vector = SafeLifeVectorEnv(single_env(COSTLY), N_ENVS, "cpu", wrappers(0.0))
    model = DevicePPOLagrangian(
        "CnnPolicy", GymnasiumTensorVecEnv(vector), seed=seed, policy_kwargs=POLICY,
        cost_limit=cost_limit, **LAGRANGIAN, **SETTINGS,
    )  # fmt: skip
    return model.learn(steps)


@pytest.mark.parametrize("batching", ["loop", "grouped", "vmap", "unfold"])
def test_each_lagrangian_member_is_its_own_single_run(batching):
    """PPO-Lagrangian members, each with its own seed and budget: its multiplier, cost critic
    and policy end where its single DevicePPOLagrangian run's end (bit for bit member by
    member; to the grouped kernels' rounding under vmap)."""
    steps = N_ENVS * N_STEPS * 3
    seeds, limits = [0, 5], [0.5, 2.0]
    env = SafeLifeVectorEnv(single_env(COSTLY), 2 * N_ENVS, "cpu", wrappers(0.0), groups=2)

    def member(view, seed):
        return DevicePPOLagrangian(
            "CnnPolicy", view, seed=seed, policy_kwargs=POLICY, cost_limit=limits[view.index],
            **LAGRANGIAN, **SETTINGS,
        )  # fmt: skip

    pop = PopulationPPO(env, member, seeds, [0.0, 0.0], batching).learn(steps)
    assert pop.costs is not None
    for member_, seed, limit in zip(pop.members, seeds, limits):
        single = lagrangian_single(seed, limit, steps)
        multipliers = member_.lagrange_state, single.lagrange_state
        assert multipliers[0][0] != LAGRANGIAN["multiplier_init"] and multipliers[0][2] > 0
        pairs = [
            *zip(single.policy.named_parameters(), member_.policy.parameters()),
            *zip(single.cost_critic.named_parameters(), member_.cost_critic.parameters()),
        ]
        if batching == "loop":
            assert torch.equal(*multipliers)
            assert torch.equal(member_._episode_costs, single._episode_costs)
            for (name, p), q in pairs:
                assert torch.equal(q, p), name
        else:
            torch.testing.assert_close(*multipliers, rtol=1e-4, atol=1e-6)
            for (name, p), q in pairs:
                torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6, msg=name)


def test_members_do_not_leak_into_each_other():
    """Changing one member (its penalty and its weights) leaves the others' training as it was."""
    steps = N_ENVS * N_STEPS * 2
    base = population([1, 2, 3], [0.1, 0.2, 0.3], batching="vmap")
    changed = population([1, 2, 3], [0.1, 0.9, 0.3], batching="vmap")
    with torch.no_grad():
        for p in changed.stacked.parameters():
            p[1].mul_(-3.0)
    base.learn(steps)
    changed.learn(steps)

    def same(k: int) -> bool:
        pairs = zip(base.members[k].policy.parameters(), changed.members[k].policy.parameters())
        return all(torch.equal(p, q) for p, q in pairs)

    assert same(0) and same(2) and not same(1)


@pytest.mark.parametrize("batching", ["loop", "vmap"])
def test_a_member_saves_as_an_ordinary_run(tmp_path, batching):
    pop = population([0, 1], [0.0, 0.1], batching=batching).learn(N_ENVS * N_STEPS * 2)
    member = pop.members[1]
    member.save(tmp_path / "member.zip")
    size = (tmp_path / "member.zip").stat().st_size
    pop.members[0].save(tmp_path / "other.zip")
    loaded = PPO.load(tmp_path / "member.zip", device="cpu")
    for p, q in zip(loaded.policy.parameters(), member.policy.parameters()):
        assert torch.equal(p, q)
    state = loaded.policy.optimizer.state_dict()["state"]
    moments = member.policy.optimizer.state_dict()["state"][0]["exp_avg"]
    assert moments.abs().sum() > 0
    assert torch.equal(state[0]["exp_avg"], moments)
    # its own weights only: the file is no bigger than the other member's
    assert abs(size - (tmp_path / "other.zip").stat().st_size) < 1000


def test_members_that_cannot_be_batched_are_refused():
    with pytest.raises(UserError, match="differ in n_epochs"):
        env = SafeLifeVectorEnv(single_env(), 2 * N_ENVS, "cpu", wrappers(0.0), groups=2)
        epochs = iter([2, 3])

        def member(view, seed):
            settings = SETTINGS | {"n_epochs": next(epochs)}
            return DevicePPO("CnnPolicy", view, seed=seed, policy_kwargs=POLICY, **settings)

        PopulationPPO(env, member, [0, 1])
    with pytest.raises(UserError, match="target_kl"):
        population([0], [0.0], SETTINGS | {"target_kl": 0.01})


def counted_learn(
    n_steps: int, batch_size: int, size: int = 3, lagrangian: bool = False
) -> OpCounts:
    """What two rollouts and updates of a population of ``size`` ask of the host, from its
    second rollout on (the first builds what is reused)."""
    env = vector_env(size * 2, groups=size)
    kind = DevicePPOLagrangian if lagrangian else DevicePPO
    more = {"cost_limit": 1.0} if lagrangian else {}

    def member(view, seed):
        return kind(
            "MlpPolicy",
            view,
            seed=seed,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=1,
            policy_kwargs={"net_arch": [8]},
            **more,
        )

    pop = PopulationPPO(env, member, list(range(size)), [0.1 * k for k in range(size)])
    pop.learn(2 * n_steps)
    with counting() as counts:
        pop.learn(2 * 2 * n_steps)
    return counts


@pytest.mark.parametrize("lagrangian", [False, True], ids=["ppo", "lagrangian"])
def test_a_rollout_step_and_a_minibatch_make_no_sync_and_no_copy(lagrangian):
    """Twice the steps a rollout, two minibatches for one, or twice the members: the same syncs
    and copies (what a rollout or an update reads, it reads once, for all members; with
    PPO-Lagrangian, the multipliers and cost losses too)."""
    base = counted_learn(3, 3 * 2, lagrangian=lagrangian)
    longer = counted_learn(6, 6 * 2, lagrangian=lagrangian)
    more_minibatches = counted_learn(3, 3 * 2 // 2, lagrangian=lagrangian)
    more_members = counted_learn(3, 3 * 2, size=6, lagrangian=lagrangian)
    assert (longer.syncs, longer.copies) == (base.syncs, base.copies), (base.named, longer.named)
    assert (more_minibatches.syncs, more_minibatches.copies) == (base.syncs, base.copies)
    # (a learn's start copies each member's episode starts once: the rollouts add none)
    assert more_members.syncs == base.syncs, (base.named, more_members.named)
    # a rollout's: timeouts (1), invalid actions, losses (and the safety scalars)
    assert base.syncs <= 2 * (3 + lagrangian), base.named
    assert longer.kernels > base.kernels and more_minibatches.kernels > base.kernels


def rollout_counts(size: int, n_steps: int, env_counted: bool = False) -> OpCounts:
    """What a rollout of a population of ``size`` (batched by vmap) asks of the device outside
    its env steps (not counted, unless ``env_counted``), from its second rollout on."""
    env = vector_env(size * 2, groups=size)

    def member(view, seed):
        return DevicePPO(
            "MlpPolicy", view, seed=seed, n_steps=n_steps, batch_size=2 * n_steps, n_epochs=1,
            policy_kwargs={"net_arch": [8]},
        )  # fmt: skip

    pop = PopulationPPO(env, member, list(range(size)), [0.0] * size, batching="vmap")
    pop.learn(2 * n_steps)
    step = pop.venv.step

    def uncounted(actions: torch.Tensor):
        with _disable_current_modes():
            return step(actions)

    if not env_counted:
        pop.venv.step = uncounted  # type: ignore[method-assign]
    with counting() as counts:
        pop.collect_rollouts([])
    return counts


def test_a_rollout_makes_as_many_operations_for_72_members_as_for_2():
    """Outside the env step, a rollout step (the stacked forward pass, one draw for all members,
    the buffer) and a rollout's tail (the time limits' bootstraps: 3-step episodes, cut in every
    rollout) make the same operations for 72 members as for 2: nothing runs member by member
    (``torch.multinomial`` once per member and a forward pass per member's cuts did)."""
    two, many = rollout_counts(2, 3), rollout_counts(72, 3)
    assert (two.kernels, two.syncs, two.copies) == (many.kernels, many.syncs, many.copies), (
        two,
        many,
    )
    longer = rollout_counts(2, 6)
    assert (longer.syncs, longer.copies) == (two.syncs, two.copies)  # none a step
    assert two.named == many.named == ROLLOUT_END, (two.named, many.named)


def test_a_rollouts_steps_make_no_sync_and_no_copy_and_its_end_the_same_for_more_members():
    """The env steps counted too: twice the steps, the same syncs and copies (a step makes
    none), and a rollout's end makes what a single run's makes, one sync (the invalid-action
    flag) and one copy (the episodes), for 2 members as for 8."""
    for size in (2, 8):
        short, long = rollout_counts(size, 3, True), rollout_counts(size, 6, True)
        assert short.named == long.named == ROLLOUT_END, (size, short.named, long.named)


@pytest.mark.parametrize("batching", ["grouped", "vmap", "unfold"])
def test_a_batched_update_launches_as_many_kernels_for_more_members(batching):
    """Batched, an update's kernels do not grow with the members: one pass of the stacked
    networks per minibatch, one optimizer step over the stacked parameters."""

    def update_kernels(size: int) -> int:
        pop = population(list(range(size)), [0.0] * size, batching=batching)
        pop.learn(N_ENVS * N_STEPS)
        with counting() as counts:
            pop.train()
        return counts.kernels

    assert update_kernels(2) == update_kernels(4)


def test_each_members_cuts_are_bootstrapped_by_its_own_network():
    """3-step episodes in 7-step rollouts (3 cuts an env in the third): each member's cut
    rewards get ``gamma * V`` of its own network, bit for bit as a pass of its envs' ``k``-th
    final observations computes it, each round one stacked pass of all members."""
    size, n, n_steps = 2, 2, 7
    env = vector_env(size * n, groups=size)

    def member(view, seed):
        return DevicePPO(
            "MlpPolicy", view, seed=seed, n_steps=n_steps, batch_size=n * n_steps,
            policy_kwargs={"net_arch": [8]},
        )  # fmt: skip

    class Rewards(BaseCallback):
        def _on_step(self) -> bool:
            self.rewards.append(self.locals["step"].rewards.clone())
            return True

    seen = Rewards()
    pop = PopulationPPO(env, member, [0, 1], [0.0, 0.0])
    _, callbacks = pop.setup(10**6, [seen, None])
    for _ in range(3):
        seen.rewards = []
        assert pop.collect_rollouts(callbacks)
    buffer = pop.buffer
    assert pop.cut_rounds == 3 and buffer.timeouts.sum(0).tolist() == [3] * size * n
    expected = torch.stack(seen.rewards)
    for k, model in enumerate(pop.members):
        envs = torch.arange(k * n, (k + 1) * n)
        cuts = buffer.timeouts[:, envs].T.nonzero()[:, 1].view(n, 3)
        for r in range(3):
            with torch.no_grad():
                obs = buffer.final_observations[cuts[:, r], envs]
                values = model.policy.predict_values(obs).flatten()
            expected[cuts[:, r], envs] += model.gamma * values
    assert torch.equal(buffer.rewards, expected)
