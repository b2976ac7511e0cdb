"""Population runs (:mod:`safelife_rl.training.population.runs`) and ``reproduce --population``:
each member leaves an ordinary run folder, a part-trained member resumes on its own, and what
cannot be a population is refused in one line before anything runs."""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest
import torch
import yaml
from omegaconf import open_dict
from stable_baselines3 import PPO

from safelife_rl.apps.reproduce import cli
from safelife_rl.apps.reproduce.runs import Run
from safelife_rl.training import PPOLagrangian
from safelife_rl.training.callbacks import RunStopped
from safelife_rl.training.population import PopulationPPO
from safelife_rl.training.population import runs as population_runs
from safelife_rl.training.population.record import joined_rollouts
from safelife_rl.training.population.runs import check_population, train_population
from safelife_rl.training.rollout_record import SavedRollouts
from safelife_rl.training.run import train
from safety_rl_common.errors import UserError
from tests.safelife.test_exact_resume import rows

LEVELS = "env.kwargs.bank={size:4,progress:false}"  # levels the device keeps


#: the penalty ramp's share at each rollout's start (0, 32, 64, 96 steps) under RAMP_STEPS
RAMP_STEPS = "wrappers.side_effect_penalty.ramp.steps=[32,96]"
RAMP_AT_ROLLOUTS = [0.0, 0.0, 0.5, 1.0]


def members(train_config, *overrides, count=2):
    cfgs = []
    for k in range(count):
        cfg = train_config(LEVELS, "vec_env=device", *overrides)
        with open_dict(cfg):
            cfg.seed = k
            if cfg.wrappers.side_effect_penalty is not None:
                cfg.wrappers.side_effect_penalty.penalty = 0.1 * k
        cfgs.append(cfg)
    return cfgs


def test_members_train_into_ordinary_run_folders(train_config, tmp_path, tb_scalars):
    folders = [tmp_path / "a", tmp_path / "b"]
    summaries = train_population(members(train_config, "total_timesteps=128", RAMP_STEPS), folders)
    assert [s["timesteps"] for s in summaries] == [128, 128]
    assert all("trained" in s and "random" in s for s in summaries)
    for k, folder in enumerate(folders):
        config = yaml.safe_load((folder / "config.yaml").read_text())
        assert config["seed"] == k and config["vec_env"] == "device"
        assert config["wrappers"]["side_effect_penalty"]["penalty"] == pytest.approx(0.1 * k)
        model = PPO.load(folder / "final_model.zip", device="cpu")
        assert model.num_timesteps == 128
        assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == [
            "model_128_steps.zip",
            "model_64_steps.zip",
        ]
        logged = tb_scalars(folder / "tensorboard")
        assert "train/value_loss" in logged
        penalties = [e.value for e in logged["schedule/side_effect_penalty"]]
        assert penalties == pytest.approx([0.1 * k * ramp for ramp in RAMP_AT_ROLLOUTS])
        assert (folder / "learning_curve.png").is_file()
    with pytest.raises(UserError, match="holds a run already"):
        train_population(members(train_config, "total_timesteps=64"), folders)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["method=aup"], "a population trains PPO, PPO with the impact penalty and PPO-Lag"),
        # a member is a vec_env=device run: refused as a single device run of A2C is
        (["algo=a2c"], "vec_env=device trains PPO and PPOLagrangian, not stable_baselines3.A2C"),
        (["wrappers.side_effect_penalty=null"], "need the side_effect_penalty wrapper"),
    ],
)
def test_what_cannot_be_a_population_is_refused(train_config, overrides, message):
    with pytest.raises(UserError, match=re.escape(message)):
        check_population(members(train_config, *overrides))


def test_members_may_differ_only_in_seed_and_penalty(train_config):
    cfgs = members(train_config)
    with open_dict(cfgs[1]):
        cfgs[1].algo.n_epochs = 5
    with pytest.raises(UserError, match=r"member 1 differs from member 0 in algo.n_epochs"):
        check_population(cfgs)


def test_a_population_beyond_the_memory_is_refused(train_config, tmp_path, monkeypatch):
    monkeypatch.setattr(population_runs, "free_memory", lambda device: 2**20)
    with pytest.raises(UserError, match=r"a population of 2 needs about .* at most about 0"):
        train_population(
            members(train_config, "total_timesteps=64"), [tmp_path / "a", tmp_path / "b"]
        )
    assert not (tmp_path / "a").exists()


