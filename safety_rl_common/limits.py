"""Bounds on what a file or a setting may make the toolkit read or allocate, each raised (or
lowered) by an environment variable: a small crafted file can inflate to gigabytes, and a
mistyped size can ask for more memory than the machine has. Errors name the variable."""

from __future__ import annotations

import os
from dataclasses import dataclass

from safety_rl_common.errors import UserError


@dataclass(frozen=True)
class Limit:
    """A positive integer bound, ``default`` unless the environment variable ``variable`` sets
    it."""

    variable: str
    default: int
    unit: str

    def get(self) -> int:
        text = os.environ.get(self.variable, "")
        if not text:
            return self.default
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise UserError(f"{self.variable}={text!r}: give a positive number of {self.unit}")
        return value

    def raise_hint(self) -> str:
        return f"raise it with {self.variable}=<{self.unit}>"

    def check(self, value: int, what: str) -> None:
        """Refuse ``value`` over the limit, naming ``what`` and how to raise the limit."""
        limit = self.get()
        if value > limit:
            raise UserError(
                f"{what} is {value} {self.unit}, over the limit of {limit}; {self.raise_hint()}"
            )


#: MiB one file, or one member of a zip or ``.npz`` archive once inflated, may hold: far above
#: any level suite, bank or model the toolkit writes (a 10,000-level bank takes about 30 MB, a
#: paper-sized model 10 MB).
READ_LIMIT = Limit("SAFELIFE_MAX_READ_MB", 1024, "MiB")
#: Cells a side of a board or an agent's view may have (SafeLife's boards have 25 or so; a
#: 10,000-cell side takes gigabytes per env).
SIDE_LIMIT = Limit("SAFELIFE_MAX_SIDE", 1024, "cells")
#: Episodes one benchmark may play.
EPISODE_LIMIT = Limit("SAFELIFE_MAX_EPISODES", 1_000_000, "episodes")
#: Levels one level bank may hold (a level takes about 3 KB: a million levels, 3 GB).
BANK_LIMIT = Limit("SAFELIFE_MAX_BANK_LEVELS", 1_000_000, "levels")
#: Envs one training run may step (the device vector env runs thousands; each host env holds a
#: board, and every env a row of the rollout buffer).
ENV_LIMIT = Limit("SAFELIFE_MAX_ENVS", 65_536, "envs")
#: Passes over one rollout (``algo.n_epochs``): SafeLife's PPO takes 3, SB3's default 10.
EPOCH_LIMIT = Limit("SAFELIFE_MAX_EPOCHS", 1_000, "epochs")


#: Nodes a YAML file (a run's config, a level type's parameters) may expand to, its aliases
#: followed: a run's config has a few hundred; 600 bytes of nested aliases expand to millions.
YAML_NODE_LIMIT = Limit("SAFELIFE_MAX_YAML_NODES", 100_000, "nodes")
#: KiB a YAML file may hold, measured before it is parsed: a run's config takes a few KB, and
#: a 100 MB one keeps OmegaConf busy for minutes.
YAML_SIZE_LIMIT = Limit("SAFELIFE_MAX_YAML_KB", 1024, "KiB")
#: Levels of mappings and lists a YAML file may nest: a config nests five or so, and the
#: parsers recurse once per level (Python's stack ends near a thousand).
YAML_DEPTH_LIMIT = Limit("SAFELIFE_MAX_YAML_DEPTH", 64, "levels")


def check_limits() -> None:
    """Refuse a bad setting of any limit's variable now, before a run writes anything (a limit
    read only when a file is opened would surface midway, or be taken for a bad file)."""
    for limit in (
        *(READ_LIMIT, SIDE_LIMIT, EPISODE_LIMIT, BANK_LIMIT, ENV_LIMIT, EPOCH_LIMIT),
        *(YAML_NODE_LIMIT, YAML_SIZE_LIMIT, YAML_DEPTH_LIMIT),
    ):
        limit.get()
