"""Agents: semi-determinism (Definition 7), no global random state, SB3 update code in use."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from extended_envs import bind_agent
from extended_envs.agents import A2CAgent, DQNAgent, PPOAgent, QLearner, RandomAgent

TINY = {
    QLearner: {},
    RandomAgent: {},
    DQNAgent: {
        "learning_starts": 10,
        "batch_size": 8,
        "train_freq": 2,
        "target_update_interval": 20,
        "total_timesteps": 100,
        "policy_kwargs": {"net_arch": [16]},
    },
    PPOAgent: {"n_steps": 16, "batch_size": 8, "n_epochs": 2, "policy_kwargs": {"net_arch": [16]}},
    A2CAgent: {"n_steps": 4, "policy_kwargs": {"net_arch": [16]}},
}
SB3 = [DQNAgent, PPOAgent, A2CAgent]
LEARNERS = [QLearner, *SB3]
N_ACTIONS, N_OBS = 3, 4


def bound(agent_class, seed=0, n_obs=N_OBS, **changes):
    return bind_agent(agent_class, N_ACTIONS, n_obs, seed, **{**TINY[agent_class], **changes})


def transitions(n, seed=0, n_obs=N_OBS):
    """A fixed stream of (o_prev, a, r, o_next) unrelated to any agent's choices."""
    rng = np.random.default_rng(seed)
    obs = int(rng.integers(n_obs))
    for _ in range(n):
        nxt = int(rng.integers(n_obs))
        yield obs, int(rng.integers(N_ACTIONS)), float(rng.choice([-1.0, 0.0, 1.0])), nxt
        obs = nxt


def policy(agent, n_obs=N_OBS):
    return [agent.act(o) for o in range(n_obs)]


@pytest.mark.parametrize("agent_class", list(TINY))
def test_identically_trained_instances_act_identically(agent_class):
    A = bound(agent_class)
    first, second = A(), A()
    for step, transition in enumerate(transitions(120)):
        assert policy(first) == policy(second), f"diverged at step {step}"
        for _ in range(step % 3):  # acting, however often, changes nothing
            first.act(transition[0])
        first.train(*transition)
        second.train(*transition)
    assert policy(first) == policy(second)


@pytest.mark.parametrize("agent_class", list(TINY))
def test_other_instances_and_global_seeds_do_not_interfere(agent_class):
    A = bound(agent_class)
    alone, crowded = A(), A()
    others = [A(), bound(agent_class, seed=1)()]
    alone_policies, crowded_policies = [], []
    for transition in transitions(80):
        alone.train(*transition)
        alone_policies.append(policy(alone))
    for step, transition in enumerate(transitions(80)):
        np.random.seed(step)
        torch.manual_seed(step)
        for other in others:  # a simulation trained on something else, in between
            other.act(step % N_OBS)
            other.train(step % N_OBS, step % N_ACTIONS, 1.0, 0)
        crowded.train(*transition)
        crowded_policies.append(policy(crowded))
    assert alone_policies == crowded_policies


@pytest.mark.parametrize("agent_class", LEARNERS)
def test_different_learning_rates_act_differently(agent_class):
    lr = bound(agent_class).hyperparams["learning_rate"]
    fast_lr = min(lr * 50, 1.0)  # QLearner's learning rate is at most 1
    slow, fast = bound(agent_class)(), bound(agent_class, learning_rate=fast_lr)()
    differed = False
    for transition in transitions(200):
        slow.train(*transition)
        fast.train(*transition)
        differed = differed or policy(slow) != policy(fast)
    assert differed


@pytest.mark.parametrize("agent_class", LEARNERS)
def test_different_seeds_act_differently(agent_class):
    a, b = bound(agent_class, seed=0)(), bound(agent_class, seed=1)()
    policies_a, policies_b = [], []
    for transition in transitions(60):
        a.train(*transition)
        b.train(*transition)
        policies_a.append(policy(a))
        policies_b.append(policy(b))
    assert policies_a != policies_b


@pytest.mark.parametrize("agent_class", list(TINY))
def test_global_random_state_is_left_alone(agent_class):
    bound(agent_class)().train(0, 0, 0.0, 1)  # first use imports lazily-loaded torch modules
    np.random.seed(123)
    torch.manual_seed(123)
    numpy_state, torch_state = np.random.get_state()[1].copy(), torch.get_rng_state()
    agent = bound(agent_class, seed=4)()
    for transition in transitions(60):
        agent.act(transition[0])
        agent.train(*transition)
    assert np.array_equal(np.random.get_state()[1], numpy_state)
    assert torch.equal(torch.get_rng_state(), torch_state)


