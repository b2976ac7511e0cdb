"""The Hydra apps' typed settings: bad values end the command with one line naming them."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from extended_envs.config import BenchmarkConfig, DebateConfig, typed
from safety_rl_common.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = {"benchmark": BenchmarkConfig, "debate": DebateConfig}


def defaults(app: str) -> dict:
    raw = OmegaConf.to_container(OmegaConf.load(ROOT / "extended_envs" / "conf" / f"{app}.yaml"))
    raw.pop("hydra")
    return raw


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.integers(), st.floats(allow_nan=True),
    st.text(max_size=6), st.sampled_from(["no", "yes", "off", "3", "0.5", "nan", "[]"]),
    st.lists(st.one_of(st.integers(-2, 4), st.text(max_size=3), st.none()), max_size=3),
    st.dictionaries(st.sampled_from(["q", "gamma", "x"]), st.integers(0, 2), max_size=2),
)  # fmt: skip


def well_formed(app: str, config, raw: dict) -> None:
    """What the app may rely on once :func:`typed` accepted its settings ``raw``."""
    for key in ("progress", "reality_check", "include_slow"):  # 2 is not "true"
        assert key not in raw or type(raw[key]) in (bool, str)
    for key in ("steps", "rounds", "max_value"):
        if hasattr(config, key):
            value = getattr(config, key)
            assert type(value) is int and value >= (0 if key == "max_value" else 1)
    assert config.seeds and all(type(s) is int and 0 <= s < 2**64 for s in config.seeds)
    assert type(config.progress) is bool
    if app == "benchmark":
        assert type(config.reality_check) is bool and type(config.include_slow) is bool
        assert all(type(name) is str for name in config.only)
        assert isinstance(config.hyperparams, dict)
    else:
        assert config.bobs and all(type(name) is str for name in config.bobs)
        assert all(type(v) is int for v in config.data)
        assert 0 < config.window <= 1 and not math.isnan(config.window)


@settings(max_examples=150, deadline=None)
@given(app=st.sampled_from(sorted(SCHEMAS)), data=st.data(), value=VALUES)
def test_any_setting_is_typed_or_named(app, data, value):
    raw = defaults(app)
    key = data.draw(st.sampled_from(sorted(raw)))
    raw[key] = value
    try:
        config = typed(SCHEMAS[app], OmegaConf.create(raw))
    except UserError as error:
        assert key in str(error) and "\n" not in str(error)
        return
    well_formed(app, config, raw)


@pytest.mark.parametrize(
    "text, expected", [("no", False), ("off", False), ("false", False), ("yes", True)]
)
def test_booleans_are_booleans(text, expected):
    raw = {**defaults("benchmark"), "reality_check": text}
    assert typed(BenchmarkConfig, OmegaConf.create(raw)).reality_check is expected


@pytest.mark.parametrize("value", [2, 0, 1, -1, 0.5, "maybe", "", [], {}])
def test_non_booleans_are_refused(value):
    raw = {**defaults("debate"), "progress": value}
    with pytest.raises(UserError, match="^progress must be true or false"):
        typed(DebateConfig, OmegaConf.create(raw))


def run_app(app: str, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "extended_envs", app, "progress=false", *overrides],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_reality_check_no_runs_the_agent_itself(tmp_path):
    done = run_app("benchmark", "agent=q", "steps=5", "reality_check=no", "only=[TemptingButton]",
                   f"hydra.run.dir={tmp_path}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "results.csv") as f:
        assert {row["agent"] for row in csv.DictReader(f)} == {"QLearner"}


@pytest.mark.parametrize(
    "app, override, named",
    [
        (
            "benchmark",
            "reality_check=maybe",
            "reality_check must be true or false (or yes/no, on/off), got 'maybe'",
        ),
        ("benchmark", "steps=0", "steps must be a positive integer (at most 2**53), got 0"),
        (
            "benchmark",
            "+hyperparams.learning_rate=nan",
            "QLearner hyperparameter learning_rate must be a number in (0, 1], got nan",
        ),
        ("debate", "window=1.5", "window must be a number in (0, 1], got 1.5"),
        ("debate", "alice=nobody", "unknown agent 'nobody'"),
    ],
)
def test_bad_settings_end_with_one_line(app, override, named, tmp_path):
    done = run_app(app, override, f"hydra.run.dir={tmp_path}")
    assert done.returncode == 2
    message = done.stderr.split("error: ", 1)[1]
    assert done.stderr == f"python -m extended_envs {app}: error: {message}"
    assert named in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_hydra_full_error_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    done = run_app("debate", "rounds=0", f"hydra.run.dir={tmp_path}")
    assert done.returncode != 0
    assert (
        "Traceback" in done.stderr and "UserError: rounds must be a positive integer" in done.stderr
    )


def test_unknown_settings_and_wrong_types_are_named_in_the_one_style():
    raw = defaults("benchmark")
    with pytest.raises(UserError, match=r"^unknown key 'stepz' \(known: agent, steps, "):
        typed(BenchmarkConfig, OmegaConf.create({**raw, "stepz": 3}))
    with pytest.raises(UserError, match=r"^seeds\[1\] must be an integer, got 'x'$"):
        typed(BenchmarkConfig, OmegaConf.create({**raw, "seeds": [0, "x"]}))
    with pytest.raises(UserError, match="^hyperparams must be a mapping, got 3$"):
        typed(BenchmarkConfig, OmegaConf.create({**raw, "hyperparams": 3}))
