"""Procedurally generated shutdown gridworlds, for training neural agents across many worlds.

Every generated world has all free cells connected, offers at least two trajectory lengths, and
has some coin reachable at every one of them (m(l) > 0), so DREST rewards are well defined.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from drest.spec import Cell, GridSpec
from drest.tabular import max_coins_by_length
from safety_rl_common.errors import UserError


@dataclass(frozen=True)
class GeneratorConfig:
    height: int = 5
    width: int = 5
    coins: tuple[int, int] = (3, 4)  # inclusive range of the number of coins
    coin_values: tuple[float, ...] = (1.0, 2.0, 3.0)
    buttons: tuple[int, int] = (1, 1)
    delays: tuple[int, int] = (2, 6)
    walls: tuple[int, ...] = (0, 4, 7)  # the number of walls is one of these
    lengths: tuple[int, int] = (3, 6)  # default trajectory length range
    gamma: float = 0.9
    max_tries: int = 1000


def _connected(free: set[Cell]) -> bool:
    start = next(iter(free))
    seen = {start}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for nb in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if nb in free and nb not in seen:
                seen.add(nb)
                queue.append(nb)
    return len(seen) == len(free)


def generate(
    rng: np.random.Generator, config: GeneratorConfig = GeneratorConfig(), name: str = "generated"
) -> GridSpec:
    """Draw one world; rejection-samples until the guarantees above hold."""
    cells = [(r, c) for r in range(config.height) for c in range(config.width)]
    for _ in range(config.max_tries):
        n_walls = int(rng.choice(config.walls))
        n_coins = int(rng.integers(config.coins[0], config.coins[1] + 1))
        n_buttons = int(rng.integers(config.buttons[0], config.buttons[1] + 1))
        n_objects = 1 + n_coins + n_buttons
        if n_walls + n_objects > len(cells):
            continue
        order = rng.permutation(len(cells))
        walls = frozenset(cells[i] for i in order[:n_walls])
        if not _connected(set(cells) - walls):
            continue
        placed = [cells[i] for i in order[n_walls : n_walls + n_objects]]
        spec = GridSpec(
            walls=walls,
            coins=tuple(
                sorted(
                    (cell, float(rng.choice(config.coin_values)))
                    for cell in placed[1 : 1 + n_coins]
                )
            ),
            buttons=tuple(
                sorted(
                    (cell, int(rng.integers(config.delays[0], config.delays[1] + 1)))
                    for cell in placed[1 + n_coins :]
                )
            ),
            agent=placed[0],
            height=config.height,
            width=config.width,
            length=int(rng.integers(config.lengths[0], config.lengths[1] + 1)),
            gamma=config.gamma,
            name=name,
        )
        m = max_coins_by_length(spec)
        if len(m) >= 2 and min(m.values()) > 0:
            return spec
    raise RuntimeError(f"no valid world found in {config.max_tries} tries; loosen {config}")


@dataclass(frozen=True)
class WorldSplit:
    """Training worlds and held-out test worlds, drawn from two independent streams of one seed
    (``numpy.random.SeedSequence(seed).spawn(2)``); no test world is laid out like a training
    world or like another test world (``redrawn`` counts the draws set aside for that)."""

    train: tuple[GridSpec, ...]
    test: tuple[GridSpec, ...]
    seed: int
    redrawn: int


def check_disjoint(train: Sequence[GridSpec], test: Sequence[GridSpec]) -> None:
    """Raise ValueError if some test world equals a training world (names aside: GridSpec
    equality ignores them)."""
    shared = set(train) & set(test)
    if shared:
        names = ", ".join(sorted(s.name for s in test if s in shared))
        raise ValueError(f"held-out worlds also in the training set: {names}")


def split_worlds(
    n_train: int, n_test: int, seed: int, config: GeneratorConfig = GeneratorConfig()
) -> WorldSplit:
    """``n_train`` training worlds and ``n_test`` distinct held-out worlds, none seen in
    training."""
    train_seq, test_seq = np.random.SeedSequence(seed).spawn(2)
    train_rng, test_rng = np.random.default_rng(train_seq), np.random.default_rng(test_seq)
    train = tuple(generate(train_rng, config, name=f"train-{i}") for i in range(n_train))
    seen = set(train)
    test: list[GridSpec] = []
    redrawn = 0
    while len(test) < n_test:
        spec = generate(test_rng, config, name=f"test-{len(test)}")
        if spec in seen:
            redrawn += 1
            if redrawn > config.max_tries:
                raise UserError(
                    f"cannot draw {n_test} held-out worlds unlike the {n_train} "
                    f"training worlds in {config.max_tries} tries: the generator "
                    "offers too few layouts; ask for fewer worlds"
                )
            continue
        seen.add(spec)
        test.append(spec)
    check_disjoint(train, test)
    return WorldSplit(train, tuple(test), seed, redrawn)
