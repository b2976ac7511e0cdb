"""Issue 43's measuring lease call runs whole on a CPU as the lease runs it (``--device cpu
--tiny``): every section reported, each figure with its precision and cuDNN flags, the CUDA graph
rows stated as not available; bad input is refused in one line before anything runs."""

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils._pytree import tree_leaves

from safelife_rl.training.precision import available

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_measure  # noqa: E402
import gpu_suite  # noqa: E402
import precision  # noqa: E402


def lease(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["benchmarks/gpu_lease.sh", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)},
    )


def test_the_measuring_call_runs_whole_on_a_cpu(tmp_path):
    result = lease(tmp_path, "measure", "--device", "cpu", "--tiny")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = (tmp_path / "measure.md").read_text()
    assert "Precisions: fp32, bf16 (not measured here: tf32)" in report
    assert "FAILED" not in report and "skipped" not in report
    for title in ("## Profile", "## The members' stacked CNN", "## The compiled env step",
                  "## Population training speed"):  # fmt: skip
        assert title in report
    rows = list(csv.DictReader((tmp_path / "measure.csv").open()))
    flags = ("cudnn_benchmark", "cudnn_deterministic", "cudnn_allow_tf32", "matmul_allow_tf32")
    assert all(row["precision"] in ("fp32", "bf16") and all(row[f] for f in flags) for row in rows)
    assert all(row["cudnn_allow_tf32"] == row["matmul_allow_tf32"] == "False" for row in rows)
    by_section = {name: [r for r in rows if r["section"] == name] for name in gpu_measure.SECTIONS}
    assert {r["batching"] for r in by_section["profile"]} == {"grouped", "vmap", "unfold"}
    network = by_section["network"]
    assert len(network) == 3 * 2 * 2 * 2  # batchings x precisions x bodies x (eager, graph)
    for row in network + by_section["env"]:  # eager measured; the graph stated, not dropped
        if row["mode"] == "eager":
            assert float(row["ms"]) > 0 and float(row["per_second"]) > 0
        else:
            assert row["mode"] == "CUDA graph" and row["note"] == gpu_measure.NO_GRAPH
    assert [r["size"] for r in by_section["env"]] == ["8", "8"]
    speed = [(r["size"], r["precision"], r["mode"]) for r in by_section["speed"]]
    captured = gpu_measure.CAPTURED_TRAINING
    # bf16: the trainer's setting too; the captured trainer's rows stated, not dropped
    assert speed == [("2", p, m) for p in ("fp32", "bf16") for m in ("train", captured)]
    for row in by_section["speed"]:
        if row["mode"] == "train":
            assert float(row["per_second"]) > 0
        else:
            assert row["note"] == gpu_measure.NO_GRAPH


