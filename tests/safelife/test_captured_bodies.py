"""The device trainer's rollout and update each replayed as one CUDA graph (``graphs=``,
:mod:`safelife_rl.training.device.graphs`), proven on the CPU before any GPU sees them: the
bodies run eagerly (``replay="eager"``, the CPU's stand-in for a replay) make no sync, no copy
and the same operations for 72 members as for 2; every tensor they read from outside keeps its
address from call to call (what a replay reads where its capture read); the trainer's
bookkeeping around a replay (callbacks, step counts, episodes, buffer) leaves training bit for
bit the eager trainer's; and what cannot be captured is refused in one line. On CUDA, the
captured run equals the eager one bit for bit (the lease's check)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from safelife_rl.training.device import DevicePPO, GymnasiumTensorVecEnv
from safelife_rl.training.device.graphs import CapturedCall
from safelife_rl.training.methods.cost_penalty import DeviceCostPenalty
from safelife_rl.training.methods.ppo_lagrangian import DevicePPOLagrangian
from safelife_rl.training.population import PopulationPPO
from safety_rl_common.errors import UserError
from safety_rl_common.torch_counts import OpCounts, counting

from .test_device_step import vector_env

pytestmark = pytest.mark.usefixtures("torch_one_thread")

N_ENVS, N_STEPS = 2, 4
SETTINGS = {
    "n_steps": N_STEPS,
    "batch_size": 4,
    "n_epochs": 2,
    "clip_range_vf": 0.2,
    "policy_kwargs": {"net_arch": [8], "optimizer_kwargs": {"fused": True}},
}


UNFUSED = {"fused": False}


def population(size: int, graphs: str, replay: str = "eager", batching: str = "vmap", **more):
    """A population of ``size`` tiny MLP members on 3-step SafeLife episodes (restarts and
    time-limit cuts in every rollout), their bodies replayed as ``graphs`` says."""
    env = vector_env(size * N_ENVS, groups=size, device=more.pop("device", "cpu"))

    def member(view, seed):
        return DevicePPO("MlpPolicy", view, seed=seed, device=env.device, **(SETTINGS | more))

    penalties = [0.1 * k for k in range(size)]
    return PopulationPPO(env, member, list(range(size)), penalties, batching, graphs, replay)


def single(graphs: str, replay: str = "eager", device: str = "cpu") -> DevicePPO:
    env = GymnasiumTensorVecEnv(vector_env(N_ENVS, device=device))
    model = DevicePPO("MlpPolicy", env, seed=3, device=device, **SETTINGS)
    model.graphs, model.graph_replay = graphs, replay
    return model


class Steps(BaseCallback):
    """Records each step's count, actions and the episodes at each rollout's end."""

    def __init__(self):
        super().__init__()
        self.seen: list = []

    def _on_step(self) -> bool:
        self.seen.append((self.num_timesteps, self.locals["actions"].tolist()))
        return True

    def _on_rollout_end(self) -> None:
        self.seen.append([(t, sorted(info)) for t, info in self.locals["episodes"]])


def state_of(trainer) -> list[torch.Tensor]:
    """What training changed: the stacked weights, the optimizer's moments and the buffer."""
    buffer = trainer.buffer
    moments = [
        value
        for optimizer in trainer.optimizer.stepping()
        for state in optimizer.state.values()
        for value in state.values()
    ]
    return [
        *trainer.stacked.parameters(),
        *moments,
        buffer.observations,
        buffer.actions,
        buffer.rewards,
        buffer.advantages,
        buffer._returns,
        buffer.log_probs,
    ]


