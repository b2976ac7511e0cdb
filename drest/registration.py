"""Gymnasium ids for the gridworlds: ``gym.make("drest/Example-v0")`` after ``import drest``."""

from __future__ import annotations

import gymnasium as gym

from drest.worlds import BUILTIN_WORLDS


def env_id(name: str) -> str:
    """``"fewer_for_longer"`` -> ``"drest/FewerForLonger-v0"``."""
    return "drest/" + "".join(part.capitalize() for part in name.split("_")) + "-v0"


ENV_IDS: dict[str, str] = {name: env_id(name) for name in BUILTIN_WORLDS}
PROCEDURAL_ID = "drest/Procedural-v0"


def register_envs() -> None:
    """Register every built-in world (kwargs ``obs_type``, ``render_mode``; ``x`` for Lopsided)
    and the procedural env. Safe to call twice."""
    for name, id_ in ENV_IDS.items():
        if id_ not in gym.registry:
            gym.register(
                id=id_, entry_point="drest.env:ShutdownGridworldEnv", kwargs={"gridworld": name}
            )
    if PROCEDURAL_ID not in gym.registry:
        gym.register(id=PROCEDURAL_ID, entry_point="drest.env:ProceduralGridworldEnv")
