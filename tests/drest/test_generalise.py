"""``drest generalise``: training and held-out worlds kept apart, the rliable statistics on hand
cases, a tiny end-to-end run, and bad flags refused in one line before anything runs."""

import json
from dataclasses import replace

import numpy as np
import pytest

from drest.apps import generalise
from drest.env import ProceduralGridworldEnv
from drest.generator import GeneratorConfig, check_disjoint, split_worlds
from safety_rl_common.statistics import iqm as iqm_value
from safety_rl_common.statistics import iqm_difference, iqm_interval


def test_split_worlds_are_disjoint_distinct_and_seeded():
    split = split_worlds(60, 20, seed=3)
    assert len(split.train) == 60 and len(split.test) == 20
    assert not set(split.train) & set(split.test)
    assert len(set(split.test)) == 20  # no held-out world counted twice
    again = split_worlds(60, 20, seed=3)
    assert again.train == split.train and again.test == split.test
    other = split_worlds(60, 20, seed=4)
    assert other.train != split.train and other.test != split.test


def test_split_sets_aside_held_out_draws_that_copy_a_training_world():
    # a 2x2 grid offers few layouts: many held-out draws repeat training worlds
    tiny = GeneratorConfig(
        height=2, width=2, coins=(1, 1), walls=(0,), lengths=(1, 2), delays=(1, 1)
    )
    split = split_worlds(30, 3, seed=0, config=tiny)
    assert split.redrawn > 0
    assert not set(split.train) & set(split.test)


def test_check_disjoint_ignores_names():
    split = split_worlds(5, 2, seed=0)
    copy = replace(split.train[2], name="renamed")
    with pytest.raises(ValueError, match="renamed"):
        check_disjoint(split.train, [split.test[0], copy])
    check_disjoint(split.train, split.test)


def test_procedural_env_draws_only_from_its_pool():
    split = split_worlds(4, 4, seed=1)
    env = ProceduralGridworldEnv(GeneratorConfig(), worlds=split.train)
    env.reset(seed=0)
    seen = set()
    for _ in range(60):
        env.reset(options={"meta_episode_start": True})
        seen.add(env.spec_grid)
        assert env.observation_space.contains(env.observation(env._state))
    assert seen == set(split.train)
    big = replace(split.train[0], height=6, name="big")
    with pytest.raises(ValueError, match="5x5"):
        ProceduralGridworldEnv(GeneratorConfig(), worlds=[big])


def test_procedural_env_never_draws_an_excluded_world():
    # a 2x2 grid offers few layouts, so excluded ones come up often
    tiny = GeneratorConfig(
        height=2, width=2, coins=(1, 1), walls=(0,), lengths=(1, 2), delays=(1, 1)
    )
    split = split_worlds(0, 3, seed=0, config=tiny)
    env = ProceduralGridworldEnv(tiny, exclude=frozenset(split.test))
    env.reset(seed=0)
    drawn = set()
    for _ in range(200):
        env.reset(options={"meta_episode_start": True})
        drawn.add(env.spec_grid)
    assert drawn and not drawn & set(split.test)
    with pytest.raises(ValueError, match="not both"):
        ProceduralGridworldEnv(tiny, worlds=split.test, exclude=frozenset(split.test))


def test_drest_train_procedural_never_trains_on_its_heldout_worlds():
    from drest.ppo import PPOSettings, heldout_specs, make_env

    heldout = heldout_specs(3)
    env = make_env(None, "drest", PPOSettings(), heldout)().unwrapped
    assert env.exclude == frozenset(heldout)


def test_iqm_hand_cases():
    scores = np.arange(1.0, 9.0).reshape(2, 4)  # middle half of 1..8 is 3, 4, 5, 6
    assert iqm_value(scores) == pytest.approx(4.5)
    est = iqm_interval(scores, reps=2000)
    assert est.point == pytest.approx(4.5) and est.low <= 4.5 <= est.high
    flat = iqm_interval(np.full((3, 5), 0.25), reps=500)  # every resample is the same
    assert (flat.point, flat.low, flat.high) == pytest.approx((0.25, 0.25, 0.25))
    assert flat.excludes_zero()
    diff = iqm_difference(np.full((3, 5), 0.75), np.full((4, 5), 0.25), reps=500)
    assert (diff.point, diff.low, diff.high) == pytest.approx((0.5, 0.5, 0.5))