def python_frozen(trainer) -> None:
    """Make the eager stand-in replay as a CUDA graph replays: from the third call of a body
    on (the first is the warm-up, the second the capture, whose Python runs), whatever the
    body's Python changed of the trainer and what it holds (attributes rebound, lists and dicts
    changed) is put back as it was, so that only the device's work remains; what the trainer
    needs of it after a replay it must set itself."""
    owners = [
        trainer, trainer.buffer, trainer.recorder, trainer.sampler, trainer.venv,
        trainer.venv.venv, trainer.optimizer, trainer.stacked, *trainer.members,
    ]  # fmt: skip

    def frozen(call: CapturedCall) -> None:
        body = call.body

        def run():
            if call.calls < 3:
                return body()
            saved = [(owner, dict(vars(owner))) for owner in owners]
            contents = {
                id(value): (value, list(value) if isinstance(value, list) else dict(value))
                for _, attributes in saved
                for value in attributes.values()
                if isinstance(value, (list, dict))
            }
            out = body()
            for owner, attributes in saved:
                vars(owner).clear()
                vars(owner).update(attributes)
            for value, content in contents.values():
                value.clear()
                value.extend(content) if isinstance(value, list) else value.update(content)
            return out

        call.body = run

    for call in (trainer._rollout_call, trainer._update_call):
        if call is not None:
            frozen(call)


@pytest.mark.parametrize("graphs", ["rollout", "update", "all"])
@pytest.mark.parametrize("size", [1, 3], ids=["single", "population"])
def test_replayed_bodies_train_as_the_eager_trainer_bit_for_bit(graphs, size):
    """Four rollouts and updates (the first the warm-up, the second the capture, then
    replays that run no Python of the body's: :func:`python_frozen`): the same weights, Adam
    moments, buffer, callback steps, episodes and logs."""
    runs = []
    for setting in ("none", graphs):
        if size == 1:
            model = single(setting)
            python_frozen(model.trainer())
            callback = Steps()
            model.learn(4 * N_ENVS * N_STEPS, callback=callback)
            trainer, callbacks = model.trainer(), [callback]
        else:
            trainer = population(size, setting)
            python_frozen(trainer)
            callbacks = [Steps() for _ in range(size)]
            trainer.learn(4 * N_ENVS * N_STEPS, callbacks)
        logs = [dict(m.logger.name_to_value) for m in trainer.members]
        episodes = [list(m.ep_info_buffer) for m in trainer.members]
        runs.append((trainer, [c.seen for c in callbacks], logs, episodes))
    (eager, *seen), (captured, *replayed) = runs
    if graphs != "none":
        calls = [c.calls for c in (captured._rollout_call, captured._update_call) if c]
        assert calls and all(n == 4 for n in calls)
    for a, b in zip(state_of(eager), state_of(captured)):
        assert torch.equal(a, b)
    assert seen == replayed
    for trainer in (eager, captured):  # a full rollout, as SB3's buffer says it
        assert trainer.buffer.full and trainer.buffer.pos == trainer.buffer.buffer_size
    assert [m.num_timesteps for m in eager.members] == [m.num_timesteps for m in captured.members]
    assert [m._n_updates for m in eager.members] == [m._n_updates for m in captured.members]
    if size > 1:
        width = size * N_ENVS
        assert np.array_equal(
            eager.recorded.columns(0, width, 4 * N_STEPS),
            captured.recorded.columns(0, width, 4 * N_STEPS),
        )


class Reads(TorchDispatchMode):
    """The storages an operation reads that no operation in the block made (the body's
    inputs from outside), each held so that no other tensor takes its address."""

    def __init__(self):
        super().__init__()
        self.made: set[int] = set()
        self.inputs: dict[int, torch.UntypedStorage] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for value in tree_flatten((args, kwargs))[0]:
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                address = storage.data_ptr()
                if address and address not in self.made:
                    self.inputs.setdefault(address, storage)
        out = func(*args, **kwargs)
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr():
                self.made.add(value.untyped_storage().data_ptr())
        return out


def watched(call: CapturedCall) -> list[Reads]:
    """Each later call of ``call``'s body: what it read from outside, and its counts."""
    seen: list[Reads] = []
    body = call.body

    def watching():
        with counting() as counts, Reads() as reads:
            out = body()
        reads.counts = counts
        seen.append(reads)
        return out

    call.body = watching
    return seen


