"""Issue 43's first lease call, which only measures (about 5 minutes on an H100): where a
population's time goes, what precision and CUDA graphs give the members' stacked CNN, the env
step as a CUDA graph, and population training speed; every figure with its precision and cuDNN
flags.

    python benchmarks/gpu_measure.py [--device cuda] [--sections profile network env speed]
        [--precisions fp32 tf32 bf16] [--batchings grouped vmap unfold] [--profile-members 72]
        [--network-members 72] [--env-sizes 1152 4608] [--members 72 18] [--seconds 0.5]
        [--budget SECTION=SECONDS ...] [--cudnn-deterministic] [--out DIR]
    python benchmarks/gpu_measure.py --device cpu --tiny   # the same in seconds on a CPU (CI)

Sections, in this order, each under its own deadline (``--budget``, seconds; defaults in
:data:`BUDGET`): an item that would start after it is reported as skipped, and a section still
running :data:`GRACE` seconds after it is stopped, so that the call always returns what ran:

1. **profile**: ``population_profile.py``'s profile of ``--profile-members`` members (the
   rollouts', updates' and operators' times) for each batching, at tf32 on CUDA (fp32 on a CPU);
2. **network**: one minibatch of the members' stacked CNN (forward, a stand-in loss, backward,
   gradient clipping, Adam: a PPO update's work per minibatch but its loss terms) at the
   paper's 80 observations a member, and one rollout forward (16 observations a member), of
   ``--network-members`` members, for each batching x precision, eager and as a CUDA graph
   (captured by hand after 3 runs on a side stream; Adam ``capturable`` in both), with the GPU
   ops one replay runs (``torch.profiler``) and the bit checks: one replay equals one eager run
   of its body from the same state bit for bit, and two eager runs each other (a
   nondeterministic kernel shows there, not as the graph's fault; ``--cudnn-deterministic``
   runs the section with cuDNN's deterministic kernels, a run's autotuned ones by default);
3. **env**: the compiled env step (``compile=True``: without Inductor's own CUDA graphs, so its
   kernels are captured inside) at ``--env-sizes`` envs: time per step as the env steps it, and
   captured with the state written back into static buffers; the graph's GPU ops, and 16
   replayed steps equal to 16 eager steps bit for bit (observations, rewards, ends, state);
4. **speed**: ``population_speed.py``'s training rate of ``--members`` members at the
   precisions (the run's ``precision``: fp32, tf32 on CUDA, bf16), the trainer eager and with
   its rollout and update each one CUDA graph (``graphs=all``, issue 43 steps 2-3).

On a CPU the graph rows read "n/a (no CUDA)" and tf32 is not measured. Writes ``measure.md``
and ``measure.csv`` (one row per figure) into ``--out`` (default ``$OUT`` or
``outputs/gpu_measure``), both rewritten after every section. Exit status 1 if a section
failed or was stopped, 2 on bad input (one line, before anything runs).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from engine_speed import fresh_compiles, timed
from gpu_suite import Report, random_actions, same, table, vector_envs
from omegaconf import DictConfig
from population_profile import profile_section
from population_speed import (
    CAPTURED,
    KEPT_BATCHINGS,
    TINY,
    config,
    members,
    population_rates,
)
from precision import (
    autocast,
    default_device,
    flags,
    flags_text,
    refusal,
    with_precision,
)
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils._pytree import tree_leaves

from safelife_rl.envs.vector_env import SafeLifeVectorEnv
from safelife_rl.training.device.stacked import (
    PolicyHeads,
    StackedNetworks,
    StackedOptimizer,
)
from safelife_rl.training.population import PopulationPPO
from safelife_rl.training.population.runs import build_population
from safelife_rl.training.precision import PRECISIONS, available, set_tensorfloat
from safelife_rl.training.run import cudnn_kernels

SECTIONS = ("profile", "network", "env", "speed")
#: each section's deadline, seconds from its start (about 5 minutes in all on an H100)
BUDGET = {"profile": 60, "network": 70, "env": 90, "speed": 150}
#: seconds past its deadline after which a running section is stopped
GRACE = 30
NO_GRAPH = "n/a (no CUDA)"
SKIPPED = "skipped: the section's deadline"
COLUMNS = (
    "section", "what", "batching", "precision", "mode", "size", "ms", "per_second",
    "gpu_ops", "graph_equals_eager", "eager_equals_eager", *flags(), "note",
)  # fmt: skip
#: steps compared bit for bit between the captured env step and the eager one
COMPARED_STEPS = 16


class Overran(Exception):
    """A section still running :data:`GRACE` seconds after its deadline."""


@contextlib.contextmanager
def stopped_after(seconds: float) -> Iterator[None]:
    """Raise :class:`Overran` in the main thread if the block runs longer than ``seconds``."""

    def stop(signum: int, frame: Any) -> None:
        raise Overran(f"stopped after {seconds:.0f} s (its deadline and {GRACE} s)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds

    def passed(self) -> bool:
        return time.perf_counter() >= self.end


class Rows:
    """The figures, one CSV row each, with the cuDNN and matmul flags in force when added."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: list[dict[str, Any]] = []

    def add(self, section: str, what: str, **values: Any) -> None:
        self.rows.append({"section": section, "what": what, **flags(), **values})

    def of(self, section: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["section"] == section]

    def write(self) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        with partial.open("w", newline="") as file:
            writer = csv.DictWriter(file, COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)
        partial.replace(self.path)