@pytest.mark.parametrize("agent_class", SB3)
def test_sb3_agents_fill_sb3_buffers_and_run_its_updates(agent_class):
    agent = bound(agent_class)()
    weights = [p.detach().clone() for p in agent.policy.parameters()]
    for transition in transitions(40):
        agent.train(*transition)
    assert agent.num_timesteps == 40
    assert agent._n_updates > 0
    assert any(not torch.equal(w, p) for w, p in zip(weights, agent.policy.parameters()))
    if agent_class is DQNAgent:
        assert agent.replay_buffer.pos == 40
        assert agent.exploration_rate < 1.0


@pytest.mark.parametrize("agent_class", [PPOAgent, A2CAgent])
def test_rollout_buffer_holds_log_prob_of_the_action_trained_on(agent_class):
    agent = bound(agent_class, n_steps=64)()
    stream = list(transitions(10))
    for o_prev, a, r, o_next in stream:
        agent.train(o_prev, a, r, o_next)
    with torch.no_grad():
        obs = torch.tensor([o for o, *_ in stream])
        actions = torch.tensor([a for _, a, *_ in stream])
        _, log_prob, _ = agent.policy.evaluate_actions(obs, actions)
    stored = agent.rollout_buffer.log_probs[:10, 0]
    assert np.allclose(stored, log_prob.numpy(), atol=1e-5)
    assert np.array_equal(agent.rollout_buffer.actions[:10, 0, 0], actions.numpy())


def test_dqn_learns_a_bandit():
    """One observation; action 2 pays 1, the others 0."""
    agent = bound(
        DQNAgent, n_obs=1, learning_rate=5e-3, exploration_fraction=0.5, total_timesteps=300
    )()
    for _ in range(300):
        a = agent.act(0)
        agent.train(0, a, float(a == 2), 0)
    with torch.no_grad():
        assert int(agent.q_net(torch.tensor([0])).argmax()) == 2


def test_qlearner_learns_a_bandit():
    agent = bind_agent(QLearner, 3, 1, seed=0, epsilon=0.2)()
    for _ in range(300):
        a = agent.act(0)
        agent.train(0, a, float(a == 1), 0)
    assert agent.q[0].index(max(agent.q[0])) == 1


@pytest.mark.parametrize("agent_class", SB3)
def test_sb3_agents_take_box_observations(agent_class):
    box = spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)
    A = bound(agent_class, n_obs=box)
    first, second = A(), A()
    rng = np.random.default_rng(0)
    o = rng.uniform(-1, 1, 3).astype(np.float32)
    for _ in range(40):
        o2 = rng.uniform(-1, 1, 3).astype(np.float32)
        a = first.act(o)
        assert a == second.act(o) and 0 <= a < N_ACTIONS
        first.train(o, a, float(a == 0), o2)
        second.train(o, a, float(a == 0), o2)
        o = o2
    assert first._n_updates == second._n_updates > 0


def test_qlearner_rejects_box_observations():
    with pytest.raises(ValueError, match="discrete"):
        QLearner(2, spaces.Box(0, 1, (2,)))


def test_random_agent_uses_all_actions_about_equally():
    agent = bind_agent(RandomAgent, 3, 1, seed=0)()
    actions = []
    for _ in range(3000):
        actions.append(agent.act(0))
        agent.train(0, actions[-1], 0.0, 0)
    assert np.bincount(actions, minlength=3).min() > 900


@pytest.mark.parametrize("agent_class", SB3)
def test_network_output_cache_is_transparent(agent_class):
    A = bound(agent_class)
    cached, fresh = A(), A()
    for transition in transitions(60):
        for o in range(N_OBS):
            fresh.cache.clear()
            assert cached.act(o) == fresh.act(o)
        fresh.cache.clear()
        cached.train(*transition)
        fresh.train(*transition)
    if agent_class is not DQNAgent:
        assert np.array_equal(cached.rollout_buffer.values, fresh.rollout_buffer.values)


def test_cheap_agents_load_without_torch():
    code = (
        "import sys; from extended_envs.agents import QLearner, RandomAgent; "
        "assert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules; "
        "from extended_envs.agents import DQNAgent; assert 'torch' in sys.modules; "
        "import extended_envs.agents as agents; assert sorted(agents.__all__) == "
        "sorted(name for name in agents.__all__ if hasattr(agents, name))"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=root)