def test_reproduce_trains_a_task_as_one_population_and_resumes_a_member_alone(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["table1", "--quick", "--population", "--tasks", "prune-still", "--out", str(out)]

    def run_and_check(line: str) -> str:
        cli.main(argv)
        printed = capsys.readouterr().out
        assert line in printed
        for penalty in (0.0, 0.5):
            folder = Run("prune-still", penalty, 0).folder(out)
            assert (folder / "benchmark.csv").is_file()
            assert PPO.load(folder / "final_model.zip", device="cpu").num_timesteps == 1536
        return printed

    run_and_check("[run] prune-still: training 2 runs as one population")

    def stop(penalty: float) -> None:  # as a job killed after the checkpoint of 768 steps
        folder = Run("prune-still", penalty, 0).folder(out)
        for name in ("benchmark.csv", "evaluation.json", "final_model.zip"):
            (folder / name).unlink()
        (folder / "checkpoints" / "model_1536_steps.zip").unlink()

    stop(0.5)
    printed = run_and_check("[run] prune-still penalty 0.5 seed 0: resuming on its own")
    assert "1 of 2 runs to train" in printed
    stop(0.0)
    stop(0.5)
    run_and_check("[run] prune-still: resuming 2 runs as one population")


@pytest.mark.parametrize("batching", ["loop", "vmap"])
def test_a_resumed_population_continues_each_member_from_its_checkpoint(
    train_config, tmp_path, batching, monkeypatch
):
    from safelife_rl.training.device import trainer

    if batching == "vmap":  # as on CUDA
        original = trainer.StackedNetworks
        monkeypatch.setattr(trainer, "StackedNetworks", lambda nets, _: original(nets, "vmap"))
    folders = [tmp_path / "a", tmp_path / "b"]
    cfgs = members(train_config, "total_timesteps=128")
    train_population(cfgs, folders)
    saved = [PPO.load(f / "checkpoints" / "model_64_steps.zip", device="cpu") for f in folders]
    uninterrupted = [PPO.load(f / "final_model.zip", device="cpu") for f in folders]
    for folder in folders:
        (folder / "final_model.zip").unlink()
        (folder / "checkpoints" / "model_128_steps.zip").unlink()
    loaded = {}

    def load_members(trainer_, cfgs_, folders_, steps):
        restored = load(trainer_, cfgs_, folders_, steps)
        loaded["steps"] = steps
        loaded["weights"] = [
            [p.detach().clone() for p in m.policy.parameters()] for m in trainer_.members
        ]
        stacked = trainer_.optimizer.optimizer
        if stacked is not None:  # the stack holds every member's moments
            first = trainer_.stacked.parameters()[0]
            loaded["moments"] = stacked.state[first]["exp_avg"].clone()
        return restored

    load = population_runs._load_members
    monkeypatch.setattr(population_runs, "_load_members", load_members)
    summaries = train_population(cfgs, folders, resume=True)
    assert loaded["steps"] == 64 and [s["timesteps"] for s in summaries] == [128, 128]
    for k, model in enumerate(saved):
        for p, q in zip(model.policy.parameters(), loaded["weights"][k]):
            assert torch.equal(p, q)
        moments = model.policy.optimizer.state_dict()["state"][0]["exp_avg"]
        if "moments" in loaded:
            assert torch.equal(loaded["moments"][k], moments)
        final = PPO.load(folders[k] / "final_model.zip", device="cpu")
        assert final.num_timesteps == 128
        assert not torch.equal(next(final.policy.parameters()), loaded["weights"][k][0])
        # the envs, random streams and logged values replayed: exactly where the uninterrupted
        # population ended (in either batching: the same kernels run on the same values)
        assert_same_model(final, uninterrupted[k])
    with pytest.raises(UserError, match="holds no run to resume"):
        train_population(cfgs, [tmp_path / "c", tmp_path / "d"], resume=True)


def assert_same_model(model, expected):
    networks = [(model.policy, expected.policy)]
    if hasattr(expected, "cost_critic"):  # PPO-Lagrangian's
        networks.append((model.cost_critic, expected.cost_critic))
        assert torch.equal(model.lagrange_state, expected.lagrange_state)
        assert torch.equal(model.cost_optimizer.state_dict()["state"][0]["exp_avg"],
                           expected.cost_optimizer.state_dict()["state"][0]["exp_avg"])  # fmt: skip
    for network, other in networks:
        for p, q in zip(network.parameters(), other.parameters(), strict=True):
            assert torch.equal(p, q)
    moments = model.policy.optimizer.state_dict()["state"]
    for key, state in expected.policy.optimizer.state_dict()["state"].items():
        assert torch.equal(moments[key]["exp_avg_sq"], state["exp_avg_sq"])


def test_a_lagrangian_population_trains_and_resumes_exactly(train_config, tmp_path):
    """PPO-Lagrangian members with their own budgets: resumed together from their checkpoints,
    and one resumed alone, they end bit for bit where the uninterrupted population ends."""
    folders = [tmp_path / "a", tmp_path / "b"]
    cfgs = members(train_config, "total_timesteps=128", "method=ppo_lagrangian")
    for k, cfg in enumerate(cfgs):
        with open_dict(cfg):
            cfg.cost_limit = 0.5 + k
    train_population(cfgs, folders)

    def final(folder):
        return PPOLagrangian.load(folder / "final_model.zip", device="cpu")

    def stop(folder):
        (folder / "final_model.zip").unlink()
        (folder / "checkpoints" / "model_128_steps.zip").unlink()

    uninterrupted = [final(f) for f in folders]
    assert [m.cost_limit for m in uninterrupted] == [0.5, 1.5]
    progress = rows(folders[1])
    assert "safety/multiplier" in progress[-1]
    for folder in folders:
        stop(folder)
    train_population(cfgs, folders, resume=True)
    for folder, expected in zip(folders, uninterrupted):
        assert_same_model(final(folder), expected)
    stop(folders[1])
    train(cfgs[1], folders[1], resume=True)
    assert_same_model(final(folders[1]), uninterrupted[1])
    assert rows(folders[1]) == progress


def test_a_member_resumed_alone_ends_where_it_ends_in_the_population(train_config, tmp_path):
    """A member's checkpoint holds its single run's rollout record (its actions, its own random
    streams): resumed on its own as a DevicePPO run, it ends bit for bit where it ended in the
    population (member by member, as on the CPU)."""
    folders = [tmp_path / "a", tmp_path / "b"]
    cfgs = members(train_config, "total_timesteps=128", RAMP_STEPS)
    train_population(cfgs, folders)
    uninterrupted = PPO.load(folders[1] / "final_model.zip", device="cpu")
    progress = rows(folders[1])
    (folders[1] / "final_model.zip").unlink()
    (folders[1] / "checkpoints" / "model_128_steps.zip").unlink()
    summary = train(cfgs[1], folders[1], resume=True)
    assert summary["timesteps"] == 128
    assert_same_model(PPO.load(folders[1] / "final_model.zip", device="cpu"), uninterrupted)
    assert rows(folders[1]) == progress


def test_a_population_needs_levels_the_device_keeps(tmp_path, capsys):
    argv = ["table1", "--quick", "--population", "--out", str(tmp_path), "env.kwargs.bank=null"]
    with pytest.raises(SystemExit) as ended:
        cli.main(argv)
    assert ended.value.code == 2
    assert "train from a level bank (env.kwargs.bank={size:1000})" in capsys.readouterr().err


def test_a_stopped_population_saves_every_member_and_resumes(train_config, tmp_path, monkeypatch):
    """SIGTERM mid-run: every member saves at the last rollout boundary (32 steps: one rollout
    of 2 envs x 16 steps), and the population continues from there."""
    original = PopulationPPO.collect_rollouts
    rollouts = []

    def collect(self, callbacks):
        rollouts.append(1)
        if len(rollouts) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, callbacks)

    monkeypatch.setattr(PopulationPPO, "collect_rollouts", collect)
    folders = [tmp_path / "a", tmp_path / "b"]
    cfgs = members(train_config, "total_timesteps=128")
    with pytest.raises(RunStopped, match=r"stopped by SIGTERM at 32 steps a member"):
        train_population(cfgs, folders)
    for folder in folders:
        saved = PPO.load(folder / "checkpoints" / "model_32_steps.zip", device="cpu")
        assert saved.num_timesteps == 32
        assert not (folder / "final_model.zip").exists()
    summaries = train_population(cfgs, folders, resume=True)
    assert [s["timesteps"] for s in summaries] == [128, 128]