def rows_table(rows: list[dict[str, Any]]) -> str:
    """A section's rows as a markdown table, each with its precision and flags."""

    def cell(row: dict[str, Any], key: str, fmt: str = "{}") -> str:
        value = row.get(key)
        return "-" if value is None else fmt.format(value)

    def equal(value: bool | None) -> str:
        return "-" if value is None else "yes" if value else "**NO**"

    return table(
        ["what", "size", "batching", "precision", "mode", "ms", "per s", "GPU ops",
         "graph = eager", "eager = eager", "flags", "note"],
        [
            [
                row["what"], cell(row, "size", "{:,}"), cell(row, "batching"),
                cell(row, "precision"), cell(row, "mode"), cell(row, "ms", "{:.3f}"),
                cell(row, "per_second", "{:,.0f}"), cell(row, "gpu_ops"),
                equal(row.get("graph_equals_eager")), equal(row.get("eager_equals_eager")),
                flags_text({key: row[key] for key in flags()}), cell(row, "note"),
            ]
            for row in rows
        ],
    )  # fmt: skip


# -- CUDA graphs -------------------------------------------------------------------------------


def captured(body: Callable[[], Any], warmup: int = 3) -> tuple[torch.cuda.CUDAGraph, Any]:
    """``body`` captured as a CUDA graph after ``warmup`` runs on a side stream, and the
    graph's outputs (static: each replay writes them again)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = body()
    return graph, outputs


def graph_ops(graph: torch.cuda.CUDAGraph) -> int | None:
    """The GPU ops (kernels, copies, sets) one replay runs as ``torch.profiler`` sees them
    (``None``: it sees none)."""
    if not torch.cuda.is_available():
        return None
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            graph.replay()
            torch.cuda.synchronize()
    except RuntimeError:  # a profiler that cannot trace the device: not measurable here
        return None
    ops = sum(event.count for event in prof.key_averages() if event.device_type == DeviceType.CUDA)
    return ops or None


def clones(tensors: Any) -> list[torch.Tensor]:
    return [t.detach().clone() for t in tree_leaves(tensors) if isinstance(t, torch.Tensor)]


def bit_checks(
    body: Callable[[], Any],
    graph: torch.cuda.CUDAGraph,
    outputs: Any,
    live: Callable[[], list[torch.Tensor]],
) -> tuple[bool, bool]:
    """Whether one replay of ``graph`` equals one eager run of ``body`` bit for bit (outputs
    and the ``live`` tensors body changes, each run from the same state), and whether two
    eager runs equal each other."""
    state = live()
    start = clones(state)

    def run_from_start(run: Callable[[], Any]) -> list[torch.Tensor]:
        with torch.no_grad():
            for tensor, value in zip(state, start):
                tensor.copy_(value)
        result = run()
        return clones(state) + clones(result)

    def replay() -> Any:
        graph.replay()
        return outputs

    replayed = run_from_start(replay)
    first, second = run_from_start(body), run_from_start(body)
    return same(replayed, first), same(first, second)


#: how a body becomes a graph: :func:`captured` on CUDA, ``None`` (no graph) on a CPU
Capture = Callable[[Callable[[], Any]], tuple[Any, Any]] | None
CAPTURE_FAILED = "**capture FAILED**"


def failed_capture(
    capture: Callable[[Callable[[], Any]], tuple[Any, Any]], body: Callable[[], Any]
) -> tuple[Any, Any] | str:
    """``capture(body)``, or the line saying why it failed: a graph that cannot be captured is
    a failed row (and section), not a skipped one, and the other rows still run."""
    try:
        return capture(body)
    except Exception as error:  # noqa: BLE001 - reported in its row
        return f"{CAPTURE_FAILED}: {type(error).__name__}: {(str(error) or '-').splitlines()[0]}"


def eager_and_graph(
    body: Callable[[], Any],
    device: torch.device,
    seconds: float,
    capture: Capture,
    live: Callable[[], list[torch.Tensor]] = list,
) -> tuple[float, dict[str, Any] | None]:
    """Seconds per eager run of ``body`` and, given ``capture``, its graph's: seconds per
    replay, GPU ops and bit checks (``None`` without)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    eager = timed(body, sync, seconds)
    if capture is None:
        return eager, None
    graphed = failed_capture(capture, body)
    if isinstance(graphed, str):
        return eager, {"note": graphed}
    graph, outputs = graphed
    replay = timed(graph.replay, sync, seconds)
    graph_equal, eager_equal = bit_checks(body, graph, outputs, live)
    return eager, {
        "seconds": replay,
        "gpu_ops": graph_ops(graph),
        "graph_equals_eager": graph_equal,
        "eager_equals_eager": eager_equal,
    }


