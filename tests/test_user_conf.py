"""The researcher's ``conf/`` beside the package defaults (docs/configuration.md): the Hydra
plugin ``hydra_plugins.safety_rl_toolkit`` puts ``./conf`` on the search path of this project's
apps (or ``$SAFETY_RL_CONF``, or ``--config-dir``), every config of the repository's ``conf/``
composes through the app it is for, and the apps run them: from the repository's root, and from
a folder of the user's own holding a ``conf/``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra._internal.config_search_path_impl import ConfigSearchPathImpl
from hydra.core.plugins import Plugins
from hydra.errors import SearchPathException
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

import safelife_rl.training  # noqa: F401  (the train_schema config)
from drest.apps.train import TrainConfig
from extended_envs.config import BenchmarkConfig, DebateConfig, typed
from hydra_plugins.safety_rl_toolkit.user_conf import (
    APP_CONFIGS,
    ENV_VAR,
    PROVIDER,
    SCHEME,
    UserConfSearchPath,
)

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
#: Each app's experiments in conf/experiment/: safelife_rl's at the top, the others' in a
#: folder named after their package (added with `+`: their configs have no experiment slot).
SAFELIFE_EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
DREST_EXPERIMENTS = sorted(f"drest/{p.stem}" for p in (CONF / "experiment/drest").glob("*.yaml"))
BENCHMARK_EXPERIMENTS = ["extended_envs/q-battery"]
DEBATE_EXPERIMENTS = ["extended_envs/debate-long"]
SEARCHES = sorted(p.stem for p in (CONF / "hparams_search").glob("*.yaml"))


@pytest.fixture(autouse=True)
def no_conf_variable(monkeypatch):
    """The user's own ``$SAFETY_RL_CONF`` changes nothing here."""
    monkeypatch.delenv(ENV_VAR, raising=False)


def appended(main: str) -> list[str]:
    """What the plugin appends to the search path of an app whose primary configs are at
    ``main``."""
    search_path = ConfigSearchPathImpl()
    search_path.append("main", main)
    UserConfSearchPath().manipulate_search_path(search_path)
    return [entry.path for entry in search_path.get_path()[1:]]


def test_hydra_finds_the_plugin():
    found = [
        f"{p.__module__}.{p.__qualname__}" for p in Plugins.instance().discover(SearchPathPlugin)
    ]  # (Hydra imports it anew)
    assert "hydra_plugins.safety_rl_toolkit.user_conf.UserConfSearchPath" in found