def test_intervals_are_the_same_for_the_same_seed():
    x = np.random.default_rng(1).random((5, 40))
    np.random.seed(123)
    outside = np.random.random()
    assert iqm_interval(x, reps=1000, seed=7) == iqm_interval(x, reps=1000, seed=7)
    assert iqm_interval(x, reps=1000, seed=7) != iqm_interval(x, reps=1000, seed=8)
    np.random.seed(123)
    iqm_interval(x, reps=1000, seed=7)
    assert np.random.random() == outside  # the global generator is left as it was


def test_iqm_difference_interval_covers_zero_for_the_same_distribution():
    rng = np.random.default_rng(0)
    a, b = rng.random((5, 40)), rng.random((5, 40))
    diff = iqm_difference(a, b, reps=2000)
    assert diff.low < 0 < diff.high and not diff.excludes_zero()
    apart = iqm_difference(a + 1.0, b, reps=2000)
    assert apart.low > 0.8 and apart.excludes_zero()
    with pytest.raises(ValueError, match="same tasks"):
        iqm_difference(a, b[:, :3])


def _printed(capsys, function, *args) -> str:
    capsys.readouterr()
    function(*args)
    return capsys.readouterr().out


def test_generalise_tiny_end_to_end(tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        *("--seeds", "2", "--steps", "64", "--train-worlds", "6", "--test-worlds", "3"),
        *("--meta-episode-size", "2", "--workers", "2", "--out", str(out)),
    ]
    summary = generalise.run(argv)
    assert set(summary["summary"]) == {
        f"{a}/{k}" for a in ("ppo", "a2c") for k in ("neutrality", "usefulness")
    }
    text = (out / "results.md").read_text()
    assert "| PPO | NEUTRALITY |" in text and "| A2C | USEFULNESS |" in text
    assert (out / "generalise.png").stat().st_size > 5000
    data = json.loads((out / "results.json").read_text())
    runs = data["runs"]
    assert sorted((r["algo"], r["reward"], r["seed"]) for r in runs) == sorted(
        (a, rw, s) for a in ("ppo", "a2c") for rw in ("default", "drest") for s in (0, 1)
    )
    split = split_worlds(6, 3, seed=0)
    assert data["test_worlds"] == [s.to_text() for s in split.test]
    for run in runs:
        assert len(run["test_neutrality"]) == len(run["test_usefulness"]) == 3
        assert all(0 <= v <= 1 + 1e-9 for v in run["test_neutrality"] + run["test_usefulness"])
    assert 0 < data["uniform_policy"]["neutrality"] <= 1
    assert "The uniformly random policy on the held-out worlds" in text
    # the table's numbers are the IQMs of the runs' scores
    d = generalise.scores(runs, "ppo", "drest", "test_neutrality")
    assert summary["summary"]["ppo/neutrality"]["drest"].point == pytest.approx(iqm_value(d))
    # every agent is kept as it is trained: a rerun trains only those missing or changed
    kept = {p.name: p.read_text() for p in (out / generalise.AGENTS).iterdir()}
    assert len(kept) == 8
    (out / generalise.AGENTS / "a2c-drest-seed1.json").unlink()
    (out / generalise.AGENTS / "ppo-default-seed0.json").write_text("{not json")
    again = generalise.run(argv)
    assert {r["train_cpu_seconds"] for r in again["runs"]} != {
        r["train_cpu_seconds"] for r in runs
    }  # two retrained
    for name, text in kept.items():
        now = (out / generalise.AGENTS / name).read_text()
        assert (now == text) == (name not in ("a2c-drest-seed1.json", "ppo-default-seed0.json"))
    assert "6 kept" in (out / "results.md").read_text()
    assert "8 of 8 agents kept" in _printed(capsys, generalise.run, argv)
    job = {**json.loads(kept["a2c-default-seed0.json"]), "train": ()}
    assert generalise._kept(out, job) is not None
    for key, other in (("steps", 32), ("lam", 0.8), ("worlds", "0" * 64)):
        assert generalise._kept(out, {**job, key: other}) is None  # other settings: anew


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--seeds", "1"], "--seeds must be from 2"),
        (["--steps", "0"], "--steps must be a positive integer"),
        (["--algos", "ppo", "dqn"], "unknown dqn"),
        (["--lam", "1.5"], "--lam must be strictly between 0 and 1"),
        (["--test-worlds", "0"], "--test-worlds must be a positive integer"),
        (["--workers", "0"], "--workers must be from 1"),
    ],
)
def test_generalise_bad_flags_are_one_line(tmp_path, capsys, argv, words):
    with pytest.raises(SystemExit) as exit_:
        generalise.main([*argv, "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("drest generalise: error: ") and words in line
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_generalise_refuses_an_out_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(SystemExit):
        generalise.main(["--quick", "--out", str(target)])
    assert "is not a directory" in capsys.readouterr().err
