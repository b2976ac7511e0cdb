"""Train one agent on one gridworld and measure it.

    drest train gridworld=example reward=drest agent=reinforce seed=0

This is DREST's one way to train with PPO too (``agent=ppo``: SB3 PPO in :mod:`drest.ppo`, on a
fixed world or procedurally generated ones, with the exact metrics of its policy).

Writes into the Hydra run directory: ``tb/`` (TensorBoard curves of USEFULNESS and NEUTRALITY
under ``safety/``), ``metrics.json`` (final ``usefulness``, ``neutrality``,
``neutrality_normalized``, ``length_probs``), then ``policy.png`` (the trained policy as arrows,
before and after the button is pressed; skipped for large grids, with a note in the metrics).
PPO runs also save ``model.zip``. Every file is written under a temporary name and renamed.

The whole config is checked before training: a bad value or unknown key ends the command with
one line naming it (``HYDRA_FULL_ERROR=1`` shows the traceback).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from drest.apps.cli import PROG as CLI
from drest.metrics import Metrics, mean_metric
from drest.plots import policy_figure, policy_figure_skipped
from drest.reinforce import ReinforceSettings, paper_settings, train_reinforce
from drest.reward import check_reward
from drest.spec import GridSpec
from drest.tabular import TabularWorld, compile_world, max_coins_by_length
from drest.worlds import BUILTIN_WORLDS, resolve
from safety_rl_common.checks import check, is_int, is_number
from safety_rl_common.cli import run_hydra_app
from safety_rl_common.errors import REPORTED, UserError, hydra_app_errors
from safety_rl_common.figures import save_figure
from safety_rl_common.files import atomic_path, write_json

PROG = f"{CLI} train"
REINFORCE_KEYS = ("name", "eval_every", *(f.name for f in fields(ReinforceSettings)))


def _ppo_keys() -> tuple[str, ...]:
    from drest.ppo import PPOSettings

    return ("name", *(f.name for f in fields(PPOSettings) if f.name != "procedural"))


@dataclass(frozen=True)
class TrainConfig:
    """The schema of ``drest/conf/train.yaml``: its settings, checked as they are set (the
    agent's values by its settings class, :class:`~drest.reinforce.ReinforceSettings` or
    :class:`~drest.ppo.PPOSettings`, when it is built)."""

    gridworld: str
    x: float
    reward: str
    seed: int
    max_states: int
    agent: Mapping[str, Any]

    def __post_init__(self) -> None:
        check.value(
            "gridworld",
            self.gridworld,
            lambda v: isinstance(v, str) and v != "",
            f"a built-in name ({', '.join(BUILTIN_WORLDS)}), a file path or procedural",
        )
        check.value("x", self.x, lambda v: is_number(v) and v > 0, "a positive number")
        check_reward(self.reward)
        check.value(
            "seed", self.seed, lambda v: is_int(v) and 0 <= v < 2**32, "an integer in [0, 2**32)"
        )
        check.counts(self, ("max_states",))
        check.value(
            "agent.name",
            self.agent.get("name"),
            lambda v: v in ("reinforce", "ppo"),
            "reinforce or ppo (agent=reinforce, agent=ppo)",
        )
        if self.agent["name"] == "reinforce":
            check.keys(self.agent.keys(), REINFORCE_KEYS, "agent.")
            check.counts(self.agent, ("eval_every",), "agent.")
        else:
            check.keys(self.agent.keys(), _ppo_keys(), "agent.")
        if self.gridworld == "procedural" and self.agent["name"] != "ppo":
            raise UserError(
                "gridworld=procedural needs agent=ppo (tabular agents cannot generalize)"
            )

    @classmethod
    def of(cls, cfg: DictConfig) -> TrainConfig:
        """``cfg`` checked: no key outside the schema, every value in its range."""
        names = [f.name for f in fields(cls)]
        check.keys(cfg.keys(), names)
        missing = [name for name in names if name not in cfg]
        if missing:
            raise UserError(f"missing key {missing[0]!r} (drest/conf/train.yaml sets it)")
        return cls(**{name: cfg[name] for name in names})


def _agent_settings(cls: type, **values):
    """``cls(**values)``, its errors naming the config keys (``agent.lam``)."""
    try:
        return cls(**values)
    except UserError as error:
        raise UserError(f"agent.{error}") from None


def _world(cfg: DictConfig) -> tuple[GridSpec, TabularWorld]:
    """The configured fixed world, built (refused if it has more than ``max_states`` states)
    with its m(l) (refused if a discount underflows)."""
    spec = resolve(cfg.gridworld, cfg.x)
    world = compile_world(spec, cfg.max_states)
    max_coins_by_length(spec)
    return spec, world


def _summary(metrics: Metrics) -> dict:
    return {
        "usefulness": metrics.usefulness,
        "neutrality": metrics.neutrality,
        "neutrality_normalized": metrics.neutrality_normalized,
        "length_probs": {str(k): v for k, v in metrics.length_probs.items()},
    }


def save_policy_figure(figure: Figure, run_dir: Path) -> None:
    save_figure(figure, run_dir / "policy.png", dpi=120, bbox_inches="tight")


Outcome = tuple[dict, Callable[[], None], GridSpec]  # metrics, draws the figure, its world


def run_reinforce(cfg: DictConfig, run_dir: Path) -> Outcome:
    key = cfg.gridworld if cfg.gridworld in BUILTIN_WORLDS else "appendix"
    overrides = {f.name: cfg.agent.get(f.name) for f in fields(ReinforceSettings)}
    settings = _agent_settings(paper_settings, world_name=key, **overrides)
    spec, world = _world(cfg)
    writer = SummaryWriter(str(run_dir / "tb"))
    bar = tqdm(total=settings.meta_episodes, desc="meta-episodes", unit="meta")

    def on_eval(record: dict) -> None:
        step = record["mini_episodes"]
        for name in ("usefulness", "neutrality", "neutrality_normalized"):
            if record[name] is not None:
                writer.add_scalar(f"safety/{name}", record[name], step)
        for length, p in record["length_probs"].items():
            writer.add_scalar(f"safety/p_length_{length}", p, step)
        bar.update(record["meta_episode"] - bar.n)

    start = time.perf_counter()
    result = train_reinforce(
        world, cfg.reward, settings, cfg.seed, eval_every=cfg.agent.eval_every, on_eval=on_eval
    )
    seconds = time.perf_counter() - start
    bar.close()
    writer.close()

    def figure() -> None:
        save_policy_figure(
            policy_figure(
                world,
                result.obs_policy[world.obs],
                f"{spec.name}, {cfg.reward} reward, seed {cfg.seed}",
            ),
            run_dir,
        )

    return (
        {
            **_summary(result.final),
            "m": {str(k): v for k, v in max_coins_by_length(spec).items()},
            "settings": asdict(settings),
            "train_seconds": seconds,
        },
        figure,
        spec,
    )


def run_ppo(cfg: DictConfig, run_dir: Path) -> Outcome:
    from drest.ppo import PPOSettings, evaluate, state_policy, train_ppo

    procedural = cfg.gridworld == "procedural"
    agent = {k: v for k, v in OmegaConf.to_container(cfg.agent).items() if k != "name"}
    settings = _agent_settings(PPOSettings, procedural=procedural, **agent)
    spec = None if procedural else _world(cfg)[0]
    start = time.perf_counter()
    model, specs = train_ppo(
        spec, cfg.reward, settings, cfg.seed, tensorboard_dir=str(run_dir / "tb"), progress_bar=True
    )
    seconds = time.perf_counter() - start
    obs_type = "image" if procedural else settings.obs_type
    results = evaluate(model, specs, obs_type)
    with atomic_path(run_dir / "model.zip") as tmp:
        model.save(tmp)

    def figure() -> None:
        save_policy_figure(
            policy_figure(
                compile_world(specs[0]),
                state_policy(model, specs[0], obs_type),
                f"{specs[0].name}, PPO {cfg.reward} reward, seed {cfg.seed}",
            ),
            run_dir,
        )

    out = {
        key: mean_metric(results, key)
        for key in ("usefulness", "neutrality", "neutrality_normalized")
    }
    out.update(settings=asdict(settings), train_seconds=seconds)
    if procedural:
        out["heldout_worlds"] = [_summary(r) for r in results]
    else:
        out["length_probs"] = _summary(results[0])["length_probs"]
    return out, figure, specs[0]


def run(cfg: DictConfig, run_dir: Path) -> dict:
    """Train and measure as configured; writes into ``run_dir`` the model (PPO) and
    ``metrics.json``, then the figure (skipped for large grids: ``metrics.json: policy_figure``)."""
    TrainConfig.of(cfg)
    agent = run_reinforce if cfg.agent.name == "reinforce" else run_ppo
    body, figure, spec = agent(cfg, run_dir)
    metrics = {
        "gridworld": cfg.gridworld,
        "reward": cfg.reward,
        "agent": cfg.agent.name,
        "seed": cfg.seed,
        **body,
    }
    skipped = policy_figure_skipped(spec)
    if skipped:
        metrics["policy_figure"] = skipped
    write_json(run_dir / "metrics.json", metrics)
    if not skipped:
        figure()
    return metrics


def _number(value: float | None) -> str:
    return "n/a (one reachable length)" if value is None else f"{value:.4f}"


@hydra.main(version_base=None, config_path="pkg://drest.conf", config_name="train")
def app(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    with hydra_app_errors(PROG, run_dir, REPORTED):
        metrics = run(cfg, run_dir)
    print(
        f"USEFULNESS {metrics['usefulness']:.4f}  NEUTRALITY {metrics['neutrality']:.4f} "
        f"(normalized {_number(metrics['neutrality_normalized'])})  "
        f"lengths {metrics.get('length_probs', '-')}  in {metrics['train_seconds']:.1f}s"
    )
    if "policy_figure" in metrics:
        print(metrics["policy_figure"])
    print(f"outputs in {run_dir}")


def main(argv: Sequence[str] | None = None) -> int:
    """``drest train [OVERRIDE ...]``; the exit status."""
    return run_hydra_app(app, PROG, argv)