@pytest.mark.parametrize("batching", ["loop", "grouped", "vmap", "unfold"])
def test_every_input_of_the_bodies_keeps_its_address_and_nothing_syncs_or_copies(batching):
    """Four rollouts and updates, with the schedules moved and the side effects read between
    them (as the callbacks and the episode read do): from the second call on (the capture;
    the first, the warm-up, allocates the episode buffer and Adam's moments), each body reads
    the same storages every time (a replay reads where its capture read); no call makes a
    sync or a copy."""
    pop = population(2, "all", batching=batching)
    rollouts, updates = watched(pop._rollout_call), watched(pop._update_call)
    for k in range(4):
        pop.env.set_training_steps(1000 * k)
        pop.learn(N_ENVS * N_STEPS, reset_num_timesteps=False)
    for seen in (rollouts, updates):
        assert len(seen) == 4
        for reads in seen[2:]:
            assert set(reads.inputs) == set(seen[1].inputs)
        for reads in seen:
            assert (reads.counts.syncs, reads.counts.copies) == (0, 0), reads.counts.named
    # among them: the env's step params, the draw's step count, the buffer; the weights
    rollout_inputs, update_inputs = set(rollouts[1].inputs), set(updates[1].inputs)
    for tensor in [*pop.env.params.values(), pop.sampler.steps, pop.buffer.rewards]:
        assert tensor.untyped_storage().data_ptr() in rollout_inputs
    for tensor in [*pop.stacked.parameters(), pop.buffer.advantages]:
        assert tensor.untyped_storage().data_ptr() in update_inputs


def body_counts(size: int) -> tuple[OpCounts, OpCounts]:
    """The counts of a population's second rollout and update bodies (vmap)."""
    pop = population(size, "all")
    rollouts, updates = watched(pop._rollout_call), watched(pop._update_call)
    pop.learn(2 * N_ENVS * N_STEPS)
    return rollouts[1].counts, updates[1].counts


def test_the_bodies_make_the_same_operations_for_72_members_as_for_2():
    """The env step included: nothing in a rollout or an update runs member by member."""
    (rollout_2, update_2), (rollout_72, update_72) = body_counts(2), body_counts(72)
    assert rollout_2.kernels == rollout_72.kernels and update_2.kernels == update_72.kernels
    for counts in (rollout_2, update_2, rollout_72, update_72):
        assert (counts.syncs, counts.copies) == (0, 0), counts.named


@pytest.mark.parametrize("batching", ["loop", "grouped", "vmap", "unfold"])
def test_dynamo_traces_a_rollout_steps_network_draw_and_buffer_without_a_break(batching):
    """The trainer's part of a rollout step (the stacked forward pass, the batched draw and
    the buffer's writes) is one graph to ``torch._dynamo``: nothing in it reads the host."""
    pop = population(2, "rollout", batching=batching)
    pop.learn(N_ENVS * N_STEPS)
    pop.buffer.reset()

    def step(obs: torch.Tensor, starts: torch.Tensor) -> None:
        with torch.no_grad():
            logits, values = pop._heads(obs)
            actions, log_probs = pop._sample(logits)
        pop.buffer.add(
            obs, actions.reshape(-1, 1), values.flatten(), starts, values.flatten(), log_probs
        )

    explained = torch._dynamo.explain(step)(pop._last_obs, pop._last_starts)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


class StopAt(BaseCallback):
    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def _on_step(self) -> bool:
        return self.num_timesteps < self.steps


def test_a_callback_stops_a_replayed_rollout_at_its_step():
    """A callback that stops mid-rollout stops the run at that step count, as eagerly."""
    counts = []
    for graphs in ("none", "all"):
        model = single(graphs)
        model.learn(10 * N_ENVS * N_STEPS, callback=StopAt(2 * N_ENVS * N_STEPS + 2 * N_ENVS))
        counts.append(model.num_timesteps)
    assert counts[0] == counts[1] == 2 * N_ENVS * N_STEPS + 2 * N_ENVS