def add_pair(
    rows: Rows,
    section: str,
    what: str,
    eager: float,
    graph: dict[str, Any] | None,
    items: int,
    eager_note: str | None = None,
    **values: Any,
) -> None:
    """An eager row and a graph row (``n/a`` on a CPU); ``items``: observations or env steps
    per run, for the rates."""
    rows.add(
        section, what, mode="eager", ms=eager * 1e3, per_second=items / eager, note=eager_note,
        **values,
    )  # fmt: skip
    if graph is None or "seconds" not in graph:  # no CUDA, or a failed capture
        rows.add(section, what, mode="CUDA graph", **(graph or {"note": NO_GRAPH}), **values)
        return
    replay = graph.pop("seconds")
    rows.add(
        section, what, mode="CUDA graph", ms=replay * 1e3, per_second=items / replay,
        note=f"{eager / replay:.2f}x eager's speed", **graph, **values,
    )  # fmt: skip


# -- sections ----------------------------------------------------------------------------------


def trainer_config(args: argparse.Namespace, *overrides: str) -> DictConfig:
    return config([*(TINY if args.tiny else []), f"device={args.device}", *overrides])


PROFILED = "rollouts and updates, profiled"


def profile_part(args: argparse.Namespace, rows: Rows, deadline: Deadline) -> str:
    precision = "tf32" if "tf32" in args.precisions else "fp32"
    cfg = trainer_config(args)
    texts = []
    for batching in args.batchings:
        if deadline.passed():
            rows.add("profile", PROFILED, batching=batching, note=SKIPPED)
            continue
        text, rate, seconds = profile_section(
            cfg, args.profile_members, batching, precision, args.rollouts, 25
        )
        rows.add(
            "profile", PROFILED, batching=batching, precision=precision,
            mode="train", size=args.profile_members, ms=seconds["all"] * 1e3, per_second=rate,
            note=f"rollouts {seconds['rollouts']:.2f} s, updates {seconds['updates']:.2f} s",
        )  # fmt: skip
        texts.append(f"```\n{text}\n```")
    return "\n\n".join(texts)


def stand_in_loss(
    logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor
) -> torch.Tensor:
    """Each member's loss of a minibatch ``(P,)``: the log-probabilities of ``actions`` and a
    value regression, in FP32 as bf16's log-softmax and values are (a stand-in for PPO's
    loss, whose clipped terms add only small elementwise kernels)."""
    log_probs = torch.log_softmax(logits.float(), -1).gather(-1, actions[..., None])[..., 0]
    return -log_probs.mean(1) + (returns - values.float()[..., 0]).pow(2).mean(1)


class NetworkInputs:
    """Fixed random inputs of the members' stacked network: a minibatch of the paper's size a
    member (observations, actions, returns) and one rollout step's observations."""

    def __init__(self, population: PopulationPPO, device: torch.device):
        first, count = population.members[0], population.size
        space = population.env.single_observation_space
        dtype = torch.from_numpy(np.zeros(0, space.dtype)).dtype
        generator = torch.Generator(device).manual_seed(0)

        def observations(batch: int) -> torch.Tensor:
            shape = (count, batch, *space.shape)
            return torch.randint(0, 2, shape, generator=generator, device=device, dtype=dtype)

        self.batch, self.n_envs = first.batch_size, first.n_envs
        self.obs, self.rollout_obs = observations(self.batch), observations(self.n_envs)
        self.actions = torch.randint(
            0, int(first.action_space.n), (count, self.batch), generator=generator, device=device
        )
        self.returns = torch.randn((count, self.batch), generator=generator, device=device)
        self.max_grad_norm = first.max_grad_norm


