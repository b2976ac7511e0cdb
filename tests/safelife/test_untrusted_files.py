"""Opening a model or config file runs no code from it: model files load without unpickling
(``trusted=True`` alone runs SB3's full load), and saved configs may name only allowlisted code."""

import base64
import json
import shutil
import zipfile
from pathlib import Path

import cloudpickle
import pytest
import torch
from hydra import compose, initialize_config_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import safelife_rl.training  # noqa: F401  (config resolvers and schema)
from safelife_rl.envs.wrappers import sync_training_steps
from safelife_rl.training.config_targets import check_targets
from safelife_rl.training.envs import make_vec_env
from safelife_rl.training.model_files import load_model
from safelife_rl.training.resume import resume_config
from safelife_rl.training.run import load_run_config, plain, train
from safety_rl_common.errors import UserError

CONF = Path(__file__).resolve().parents[2] / "safelife_rl" / "conf"
TINY = [
    "experiment=paper",
    "env=append-still",
    "env.kwargs.view_shape=[17,17]",
    "env.kwargs.time_limit=30",
    "policy.kwargs.features_extractor_kwargs.features_dim=16",
    "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
    "n_envs=2",
    "vec_env=dummy",
    "progress_bar=false",
    "algo.n_steps=16",
    "total_timesteps=64",
    "callbacks.evaluation=null",
    "callbacks.checkpoint.save_every=64",
    "callbacks.checkpoint.keep=0",
]
ALGOS = {
    "ppo": [],
    "dqn": [
        "algo=dqn",
        "algo.learning_starts=32",
        "algo.buffer_size=500",
        "algo.train_freq=4",
        "algo.batch_size=8",
        "algo.target_update_interval=32",
    ],
}


def compose_train(*overrides, return_hydra_config=False):
    with initialize_config_dir(str(CONF), version_base=None):
        return compose("train", overrides=list(overrides), return_hydra_config=return_hydra_config)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``runs(algo)``: the folder of a 64-step training run (made once per algorithm)."""
    made = {}

    def run(algo="ppo"):
        if algo not in made:
            made[algo] = tmp_path_factory.mktemp(algo)
            train(compose_train(*TINY, *ALGOS[algo]), made[algo])
        return made[algo]

    return run


def envs(cfg):
    return make_vec_env(cfg.env.id, plain(cfg.env.kwargs), plain(cfg.wrappers), cfg.n_envs, "dummy")


class WriteMarker:
    """Unpickling it creates ``path``: the stand-in for code an attacker hides in a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def payload(marker):
    return {":serialized:": base64.b64encode(cloudpickle.dumps(WriteMarker(marker))).decode()}


def rewrite(model, out, change_data=None, entries=()):
    """A copy of ``model`` with its ``data`` JSON changed and other entries replaced."""
    entries = dict(entries)
    with zipfile.ZipFile(model) as source, zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            content = source.read(name)
            if name == "data" and change_data is not None:
                data = json.loads(content)
                change_data(data)
                content = json.dumps(data).encode()
            target.writestr(name, entries.get(name, content))
    return out


@pytest.mark.parametrize("algo", ALGOS)
def test_safe_load_continues_exactly_as_the_full_load(runs, algo):
    run = runs(algo)
    cfg = load_run_config(run)
    checkpoint = run / "checkpoints" / "model_64_steps.zip"
    continued = []
    for trusted in (True, False):
        env = envs(cfg)
        model = load_model(checkpoint, cfg, env, "cpu", trusted=trusted)
        assert model.num_timesteps == 64
        sync_training_steps(env, model.num_timesteps)
        model.learn(64, reset_num_timesteps=False)
        env.close()
        continued.append(model)
    full, safe = (m.get_parameters() for m in continued)
    assert safe["policy"].keys() == full["policy"].keys()
    for name, weights in full["policy"].items():
        assert torch.equal(safe["policy"][name], weights), name
    assert safe["policy.optimizer"]["state"].keys() == full["policy.optimizer"]["state"].keys()
    for key, state in full["policy.optimizer"]["state"].items():
        assert all(
            torch.equal(safe["policy.optimizer"]["state"][key][k], v)
            for k, v in state.items()
            if torch.is_tensor(v)
        )
    assert continued[0].num_timesteps == continued[1].num_timesteps == 128
    assert continued[0]._n_updates == continued[1]._n_updates > 0


