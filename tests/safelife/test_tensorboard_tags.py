"""Every TensorBoard tag the docs name is written by a tiny run of the method it belongs to,
and every run writes its settings and final metrics for TensorBoard's HParams dashboard."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from safelife_rl.training.run import train

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "commands" / "train.md", ROOT / "docs" / "safelife" / "methods.md"]
#: Tags of one method or kind of run, by their prefix.
OWNERS = {"safety/": "ppo_lagrangian", "aup/": "aup"}
AUP_TINY = [
    "total_timesteps=640",
    "method.buffer_steps=64",
    "method.aux_steps=256",
    "method.vae.hidden=[32,16]",
    "method.vae.epochs=3",
    "method.vae.batch_size=16",
    "method.aux_agent.buffer_size=500",
    "method.aux_agent.learning_starts=64",
]
RUNS = {
    "ppo": ["total_timesteps=64"],
    "penalty": ["total_timesteps=64"],
    "cost_penalty": ["total_timesteps=64"],
    "ppo_lagrangian": ["cost_limit=2", "total_timesteps=128"],
    "aup": AUP_TINY,
}


def expand(tag: str) -> list[str]:
    """``a/{b,c}`` -> ``a/b``, ``a/c`` (every brace group)."""
    parts = re.split(r"\{([^}]*)\}", tag)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def documented_tags() -> set[str]:
    tags = set()
    for page in PAGES:
        for tag in re.findall(
            r"`((?:episode|schedule|safety|aup|eval|final)/[\w{},/-]+)`", page.read_text()
        ):
            tags.update(expand(tag))
    return tags


def test_the_docs_name_tags_of_every_kind():
    tags = documented_tags()
    assert {
        "episode/reward",
        "safety/multiplier_update",
        "safety/episode_cost",
        "aup/q_difference",
        "eval/cost",
        "final/mean_performance",
    } <= tags, tags


@pytest.fixture(scope="module")
def logged(tmp_path_factory, request):
    """Each method's tiny run: its scalar tags and its HParams session data."""
    from tests.safelife.conftest import config  # noqa: PLC0415

    done = {}
    for method, overrides in RUNS.items():
        folder = tmp_path_factory.mktemp(method)
        train(config(f"method={method}", "++env.kwargs.side_effects=true", *overrides), folder)
        events = EventAccumulator(str(folder / "tensorboard"), size_guidance={"scalars": 0})
        events.Reload()
        content = events.PluginTagToContent("hparams")
        start = plugin_data_pb2.HParamsPluginData.FromString(
            content["_hparams_/session_start_info"]
        ).session_start_info
        done[method] = (set(events.Tags()["scalars"]), start)
    return done


@pytest.mark.parametrize("method", RUNS)
def test_each_documented_tag_is_written(logged, method):
    scalars, _ = logged[method]
    wanted = {t for t in documented_tags() if OWNERS.get(t.split("/")[0] + "/", method) == method}
    if method == "aup":  # the projection variant has no VAE; cb_vae's run has every aup/ tag
        wanted |= {t for t in documented_tags() if t.startswith("aup/")}
    missing = sorted(wanted - scalars)
    assert not missing, (method, missing)


@pytest.mark.parametrize("method", RUNS)
def test_each_run_writes_its_hparams(logged, method):
    scalars, start = logged[method]
    hparams = dict(start.hparams)
    assert hparams["method.name"].string_value == method
    assert hparams["seed"].number_value == 0 and hparams["n_envs"].number_value == 2
    assert (
        hparams["algo._target_"].string_value.endswith("PPO")
        or hparams["algo._target_"].string_value == "PPOLagrangian"
    )
    assert {"final/mean_performance", "final/steps_per_second"} <= scalars
    if method == "ppo_lagrangian":
        assert hparams["cost_limit"].number_value == 2
        assert hparams["method.multiplier_lr"].number_value == pytest.approx(0.01)


def test_the_training_app_returns_its_objective_for_a_sweeper(tmp_path, train_config):
    """Hydra's sweepers (Optuna's among them) read what the app returns: the final
    evaluation's mean performance."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from safelife_rl.apps.train import app

    cfg = train_config("total_timesteps=64", f"hydra.run.dir={tmp_path}", return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    value = app(cfg)
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert isinstance(value, float) and value == evaluation["trained"]["mean_performance"]