def network_bodies(
    stacked: StackedNetworks,
    optimizer: StackedOptimizer,
    inputs: NetworkInputs,
    precision: str,
    device: torch.device,
) -> dict[str, tuple[Callable[[], Any], Callable[[], list[torch.Tensor]], int]]:
    """The bodies measured, by name: each with what it changes (weights and Adam's state) and
    the observations it takes."""
    assert optimizer.optimizer is not None  # batched: one optimizer over the stacks
    adam = optimizer.optimizer

    def minibatch() -> torch.Tensor:
        with autocast(precision, device):
            logits, values = stacked(inputs.obs)
            loss = stand_in_loss(logits, values, inputs.actions, inputs.returns)
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step(inputs.max_grad_norm)
        return loss.detach()

    def rollout_forward() -> Any:
        with torch.no_grad(), autocast(precision, device):
            return stacked(inputs.rollout_obs)

    def changed() -> list[torch.Tensor]:
        params = stacked.parameters()
        return params + [
            value
            for param in params
            for value in adam.state.get(param, {}).values()
            if isinstance(value, torch.Tensor)
        ]

    return {
        "minibatch (forward, backward, Adam)": (minibatch, changed, inputs.batch),
        "rollout forward": (rollout_forward, list, inputs.n_envs),
    }


def network_part(args: argparse.Namespace, rows: Rows, deadline: Deadline) -> str:
    device = torch.device(args.device)
    population = build_population(
        members(trainer_config(args), args.network_members), args.batchings[0]
    )
    population.env.close()
    inputs = NetworkInputs(population, device)
    networks = [PolicyHeads(member.policy) for member in population.members]
    optimizers = [member.policy.optimizer for member in population.members]
    for batching in args.batchings:
        stacked = StackedNetworks(networks, batching)
        optimizer = StackedOptimizer(stacked, optimizers)
        if device.type == "cuda":  # Adam's step counts on the device, in both modes
            for group in optimizer.optimizer.param_groups:  # type: ignore[union-attr]
                group["capturable"] = True
        for precision in args.precisions:
            set_tensorfloat(precision)
            cudnn_kernels(args.cudnn_deterministic)
            bodies = network_bodies(stacked, optimizer, inputs, precision, device)
            for what, (body, changed, batch) in bodies.items():
                common = {"batching": batching, "precision": precision, "size": population.size}
                if deadline.passed():
                    rows.add("network", what, note=SKIPPED, **common)
                    continue
                eager, graph = eager_and_graph(body, device, args.seconds, args.capture, changed)
                add_pair(rows, "network", what, eager, graph, population.size * batch, **common)
    return ""


def env_part(args: argparse.Namespace, rows: Rows, deadline: Deadline) -> str:
    device = torch.device(args.device)
    set_tensorfloat("fp32")  # the env's step has no matmuls or convolutions: stated, not chosen
    for n in args.env_sizes:
        what = "compiled env step"
        if deadline.passed():
            rows.add("env", what, size=n, note=SKIPPED)
            continue
        fresh_compiles()
        envs = vector_envs("suite", n, device, True, 1)
        try:
            measure_env_step(envs, n, device, args.seconds, args.capture, rows)
        finally:
            envs.close()
    return ""


