"""The training app: ``python -m safelife_rl.train [group=option ...] [key=value ...]``.

Configs live in ``conf/`` (``train.yaml`` and the groups ``env``, ``algo``, ``policy``,
``wrappers``, ``callbacks``); ``-m`` sweeps through Hydra's launchers. ``resume=RUN_DIR``
continues a killed run from its newest checkpoint with the config it saved (only
``total_timesteps`` may be changed).
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning (read when torch loads, so before it is
# imported): with torch_threads=2 on a 2-core machine shared with other jobs, spinning threads
# made training 6x slower than one thread; sleeping ones keep it close.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from .training.run import format_summary, load_run_config, train

#: Overrides a resumed run accepts (none changes what the run learns: every vec_env plays the
#: same episodes, and level workers make the same levels); everything else comes from the run's
#: saved config.
RESUME_OVERRIDES = (
    "resume", "total_timesteps", "vec_env", "torch_threads", "progress_bar", "env.kwargs.workers",
)  # fmt: skip


def resume_config(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The saved config of the run at ``cfg.resume``, with the :data:`RESUME_OVERRIDES` given on
    the command line applied; any other override is an error."""
    given = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    unexpected = sorted(given - set(RESUME_OVERRIDES))
    if unexpected:
        raise ValueError(
            f"resume={cfg.resume} continues that run with its saved config; only "
            f"{', '.join(RESUME_OVERRIDES[1:])} may be changed, not {', '.join(unexpected)}"
        )
    saved = load_run_config(cfg.resume)
    for key in given - {"resume"}:
        OmegaConf.update(saved, key, OmegaConf.select(cfg, key))
    return saved


@hydra.main(version_base=None, config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> dict[str, Any]:
    if cfg.resume is not None:
        run_dir = Path(cfg.resume)
        summary = train(resume_config(cfg, list(HydraConfig.get().overrides.task)), run_dir, True)
    else:
        summary = train(cfg, HydraConfig.get().runtime.output_dir)
    print(format_summary(summary))
    return summary


if __name__ == "__main__":
    main()