@pytest.mark.parametrize("main", APP_CONFIGS)
def test_conf_of_the_current_folder_follows_the_package_defaults(main, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert appended(main) == []  # no conf/ here
    (tmp_path / "conf").mkdir()
    assert appended(main) == [f"{SCHEME}://{tmp_path / 'conf'}"]


def test_other_hydra_apps_are_left_alone(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    assert appended("pkg://someone_else.conf") == []
    assert appended(f"file://{ROOT / 'safelife_rl' / 'conf'}") == []  # the tests' own compose


def test_the_variable_names_another_folder_or_none(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_VAR, "elsewhere")
    assert appended("pkg://drest.conf") == [f"{SCHEME}://{tmp_path / 'elsewhere'}"]
    monkeypatch.setenv(ENV_VAR, "")
    assert appended("pkg://drest.conf") == []
    monkeypatch.setenv(ENV_VAR, "typo")
    with pytest.raises(SearchPathException, match=f"{ENV_VAR} is 'typo', which is not a folder"):
        appended("pkg://drest.conf")


def _compose(module: str, config: str, overrides: list[str], hydra: bool = True):
    with initialize_config_module(module, version_base=None):
        return compose(config, overrides=overrides, return_hydra_config=hydra)


def _selected(cfg, key: str):
    """What an override ``key=...`` chose: the option of a config group, or the setting."""
    if key in cfg.hydra.runtime.choices:
        return cfg.hydra.runtime.choices[key]
    return OmegaConf.select(cfg, key)


def _each_value(cfg, config: str, overrides: list[str]) -> None:
    """Every value of the sweep of ``cfg`` composes and is chosen (each once, not every
    combination)."""
    for key, values in (cfg.hydra.sweeper.params or {}).items():
        for value in str(values).split(","):
            job = _compose("safelife_rl.conf", config, [*overrides, f"{key}={value}"])
            assert _selected(job, key) == yaml.safe_load(value), (key, value)


@pytest.fixture
def at_root(monkeypatch):
    """Compose as a command run from the repository's root does (the plugin reads the current
    folder)."""
    monkeypatch.chdir(ROOT)


def test_no_config_of_conf_is_hidden_by_a_package_config():
    """A name both have is the package's (its configs come first), so conf/ must not repeat
    one."""
    ours = [p.relative_to(CONF) for p in CONF.rglob("*.yaml")]
    assert ours
    for package in ("safelife_rl", "drest", "extended_envs"):
        hidden = [str(p) for p in ours if (ROOT / package / "conf" / p).exists()]
        assert not hidden, (package, hidden)


@pytest.mark.parametrize("name", SAFELIFE_EXPERIMENTS)
def test_each_training_experiment_composes_with_every_value_of_its_sweep(name, at_root):
    cfg = _compose("safelife_rl.conf", "train", [f"experiment={name}"])
    assert cfg.hydra.runtime.choices.experiment == name
    _each_value(cfg, "train", [f"experiment={name}"])


def test_the_experiments_say_what_they_run(at_root):
    smoke = _compose("safelife_rl.conf", "train", ["experiment=smoke"])
    assert (smoke.total_timesteps, smoke.env.id, smoke.algo.n_steps) == (
        64,
        "safelife_rl/AppendStill-v1",
        16,
    )
    table = _compose("safelife_rl.conf", "train", ["experiment=paper-table1"])
    assert table.total_timesteps == 6_000_000
    assert len(table.hydra.sweeper.params["wrappers.side_effect_penalty.penalty"].split(",")) == 6
    methods = _compose("safelife_rl.conf", "train", ["experiment=methods"])
    compared = methods.hydra.sweeper.params.method.split(",")  # compare's default methods
    assert compared == ["ppo", "penalty", "aup", "aup_proj", "ppo_lagrangian"]


@pytest.mark.parametrize("name", DREST_EXPERIMENTS)
def test_each_drest_experiment_composes_and_checks(name, at_root):
    cfg = _compose("drest.conf", "train", [f"+experiment={name}"], hydra=False)
    TrainConfig.of(cfg)
    if name == "drest/lopsided-ppo":
        assert (cfg.gridworld, cfg.agent.name, cfg.agent.ent_coef) == ("lopsided", "ppo", 0.2)


@pytest.mark.parametrize(
    ("config", "schema", "name"),
    [
        *(("benchmark", BenchmarkConfig, name) for name in BENCHMARK_EXPERIMENTS),
        *(("debate", DebateConfig, name) for name in DEBATE_EXPERIMENTS),
    ],
)
def test_each_extended_envs_experiment_composes_and_checks(config, schema, name, at_root):
    assert (CONF / "experiment" / f"{name}.yaml").is_file()
    typed(schema, _compose("extended_envs.conf", config, [f"+experiment={name}"], hydra=False))


def test_every_extended_envs_experiment_is_tested():
    found = sorted(
        f"extended_envs/{p.stem}" for p in (CONF / "experiment/extended_envs").glob("*.yaml")
    )
    assert found == sorted(BENCHMARK_EXPERIMENTS + DEBATE_EXPERIMENTS)


@pytest.mark.parametrize("name", SEARCHES)
def test_each_search_composes_with_every_value(name, at_root):
    cfg = _compose("safelife_rl.conf", "train", [f"+hparams_search={name}"])
    assert cfg.hydra.sweeper.params and cfg.hydra.sweeper._target_.endswith("BasicSweeper")
    _each_value(cfg, "train", [f"+hparams_search={name}"])


@pytest.mark.parametrize(
    ("launcher", "target", "settings"),
    [
        (
            "workstation",
            "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
            {"n_jobs": 4},
        ),
        (
            "cluster",
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
            {"partition": "gpu", "cpus_per_task": 16},
        ),  # cpus_per_task: the package's slurm.yaml
        (
            "cluster-local",
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
            {"timeout_min": 30},
        ),
    ],
)
def test_each_launcher_extends_the_packages(launcher, target, settings, at_root):
    cfg = _compose("safelife_rl.conf", "train", [f"hydra/launcher={launcher}"])
    assert cfg.hydra.launcher._target_ == target
    assert {k: cfg.hydra.launcher[k] for k in settings} == settings


def test_conf_local_keeps_only_its_readme_in_git():
    ignored = subprocess.run(
        ["git", "check-ignore", "conf/local/mybox.yaml", "conf/local/README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.stdout.split() == ["conf/local/mybox.yaml"]


def test_the_machine_config_conf_local_shows(tmp_path, monkeypatch):
    """The example of conf/local/README.md, as conf/local/mybox.yaml of a folder, is
    ``+local=mybox``."""
    text = (CONF / "local" / "README.md").read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "conf" / "local").mkdir(parents=True)
    (tmp_path / "conf" / "local" / "mybox.yaml").write_text(example)
    monkeypatch.chdir(tmp_path)
    cfg = _compose("safelife_rl.conf", "train", ["+local=mybox"], hydra=False)
    settings = yaml.safe_load(example)
    assert settings and {k: cfg[k] for k in settings} == settings


#: The files docs/configuration.md writes into conf/ (``cat > conf/PATH <<'EOF' ... EOF``).
DOC_FILE = re.compile(r"^cat > conf/(\S+) <<'EOF'\n(.*?)^EOF$", re.MULTILINE | re.DOTALL)


def test_the_configs_the_docs_add_compose(tmp_path, monkeypatch):
    """Each file docs/configuration.md adds to conf/, in a folder of its own, composes through
    the command the page runs it with."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    written = dict(DOC_FILE.findall(page))
    assert sorted(written) == [
        "experiment/drest/lopsided-default.yaml",
        "experiment/my-append-still.yaml",
        "local/mybox.yaml",
    ]
    for name, text in written.items():
        (tmp_path / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    mine = _compose(
        "safelife_rl.conf", "train", ["experiment=my-append-still", "+local=mybox"], hydra=False
    )
    assert (mine.env.id, mine.total_timesteps, mine.algo.learning_rate) == (
        "safelife_rl/AppendStill-v1",
        200000,
        1e-4,
    )
    assert (mine.device, mine.n_envs) == ("cuda", 32)
    drest = _compose("drest.conf", "train", ["+experiment=drest/lopsided-default"], hydra=False)
    TrainConfig.of(drest)
    assert (drest.gridworld, drest.reward) == ("lopsided", "default")


# --- the apps, run as the user runs them -------------------------------------------------


def run(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    environ.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (argv, done.stderr[-3000:])
    return done


def test_a_sweep_of_the_search_trains_from_the_root(tmp_path):
    """Two runs of the PPO search on the smoke experiment: conf/ found from the root."""
    run(
        "safelife_rl",
        "train",
        "-m",
        "experiment=smoke",
        "+hparams_search=ppo-append-still",
        "algo.learning_rate=1e-4,3e-4",
        "algo.ent_coef=0.01",
        "algo.n_epochs=3",
        f"hydra.sweep.dir={tmp_path}",
        cwd=ROOT,
    )
    rates = []
    for job in ("0", "1"):
        assert (tmp_path / job / "final_model.zip").is_file()
        saved = yaml.safe_load((tmp_path / job / "config.yaml").read_text())
        assert saved["total_timesteps"] == 64
        rates.append(saved["algo"]["learning_rate"])
    assert rates == [1e-4, 3e-4]


def test_drest_and_extended_envs_run_their_experiments_from_the_root(tmp_path):
    run(
        "drest",
        "train",
        "+experiment=drest/lopsided-ppo",
        "agent.total_timesteps=1024",
        "agent.eval_freq=1024",
        f"hydra.run.dir={tmp_path / 'drest'}",
        cwd=ROOT,
    )
    metrics = yaml.safe_load((tmp_path / "drest" / "metrics.json").read_text())
    assert (metrics["gridworld"], metrics["agent"]) == ("lopsided", "ppo")
    run(
        "extended_envs",
        "benchmark",
        "+experiment=extended_envs/q-battery",
        "steps=50",
        "seeds=[0]",
        "only=[TemptingButton]",
        "progress=false",
        f"hydra.run.dir={tmp_path / 'benchmark'}",
        cwd=ROOT,
    )
    assert "QLearner" in (tmp_path / "benchmark" / "results.csv").read_text()
    done = run(
        "extended_envs",
        "debate",
        "+experiment=extended_envs/debate-long",
        "rounds=200",
        "seeds=[0]",
        "bobs=[random]",
        "progress=false",
        f"hydra.run.dir={tmp_path / 'debate'}",
        cwd=ROOT,
    )
    assert "| random | 1 |" in done.stdout


#: A user's experiment in a folder of their own: the package's experiment=paper, shrunk.
MY_RUN = """\
# @package _global_
defaults:
  - paper
  - override /env: append-still
  - _self_
total_timesteps: 32
n_envs: 2
progress_bar: false
env: {kwargs: {view_shape: [17, 17], time_limit: 20}}
policy: {kwargs: {features_extractor_kwargs: {features_dim: 8, conv_channels: [4, 8, 8]}}}
algo: {n_steps: 16}
callbacks: {evaluation: {eval_every: 32, n_episodes: 1}, checkpoint: null}
"""


def test_a_folder_of_the_users_own_with_a_conf(tmp_path):
    """The training app run from a folder holding conf/experiment/my-run.yaml and a machine
    config in conf/local/ uses both."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "local").mkdir()
    (tmp_path / "conf" / "experiment" / "my-run.yaml").write_text(MY_RUN)
    (tmp_path / "conf" / "local" / "mybox.yaml").write_text("# @package _global_\nseed: 7\n")
    run(
        "safelife_rl",
        "train",
        "experiment=my-run",
        "+local=mybox",
        "hydra.run.dir=run",
        cwd=tmp_path,
    )
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert (saved["total_timesteps"], saved["env"]["id"]) == (32, "safelife_rl/AppendStill-v1")
    assert saved["seed"] == 7
    assert (tmp_path / "run" / "final_model.zip").is_file()


def test_config_dir_and_the_variable_name_a_folder_elsewhere(tmp_path):
    """``--config-dir DIR`` and ``$SAFETY_RL_CONF=DIR`` each add a folder that is not
    ./conf."""
    experiment = tmp_path / "elsewhere" / "experiment"
    experiment.mkdir(parents=True)
    (experiment / "mine.yaml").write_text(
        "# @package _global_\nagent: random\nsteps: 20\nseeds: [0]\nonly: [TemptingButton]\n"
        "progress: false\n"
    )
    (tmp_path / "here").mkdir()
    run(
        "extended_envs",
        "benchmark",
        "--config-dir",
        "../elsewhere",
        "+experiment=mine",
        "hydra.run.dir=a",
        cwd=tmp_path / "here",
    )
    run(
        "extended_envs",
        "benchmark",
        "+experiment=mine",
        "hydra.run.dir=b",
        cwd=tmp_path / "here",
        env={ENV_VAR: str(tmp_path / "elsewhere")},
    )
    for out in ("a", "b"):
        assert "RandomAgent" in (tmp_path / "here" / out / "results.csv").read_text()
    shown = run(
        "extended_envs",
        "benchmark",
        "--info",
        "searchpath",
        cwd=tmp_path,
        env={ENV_VAR: "elsewhere"},
    )
    assert f"{PROVIDER}" in shown.stdout and str(tmp_path / "elsewhere") in shown.stdout