def measure_env_step(
    envs: SafeLifeVectorEnv,
    n: int,
    device: torch.device,
    seconds: float,
    capture: Capture,
    rows: Rows,
) -> None:
    """The compiled step as the env steps it (the state replaced), and on CUDA captured with
    the state written back into static buffers, compared bit for bit over
    :data:`COMPARED_STEPS` steps."""
    step, params = envs._step, envs.params  # the compiled pure step (SafeLifeVectorEnv.step's)
    actions = random_actions(n, device, COMPARED_STEPS)
    start = {key: value.clone() for key, value in envs.state.items()}
    begun = time.perf_counter()
    step(start, actions[0], params)  # compiles
    compile_seconds = time.perf_counter() - begun
    current, calls = start, iter(range(1 << 62))

    def eager_step() -> None:
        nonlocal current
        current = step(current, actions[next(calls) % COMPARED_STEPS], params)[0]

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    eager = timed(eager_step, sync, seconds)
    common = {"eager_note": f"compiled in {compile_seconds:.0f} s", "precision": "fp32", "size": n}
    graph_figures = None
    if capture is not None:
        state = {key: value.clone() for key, value in start.items()}  # static buffers
        static_actions = actions[0].clone()

        def body() -> Any:
            new_state, *outputs = step(state, static_actions, params)
            for key, value in new_state.items():
                state[key].copy_(value)
            return outputs

        graphed = failed_capture(capture, body)
        if isinstance(graphed, str):
            add_pair(rows, "env", "compiled env step", eager, {"note": graphed}, n, **common)
            return
        graph, outputs = graphed
        replay = timed(graph.replay, sync, seconds)

        def replayed() -> list[torch.Tensor]:
            for key, value in start.items():
                state[key].copy_(value)
            out = []
            for taken in actions:
                static_actions.copy_(taken)
                graph.replay()
                out += clones(outputs)
            return out + clones(state)

        def stepped() -> list[torch.Tensor]:
            now, out = start, []
            for taken in actions:
                now, *outputs_now = step(now, taken, params)
                out += clones(outputs_now)
            return out + clones(now)

        first = stepped()
        graph_figures = {
            "seconds": replay,
            "gpu_ops": graph_ops(graph),
            "graph_equals_eager": same(replayed(), first),
            "eager_equals_eager": same(first, stepped()),
        }
    add_pair(rows, "env", "compiled env step", eager, graph_figures, n, **common)


def speed_part(args: argparse.Namespace, rows: Rows, deadline: Deadline) -> str:
    cfg = trainer_config(args)
    for count in args.members:
        for precision in args.precisions:
            for mode in ("train", CAPTURED_TRAINING):
                what = "population training"
                common = {"batching": "auto", "precision": precision, "size": count, "mode": mode}
                if deadline.passed():
                    rows.add("speed", what, note=SKIPPED, **common)
                    continue
                at = with_precision(cfg, precision)
                if mode == "train":
                    wall, cpu = population_rates(at, count, args.rollouts, "auto")
                elif args.capture is None:
                    rows.add("speed", what, note=NO_GRAPH, **common)
                    continue
                else:
                    at = with_precision(trainer_config(args, *CAPTURED), precision)
                    try:
                        wall, cpu = population_rates(at, count, args.rollouts, "auto")
                    except Exception as error:  # noqa: BLE001 - the row says it; the rest run
                        line = (str(error).strip().splitlines() or [type(error).__name__])[0]
                        rows.add("speed", what, note=f"{CAPTURE_FAILED}: {line}", **common)
                        continue
                rows.add(
                    "speed", what, ms=count * cfg.n_envs * cfg.algo.n_steps / wall * 1e3,
                    per_second=wall,
                    note=f"{cpu:,.0f} env steps per CPU-s; ms: one rollout and update",
                    **common,
                )  # fmt: skip
    return ""


#: the speed rows' mode of the trainer with its rollout and update each one CUDA graph
CAPTURED_TRAINING = "train, graphs=all"


