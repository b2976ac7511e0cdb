"""Train one agent on one gridworld and measure it.

    python -m drest.train gridworld=example reward=drest agent=reinforce seed=0

Writes into the Hydra run directory: ``tb/`` (TensorBoard curves of USEFULNESS and NEUTRALITY
under ``safety/``), ``policy.png`` (the trained policy as arrows, before and after the button is
pressed) and ``metrics.json`` (final ``usefulness``, ``neutrality``, ``neutrality_normalized``,
``length_probs``). PPO runs also save ``model.zip``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, fields
from pathlib import Path

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from drest.metrics import Metrics
from drest.plots import policy_figure
from drest.reinforce import ReinforceSettings, paper_settings, train_reinforce
from drest.reward import REWARDS
from drest.tabular import compile_world, max_coins_by_length
from drest.worlds import BUILTIN_WORLDS, resolve
from safelife_rl.files import write_json


def _check(cfg: DictConfig) -> None:
    if cfg.reward not in REWARDS:
        raise ValueError(f"reward must be one of {REWARDS}, got {cfg.reward!r}")
    if cfg.agent.name not in ("reinforce", "ppo"):
        raise ValueError(f"agent must be reinforce or ppo, got {cfg.agent.name!r}")
    if cfg.gridworld == "procedural" and cfg.agent.name != "ppo":
        raise ValueError("gridworld=procedural needs agent=ppo (tabular agents cannot generalize)")


def _summary(metrics: Metrics) -> dict:
    return {"usefulness": metrics.usefulness, "neutrality": metrics.neutrality,
            "neutrality_normalized": metrics.neutrality_normalized,
            "length_probs": {str(k): v for k, v in metrics.length_probs.items()}}


def run_reinforce(cfg: DictConfig, run_dir: Path) -> dict:
    spec = resolve(cfg.gridworld, cfg.x)
    key = cfg.gridworld if cfg.gridworld in BUILTIN_WORLDS else "appendix"
    overrides = {f.name: cfg.agent[f.name] for f in fields(ReinforceSettings)}
    settings = paper_settings(key, **overrides)
    world = compile_world(spec)
    writer = SummaryWriter(str(run_dir / "tb"))
    bar = tqdm(total=settings.meta_episodes, desc="meta-episodes", unit="meta")

    def on_eval(record: dict) -> None:
        step = record["mini_episodes"]
        for name in ("usefulness", "neutrality", "neutrality_normalized"):
            writer.add_scalar(f"safety/{name}", record[name], step)
        for length, p in record["length_probs"].items():
            writer.add_scalar(f"safety/p_length_{length}", p, step)
        bar.update(record["meta_episode"] - bar.n)

    start = time.perf_counter()
    result = train_reinforce(world, cfg.reward, settings, cfg.seed,
                             eval_every=cfg.agent.eval_every, on_eval=on_eval)
    seconds = time.perf_counter() - start
    bar.close()
    writer.close()
    policy_figure(world, result.obs_policy[world.obs], run_dir / "policy.png",
                  title=f"{spec.name}, {cfg.reward} reward, seed {cfg.seed}")
    return {**_summary(result.final), "m": {str(k): v for k, v in
                                            max_coins_by_length(spec).items()},
            "settings": asdict(settings), "train_seconds": seconds}


def run_ppo(cfg: DictConfig, run_dir: Path) -> dict:
    from drest.ppo import PPOSettings, evaluate, state_policy, train_ppo

    procedural = cfg.gridworld == "procedural"
    agent = {k: v for k, v in OmegaConf.to_container(cfg.agent).items() if k != "name"}
    settings = PPOSettings(procedural=procedural, **agent)
    spec = None if procedural else resolve(cfg.gridworld, cfg.x)
    start = time.perf_counter()
    model, specs = train_ppo(spec, cfg.reward, settings, cfg.seed,
                             tensorboard_dir=str(run_dir / "tb"), progress_bar=True)
    seconds = time.perf_counter() - start
    obs_type = "image" if procedural else settings.obs_type
    results = evaluate(model, specs, obs_type)
    model.save(run_dir / "model.zip")
    policy_figure(compile_world(specs[0]), state_policy(model, specs[0], obs_type),
                  run_dir / "policy.png",
                  title=f"{specs[0].name}, PPO {cfg.reward} reward, seed {cfg.seed}")
    out = {"usefulness": float(np.mean([r.usefulness for r in results])),
           "neutrality": float(np.mean([r.neutrality for r in results])),
           "neutrality_normalized": float(np.mean([r.neutrality_normalized for r in results])),
           "settings": asdict(settings), "train_seconds": seconds}
    if procedural:
        out["heldout_worlds"] = [_summary(r) for r in results]
    else:
        out["length_probs"] = _summary(results[0])["length_probs"]
    return out


def run(cfg: DictConfig, run_dir: Path) -> dict:
    """Train and measure as configured; writes the outputs into ``run_dir``."""
    _check(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    body = run_reinforce(cfg, run_dir) if cfg.agent.name == "reinforce" else run_ppo(cfg, run_dir)
    metrics = {"gridworld": cfg.gridworld, "reward": cfg.reward, "agent": cfg.agent.name,
               "seed": cfg.seed, **body}
    write_json(run_dir / "metrics.json", metrics)
    return metrics


@hydra.main(version_base=None, config_path="../conf/drest", config_name="train")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    metrics = run(cfg, run_dir)
    print(f"USEFULNESS {metrics['usefulness']:.4f}  NEUTRALITY {metrics['neutrality']:.4f} "
          f"(normalized {metrics['neutrality_normalized']:.4f})  "
          f"lengths {metrics.get('length_probs', '-')}  in {metrics['train_seconds']:.1f}s")
    print(f"outputs in {run_dir}")


if __name__ == "__main__":
    main()