def test_the_profile_stage_runs_on_a_cpu(tmp_path):
    result = lease(tmp_path, "profile", "--device", "cpu", "--tiny")
    assert result.returncode == 0, result.stderr[-3000:]
    profile = (tmp_path / "population_profile.txt").read_text()
    for batching in ("grouped", "vmap", "unfold"):
        assert f"2 members, 2 envs each, on cpu (batching: {batching}): " in profile
    assert profile.count("fp32: cuDNN benchmark on, deterministic off, TF32 off") == 3


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["nope"], "unknown stage 'nope'"),
        (["measure", "--device", "cpu", "--precisions", "tf32"], "precision=tf32 is TensorFloat"),
        (["measure", "--device", "tpu"], "unknown device 'tpu'"),
        (["profile", "--device", "cpu", "--precision", "tf32"], "precision=tf32 is TensorFloat"),
        (["profile", "--precision", "fp32", "device=cuda"], "precision='device=cuda': give one"),
        pytest.param(
            ["measure", "--device", "cuda"],
            "torch sees no CUDA device",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here"),
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(tmp_path, args, line):
    begun = time.perf_counter()
    result = lease(tmp_path / "out", *args, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and line in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()  # nothing ran
    assert time.perf_counter() - begun < 30


def test_bf16_is_refused_on_a_gpu_without_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100")
    assert precision.refusal("cuda", ["fp32"]) is None
    assert precision.refusal("cuda", ["bf16"]) == (
        "precision=bf16: this GPU (Tesla V100) has no bfloat16 arithmetic; give fp32"
    )
    assert "compute capability 8.0" in precision.refusal("cuda", ["tf32"])
    assert available("cuda") == ["fp32"]


def test_a_section_past_its_deadline_reports_what_it_skipped(tmp_path):
    status = gpu_measure.main(
        ["--device", "cpu", "--tiny", "--sections", "speed", "--budget", "speed=0",
         "--out", str(tmp_path)]
    )  # fmt: skip
    assert status == 0
    rows = list(csv.DictReader((tmp_path / "measure.csv").open()))
    assert [r["note"] for r in rows] == [gpu_measure.SKIPPED] * 4  # fp32 and bf16, both modes
    assert gpu_measure.SKIPPED in (tmp_path / "measure.md").read_text()


def test_a_section_overrunning_its_grace_is_stopped():
    begun = time.perf_counter()
    with pytest.raises(gpu_measure.Overran), gpu_measure.stopped_after(0.2):
        time.sleep(5)
    assert time.perf_counter() - begun < 2


class Replayed:
    """A CUDA graph's stand-in on a CPU: each replay runs the body eagerly and writes its
    results into the outputs of the capture run, as a graph writes its static outputs;
    ``perturbed``: a replay that gets one output wrong."""

    def __init__(self, body, outputs, perturbed: bool):
        self.body, self.outputs, self.perturbed = body, outputs, perturbed

    def replay(self) -> None:
        static = [t for t in tree_leaves(self.outputs) if isinstance(t, torch.Tensor)]
        for target, value in zip(static, tree_leaves(self.body())):
            target.copy_(value)
        if self.perturbed:
            static[0].add_(1)


def capture_on_cpu(perturbed: bool = False):
    def capture(body):
        for _ in range(3):  # as captured() warms up
            body()
        outputs = body()
        return Replayed(body, outputs, perturbed), outputs

    return capture


@pytest.mark.parametrize("perturbed", [False, True])
def test_the_bit_checks_compare_a_replay_with_its_eager_body(perturbed):
    """The CUDA-only path (capture, replay, restore the weights and Adam's state, compare) run
    on a CPU with a stand-in graph: equal where the replay is the body, not where it is off."""
    args = gpu_measure.parse(["--device", "cpu", "--tiny", "--precisions", "fp32"])
    args.capture = capture_on_cpu(perturbed)
    rows = gpu_measure.Rows(Path(os.devnull))
    gpu_measure.network_part(args, rows, gpu_measure.Deadline(600))
    graphs = [row for row in rows.rows if row["mode"] == "CUDA graph"]
    assert len(graphs) == len(args.batchings) * 2  # batchings x bodies
    assert all(row["eager_equals_eager"] for row in graphs)
    assert all(row["graph_equals_eager"] is not perturbed for row in graphs)
    assert all(gpu_measure.graph_failed(row) is perturbed for row in graphs)
    # unequal where the eager runs differ too: a nondeterministic kernel's, not the graph's
    assert not gpu_measure.graph_failed({"graph_equals_eager": False, "eager_equals_eager": False})


def test_the_env_step_replayed_from_static_buffers_equals_stepping():
    """The captured env step's body (the step on static state, written back) against the step
    as the env takes it, with the CPU's stand-in graph (the eager step: the same body)."""
    rows = gpu_measure.Rows(Path(os.devnull))
    envs = gpu_suite.vector_envs("suite", 8, torch.device("cpu"), False, 1)
    gpu_measure.measure_env_step(envs, 8, torch.device("cpu"), 0.05, capture_on_cpu(), rows)
    eager, graph = rows.rows
    assert (eager["mode"], graph["mode"]) == ("eager", "CUDA graph")
    assert graph["graph_equals_eager"] and graph["eager_equals_eager"]


def test_a_graph_that_cannot_be_captured_is_a_failed_row():
    def capture(body):
        raise RuntimeError("operation not permitted when stream is capturing")

    eager, graph = gpu_measure.eager_and_graph(
        lambda: torch.ones(2) * 2, torch.device("cpu"), 0.01, capture
    )
    assert eager > 0
    assert graph == {
        "note": f"{gpu_measure.CAPTURE_FAILED}: RuntimeError: operation not permitted when "
        "stream is capturing"
    }


def test_a_captured_speed_row_that_fails_says_so_and_the_others_run(tmp_path, monkeypatch):
    """A capture that fails on the lease fails its own row (the section is reported failed)
    and the rows after it are still measured."""
    from safety_rl_common.errors import UserError

    def rates(cfg, count, rollouts, batching):
        if cfg.get("graphs", "none") != "none":
            raise UserError("the rollout could not be captured as one CUDA graph: a sync")
        return 1000.0, 500.0

    monkeypatch.setattr(gpu_measure, "population_rates", rates)
    args = gpu_measure.parse(["--device", "cpu", "--tiny", "--precisions", "fp32"])
    args.capture, args.members = object(), [2, 3]  # as on CUDA
    rows = gpu_measure.Rows(tmp_path / "measure.csv")
    gpu_measure.speed_part(args, rows, gpu_measure.Deadline(60))
    notes = [(row["size"], row["mode"], row.get("note", "")) for row in rows.of("speed")]
    assert [(size, mode) for size, mode, _ in notes] == [
        (2, "train"), (2, gpu_measure.CAPTURED_TRAINING),
        (3, "train"), (3, gpu_measure.CAPTURED_TRAINING),
    ]  # fmt: skip
    for _, mode, note in notes:
        failed = f"{gpu_measure.CAPTURE_FAILED}: the rollout could not be captured"
        assert note.startswith(failed) == (mode != "train")
    assert sum(gpu_measure.graph_failed(row) for row in rows.of("speed")) == 2