INTROS = {
    "profile": "## Profile: where a population's time goes (`population_profile.py`)",
    "network": (
        "## The members' stacked CNN: one minibatch and one rollout forward\n\n"
        "Minibatch: forward, a stand-in loss (log-probabilities and a value regression in "
        "FP32), backward, gradient clipping and Adam (`capturable` on CUDA, in both modes) of "
        "the paper's minibatch a member; rollout forward: one step's observations a member. "
        "CUDA graph: captured by hand after 3 runs on a side stream; graph = eager: one replay "
        "against one eager run from the same weights and Adam state, bit for bit; eager = "
        "eager: two eager runs (a nondeterministic kernel differs there too). bf16: autocast, "
        "FP32 master weights. per s: observations a second."
    ),
    "env": (
        "## The compiled env step as a CUDA graph\n\n"
        "`SafeLifeVectorEnv(compile=True)` (no Inductor CUDA graphs) on the append-still suite "
        "with the training wrappers. Eager: the compiled step as the env steps it (its state "
        "replaced); CUDA graph: the same step captured with its state written back into "
        f"static buffers. graph = eager over {COMPARED_STEPS} steps (observations, rewards, "
        "ends, statistics, state). per s: env steps a second."
    ),
    "speed": (
        "## Population training speed (`population_speed.py`: the paper's setup, all members "
        "together, no grid)\n\nbatching `auto` (unfold on CUDA, member by member on a CPU), at "
        "the run's `precision`; `train`: the trainer eager, its env step eager; "
        f"`{CAPTURED_TRAINING}`: its rollout and update each one CUDA graph (`graphs=all`, the "
        "env step compiled and captured inside), timed after the warm-up and the capture. per "
        "s: env steps a second; ms: one rollout and update of every member."
    ),
}
PARTS: dict[str, Callable[[argparse.Namespace, Rows, Deadline], str]] = {
    "profile": profile_part,
    "network": network_part,
    "env": env_part,
    "speed": speed_part,
}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=default_device())
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--precisions", nargs="+", choices=PRECISIONS, help="default: what the device can do"
    )
    parser.add_argument("--batchings", nargs="+", choices=KEPT_BATCHINGS, default=KEPT_BATCHINGS)
    parser.add_argument("--profile-members", type=int, default=72)
    parser.add_argument("--network-members", type=int, default=72)
    parser.add_argument("--env-sizes", type=int, nargs="+", default=[1152, 4608])
    parser.add_argument("--members", type=int, nargs="+", default=[72, 18])
    parser.add_argument("--rollouts", type=int, default=2, help="timed rollouts (profile, speed)")
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    parser.add_argument(
        "--budget", nargs="+", default=[], metavar="SECTION=SECONDS", help="section deadlines"
    )
    parser.add_argument(
        "--cudnn-deterministic",
        action="store_true",
        help="the network section with cuDNN's deterministic kernels (not a run's autotuned ones)",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: seconds on a CPU (CI)")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "outputs/gpu_measure"))
    )
    args = parser.parse_args(argv)
    # --tiny: the same deadlines' machinery, with room for a cold compile on a loaded CPU
    args.budgets = {name: 300.0 for name in BUDGET} if args.tiny else dict(BUDGET)
    for item in args.budget:
        name, _, seconds = item.partition("=")
        if name not in BUDGET or not seconds.replace(".", "", 1).isdigit():
            parser.error(f"--budget takes SECTION=SECONDS, SECTION one of {SECTIONS}: {item!r}")
        args.budgets[name] = float(seconds)
    if args.tiny:
        args.profile_members = args.network_members = 2
        args.env_sizes, args.members, args.rollouts, args.seconds = [8], [2], 1, 0.05
    return args


def graph_failed(row: dict[str, Any]) -> bool:
    """Whether a row's graph failed: not captured, or unequal to its eager body where two
    eager runs are equal (where they are not, a nondeterministic kernel is to blame:
    ``--cudnn-deterministic`` tells)."""
    unequal = row.get("graph_equals_eager") is False and row.get("eager_equals_eager")
    return bool(unequal) or CAPTURE_FAILED in (row.get("note") or "")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    reason = refusal(args.device, args.precisions or ())
    if reason:
        print(f"gpu_measure.py: {reason}", file=sys.stderr)
        return 2
    args.precisions = args.precisions or available(args.device)
    device = torch.device(args.device)
    args.capture = captured if device.type == "cuda" else None
    torch.manual_seed(0)
    begun = time.perf_counter()
    report = Report(args.out / "measure.md", device, "Issue 43's measuring lease")
    rows = Rows(args.out / "measure.csv")
    left_out = [p for p in PRECISIONS if p not in args.precisions]
    report.finish(
        f"Precisions: {', '.join(args.precisions)}"
        + (f" (not measured here: {', '.join(left_out)})" if left_out else "")
        + f"; batchings: {', '.join(args.batchings)}; section deadlines (s): "
        + ", ".join(f"{name} {args.budgets[name]:.0f}" for name in args.sections)
        + f", each stopped {GRACE} s after."
    )
    for name in args.sections:
        start = time.perf_counter()
        text = ""
        try:
            with stopped_after(args.budgets[name] + GRACE):
                text = PARTS[name](args, rows, Deadline(args.budgets[name]))
        except Exception:  # noqa: BLE001 - the report keeps what ran and the next section runs
            report.failed.append(name)
            text += f"\n\n**FAILED**:\n\n```\n{traceback.format_exc()[-3000:]}```"
        section_rows = rows.of(name)
        if any(graph_failed(row) for row in section_rows):
            report.failed.append(name)
        parts = [INTROS[name], rows_table(section_rows) if section_rows else "", text.strip()]
        parts.append(f"({name}: {time.perf_counter() - start:.0f} s)")
        rows.write()
        report.finish("\n\n".join(part for part in parts if part))
    report.finish(
        f"Total: {time.perf_counter() - begun:.0f} s"
        + (f"; FAILED: {', '.join(report.failed)}" if report.failed else "")
    )
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
