"""The device path's action sampler (:mod:`safelife_rl.training.device.sampler`): categorical
draws (a chi-square test over 10^6), the same for a run alone and as a member of any batch, on
the CPU and on CUDA, in as many operations for 2 runs as for 72."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from safelife_rl.training.device.sampler import ActionSampler, run_seed
from safety_rl_common.torch_counts import count_ops

PROBABILITIES = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.07, 0.05, 0.02, 0.01])


def test_the_draws_follow_the_softmax_of_the_logits():
    """10^6 draws (10 runs x 1,000 envs x 100 steps) of one distribution: chi-square, 8 degrees
    of freedom, at the 1e-4 level; and no correlation between an env's consecutive draws."""
    runs, envs, steps = 10, 1000, 100
    sampler = ActionSampler(range(runs), envs, 9, "cpu")
    logits = torch.tensor(np.log(PROBABILITIES), dtype=torch.float32) + 3.0  # a shift: the same
    logits = logits.expand(runs, envs, 9)
    draws = torch.stack([sampler(logits) for _ in range(steps)])
    counts = torch.bincount(draws.flatten(), minlength=9).numpy()
    expected = PROBABILITIES / PROBABILITIES.sum() * draws.numel()
    assert stats.chisquare(counts, expected).pvalue > 1e-4, counts
    first, second = draws[:-1].flatten().double().numpy(), draws[1:].flatten().double().numpy()
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.01


def test_a_run_draws_alone_as_it_draws_in_a_batch():
    """Member ``k`` of a sampler of P runs draws what a sampler of its seed alone draws, at
    every step (whatever the batch's size), and the counter goes on from a run's step count."""
    seeds, envs = [3, 11, 3, 7], 5
    logits = torch.randn(4, envs, 9, dtype=torch.float32)
    logits[2] = logits[0]
    together = ActionSampler(seeds, envs, 9, "cpu")
    together.start(40)
    batched = [together(logits) for _ in range(3)]
    for k, seed in enumerate(seeds):
        alone = ActionSampler([seed], envs, 9, "cpu")
        alone.start(40)
        assert all(torch.equal(alone(logits[k : k + 1])[0], b[k]) for b in batched)
    assert torch.equal(batched[0][0], batched[0][2])  # the same seed and logits, the same draws
    assert not torch.equal(batched[0], batched[1])  # the next step, other draws
    again = ActionSampler(seeds, envs, 9, "cpu")
    again.start(40 + envs)  # resumed after one step
    assert torch.equal(again(logits), batched[1])


def test_a_run_without_a_seed_keeps_the_seed_it_drew():
    class Run:
        seed = None

    run = Run()
    first = run_seed(run)
    assert run_seed(run) == first == run.action_seed
    run.seed = 5
    assert run_seed(run) == 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_same_logits_draw_the_same_actions_on_the_cpu_and_on_cuda():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(18, 256, 9, generator=generator) * 3
    draws = {}
    for device in ("cpu", "cuda"):
        sampler = ActionSampler(range(18), 256, 9, device)
        sampler.start(1_000_000)
        draws[device] = torch.stack([sampler(logits.to(device)).cpu() for _ in range(20)])
    assert torch.equal(draws["cpu"], draws["cuda"])


def test_a_draw_makes_as_many_operations_for_2_runs_as_for_72_and_no_sync():
    def counted(runs: int):
        sampler = ActionSampler(range(runs), 16, 9, "cpu")
        return count_ops(sampler, torch.randn(runs, 16, 9))

    two, many = counted(2), counted(72)
    assert two.kernels == many.kernels and (two.syncs, two.copies) == (0, 0), (two, many)