def test_code_pickled_in_a_model_runs_only_when_trusted(runs, tmp_path):
    run = runs()
    cfg = load_run_config(run)
    marker = tmp_path / "marker"

    def plant(data):
        data["lr_schedule"] = payload(marker)

    crafted = rewrite(run / "final_model.zip", tmp_path / "crafted.zip", plant)
    model = load_model(crafted, cfg, envs(cfg), "cpu")
    assert not marker.exists()
    assert model.lr_schedule(1.0) == cfg.algo.learning_rate and model.num_timesteps == 64
    load_model(crafted, cfg, envs(cfg), "cpu", trusted=True)
    assert marker.exists()  # the opt-in is SB3's full load: the file's code ran


def test_trust_saved_in_a_run_folder_runs_nothing_on_resume(runs, tmp_path):
    """Trust comes from this invocation's command line alone, never from the folder resumed."""
    run = tmp_path / "run"
    shutil.copytree(runs(), run)
    marker = tmp_path / "marker"
    saved = OmegaConf.load(run / "config.yaml")
    saved.trust_pickle = True
    (run / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    crafted = rewrite(
        run / "final_model.zip",
        tmp_path / "crafted.zip",
        lambda data: data.update(lr_schedule=payload(marker)),
    )
    crafted.replace(run / "final_model.zip")
    given = [f"resume={run}", "total_timesteps=96"]
    cfg = resume_config(compose_train(*TINY, *given), given)
    assert cfg.trust_pickle is False
    train(cfg, run, resume=True, trusted=cfg.trust_pickle)
    assert not marker.exists()
    given.append("trust_pickle=true")
    assert resume_config(compose_train(*TINY, *given), given).trust_pickle is True


@pytest.mark.parametrize("module", ["safelife_rl.__main__", "drest._private", "gymnasium.__init__"])
def test_an_env_id_may_not_import_main_or_private_modules(runs, module):
    cfg = saved_config(runs())
    cfg["env"]["id"] = f"{module}:Thing-v0"
    with pytest.raises(UserError, match=f"env.id: '{module}:Thing-v0' imports module"):
        check_targets(cfg, "RUN/config.yaml")


def test_unknown_saved_values_are_refused_by_name(runs, tmp_path):
    run = runs()
    cfg = load_run_config(run)
    marker = tmp_path / "marker"

    def plant(data):
        data["zz_extra"] = payload(marker)

    crafted = rewrite(run / "final_model.zip", tmp_path / "crafted.zip", plant)
    with pytest.raises(UserError, match="crafted.zip: saved values zz_extra are not values of"):
        load_model(crafted, cfg, envs(cfg), "cpu")
    assert not marker.exists()


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("num_timesteps", 1e30, r"saved count num_timesteps=1e\+30 is not an integer"),
        ("num_timesteps", -5, "saved count num_timesteps=-5 is not an integer"),
        ("_n_updates", 2.5, "saved count _n_updates=2.5 is not an integer"),
        ("num_timesteps", float("nan"), "saved value num_timesteps=nan is not a finite number"),
        ("_current_progress_remaining", float("inf"), "_current_progress_remaining=inf is not a"),
    ],
)
def test_crafted_step_counts_are_refused(runs, tmp_path, key, value, message):
    run = runs()
    cfg = load_run_config(run)

    def plant(data):
        data[key] = value

    crafted = rewrite(run / "final_model.zip", tmp_path / "crafted.zip", plant)
    with pytest.raises(UserError, match=message):
        load_model(crafted, cfg, envs(cfg), "cpu")