def test_the_comparison_trains_its_batchable_methods_as_populations(tmp_path, capsys):
    """Of the comparison's methods, PPO and PPO with the impact penalty are one population per
    task, PPO-Lagrangian's runs another; the others train one run per process (here: none)."""
    from safelife_rl.apps import compare
    from safelife_rl.apps.reproduce.sweep import Settings, population_groups

    settings = Settings("paper-quick", 1536, 3, 2, (), axis="method", suite="ours")
    runs = [Run("prune-still", m, 0) for m in ("ppo", "penalty", "aup", "ppo_lagrangian")]
    groups = population_groups(runs, settings)
    assert sorted(map(sorted, groups)) == [["penalty", "ppo"], ["ppo_lagrangian"]]
    out = tmp_path / "out"
    methods = "ppo,penalty,ppo_lagrangian"
    argv = ["--quick", "--population", "--methods", methods, "--tasks", "prune-still"]
    compare.main([*argv, "--seeds", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "[run] prune-still: training 2 runs as one population" in printed
    assert "[run] prune-still: training 1 run as one population" in printed
    for method, penalty in (("ppo", 0.0), ("penalty", 0.3), ("ppo_lagrangian", 0.0)):
        config = yaml.safe_load(
            (Run("prune-still", method, 0).folder(out) / "config.yaml").read_text()
        )
        assert config["method"]["name"] == method
        assert config["wrappers"]["side_effect_penalty"]["penalty"] == penalty
    assert (out / "comparison.md").is_file()


def test_members_whose_records_were_not_made_together_are_refused(tmp_path):
    """Members resumed together replay one vector env: their saved records must share their
    rollout starts, step offset and length."""

    def saved(starts, steps=8):
        return SavedRollouts(np.zeros((steps, 2), np.int64), np.array(starts), {"offset": 0})

    paths = [tmp_path / "a.zip", tmp_path / "b.zip"]
    assert joined_rollouts([saved([0, 4]), saved([0, 4])], paths).shape == (8, 4)
    for other in (saved([0, 2, 4]), saved([0, 4], steps=4)):
        with pytest.raises(UserError, match=r"b.zip: its rollout record does not match .*a.zip"):
            joined_rollouts([saved([0, 4]), other], paths)
