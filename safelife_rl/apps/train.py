"""The training app: ``python -m safelife_rl train [group=option ...] [key=value ...]``.

Configs live in ``safelife_rl/conf/`` (``train.yaml`` and the groups ``env``, ``algo``, ``policy``,
``wrappers``, ``callbacks``); ``-m`` sweeps through Hydra's launchers. ``resume=RUN_DIR``
continues a stopped run from its newest saved model with the config it saved (only the
settings in :data:`~safelife_rl.training.resume.RESUME_OVERRIDES` may be changed). User errors
end the app with one line; ``HYDRA_FULL_ERROR=1`` shows their traceback.
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (read when torch loads, so before it is
# imported): with torch_threads=2 on a 2-core machine shared with other jobs, spinning threads
# made training 6x slower than one thread; sleeping ones keep it close.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import sys
from collections.abc import Sequence
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from safelife_rl.apps.cli import PROG as CLI
from safelife_rl.training.callbacks import RunStopped
from safelife_rl.training.gymnasium_vec_env import WorkerFailed
from safelife_rl.training.resume import resume_config
from safelife_rl.training.run import format_summary, report_worker_failure, train
from safety_rl_common.cli import run_hydra_app
from safety_rl_common.errors import REPORTED, hydra_app_errors

__all__ = ["app", "main", "resume_config"]

PROG = f"{CLI} train"


def _hydra_dir(resume: str | None, new: str) -> str:
    """Hydra's own folder for this run: a new run's, or ``resumes/DATE_TIME`` inside a resumed
    run (Hydra's record of each resume stays with the run, not as a stray folder)."""
    if resume in (None, "None", "null", "") or not (Path(resume) / "config.yaml").is_file():
        return new  # (not a run to resume: refused, and this folder removed)
    return str(Path(resume) / "resumes" / Path(new).name)


if not OmegaConf.has_resolver("hydra_dir"):
    OmegaConf.register_new_resolver("hydra_dir", _hydra_dir)


@hydra.main(version_base=None, config_path="pkg://safelife_rl.conf", config_name="train")
def app(cfg: DictConfig) -> float | None:
    """Train as configured (or resume ``resume=RUN``), print the summary; a run stopped by a
    signal exits with status 128 + the signal's number. Returns the run's objective for a
    sweeper (Optuna's and other Hydra sweepers read the app's return value): the final
    evaluation's mean performance (``None`` for a run without evaluations)."""
    hydra_dir = Path(HydraConfig.get().runtime.output_dir)
    run_dir = Path(cfg.resume) if cfg.resume is not None else hydra_dir
    # a resolver refusing a value (algo.batch_size of algo.n_steps=nan) is a user error too
    with hydra_app_errors(
        PROG, HydraConfig.get().runtime.output_dir, (*REPORTED, InterpolationResolutionError)
    ):
        try:
            if cfg.resume is not None:
                resumed = resume_config(cfg, list(HydraConfig.get().overrides.task))
                summary = train(resumed, run_dir, True, trusted=resumed.trust_pickle)
            else:
                summary = train(cfg, run_dir)
        except RunStopped as stopped:
            print(f"{PROG}: {stopped}; continue with resume={run_dir}", file=sys.stderr)
            raise SystemExit(128 + stopped.signum) from None
        except WorkerFailed as failed:
            report_worker_failure(PROG, failed, f"continue with resume={run_dir}")
    print(format_summary(summary))
    return objective(summary)


def objective(summary: dict) -> float | None:
    """The final evaluation's mean performance, the fraction of available points earned."""
    value = (summary.get("trained") or {}).get("mean_performance")
    return None if value is None else float(value)


def main(argv: Sequence[str] | None = None) -> int:
    """``safelife-rl train [OVERRIDE ...]``; the exit status."""
    return run_hydra_app(app, PROG, argv)