def test_qlearner_does_not_bootstrap_past_a_terminal_observation():
    agent = bind_agent(QLearner, 2, 3, seed=0, learning_rate=1.0, gamma=0.5)()
    agent.train(1, 0, 4.0, 2)  # Q[1][0] = 4
    agent.train(0, 1, 1.0, 1)  # bootstraps: 1 + 0.5 * 4
    assert agent.q[0][1] == 3.0
    agent.train(0, 1, 1.0, 1, terminated=True)
    assert agent.q[0][1] == 1.0
    agent.train(0, 1, 1.0, 1, truncated=True)  # a time limit's cut still bootstraps
    assert agent.q[0][1] == 3.0


def test_dqn_stores_terminated_not_truncated_as_done():
    agent = bound(DQNAgent)()
    agent.train(0, 1, 1.0, 2)
    agent.train(2, 0, 1.0, 3, terminated=True)
    agent.train(0, 2, 1.0, 1, truncated=True)
    buffer = agent.replay_buffer
    assert buffer.dones[:3, 0].tolist() == [0.0, 1.0, 0.0]
    assert buffer.next_observations[:3, 0, 0].tolist() == [2, 3, 1]


@pytest.mark.parametrize("agent_class", [PPOAgent, A2CAgent])
def test_on_policy_agents_cut_returns_at_episode_ends(agent_class):
    agent = bound(agent_class, n_steps=64, gamma=0.9)()
    agent.train(0, 1, 1.0, 2)
    agent.train(2, 0, 1.0, 3, terminated=True)
    agent.train(0, 2, 1.0, 1)
    agent.train(1, 2, 1.0, 3, truncated=True)
    agent.train(0, 1, 1.0, 2)
    buffer = agent.rollout_buffer
    assert buffer.episode_starts[1:5, 0].tolist() == [0.0, 1.0, 0.0, 1.0]  # after each end
    with torch.no_grad():
        terminal_value = float(agent.policy.predict_values(torch.tensor([3])))
    assert buffer.rewards[3, 0] == pytest.approx(1.0 + 0.9 * terminal_value, abs=1e-6)
    assert buffer.rewards[:3, 0].tolist() == [1.0, 1.0, 1.0]


def test_episode_ends_dont_break_semi_determinism():
    stream = [(o, a, r, n, i % 7 == 6, i % 11 == 10) for i, (o, a, r, n) in
              enumerate(transitions(60))]  # fmt: skip
    for agent_class in SB3:
        first, second = bound(agent_class)(), bound(agent_class)()
        for o, a, r, n, terminated, truncated in stream:
            for agent in (first, second):
                agent.train(o, a, r, n, terminated=terminated, truncated=truncated)
        assert policy(first) == policy(second)


@pytest.fixture
def sharing():
    from extended_envs.agents.shared_updates import SHARED_UPDATES

    SHARED_UPDATES.clear()
    yield SHARED_UPDATES
    SHARED_UPDATES.enabled = True
    SHARED_UPDATES.clear()


@pytest.mark.parametrize("agent_class", SB3)
def test_simulated_copies_share_updates_with_identical_results(agent_class, sharing):
    from extended_envs import run_environment
    from extended_envs.envs import TemptingButton

    kwargs = {**TINY[agent_class], "total_timesteps": 300}
    shared = run_environment(TemptingButton, agent_class, 300, seed=4, **kwargs)
    computed, reused = sharing.computed, sharing.reused
    sharing.clear()
    sharing.enabled = False
    alone = run_environment(TemptingButton, agent_class, 300, seed=4, **kwargs)
    assert np.array_equal(shared["rewards"], alone["rewards"])
    assert computed == reused == sharing.computed / 2 > 0  # the copy loads each update


@pytest.mark.parametrize("agent_class", SB3)
def test_shared_updates_leave_instances_independent(agent_class, sharing):
    A = bound(agent_class)
    first, second = A(), A()
    stream = list(transitions(40))
    for transition in stream:
        first.train(*transition)
        second.train(*transition)
    assert sharing.reused > 0
    for p, q in zip(first.policy.parameters(), second.policy.parameters(), strict=True):
        assert torch.equal(p, q) and p.data_ptr() != q.data_ptr()
    before = [p.detach().clone() for p in second.policy.parameters()]
    for transition in transitions(40, seed=1):  # only the first goes on
        first.train(*transition)
    assert all(torch.equal(b, p) for b, p in zip(before, second.policy.parameters(), strict=True))
    assert any(
        not torch.equal(b, p) for b, p in zip(before, first.policy.parameters(), strict=True)
    )
    third = A()  # trained differently: computes its own updates
    computed = sharing.computed
    for transition in transitions(40, seed=2):
        third.train(*transition)
    assert sharing.computed > computed
