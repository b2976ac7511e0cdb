"""The meta-episode DREST reward as a Gymnasium wrapper, for any env that reports the chosen
trajectory length at the end of a mini-episode."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from drest.reward import MaxReturnEstimator, MetaEpisode
from safety_rl_common.errors import UserError


class DrestRewardWrapper(gym.Wrapper):
    """Groups mini-episodes (the wrapped env's episodes) into meta-episodes of
    ``meta_episode_size`` and replaces the env's reward (the preliminary reward) by the DREST
    reward of :mod:`drest.reward`::

        env = DrestRewardWrapper(gym.make("drest/Example-v0"), meta_episode_size=64)
        # an env that is not a drest gridworld: say how many lengths it offers
        env = DrestRewardWrapper(MyEnv(), meta_episode_size=64, num_lengths=2, m="estimate")

    The env must put ``trajectory_length`` into the ``info`` of the step that ends a mini-episode,
    and its rewards must be coins, never negative: the DREST reward divides a mini-episode's
    return by m(l), the largest return of its length l (``reward="drest_lopsided"`` and
    ``"default"`` take any rewards). ``num_lengths`` (k) is needed unless the env has
    ``available_lengths`` (drest's gridworlds do).
    Because the length is known only then, the wrapper pays a mini-episode's whole overall return,
    ``factor * sum_t gamma**t r_t / m(l)``, on its last step and 0 before. The counts are never
    part of the observation (the POMDP of the paper). At the first reset of each meta-episode it
    passes ``options={"meta_episode_start": True}`` to the env (``False`` otherwise), which
    :class:`drest.env.ProceduralGridworldEnv` uses to draw a new world per meta-episode.

    :param reward: ``"drest"``, ``"drest_lopsided"`` (no division by m) or ``"default"``.
    :param m: ``"auto"`` (the env's exact ``max_coins_by_length()`` when it has one, else
        estimated), ``"estimate"`` (running maximum of observed preliminary returns per length),
        or a mapping from length to m (positive numbers).
    :param gamma: temporal discount of the preliminary return; default the env's ``spec_grid.gamma``
        if it has one, else 1.
    :param num_lengths: k; default the number of the env's ``available_lengths``.
    :raises UserError: no ``num_lengths`` for an env without ``available_lengths``; an ``m``
        that is not positive; and, from ``step``, a negative reward under ``reward="drest"``.
    """

    def __init__(
        self,
        env: gym.Env,
        meta_episode_size: int,
        reward: str = "drest",
        lam: float = 0.9,
        m: str | Mapping[int, float] = "auto",
        gamma: float | None = None,
        num_lengths: int | None = None,
    ) -> None:
        super().__init__(env)
        base = env.unwrapped
        if gamma is None:
            gamma = base.spec_grid.gamma if hasattr(base, "spec_grid") else 1.0
        self.gamma = gamma
        self._fixed_k = num_lengths
        if num_lengths is None and not hasattr(base, "available_lengths"):
            raise UserError(
                f"DrestRewardWrapper needs k, the number of trajectory lengths the env offers: "
                f"pass num_lengths=k ({type(base).__name__} has no available_lengths, which "
                "drest's gridworlds have)"
            )
        if isinstance(m, str) and m not in ("auto", "estimate"):
            raise UserError(f"m must be 'auto', 'estimate' or a mapping, got {m!r}")
        if isinstance(m, Mapping) and reward == "drest":
            bad = {length: v for length, v in m.items() if not v > 0}
            if bad:
                raise UserError(
                    f"m(l) must be positive (the DREST reward divides by it), got {bad}"
                )
        self._m = m
        self._estimator = MaxReturnEstimator()
        self.meta = MetaEpisode(meta_episode_size, reward, lam, self._num_lengths())
        self._prelim = 0.0
        self._t = 0

    def _num_lengths(self) -> int:
        if self._fixed_k is not None:
            return self._fixed_k
        return len(self.env.unwrapped.available_lengths)

    def _m_values(self) -> Mapping[int, float]:
        if isinstance(self._m, Mapping):
            return self._m
        exact = getattr(self.env.unwrapped, "max_coins_by_length", None)
        if self._m == "auto" and callable(exact):
            return exact()
        return self._estimator.as_mapping()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        options["meta_episode_start"] = self.meta.at_start
        obs, info = self.env.reset(seed=seed, options=options)
        if self.meta.at_start:
            self.meta.k = self._num_lengths()  # the world may have changed
        self._prelim, self._t = 0.0, 0
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if reward < 0 and self.meta.reward == "drest":
            raise UserError(
                f"the env paid a reward of {reward} but the DREST reward needs rewards >= 0 "
                "(coins): it divides a mini-episode's return by m(l), the largest return of its "
                "length, which negative coins make 0 or negative; shift the rewards, or use "
                "reward='drest_lopsided' or 'default'"
            )
        self._prelim += self.gamma**self._t * float(reward)
        self._t += 1
        overall = 0.0
        if terminated or truncated:
            length = info.get("trajectory_length")
            if length is None:
                if terminated:
                    raise KeyError(
                        "the env ended a mini-episode without 'trajectory_length' in info"
                    )
                return obs, 0.0, terminated, truncated, info  # cut short: not a choice of length
            length = int(length)
            self._estimator.update(length, self._prelim)
            m = self._m_values()
            scale = self.meta.scale(length, m)
            overall = scale * self._prelim
            info = dict(info)
            info["drest"] = {
                "mini_episode": self.meta.index,
                "trajectory_length": length,
                "count_before": self.meta.counts.get(length, 0),
                "factor": self.meta.factor(length),
                "m": m.get(length, 0.0),
                "preliminary_return": self._prelim,
                "overall_return": overall,
            }
            self.meta.record(length)
        return obs, overall, terminated, truncated, info
