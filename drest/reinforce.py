"""Tabular REINFORCE with the paper's hyperparameters and schedules.

The policy is a softmax over a table of logits, one row per observation ``[x, y, coin flags,
button flags]``, starting uniform. Actions are drawn epsilon-greedily (with probability epsilon
uniformly at random, else from the softmax). After each mini-episode every visited (obs, action)
gets ``theta[o] += lr * G_t * (onehot(a) - softmax(theta[o]))``, with G_t the gamma-discounted
return from time step t to the end of the mini-episode (no baseline; a bump into a wall is a time
step, see :mod:`drest.dynamics`). The learning rate and epsilon
decay exponentially once per meta-episode from their start to their end value over
``decay_meta_episodes`` meta-episodes and are then held. Metrics are computed exactly for the
softmax policy without epsilon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from drest.metrics import Metrics, exact_metrics
from drest.reinforce_kernel import REWARD_MODES, run_meta_episodes
from drest.reward import MetaEpisode, check_lambda, check_reward
from drest.tabular import TabularWorld, max_coins_by_length
from safety_rl_common.checks import check
from safety_rl_common.errors import UserError

# A mini-episode is cut short (and not learned from) after this many time steps per move of the
# longest trajectory: with bumps that use no move a policy could otherwise bump for ever.
MAX_STEPS_PER_MOVE = 16
# Meta-episodes whose random numbers are drawn at once, and the most memory one draw may take.
DRAW_BLOCK = 8
DRAW_BYTES = 256 * 2**20


#: The largest REINFORCE step size: the paper's run from 0.25; a step of 100 on the logits
#: already makes every update a jump to a deterministic policy.
MAX_LR = 100


@dataclass(frozen=True)
class ReinforceSettings:
    meta_episodes: int
    meta_episode_size: int
    lam: float
    lr_start: float
    lr_end: float
    eps_start: float
    eps_end: float
    decay_meta_episodes: int

    def __post_init__(self) -> None:
        check.types(self)
        check.counts(self, ("meta_episodes", "meta_episode_size", "decay_meta_episodes"))
        check_lambda(self.lam, "lam")
        check.value("lr_start", self.lr_start, lambda v: 0 < v <= MAX_LR, f"in (0, {MAX_LR}]")
        check.value("lr_end", self.lr_end, lambda v: 0 <= v <= MAX_LR, f"in [0, {MAX_LR}]")
        check.value("eps_start", self.eps_start, lambda v: 0 < v <= 1, "in (0, 1]")
        check.value("eps_end", self.eps_end, lambda v: 0 <= v <= 1, "in [0, 1]")

    def schedule(self, meta_episode: int) -> tuple[float, float]:
        """(learning rate, epsilon) during 0-based ``meta_episode``."""
        frac = min(meta_episode / self.decay_meta_episodes, 1.0)
        return (
            self.lr_start * (self.lr_end / self.lr_start) ** frac,
            self.eps_start * (self.eps_end / self.eps_start) ** frac,
        )


# The paper's settings (Section 5, Section 6.1, Appendix C). The example world decays over 65,536
# mini-episodes = 1,024 meta-episodes of 64.
PAPER_SETTINGS: dict[str, ReinforceSettings] = {
    "example": ReinforceSettings(
        meta_episodes=2048,
        meta_episode_size=64,
        lam=0.9,
        lr_start=0.25,
        lr_end=0.01,
        eps_start=0.5,
        eps_end=0.001,
        decay_meta_episodes=1024,
    ),
    "lopsided": ReinforceSettings(
        meta_episodes=512,
        meta_episode_size=64,
        lam=0.9,
        lr_start=0.25,
        lr_end=0.003,
        eps_start=0.5,
        eps_end=0.0001,
        decay_meta_episodes=256,
    ),
    "appendix": ReinforceSettings(
        meta_episodes=1024,
        meta_episode_size=32,
        lam=0.9,
        lr_start=0.25,
        lr_end=0.003,
        eps_start=0.75,
        eps_end=0.0001,
        decay_meta_episodes=512,
    ),
}


def paper_settings(world_name: str, **overrides) -> ReinforceSettings:
    """The paper's settings for a built-in world name (appendix settings for any other world),
    with ``overrides`` (fields set to None are ignored)."""
    key = world_name if world_name in ("example", "lopsided") else "appendix"
    return replace(PAPER_SETTINGS[key], **{k: v for k, v in overrides.items() if v is not None})


@dataclass
class ReinforceResult:
    theta: np.ndarray  # (n_obs, 4) logits
    history: list[dict]  # one record per evaluation
    final: Metrics
    settings: dict

    @property
    def obs_policy(self) -> np.ndarray:
        return softmax(self.theta)


def softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def train_reinforce(
    world: TabularWorld,
    reward: str,
    settings: ReinforceSettings,
    seed: int,
    eval_every: int = 16,
    on_eval: Callable[[dict], None] | None = None,
) -> ReinforceResult:
    """Train from a uniform policy. ``reward``: "drest", "drest_lopsided" or "default".
    Every ``eval_every`` meta-episodes (and after the last) the exact metrics are recorded in
    the history and passed to ``on_eval``."""
    check_reward(reward)
    MetaEpisode(settings.meta_episode_size, reward, settings.lam, len(world.lengths))  # validates
    max_steps = MAX_STEPS_PER_MOVE * max(world.lengths)
    draw_bytes = settings.meta_episode_size * max_steps * 2 * 8  # per meta-episode
    if draw_bytes > DRAW_BYTES:
        raise UserError(
            f"REINFORCE on {world.spec.name!r} would draw {draw_bytes / 2**20:,.0f} MiB of random "
            f"numbers per meta-episode (meta_episode_size {settings.meta_episode_size} x "
            f"{max_steps:,} time steps, {MAX_STEPS_PER_MOVE} per move of its longest trajectory); "
            f"the limit is {DRAW_BYTES // 2**20} MiB: use a smaller meta_episode_size or a "
            "world with shorter trajectories"
        )
    block = min(DRAW_BLOCK, DRAW_BYTES // draw_bytes)
    rng = np.random.default_rng(seed)
    m_by_length = max_coins_by_length(world.spec)
    m = np.array([m_by_length.get(length, 0.0) for length in world.lengths])
    length_index = np.full(world.n_states, -1, dtype=np.int64)
    length_index[world.terminal] = np.searchsorted(world.lengths, world.t[world.terminal])
    theta = np.zeros((world.n_obs, 4))
    probs = np.full((world.n_obs, 4), 0.25)
    history: list[dict] = []

    def evaluate(meta_episode: int) -> Metrics:
        metrics = exact_metrics(world, probs[world.obs])
        record = {
            "meta_episode": meta_episode,
            "mini_episodes": meta_episode * settings.meta_episode_size,
            "usefulness": metrics.usefulness,
            "neutrality": metrics.neutrality,
            "neutrality_normalized": metrics.neutrality_normalized,
            "length_probs": metrics.length_probs,
        }
        history.append(record)
        if on_eval is not None:
            on_eval(record)
        return metrics

    final = evaluate(0)
    start = 0
    while start < settings.meta_episodes:
        next_eval = min((start // eval_every + 1) * eval_every, settings.meta_episodes)
        stop = min(start + block, next_eval)
        uniforms = rng.random((stop - start, settings.meta_episode_size, max_steps, 2))
        schedule = np.array([settings.schedule(j) for j in range(start, stop)])
        run_meta_episodes(
            theta,
            probs,
            world.next,
            world.coin,
            world.obs,
            length_index,
            m,
            REWARD_MODES[reward],
            settings.lam,
            world.spec.gamma,
            schedule[:, 0],
            schedule[:, 1],
            uniforms,
        )
        if not np.isfinite(theta).all():
            raise UserError(
                f"REINFORCE diverged on {world.spec.name!r} by meta-episode {stop}: the policy's "
                "logits overflowed (a return times the learning rate is too large); scale the "
                "coin values down or lower lr_start"
            )
        if stop == next_eval:
            final = evaluate(stop)
        start = stop
    return ReinforceResult(theta=theta, history=history, final=final, settings=asdict(settings))
