"""The run's settings and final metrics for TensorBoard's HParams dashboard, the way its users
compare the runs of a sweep: written once, when the final evaluation is done, as SB3's
:class:`~stable_baselines3.common.logger.HParam` beside the metrics as ``final/<name>``
scalars (the dashboard reads a metric's value from the scalar of that tag)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.logger import HParam, Logger, TensorBoardOutputFormat

#: The parts of the config whose scalar settings are hyperparameters (the rest: callbacks,
#: the policy's network, file locations, says how a run is kept, not what it learns).
_SECTIONS = ("algo", "method", "env", "wrappers")
_TOP = ("seed", "total_timesteps", "n_envs", "vec_env", "device", "precision", "cost_limit")


def _scalars(node: Any, prefix: str) -> dict[str, bool | str | float]:
    """The scalar settings below ``node``, by dotted key (a list as its text)."""
    found: dict[str, bool | str | float] = {}
    if isinstance(node, Mapping):
        for key, value in node.items():
            found.update(_scalars(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(node, list):
        found[prefix] = str(node)
    elif isinstance(node, (bool, int, float, str)):
        found[prefix] = node
    return found


def run_hparams(cfg: DictConfig) -> dict[str, bool | str | float]:
    """The run's hyperparameters: its top-level settings and the scalar settings of its
    algorithm, method, env and wrappers (``_target_`` s as the class name)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    hparams: dict[str, bool | str | float] = {
        key: plain[key] for key in _TOP if plain.get(key) is not None
    }
    for section in _SECTIONS:
        hparams.update(_scalars(plain.get(section) or {}, section))
    return {
        key: value.rpartition(".")[2] if key.endswith("_target_") else value
        for key, value in hparams.items()
    }


def final_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of the run's final summary: its final evaluation's means (``trained``) and
    its training speed."""
    metrics = {
        f"final/{key}": float(value)
        for key, value in (summary.get("trained") or {}).items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    if isinstance(summary.get("steps_per_second"), (int, float)):
        metrics["final/steps_per_second"] = float(summary["steps_per_second"])
    return metrics


def record_hparams(logger: Logger, cfg: DictConfig, summary: Mapping[str, Any], step: int) -> None:
    """Write the run's hyperparameters and final metrics to its TensorBoard folder, straight to
    the TensorBoard output (what the logger holds for its next dump stays there)."""
    metrics = final_metrics(summary) or {"final/timesteps": float(step)}
    records = {**metrics, "hparams": HParam(run_hparams(cfg), metrics)}
    for output in logger.output_formats:
        if isinstance(output, TensorBoardOutputFormat):
            output.write(records, dict.fromkeys(records), step)