class GraphedStep(GymnasiumTensorVecEnv):
    """Says its step replays as a CUDA graph of its own (``compile=cudagraphs``, CUDA only)."""

    cuda_graphs = True


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda: single("all", replay="graph"), "need a CUDA device"),
        (lambda: single("sometimes"), "graphs must be one of"),
        (
            lambda: DevicePPOLagrangian(
                "MlpPolicy",
                GymnasiumTensorVecEnv(vector_env(N_ENVS)),
                cost_limit=1.0,
                **SETTINGS,
            ),
            "cost critics train eagerly",
        ),
        (
            lambda: DevicePPO(
                "MlpPolicy",
                DeviceCostPenalty(GymnasiumTensorVecEnv(vector_env(N_ENVS)), 0.1),
                **SETTINGS,
            ),
            "cannot be replayed as a CUDA graph",
        ),
        (
            lambda: DevicePPO(
                "MlpPolicy",
                GymnasiumTensorVecEnv(vector_env(N_ENVS)),
                **SETTINGS | {"policy_kwargs": {"net_arch": [8], "optimizer_kwargs": UNFUSED}},
            ),
            "fused=True",
        ),
        (
            lambda: DevicePPO("MlpPolicy", GraphedStep(vector_env(N_ENVS)), **SETTINGS),
            "not compile=cudagraphs",
        ),
    ],
    ids=["cpu", "unknown", "lagrangian", "wrapped-env", "unfused-adam", "graphed-env-step"],
)
def test_what_cannot_be_captured_is_refused_in_one_line(make, said):
    model = make()
    if model.graphs == "none":
        model.graphs, model.graph_replay = "all", "eager"
    with pytest.raises(UserError, match=said) as error:
        model.trainer()
    assert "\n" not in str(error.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("size", [1, 3], ids=["single", "population"])
def test_on_cuda_each_graph_replays_its_eager_body_bit_for_bit(size):
    """Real CUDA graphs: four rollouts and updates captured and replayed equal the same
    bodies run eagerly (cuDNN's deterministic kernels, so that two eager runs agree too). The
    eager trainer (graphs=none) differs from both only by the learning rate, which a captured
    update reads as a float32 tensor."""
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    trainers = []
    for replay in ("eager", "graph"):
        if size == 1:
            model = single("all", replay=replay, device="cuda")
            model.learn(4 * N_ENVS * N_STEPS)
            trainers.append(model.trainer())
        else:
            pop = population(size, "all", replay=replay, device="cuda")
            trainers.append(pop.learn(4 * N_ENVS * N_STEPS))
    assert trainers[1]._rollout_call.graph is not None
    assert trainers[1]._update_call.graph is not None
    for a, b in zip(state_of(trainers[0]), state_of(trainers[1])):
        assert torch.equal(a, b)


def test_a_capture_that_fails_is_an_error_in_one_line_naming_the_body(monkeypatch):
    """A sync inside a body makes CUDA's capture fail: the error names the body and is not a
    fall back to eager code."""

    class Refusing:
        def __init__(self, graph):
            pass

        def __enter__(self):
            raise RuntimeError("operation not permitted when stream is capturing\nCUDA details")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(torch.cuda, "graph", Refusing)
    ran = []
    call = CapturedCall(lambda: ran.append(1), "rollout", "graph")
    call.calls = 1  # past its warm-up
    with pytest.raises(UserError) as error:
        call()
    assert str(error.value) == (
        "the rollout could not be captured as one CUDA graph (graphs=none runs it eagerly): "
        "operation not permitted when stream is capturing"
    )
    assert call.graph is None and not ran


def test_the_bodies_benchmark_counts_them_and_times_the_callbacks():
    """``benchmarks/captured_bodies.py`` (the counts in docs/speed.md), at a tiny size."""
    root = Path(__file__).resolve().parents[2]
    tiny = ["n_envs=2", "algo.n_steps=4", "policy.kwargs.features_extractor_kwargs.features_dim=16"]
    result = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "captured_bodies.py"),
         "--batching", "grouped", "--callback-members", "2", *tiny],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    counted = re.search(
        r"grouped +rollout body: ([\d,]+) kernel ops, 0 syncs, 0 copies; "
        r"update body: ([\d,]+) kernel ops, 0 syncs, 0 copies",
        result.stdout,
    )
    assert counted and all(int(n.replace(",", "")) > 0 for n in counted.groups()), result.stdout
    assert re.search(r"2 members x 6 idle callbacks x 4 steps: [\d.]+ ms", result.stdout)