@pytest.mark.parametrize("entry", ["policy.pth", "policy.optimizer.pth", "pytorch_variables.pth"])
@pytest.mark.parametrize("trusted", [False, True])
def test_weights_are_read_without_unpickling_code(runs, tmp_path, entry, trusted):
    run = runs()
    cfg = load_run_config(run)
    marker = tmp_path / "marker"
    pickled = tmp_path / "pickled.pth"
    torch.save(WriteMarker(marker), pickled)
    crafted = rewrite(
        run / "final_model.zip", tmp_path / "crafted.zip", entries={entry: pickled.read_bytes()}
    )
    with pytest.raises(UserError, match="crafted.zip: cannot be loaded as the PPO model"):
        load_model(crafted, cfg, envs(cfg), "cpu", trusted=trusted)
    assert not marker.exists()


def test_a_model_of_another_algorithm_is_refused(runs):
    run = runs()
    cfg = load_run_config(run)
    cfg.algo._target_ = "stable_baselines3.A2C"
    with pytest.raises(UserError, match="final_model.zip: a PPO model, not A2C"):
        load_model(run / "final_model.zip", cfg, envs(cfg), "cpu")


def test_a_safe_load_needs_the_run_config(runs):
    with pytest.raises(UserError, match="without unpickling needs its run's config"):
        load_model(runs() / "final_model.zip", None, None)


FIXTURES = HealthCheck.function_scoped_fixture  # the module's run, shared by every example
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[FIXTURES])
@given(data=st.data())
def test_fuzzed_model_files_load_or_fail_with_a_user_error(runs, tmp_path_factory, data):
    """Byte flips anywhere in the zip, or any saved value replaced by any JSON value (or a
    pickle): the safe load succeeds or raises a UserError, and never runs the pickle."""
    run = runs()
    cfg = load_run_config(run)
    folder = tmp_path_factory.mktemp("fuzz")
    marker = folder / "marker"
    original = (run / "final_model.zip").read_bytes()
    if data.draw(st.booleans(), label="flip bytes"):
        content = bytearray(original)
        for _ in range(data.draw(st.integers(1, 4), label="flips")):
            at = data.draw(st.integers(0, len(content) - 1), label="at")
            content[at] = data.draw(st.integers(0, 255), label="byte")
        crafted = folder / "crafted.zip"
        crafted.write_bytes(bytes(content))
    else:
        keys = sorted(json.loads(zipfile.ZipFile(run / "final_model.zip").read("data")))
        key = data.draw(st.sampled_from(keys), label="key")
        value = data.draw(JSON | st.just(payload(marker)), label="value")
        crafted = rewrite(
            run / "final_model.zip",
            folder / "crafted.zip",
            lambda saved: saved.__setitem__(key, value),
        )
    try:
        load_model(crafted, cfg, envs(cfg), "cpu")
    except UserError as error:
        assert "crafted.zip" in str(error)
    assert not marker.exists()


# Saved configs -------------------------------------------------------------------------------

DANGEROUS = [
    "os.system",
    "builtins.open",
    "builtins.exec",
    "subprocess.call",
    "subprocess.Popen",
    "posix.system",
    "torch.load",
    "pickle.loads",
    "hydra.utils.instantiate",
    "gymnasium.make",
    "gymnasium.register",
    "stable_baselines3.PPO.load",
    "stable_baselines3.common.save_util.load_from_pkl",
    "stable_baselines3.common.logger.CSVOutputFormat",
    "safety_rl_common.files.write_text",
    "safelife_rl.training.envs.importlib.import_module",
    "safelife_rl.__main__.main",
    "torch.nn.modules.module.torch.load",
    "safelife_rl.training.SafeLifeCNN.__init__",
    "not_a_module.thing",
    "safelife_rl.no_such_thing",
    "",
]
KEYS = st.text(st.characters(codec="ascii", categories=["Ll", "Nd"]), min_size=1, max_size=6)


