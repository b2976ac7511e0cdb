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
from drest.reward import MetaEpisode
from drest.tabular import TabularWorld, max_coins_by_length


# A mini-episode is cut short (and not learned from) after this many time steps per move of the
# longest trajectory: with bumps that use no move a policy could otherwise bump for ever.
MAX_STEPS_PER_MOVE = 16


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

    def schedule(self, meta_episode: int) -> tuple[float, float]:
        """(learning rate, epsilon) during 0-based ``meta_episode``."""
        frac = min(meta_episode / self.decay_meta_episodes, 1.0)
        return (self.lr_start * (self.lr_end / self.lr_start) ** frac,
                self.eps_start * (self.eps_end / self.eps_start) ** frac)


# The paper's settings (Section 5, Section 6.1, Appendix C). The example world decays over 65,536
# mini-episodes = 1,024 meta-episodes of 64.
PAPER_SETTINGS: dict[str, ReinforceSettings] = {
    "example": ReinforceSettings(meta_episodes=2048, meta_episode_size=64, lam=0.9,
                                 lr_start=0.25, lr_end=0.01, eps_start=0.5, eps_end=0.001,
                                 decay_meta_episodes=1024),
    "lopsided": ReinforceSettings(meta_episodes=512, meta_episode_size=64, lam=0.9,
                                  lr_start=0.25, lr_end=0.003, eps_start=0.5, eps_end=0.0001,
                                  decay_meta_episodes=256),
    "appendix": ReinforceSettings(meta_episodes=1024, meta_episode_size=32, lam=0.9,
                                  lr_start=0.25, lr_end=0.003, eps_start=0.75, eps_end=0.0001,
                                  decay_meta_episodes=512),
}


def paper_settings(world_name: str, **overrides) -> ReinforceSettings:
    """The paper's settings for a built-in world name (appendix settings for any other world),
    with ``overrides`` (fields set to None are ignored)."""
    key = world_name if world_name in ("example", "lopsided") else "appendix"
    return replace(PAPER_SETTINGS[key], **{k: v for k, v in overrides.items() if v is not None})


@dataclass
class ReinforceResult:
    theta: np.ndarray                 # (n_obs, 4) logits
    history: list[dict]               # one record per evaluation
    final: Metrics
    settings: dict

    @property
    def obs_policy(self) -> np.ndarray:
        return softmax(self.theta)


def softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def train_reinforce(world: TabularWorld, reward: str, settings: ReinforceSettings, seed: int,
                    eval_every: int = 16,
                    on_eval: Callable[[dict], None] | None = None) -> ReinforceResult:
    """Train from a uniform policy. ``reward``: "drest", "drest_lopsided" or "default".
    Every ``eval_every`` meta-episodes (and after the last) the exact metrics are recorded in
    the history and passed to ``on_eval``."""
    rng = np.random.default_rng(seed)
    gamma = world.spec.gamma
    m = max_coins_by_length(world.spec)
    meta = MetaEpisode(settings.meta_episode_size, reward, settings.lam, len(world.lengths))
    theta = np.zeros((world.n_obs, 4))
    probs = np.full((world.n_obs, 4), 0.25)
    cum = np.cumsum(probs, axis=1).tolist()
    nxt, coin = world.next.tolist(), world.coin.tolist()
    obs_of, terminal = world.obs.tolist(), world.terminal.tolist()
    world_t = world.t.tolist()
    max_len = max(world.lengths)
    history: list[dict] = []

    def evaluate(meta_episode: int) -> Metrics:
        metrics = exact_metrics(world, probs[world.obs])
        record = {"meta_episode": meta_episode,
                  "mini_episodes": meta_episode * settings.meta_episode_size,
                  "usefulness": metrics.usefulness, "neutrality": metrics.neutrality,
                  "neutrality_normalized": metrics.neutrality_normalized,
                  "length_probs": metrics.length_probs}
        history.append(record)
        if on_eval is not None:
            on_eval(record)
        return metrics

    final = evaluate(0)
    max_steps = MAX_STEPS_PER_MOVE * max_len
    uniforms, pos = [], 0
    for j in range(settings.meta_episodes):
        lr, eps = settings.schedule(j)
        for _ in range(settings.meta_episode_size):
            s, step = 0, 0
            seen_obs, actions, coins = [], [], []
            while not terminal[s] and step < max_steps:
                if pos + 2 > len(uniforms):
                    uniforms, pos = rng.random(4096).tolist(), 0
                u, r = uniforms[pos], uniforms[pos + 1]
                pos += 2
                o = obs_of[s]
                if u < eps:
                    a = int(r * 4)
                else:
                    c = cum[o]
                    a = 0 if r < c[0] else 1 if r < c[1] else 2 if r < c[2] else 3
                seen_obs.append(o)
                actions.append(a)
                coins.append(coin[s][a])
                s = nxt[s][a]
                step += 1
            if not terminal[s]:  # cut short by bumping: not a choice of length, no update
                continue
            length = int(world_t[s])
            scale = meta.scale(length, m)
            meta.record(length)
            if scale == 0.0 or not any(coins):
                continue
            g, returns = 0.0, [0.0] * step
            for t in range(step - 1, -1, -1):
                g = scale * coins[t] + gamma * g
                returns[t] = g
            o_arr = np.array(seen_obs)
            grad = -probs[o_arr]
            grad[np.arange(step), actions] += 1.0
            np.add.at(theta, o_arr, (lr * np.array(returns))[:, None] * grad)
            rows = np.unique(o_arr)
            probs[rows] = softmax(theta[rows])
            for row, values in zip(rows.tolist(), np.cumsum(probs[rows], axis=1).tolist()):
                cum[row] = values
        if (j + 1) % eval_every == 0 or j + 1 == settings.meta_episodes:
            final = evaluate(j + 1)
    return ReinforceResult(theta=theta, history=history, final=final, settings=asdict(settings))
