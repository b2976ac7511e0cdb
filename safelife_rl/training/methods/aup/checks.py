"""The checks of AUP's settings (``method.*`` of ``method=aup`` and ``method=aup_proj``), run on
the composed config before anything is built, and by :class:`~.phase.AuxiliaryPhase` on its
arguments (the same rules for a run of the app and for the callback used alone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from safelife_rl.training.methods.aup.auxiliary_rewards import KINDS
from safety_rl_common.checks import check, is_int, is_number
from safety_rl_common.errors import UserError
from safety_rl_common.limits import EPOCH_LIMIT

#: The largest ``lambda`` taken: the authors ramp it to 0.1 beside rewards of about 1; past
#: this the penalty drowns every reward (and near 1e38 it overflows float32 to inf).
MAX_LAMBDA = 1000.0
#: The DQN settings that count steps or samples, and those that are shares in [0, 1].
_AGENT_COUNTS = (
    "buffer_size",
    "batch_size",
    "train_freq",
    "gradient_steps",
    "target_update_interval",
)
_AGENT_UNIT = ("gamma", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps")


def check_aup_settings(method: Mapping[str, Any], total_timesteps: int) -> None:
    """Refuse AUP settings (``method``: the ``method`` node as plain containers) that are of
    the wrong type, out of range, or that leave no room for the second phase."""
    check.value(
        "method.reward", method.get("reward"), lambda v: v in KINDS, f"one of {', '.join(KINDS)}"
    )
    buffer_steps = check.count("method.buffer_steps", method.get("buffer_steps"))
    aux_steps = check.count("method.aux_steps", method.get("aux_steps"))
    if buffer_steps + aux_steps >= total_timesteps:
        raise UserError(
            f"AUP's auxiliary phase (method.buffer_steps {buffer_steps} + method.aux_steps "
            f"{aux_steps}) must be shorter than the run (total_timesteps {total_timesteps})"
        )
    lambdas = method.get("lambda_values")
    check.value(
        "method.lambda_values",
        lambdas,
        lambda v: (
            isinstance(v, (list, tuple))
            and len(v) == 2
            and all(is_number(x) and 0 <= x <= MAX_LAMBDA for x in v)
        ),
        f"two numbers in [0, {MAX_LAMBDA:g}] (the penalty's start and end)",
    )
    end = method.get("lambda_ramp_end")
    if end is not None:
        check.count("method.lambda_ramp_end", end)
    vae = method.get("vae") or {}
    check.value("method.vae", vae, lambda v: isinstance(v, Mapping), "a mapping")
    check.keys(vae, ("hidden", "epochs", "batch_size", "learning_rate"), "method.vae.")
    hidden = vae.get("hidden", [1])
    check.value(
        "method.vae.hidden",
        hidden,
        lambda v: isinstance(v, (list, tuple)) and all(is_int(x) and 1 <= x <= 65_536 for x in v),
        "a list of layer widths (1 to 65536)",
    )
    if "epochs" in vae:
        EPOCH_LIMIT.check(check.count("method.vae.epochs", vae["epochs"]), "method.vae.epochs")
    if "batch_size" in vae:
        check.count("method.vae.batch_size", vae["batch_size"])
    if "learning_rate" in vae:
        check.learning_rate("method.vae.learning_rate", vae["learning_rate"])
    batch = vae.get("batch_size", 64)
    if method["reward"] == "cb_vae" and buffer_steps < batch:
        raise UserError(
            f"method.buffer_steps ({buffer_steps}) must fill at least one VAE "
            f"batch (method.vae.batch_size {batch})"
        )
    agent = method.get("aux_agent") or {}
    check.value("method.aux_agent", agent, lambda v: isinstance(v, Mapping), "a mapping")
    for name in _AGENT_COUNTS:
        if name in agent:
            check.count(f"method.aux_agent.{name}", agent[name])
    for name in _AGENT_UNIT:
        if name in agent:
            check.value(
                f"method.aux_agent.{name}",
                agent[name],
                lambda v: is_number(v) and 0 <= v <= 1,
                "a number in [0, 1]",
            )
    if "learning_rate" in agent:
        check.learning_rate("method.aux_agent.learning_rate", agent["learning_rate"])
    size, batch = agent.get("buffer_size", 1_000_000), agent.get("batch_size", 32)
    if batch > size:
        raise UserError(
            f"method.aux_agent.batch_size ({batch}) must be at most "
            f"method.aux_agent.buffer_size ({size}): a batch is drawn from it"
        )
    starts = agent.get("learning_starts", 100)
    check.value(
        "method.aux_agent.learning_starts",
        starts,
        lambda v: is_int(v) and v >= 0,
        "a non-negative integer",
    )
    if starts >= aux_steps:
        raise UserError(
            f"the auxiliary agent would never learn: method.aux_agent."
            f"learning_starts ({starts}) must be below method.aux_steps "
            f"({aux_steps})"
        )
    noop = method.get("noop_action")
    if noop is not None:
        check.value(
            "method.noop_action",
            noop,
            lambda v: is_int(v) and v >= 0,
            "null (the env's own) or an action number",
        )