def saved_config(run_folder):
    return OmegaConf.to_container(load_run_config(run_folder))


@settings(max_examples=60, deadline=None, suppress_health_check=[FIXTURES])
@given(target=st.sampled_from(DANGEROUS), getter=st.booleans(), data=st.data())
def test_a_target_outside_the_allowlist_is_refused_wherever_it_is(runs, target, getter, data):
    cfg = saved_config(runs())
    node, key = cfg, ""
    for _ in range(data.draw(st.integers(0, 4), label="depth")):
        children = [k for k, v in node.items() if isinstance(v, dict)]
        if not children:
            break
        name = data.draw(st.sampled_from(children), label="into")
        node, key = node[name], f"{key}.{name}" if key else name
    name = data.draw(KEYS, label="new key")
    planted = (
        {"_target_": "hydra.utils.get_method", "path": target}
        if getter
        else {"_target_": target, "x": 1}
    )
    if data.draw(st.booleans(), label="in a list"):
        node[name] = [1, planted]
        where = f"{name}[1]"
    else:
        node[name] = planted
        where = name
    where = f"{key}.{where}" if key else where
    where += ".path" if getter else "._target_"
    with pytest.raises(UserError) as error:
        check_targets(OmegaConf.create(cfg), "RUN/config.yaml")
    assert str(error.value).startswith(f"RUN/config.yaml: {where}: {target!r} is not allowed")


def test_interpolations_and_foreign_env_modules_are_refused(runs):
    cfg = saved_config(runs())
    cfg["wrappers"]["exit_bonus"]["bonus"] = "${oc.decode:'{_target_: os.system, command: ls}'}"
    with pytest.raises(UserError, match=r"wrappers.exit_bonus.bonus: interpolation"):
        check_targets(OmegaConf.create(cfg), "RUN/config.yaml")
    cfg = saved_config(runs())
    cfg["env"]["id"] = "antigravity:Thing-v0"
    with pytest.raises(UserError, match="env.id: 'antigravity:Thing-v0' imports module"):
        check_targets(cfg, "RUN/config.yaml")


def shipped_configs():
    """Every training config the shipped ``conf/`` tree composes: each option of each group,
    and each experiment."""
    groups = {
        group: sorted(p.stem for p in (CONF / group).glob("[!_]*.yaml"))
        for group in ("env", "algo", "policy", "wrappers", "callbacks", "experiment", "method")
    }
    yield ()
    for group, options in groups.items():
        for option in options:
            yield (f"{group}={option}",)


@pytest.mark.parametrize("overrides", list(shipped_configs()), ids=" ".join)
def test_every_target_of_the_shipped_configs_is_allowed(overrides):
    cfg = compose_train(*overrides)
    check_targets(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)), "conf")


@settings(max_examples=80, deadline=None, suppress_health_check=[FIXTURES])
@given(data=st.data())
def test_fuzzed_saved_configs_are_read_or_refused_with_a_user_error(runs, tmp_path_factory, data):
    """Byte flips in a run's ``config.yaml``, as the benchmark reads it next to a model: it is
    read and checked, or refused with a UserError naming the file."""
    from safelife_rl.apps.benchmark import run_config

    folder = tmp_path_factory.mktemp("config")
    content = bytearray((runs() / "config.yaml").read_bytes())
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        at = data.draw(st.integers(0, len(content) - 1), label="at")
        content[at] = data.draw(st.integers(0, 255), label="byte")
    (folder / "config.yaml").write_bytes(bytes(content))
    with (
        zipfile.ZipFile(runs() / "final_model.zip") as source,
        zipfile.ZipFile(folder / "model.zip", "w") as target,
    ):
        for name in set(source.namelist()) - {"run_config.yaml"}:  # the model's own copy
            target.writestr(name, source.read(name))
    try:
        found = run_config(folder / "model.zip")
    except UserError as error:
        assert "config.yaml" in str(error)
    else:
        assert found is not None and found[0] == str(folder / "config.yaml")
