"""The counter-based random numbers of the torch engine: a pure function of (seed, stream,
env, counter), so the same in any batch, and uniform enough for the spawners."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from safelife_rl.engine.torch_random import BOARD_SPAWNS, cell_uniforms, integers, keys, mix


def test_mix_is_a_bijection_of_32_bit_values():
    values = torch.arange(1 << 20, dtype=torch.int64) * 4099  # distinct below 2**32
    mixed = mix(values)
    assert mixed.min() >= 0 and mixed.max() < 2**32
    assert len(mixed.unique()) == len(values)


@given(
    st.integers(0, 2**31 - 1),
    st.lists(st.integers(0, 10**6), min_size=1, max_size=8),
    st.integers(0, 10**6),
)
def test_an_envs_numbers_depend_on_its_own_identity_only(seed, envs, step):
    """Env ``e`` at step ``t`` gets the same numbers alone or in any batch."""
    envs_t = torch.tensor(envs)
    batch = cell_uniforms(keys(seed, BOARD_SPAWNS, envs_t, torch.full_like(envs_t, step)), (3, 4))
    for k, env in enumerate(envs):
        alone = cell_uniforms(
            keys(seed, BOARD_SPAWNS, torch.tensor([env]), torch.tensor([step])), (3, 4)
        )
        assert torch.equal(batch[k], alone[0])


def test_uniforms_are_uniform_and_distinct_across_steps_and_streams():
    envs = torch.arange(64)
    draws = [
        cell_uniforms(keys(5, stream, envs, torch.full_like(envs, t)), (26, 26))
        for stream in (1, 2)
        for t in range(4)
    ]
    values = torch.stack(draws).flatten().numpy().astype(np.float64)
    assert values.min() >= 0 and values.max() < 1
    assert abs(values.mean() - 0.5) < 0.005 and abs(values.var() - 1 / 12) < 0.002
    counts = np.histogram(values, bins=20, range=(0, 1))[0]  # chi-square, 19 dof: p ~ 1e-6
    expected = len(values) / 20
    assert ((counts - expected) ** 2 / expected).sum() < 50
    flat = [d.flatten() for d in draws]
    assert all(not torch.equal(a, b) for i, a in enumerate(flat) for b in flat[i + 1 :])
    assert abs(np.corrcoef(flat[0].numpy(), flat[1].numpy())[0, 1]) < 0.02  # step t vs t + 1


def test_integers_cover_their_range_evenly():
    key = keys(0, 3, torch.arange(20_000), torch.zeros(20_000, dtype=torch.int64))
    counts = torch.bincount(integers(key, 0, 7), minlength=7)
    assert counts.min() > 2_600 and counts.max() < 3_100  # 20000 / 7 = 2857
