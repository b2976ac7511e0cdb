"""The level stream's semantics: lists in order (restarting on demand), picked levels, shuffled
draws from the env's generator, samplers, and batches of draws equal to single draws."""

import numpy as np
import pytest

from safelife_rl import SafeLifeEnv, load_levels
from safelife_rl.envs.level_stream import LevelStream
from safety_rl_common.errors import UserError


@pytest.fixture(scope="module")
def levels(benchmarks):
    return load_levels(benchmarks / "append-still.npz")[:5]


def names(levels) -> list[str]:
    return [level.name for level in levels]


def test_a_list_plays_in_order_and_restarts(levels):
    stream, rng = LevelStream(levels), np.random.default_rng(0)
    assert names(stream.draw(rng, 7)) == names(levels + levels[:2])
    assert names(stream.draw(rng)) == names(levels[2:3])
    stream.restart()
    assert names(stream.draw(rng)) == names(levels[:1])


def test_a_picked_level_continues_the_order(levels):
    stream, rng = LevelStream(levels), np.random.default_rng(0)
    assert stream.pick(8) is levels[3]  # modulo the list's length
    assert stream.next(rng) is levels[4] and stream.next(rng) is levels[0]
    assert stream.next(rng, {"level": 1}) is levels[1]


def test_shuffled_draws_come_from_the_generator(levels):
    stream = LevelStream(levels, shuffle=True)
    picks = np.random.default_rng(3).integers(len(levels), size=20)
    assert names(stream.draw(np.random.default_rng(3), 20)) == [levels[k].name for k in picks]


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_batch_of_draws_is_the_same_as_single_draws(levels, shuffle):
    batch, single = LevelStream(levels, shuffle), LevelStream(levels, shuffle)
    rng_batch, rng_single = np.random.default_rng(5), np.random.default_rng(5)
    for count in (3, 1, 6):
        drawn = batch.draw(rng_batch, count)
        assert names(drawn) == names(single.draw(rng_single)[0] for _ in range(count))


class Sampler:
    def __init__(self, levels):
        self.levels, self.closed = levels, False

    def sample(self, rng):
        return self.levels[int(rng.integers(len(self.levels)))]

    def close(self):
        self.closed = True


def test_a_sampler_gives_each_level_and_has_no_index(levels):
    sampler = Sampler(levels)
    stream = LevelStream(sampler)
    assert stream.levels == [] and stream.sampler is sampler
    picks = np.random.default_rng(1).integers(len(levels), size=4)
    assert names(stream.draw(np.random.default_rng(1), 4)) == [levels[k].name for k in picks]
    with pytest.raises(ValueError, match="options\\['level'\\] needs a list of levels"):
        stream.pick(0)
    stream.close()
    assert sampler.closed


def test_files_load_and_an_empty_list_is_refused(benchmarks):
    assert len(LevelStream(benchmarks / "navigation.npz").levels) == 100
    multi = LevelStream(benchmarks / "navigation.npz", multi_agent=True).levels
    assert multi[0].agent_names == ("agent0",)
    with pytest.raises(UserError, match="SafeLifeEnv needs at least one level"):
        SafeLifeEnv([])


def test_a_seeded_env_reset_restarts_the_stream(levels):
    env = SafeLifeEnv(levels)
    env.reset(seed=0)
    env.reset()
    assert env.level is levels[1]
    env.reset(seed=0)
    assert env.level is levels[0]
