"""The audit's cases, generated from tables: input kind x surface x hostile value, and the
fixtures they read (a tiny trained run, its model, a finished reproduction, level files, a
level bank), crafted once per audit."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from tests.reliability.runner import ROOT, Case

SUITES = ROOT / "safelife_rl" / "levels" / "v1.0"
TRACE = ROOT / "tests" / "data" / "safelife" / "traces" / "append-still-000.npz"
#: permissions do not bind root: the read-only cases are left out when run as root
ROOT_USER = os.geteuid() == 0

TINY = (
    "experiment=paper",
    "env=append-still",
    "env.kwargs.view_shape=[17,17]",
    "env.kwargs.time_limit=20",
    "policy.kwargs.features_extractor_kwargs.features_dim=16",
    "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
    "n_envs=2",
    "progress_bar=false",
    "algo.n_steps=16",
    "callbacks.evaluation.n_episodes=1",
    "callbacks.evaluation.eval_every=32",
    "callbacks.checkpoint.save_every=32",
    "total_timesteps=64",
)

#: hostile values of one setting, by name
VALUES = {
    "nan": "nan",
    "inf": "inf",
    "-inf": "-inf",
    "negative": "-1",
    "zero": "0",
    "huge": "1000000000000",
    "fraction": "2.5",
    "text": "abc",
    "list": "[1,2]",
    "null": "null",
}
SCALAR = ("nan", "inf", "negative", "zero", "huge", "text")

# (key, values tried, values a legal setting may take (run: refused or clean))
TRAIN_KEYS = [
    ("total_timesteps", SCALAR + ("null", "fraction", "list"), ("huge",)),
    ("n_envs", SCALAR + ("null", "fraction", "list"), ()),
    ("seed", SCALAR, ("zero", "huge")),
    ("algo.n_steps", SCALAR, ()),
    ("algo.learning_rate", SCALAR, ("zero", "huge")),
    ("algo.gamma", SCALAR, ("zero",)),
    ("algo.gae_lambda", SCALAR, ("zero",)),
    ("algo.batch_size", SCALAR, ("huge",)),
    ("algo.n_epochs", SCALAR, ()),
    ("algo.clip_range", SCALAR, ("huge",)),
    ("algo.ent_coef", SCALAR, ("zero", "negative")),
    ("algo.vf_coef", SCALAR, ("zero",)),
    ("algo.max_grad_norm", SCALAR, ("huge",)),
    ("env.kwargs.time_limit", SCALAR, ("huge",)),
    ("env.kwargs.workers", SCALAR, ("zero",)),
    ("wrappers.side_effect_penalty.penalty", SCALAR + ("-inf",), ("zero",)),
    ("wrappers.exit_bonus.bonus", SCALAR + ("-inf",), ("zero", "negative")),
    ("wrappers.movement_bonus.bonus", SCALAR, ("zero", "negative")),
    ("wrappers.movement_bonus.period", SCALAR, ("huge",)),
    ("callbacks.evaluation.eval_every", SCALAR, ("huge",)),
    ("callbacks.evaluation.n_episodes", SCALAR, ()),
    ("callbacks.evaluation.seed", SCALAR, ("zero", "huge")),
    ("callbacks.checkpoint.save_every", SCALAR, ("huge",)),
    ("callbacks.checkpoint.keep", SCALAR, ("zero", "huge")),
    ("torch_threads", SCALAR, ()),
    ("log_interval", SCALAR, ("huge",)),
]
# settings whose value is not a number: (override, legal)
TRAIN_OTHER = [
    *(
        (f"env.kwargs.view_shape={v}", False)
        for v in (
            "[0,0]",
            "[-1,17]",
            "[20001,20001]",
            "[nan,17]",
            "17",
            "abc",
            "[17]",
            "[17,17,17]",
            "[2.5,17]",
            "null",
        )
    ),
    *((f"env.kwargs.channels={v}", False) for v in ("[99]", "[-1]", "[]", "abc", "[nan]")),
    *(
        (f"wrappers.side_effect_penalty.ramp.values={v}", False)
        for v in ("[nan,1]", "[0,inf]", "abc", "[1]", "[-inf,0]")
    ),
    *(
        (f"wrappers.side_effect_penalty.ramp.steps={v}", False)
        for v in ("[-1,5]", "[5,1]", "[nan,1]", "[1]", "abc")
    ),
    *((f"device={v}", False) for v in ("meta", "gpu", "cuda", "cuda:99", "abc", "nan", "''")),
    *((f"vec_env={v}", False) for v in ("abc", "nan", "null")),
    *((f"cudnn_deterministic={v}", False) for v in ("abc", "null")),
    *((f"precision={v}", False) for v in ("fp16", "tf32", "null", "BF16")),
    *(
        (f"env.kwargs.bank={v}", False)
        for v in (
            "{size:0}",
            "{size:-1}",
            "{size:nan}",
            "{size:abc}",
            "{bogus:1}",
            "abc",
            "[1]",
            "{size:1000000000000}",
        )
    ),
    # unknown or mistyped keys and groups
    *(
        (o, False)
        for o in (
            "foo=1",
            "algo.gama=0.9",
            "env.kwargs.viewshape=[5,5]",
            "+env.kwargs.bogus=1",
            "+algo.bogus=1",
            "env=nope",
            "algo=nope",
            "method=nope",
            "experiment=nope",
            "policy=nope",
            "env.id=Nope-v0",
            "env.id=safelife_rl/Nope-v0",
            "policy.name=Nope",
            "+callbacks.bogus=1",
            "resume=",
            "trust_pickle=abc",
            "progress_bar=abc",
        )
    ),
    *((f"cost_limit={v}", False) for v in ("nan", "-1", "inf", "abc")),
    *(
        (f"method.constraint_start={v}", False)
        for v in ("nan", "-1", "1.5", "abc", "null", "true", "1000000000000")
    ),
]
TRAIN_METHOD = {
    "cost_limit": "method=ppo_lagrangian",
    "method.constraint_start": "method=ppo_lagrangian",
}
#: AUP's phases sized to fit the tiny run
AUP_TINY = (
    "total_timesteps=640",
    "method.buffer_steps=64",
    "method.aux_steps=256",
    "method.vae.hidden=[32,16]",
    "method.vae.epochs=3",
    "method.vae.batch_size=16",
    "method.aux_agent.buffer_size=500",
    "method.aux_agent.learning_starts=64",
)
# each method's own settings: (its overrides, key, values tried, values it may take)
METHOD_KEYS = [
    *(
        (
            ("method=ppo_lagrangian", "cost_limit=2"),
            f"method.{key}",
            SCALAR + ("null", "list"),
            ("zero",),
        )
        for key in ("multiplier_init", "multiplier_lr", "pid_kp", "pid_kd")
    ),
    (
        ("method=ppo_lagrangian", "cost_limit=2"),
        "method.standardize_advantages",
        ("text", "null", "list", "zero", "nan"),
        (),
    ),
    *(
        (("method=aup", *AUP_TINY), f"method.{key}", SCALAR + ("null", "fraction", "list"), ())
        for key in (
            "buffer_steps",
            "aux_steps",
            "vae.batch_size",
            "vae.epochs",
            "aux_agent.batch_size",
            "aux_agent.buffer_size",
        )
    ),
    # a ramp may end far beyond the run or at its end (null)
    (
        ("method=aup", *AUP_TINY),
        "method.lambda_ramp_end",
        SCALAR + ("null", "fraction", "list"),
        ("huge", "null"),
    ),
    (
        ("method=aup", *AUP_TINY),
        "method.aux_agent.learning_starts",
        SCALAR + ("null", "fraction", "list"),
        ("zero",),
    ),
    *(
        (("method=aup", *AUP_TINY), f"method.{key}", SCALAR + ("null", "list"), ())
        for key in ("vae.learning_rate", "aux_agent.learning_rate", "reward")
    ),
    (("method=aup", *AUP_TINY), "method.aux_agent.gamma", SCALAR + ("null", "list"), ("zero",)),
    (("method=aup", *AUP_TINY), "method.noop_action", SCALAR + ("null", "list"), ("zero", "null")),
    (("method=aup_proj", *AUP_TINY), "method.lambda_values", SCALAR + ("null", "list"), ("list",)),
    (("method=cost_penalty",), "method.coefficient", SCALAR + ("null", "list"), ("zero",)),
]
# methods' settings that are not one number: (overrides, legal)
METHOD_OTHER = [
    *(
        (("method=aup", *AUP_TINY, f"method.lambda_values={v}"), False)
        for v in ("[1e308,1e308]", "[a,b]", "[0.1]", "[nan,0.1]", "[-1,0.1]", "[0.1,0.1,0.1]")
    ),
    *(
        (("method=aup", *AUP_TINY, f"method.vae.hidden={v}"), False)
        for v in ("[0]", "[-5]", "abc", "[1000000000]", "[2.5]")
    ),
    (("method=aup", *AUP_TINY, "+method.vae.dropout=0.1"), False),
    # buffers larger than any host: refused before they are allocated
    (("method=aup", "method.buffer_steps=300000000", "total_timesteps=1000000000"), False),
    (("method=aup", *AUP_TINY, "method.aux_agent.buffer_size=10000000000"), False),
    (("algo=dqn", "algo.buffer_size=10000000000"), False),
    (("method.name=nope",), False),
]

DREST_BASE = ("agent.meta_episodes=8", "agent.eval_every=4")
DREST_PPO = (
    "agent=ppo",
    "agent.total_timesteps=256",
    "agent.n_steps=32",
    "agent.batch_size=32",
    "agent.eval_freq=128",
    "agent.n_envs=2",
)
DREST_KEYS = [
    (DREST_BASE, "seed", SCALAR, ("zero", "huge")),
    (DREST_BASE, "x", SCALAR, ("zero", "negative", "fraction", "huge")),
    (DREST_BASE, "max_states", SCALAR, ("huge",)),
    (DREST_BASE, "agent.meta_episodes", SCALAR, ("huge",)),
    (DREST_BASE, "agent.meta_episode_size", SCALAR, ()),
    (DREST_BASE, "agent.lam", SCALAR, ("zero",)),
    (DREST_BASE, "agent.lr_start", SCALAR, ("zero",)),
    (DREST_BASE, "agent.eps_start", SCALAR, ("zero",)),
    (DREST_BASE, "agent.eval_every", SCALAR, ("huge",)),
    (DREST_PPO, "agent.total_timesteps", SCALAR, ("huge",)),
    (DREST_PPO, "agent.n_envs", SCALAR, ()),
    (DREST_PPO, "agent.n_steps", SCALAR, ()),
    (DREST_PPO, "agent.learning_rate", SCALAR, ("zero", "huge")),
    (DREST_PPO, "agent.gamma", SCALAR, ("zero",)),
    (DREST_PPO, "agent.eval_freq", SCALAR, ("huge",)),
    (DREST_PPO, "agent.meta_episode_size", SCALAR, ()),
]
DREST_OTHER = [
    "gridworld=nope",
    "gridworld={fx}/levels/empty.txt",
    "gridworld={fx}/levels/junk.txt",
    "gridworld={fx}/levels/fifo",
    "gridworld={fx}/levels",
    "gridworld={fx}/levels/huge.txt",
    "gridworld={fx}/levels/binary.txt",
    "reward=nope",
    "agent=nope",
    "foo=1",
    "agent.obs_type=nope",
]

EXT_KEYS = [
    (("benchmark", "steps=20", "progress=false"), "steps", SCALAR, ("huge",)),
    (
        ("benchmark", "steps=20", "progress=false"),
        "seeds",
        ("nan", "negative", "text", "fraction", "list"),
        ("list",),
    ),
    (
        ("debate", "rounds=50", "seeds=[0]", "bobs=[random]", "progress=false"),
        "rounds",
        SCALAR,
        ("huge",),
    ),
    (
        ("debate", "rounds=50", "seeds=[0]", "bobs=[random]", "progress=false"),
        "max_value",
        SCALAR,
        ("huge",),
    ),
    (("debate", "rounds=50", "seeds=[0]", "bobs=[random]", "progress=false"), "window", SCALAR, ()),
]
EXT_OTHER = [
    ("benchmark", "agent=Nope"),
    ("benchmark", "agent=os.system"),
    ("benchmark", "agent=json.JSONDecoder"),
    ("benchmark", "only=[Nope]"),
    ("benchmark", "hyperparams.learning_rate=nan"),
    ("benchmark", "+hyperparams.bogus=1"),
    ("benchmark", "reality_check=abc"),
    ("benchmark", "seeds=[]"),
    ("benchmark", "foo=1"),
    ("debate", "alice=nope"),
    ("debate", "bobs=[nope]"),
    ("debate", "data=[]"),
    ("debate", "data=[-1,2]"),
    ("debate", "data=[nan]"),
    ("debate", "data=abc"),
    ("debate", "seeds=[]"),
    ("debate", "alice_hyperparams.gamma=nan"),
]

FLAGS = ("nan", "negative", "zero", "huge", "text")
FLAG_VALUES = {**VALUES, "empty": ""}
# (package, command and base arguments, flag, values tried, legal values)
COMMAND_FLAGS = [
    (
        (
            "safelife_rl",
            "benchmark",
            "append-still",
            "--policy",
            "noop",
            "--episodes",
            "1",
            "--levels",
            "1",
            "--time-limit",
            "5",
            "--out",
            "{case}/b.json",
        ),
        ("--episodes", "--levels", "--time-limit", "--n-envs", "--seed"),
        {"--seed": ("zero",), "--time-limit": ("huge",)},
    ),  # a trillion steps a play, as asked
    (
        (
            "safelife_rl",
            "random-run",
            "--task",
            "append-still",
            "--episodes",
            "1",
            "--time-limit",
            "5",
            "--logdir",
            "{case}/rr",
        ),
        ("--episodes", "--time-limit", "--seed"),
        {"--seed": ("zero", "huge")},
    ),
    (
        ("safelife_rl", "replay", str(TRACE), "--out", "{case}/r.npz"),
        ("--seed",),
        {"--seed": ("zero", "huge")},
    ),
    (
        ("safelife_rl", "make-suites", "append-still", "--out", "{case}/s", "--check"),
        ("--workers", "--size"),
        {},
    ),
    (("safelife_rl", "play", "append-still"), ("--time-limit",), {}),
    (("safelife_rl", "play-multi", "build-coop"), ("--agent", "--time-limit"), {}),
    (
        (
            "safelife_rl",
            "reproduce",
            "table1",
            "--quick",
            "--tasks",
            "append-still",
            "--penalties",
            "0",
            "--out",
            "{case}/r",
        ),
        ("--steps", "--seeds", "--levels", "--episodes", "--penalties"),
        {"--steps": ("huge",)},
    ),
    (
        (
            "safelife_rl",
            "compare",
            "--quick",
            "--methods",
            "ppo",
            "--tasks",
            "append-still",
            "--out",
            "{case}/c",
        ),
        ("--steps", "--seeds", "--levels", "--episodes"),
        {"--steps": ("huge",)},
    ),
    (
        ("drest", "reproduce", "--quick", "--out", "{case}/d"),
        ("--seeds", "--scale", "--workers"),
        {},
    ),
    (
        ("drest", "generalise", "--quick", "--out", "{case}/g"),
        (
            "--seeds",
            "--steps",
            "--train-worlds",
            "--test-worlds",
            "--world-seed",
            "--meta-episode-size",
            "--lam",
            "--workers",
        ),
        {"--world-seed": ("zero", "huge"), "--steps": ("huge",)},
    ),
    (
        ("extended_envs", "reproduce", "table1", "--quick", "--out", "{case}/e"),
        ("--steps", "--seeds", "--jobs"),
        {"--steps": ("huge",)},
    ),
]
OTHER_ARGS = [
    ("safelife_rl", "reproduce", "table1", "--quick", "--out", ""),
    ("safelife_rl", "reproduce", "table1", "--quick", "--out", "o_${oc.env:HOME}"),
    ("safelife_rl", "reproduce", "table1", "--quick", "--out", "a,b"),
    ("safelife_rl", "reproduce", "table1", "--quick", "--tasks", "nope", "--out", "{case}/r"),
    (
        "safelife_rl",
        "reproduce",
        "table1",
        "--quick",
        "--tasks",
        "append-still",
        "--out",
        "{case}/r",
        "algo.gama=0.9",
    ),
    (
        "safelife_rl",
        "reproduce",
        "table1",
        "--quick",
        "--tasks",
        "append-still",
        "--out",
        "{case}/r",
        "n_envs=nan",
    ),
    ("safelife_rl", "reproduce", "table1", "--quick", "--penalties", "1e308", "--out", "{case}/r"),
    ("safelife_rl", "reproduce", "table1", "--quick", "--penalties", "0,,1", "--out", "{case}/r"),
    ("safelife_rl", "compare", "--quick", "--methods", "nope", "--out", "{case}/c"),
    ("safelife_rl", "compare", "--quick", "--out", ""),
    ("safelife_rl", "benchmark", "nope-task"),
    ("safelife_rl", "benchmark", "append-still", "--policy", "nope"),
    ("safelife_rl", "plots", "{case}/nowhere"),
    ("safelife_rl", "plots", "{fx}/run", "--labels", "a", "b"),
    ("safelife_rl", "replay", "{fx}/levels/not_a_zip.npz", "--out", "{case}/r.npz"),
    ("safelife_rl", "nope"),
    ("drest", "nope"),
    ("extended_envs", "nope"),
    ("extended_envs", "reproduce", "nope"),
]


# ---------------------------------------------------------------------------------------------
# payloads and crafted files


class WriteMarker:
    """Unpickling it creates ``path``: the stand-in for code hidden in a file."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def pickled_marker(path: Path) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(WriteMarker(str(path)))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _sparse(path: Path, size: int = 2 << 30) -> None:
    with open(path, "wb") as file:
        file.truncate(size)


def _bomb_zip(path: Path, member: str, size: int, others: dict[str, bytes] | None = None) -> None:
    """A zip whose ``member`` inflates to ``size`` zero bytes (deflated to about size/1000)."""
    chunk = bytes(16 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, data in (others or {}).items():
            archive.writestr(name, data)
        with archive.open(member, "w", force_zip64=True) as handle:
            for start in range(0, size, len(chunk)):
                handle.write(chunk[: min(len(chunk), size - start)])


def _npy_header(shape: tuple[int, ...], dtype: str = "<u2") -> bytes:
    """An .npy file's header declaring ``shape`` (with no data after it)."""
    import numpy as np

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def level_files(folder: Path, markers: Path) -> dict[str, str]:
    """Crafted level files (name: what is wrong); a valid one is ``valid.npz``."""
    import numpy as np

    from safelife_rl.engine.level_files import level_record, load_levels

    folder.mkdir(parents=True, exist_ok=True)
    record = level_record(load_levels(SUITES / "append-still.npz")[0])
    np.savez(folder / "valid.npz", **record)
    variants = {
        "board_float": {"board": record["board"].astype(float) + 0.5},
        "board_negative": {"board": record["board"].astype(np.int64) - 70000},
        "board_1d": {"board": record["board"].ravel()},
        "board_3d": {"board": record["board"][None]},
        "board_empty": {"board": np.zeros((0, 0), np.uint16), "goals": np.zeros((0, 0), np.uint16)},
        "board_huge": {
            "board": np.zeros((10000, 10000), np.uint16),
            "goals": np.zeros((10000, 10000), np.uint16),
        },
        "board_bool": {"board": record["board"] > 0},
        "board_strings": {"board": np.array([["a"] * 26] * 26)},
        "goals_mismatch": {"goals": record["goals"][:5]},
        "agent_outside": {"agent_locs": np.array([[999, -3]])},
        "agent_float": {"agent_locs": np.array([[1.5, 2.5]])},
        "agent_none": {"agent_locs": np.zeros((0, 2), np.int64)},
        "spawn_nan": {"spawn_prob": np.array(np.nan)},
        "spawn_inf": {"spawn_prob": np.array(np.inf)},
        "min_performance_text": {"min_performance": np.array("abc")},
        "points_nan": {"points_table": np.full_like(record["points_table"], np.nan)},
        "points_shape": {"points_table": np.zeros((1, 2, 2))},
        "name_huge": {"name": np.array("x" * 100000)},
        "missing_board": {"board": None},
        "missing_agent": {"agent_locs": None},
    }
    for name, changes in variants.items():
        fields = dict(record)
        for key, value in changes.items():
            if value is None:
                fields.pop(key)
            else:
                fields[key] = value
        np.savez_compressed(folder / f"{name}.npz", **fields)
    with zipfile.ZipFile(folder / "pickled.npz", "w") as archive:
        archive.writestr("board.npy", _npy_header((1,), "|O") + pickled_marker(markers / "level"))
    with zipfile.ZipFile(folder / "huge_header.npz", "w") as archive:
        archive.writestr("board.npy", _npy_header((200000, 200000)))
    (folder / "not_a_zip.npz").write_text("not a level\n")
    (folder / "empty.npz").write_bytes(b"")
    (folder / "truncated.npz").write_bytes((folder / "valid.npz").read_bytes()[:300])
    _sparse(folder / "sparse.npz")
    _fifo(folder / "fifo.npz")
    (folder / "loop.npz").symlink_to("loop.npz")
    (folder / "dangling.npz").symlink_to("nowhere.npz")
    (folder / "dir.npz").mkdir()
    (folder / "empty_dir").mkdir()
    _bomb_zip(folder / "bomb.npz", "board.npy", (1 << 30) + (64 << 20), {"goals.npy": b""})
    # a trace whose actions are out of range, and one of floats
    trace = dict(np.load(TRACE))
    np.savez(folder / "trace_actions.npz", **{**trace, "actions": trace["actions"] + 50})
    np.savez(folder / "trace_float.npz", **{**trace, "actions": trace["actions"] + 0.5})
    np.savez(folder / "trace_missing.npz", **{k: v for k, v in trace.items() if k != "actions"})
    # drest gridworlds
    (folder / "empty.txt").write_text("")
    (folder / "junk.txt").write_text("this is not a gridworld\n@@@\n")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 4)
    (folder / "huge.txt").write_text(("." * 3000 + "\n") * 3000)
    _fifo(folder / "fifo")
    return {
        name: ""
        for name in [
            *variants,
            "pickled",
            "huge_header",
            "not_a_zip",
            "empty",
            "truncated",
            "sparse",
            "fifo",
            "loop",
            "dangling",
            "dir",
            "bomb",
        ]
    }


LEVEL_NAMES = [
    "board_float",
    "board_negative",
    "board_1d",
    "board_3d",
    "board_empty",
    "board_huge",
    "board_bool",
    "board_strings",
    "goals_mismatch",
    "agent_outside",
    "agent_float",
    "agent_none",
    "spawn_nan",
    "spawn_inf",
    "min_performance_text",
    "points_nan",
    "points_shape",
    "name_huge",
    "missing_board",
    "missing_agent",
    "pickled",
    "huge_header",
    "not_a_zip",
    "empty",
    "truncated",
    "sparse",
    "fifo",
    "loop",
    "dangling",
    "dir",
    "bomb",
]


def rewrite_zip(
    source: Path, target: Path, data=None, entries: dict | None = None, drop: tuple[str, ...] = ()
) -> None:
    """A copy of an SB3 zip with its ``data`` JSON changed, entries replaced or dropped."""
    entries = dict(entries or {})
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for name in old.namelist():
            if name in drop:
                continue
            content = old.read(name)
            if name == "data" and data is not None:
                loaded = json.loads(content)
                data(loaded)
                content = json.dumps(loaded).encode()
            new.writestr(name, entries.pop(name, content))
        for name, content in entries.items():
            new.writestr(name, content)


def _payload(marker: Path) -> dict:
    return {":serialized:": base64.b64encode(pickled_marker(marker)).decode()}


def _torch_payload(marker: Path) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save({"weight": WriteMarker(str(marker))}, buffer)
    return buffer.getvalue()


def yaml_bomb(levels: int = 11) -> str:
    """About 250 bytes of nested aliases that expand to 4**(levels + 1) nodes."""
    names = [f"n{i}" for i in range(levels + 1)]
    lines = [f"{names[0]}: &{names[0]} [x, x, x, x]"]
    lines += [
        f"{new}: &{new} [*{old}, *{old}, *{old}, *{old}]" for old, new in zip(names, names[1:])
    ]
    return "\n".join(lines) + "\n"


def _yaml_of(model: Path) -> str:
    with zipfile.ZipFile(model) as archive:
        return archive.read("run_config.yaml").decode()


def model_files(folder: Path, model: Path, markers: Path) -> list[str]:
    """Crafted copies of a trained model (``folder/NAME.zip``); the names."""
    folder.mkdir(parents=True, exist_ok=True)
    config = _yaml_of(model)
    made = {
        "lr_payload": dict(data=lambda d: d.update(lr_schedule=_payload(markers / "lr"))),
        "policy_class_payload": dict(
            data=lambda d: d.update(policy_class=_payload(markers / "policy_class"))
        ),
        "unknown_payload": dict(data=lambda d: d.update(zz=_payload(markers / "unknown"))),
        "space_payload": dict(
            data=lambda d: d.update(observation_space=_payload(markers / "space"))
        ),
        "timesteps_huge": dict(data=lambda d: d.update(num_timesteps=1e30)),
        "timesteps_nan": dict(data=lambda d: d.update(num_timesteps=float("nan"))),
        "timesteps_negative": dict(data=lambda d: d.update(num_timesteps=-5)),
        "data_not_json": dict(entries={"data": b"{not json"}),
        "data_list": dict(entries={"data": b"[1, 2]"}),
        "weights_payload": dict(entries={"policy.pth": _torch_payload(markers / "weights")}),
        "weights_pickle": dict(entries={"policy.pth": pickled_marker(markers / "raw_weights")}),
        "weights_junk": dict(entries={"policy.pth": b"junk" * 100}),
        "weights_missing": dict(drop=("policy.pth",)),
        "optimizer_payload": dict(
            entries={"policy.optimizer.pth": _torch_payload(markers / "optimizer")}
        ),
        "config_missing": dict(drop=("run_config.yaml",)),
        "config_huge": dict(entries={"run_config.yaml": config + "#" * (3 << 20) + "\n"}),
        "config_target": dict(
            entries={
                "run_config.yaml": config.replace(
                    "_target_: safelife_rl.training.ExitBonus",
                    f"_target_: os.system\n    _args_: ['touch {markers}/target']",
                    1,
                )
            }
        ),
        "config_yaml_tag": dict(
            entries={
                "run_config.yaml": config
                + (f"evil: !!python/object/apply:os.system ['touch {markers}/yaml_tag']\n")
            }
        ),
        "config_view_huge": dict(
            entries={
                "run_config.yaml": config.replace(
                    "view_shape:\n  - 17\n  - 17", "view_shape:\n  - 20001\n  - 20001"
                )
            }
        ),
        "config_env_main": dict(
            entries={
                "run_config.yaml": config.replace(
                    "id: safelife_rl/AppendStill-v1", "id: safelife_rl.__main__:X"
                )
            }
        ),
        "config_interpolation": dict(
            entries={"run_config.yaml": config.replace("seed: 0", "seed: ${oc.env:HOME}", 1)}
        ),
        "config_not_mapping": dict(entries={"run_config.yaml": "- 1\n- 2\n"}),
        "config_bad_yaml": dict(entries={"run_config.yaml": "a: [\n"}),
        "config_yaml_bomb": dict(entries={"run_config.yaml": yaml_bomb()}),
    }
    for name, changes in made.items():
        rewrite_zip(model, folder / f"{name}.zip", **changes)
    (folder / "not_a_zip.zip").write_text("not a model\n")
    (folder / "empty.zip").write_bytes(b"")
    (folder / "truncated.zip").write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    _sparse(folder / "sparse.zip", 20 << 30)
    _fifo(folder / "fifo.zip")
    (folder / "dir.zip").mkdir()
    (folder / "loop.zip").symlink_to("loop.zip")
    shutil.copy(folder.parent / "levels" / "bomb.npz", folder / "bomb_member.zip")
    with zipfile.ZipFile(model) as old, zipfile.ZipFile(folder / "bomb_member.zip", "a") as new:
        for name in old.namelist():
            new.writestr(name, old.read(name))
    return [
        *made,
        "not_a_zip",
        "empty",
        "truncated",
        "sparse",
        "fifo",
        "dir",
        "loop",
        "bomb_member",
    ]


# ---------------------------------------------------------------------------------------------
# run folders for resume=


def _edit_config(run: Path, old: str, new: str) -> None:
    path = run / "config.yaml"
    text = path.read_text()
    assert old in text, (old, path)
    path.write_text(text.replace(old, new, 1))


def _newest_checkpoint(run: Path) -> Path:
    return max(
        (run / "checkpoints").glob("model_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1])
    )


def _run_setups(markers: Path) -> dict[str, object]:
    """name: a function changing the copied run folder ``run``."""

    def checkpoint(data=None, entries=None, drop=()):
        def change(run: Path) -> None:
            newest = _newest_checkpoint(run)
            rewrite_zip(newest, newest.with_suffix(".new"), data, entries, drop)
            newest.with_suffix(".new").replace(newest)

        return change

    def both(*changes):
        def change(run: Path) -> None:
            for one in changes:
                one(run)

        return change

    def config(old, new):
        return lambda run: _edit_config(run, old, new)

    def write(name, content):
        def change(run: Path) -> None:
            path = run / name
            path.unlink(missing_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)

        return change

    def special(name, make):
        def change(run: Path) -> None:
            (run / name).unlink(missing_ok=True)
            make(run / name)

        return change

    payload = checkpoint(lambda d: d.update(lr_schedule=_payload(markers / "resume_lr")))
    return {
        "trust_saved_payload": both(config("trust_pickle: false", "trust_pickle: true"), payload),
        "checkpoint_payload": payload,
        "checkpoint_weights_payload": checkpoint(
            entries={"policy.pth": _torch_payload(markers / "resume_weights")}
        ),
        "checkpoint_huge_steps": checkpoint(lambda d: d.update(num_timesteps=1e30)),
        "checkpoint_nan_steps": checkpoint(lambda d: d.update(num_timesteps=float("nan"))),
        "checkpoint_junk": lambda run: _newest_checkpoint(run).write_bytes(b"junk"),
        "checkpoint_fifo": lambda run: (
            _newest_checkpoint(run).unlink(),
            _fifo(run / "checkpoints" / "model_999_steps.zip"),
        ),
        "checkpoint_sparse": lambda run: _sparse(
            run / "checkpoints" / "model_999_steps.zip", 20 << 30
        ),
        "record_actions_junk": checkpoint(entries={"rollout_actions.npy": b"\x93NUMPY junk"}),
        "record_actions_huge": checkpoint(
            entries={"rollout_actions.npy": _npy_header((100000, 100000), "<i8")}
        ),
        "record_state_junk": checkpoint(entries={"rollout_state.json": b"{"}),
        "env_id_main": config("id: safelife_rl/AppendStill-v1", "id: safelife_rl.__main__:X"),
        "env_id_os": config("id: safelife_rl/AppendStill-v1", "id: os:system"),
        "env_id_json": config("id: safelife_rl/AppendStill-v1", "id: json.tool:X"),
        "target_os_system": config(
            "_target_: safelife_rl.training.ExitBonus",
            f"_target_: os.system\n    _args_: ['touch {markers}/resume_target']",
        ),
        "target_exec": config(
            "_target_: safelife_rl.training.ExitBonus", "_target_: builtins.exec"
        ),
        "target_private": config(
            "_target_: safelife_rl.training.ExitBonus", "_target_: safelife_rl.training.run._plain"
        ),
        "get_class_path": config(
            "path: safelife_rl.training.SafeLifeCNN", "path: subprocess.Popen"
        ),
        "interpolation": config("seed: 0", "seed: ${oc.env:HOME}"),
        "yaml_tag": write(
            "config.yaml", f"a: !!python/object/apply:os.system ['touch {markers}/resume_yaml']\n"
        ),
        "config_missing": lambda run: (run / "config.yaml").unlink(),
        "config_yaml_bomb": write("config.yaml", yaml_bomb()),
        "checkpoint_config_bomb": checkpoint(entries={"run_config.yaml": yaml_bomb()}),
        "config_empty": write("config.yaml", ""),
        "config_list": write("config.yaml", "- 1\n"),
        "config_fifo": special("config.yaml", _fifo),
        "config_huge": lambda run: (run / "config.yaml").open("a").write("#" * (64 << 20) + "\n"),
        "config_nan_penalty": config("penalty: 0.0", "penalty: .nan"),
        "config_seed_negative": config("seed: 0", "seed: -1"),
        "config_unknown_key": lambda run: (run / "config.yaml").open("a").write("bogus: 1\n"),
        "evaluations_cut": lambda run: (run / "evaluations.json").write_text(
            (run / "evaluations.json").read_text()[:20]
        ),
        "evaluations_not_list": write("evaluations.json", "{}"),
        "evaluations_nan": write("evaluations.json", '[{"step": NaN}]'),
        "evaluations_fifo": special("evaluations.json", _fifo),
        "progress_binary": write("tensorboard/progress.csv", bytes(range(256)) * 8),
        "progress_long_rows": lambda run: (
            (run / "tensorboard" / "progress.csv")
            .open("a")
            .write(
                "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29\n"
            )
        ),
        "progress_empty": write("tensorboard/progress.csv", ""),
        "progress_fifo": special("tensorboard/progress.csv", _fifo),
        "lock_fifo": special("train.lock", _fifo),
        "lock_dir": special("train.lock", lambda p: p.mkdir()),
    }


def _method_run_setups() -> dict[str, tuple[str, object]]:
    """name: (the fixture run of a method, a function damaging its copy ``run``)."""

    def auxiliary(content: bytes):
        return lambda run: (run / "aup_auxiliary.pt").write_bytes(content)

    def multiplier(state):
        def change(run: Path) -> None:
            import torch

            newest = _newest_checkpoint(run)
            with zipfile.ZipFile(newest) as archive:
                variables = torch.load(
                    io.BytesIO(archive.read("pytorch_variables.pth")), weights_only=True
                )
            variables["lagrange_state"] = torch.tensor(state, dtype=torch.float64)
            buffer = io.BytesIO()
            torch.save(variables, buffer)
            rewrite_zip(
                newest,
                newest.with_suffix(".new"),
                entries={"pytorch_variables.pth": buffer.getvalue()},
            )
            newest.with_suffix(".new").replace(newest)

        return change

    return {
        "aup_auxiliary_empty": ("aup_run", auxiliary(b"")),
        "aup_auxiliary_pickle": ("aup_run", auxiliary(pickle.dumps({"settings": print}))),
        "aup_auxiliary_truncated": ("aup_run", auxiliary(b"PK\x03\x04 truncated")),
        "aup_auxiliary_missing": ("aup_run", lambda run: (run / "aup_auxiliary.pt").unlink()),
        "lagrange_state_nan": ("lagrangian_run", multiplier([float("nan"), 0.0, 0.0])),
        "lagrange_state_inf": ("lagrangian_run", multiplier([float("inf"), 0.0, 0.0])),
        "lagrange_state_huge": ("lagrangian_run", multiplier([1e300, 1e300, 0.0])),
        "lagrange_state_shape": ("lagrangian_run", multiplier([0.0, 0.0])),
    }


def method_run_cases() -> Iterator[Case]:
    """A damaged file of an AUP or PPO-Lagrangian run, resumed from its newest checkpoint."""
    for name, (run_name, change) in _method_run_setups().items():

        def setup(folder: Path, fixtures: Path, run_name=run_name, change=change) -> None:
            shutil.copytree(fixtures / run_name, folder / "run", symlinks=True)
            (folder / "run" / "final_model.zip").unlink()  # as if killed after a checkpoint
            change(folder / "run")

        longer = "total_timesteps=960" if run_name == "aup_run" else "total_timesteps=128"
        yield Case(
            "method run folders",
            f"resume {name}",
            ("safelife_rl", "train", "resume={case}/run", longer),
            setup=setup,
            timeout=120,
        )


def copy_run(fixtures: Path, target: Path) -> None:
    shutil.copytree(fixtures / "run", target, symlinks=True)
    for lock in target.rglob("train.lock"):
        lock.unlink()


# ---------------------------------------------------------------------------------------------
# the case tables


def train_cases() -> Iterator[Case]:
    base = ("safelife_rl", "train", *TINY, "hydra.run.dir={case}/run")
    for key, tried, legal in TRAIN_KEYS:
        extra = (TRAIN_METHOD[key],) if key in TRAIN_METHOD else ()
        for value in tried:
            if value in legal:
                continue
            yield Case(
                "train settings",
                f"train {key}={VALUES[value]}",
                (*base, *extra, f"{key}={VALUES[value]}"),
                watch=("{case}/run",),
            )
    for override, _ in TRAIN_OTHER:
        extra = (
            (TRAIN_METHOD[override.split("=")[0]],)
            if override.split("=")[0] in TRAIN_METHOD
            else ()
        )
        yield Case(
            "train settings", f"train {override}", (*base, *extra, override), watch=("{case}/run",)
        )


def method_cases() -> Iterator[Case]:
    base = ("safelife_rl", "train", *TINY, "hydra.run.dir={case}/run")
    for overrides, key, tried, legal in METHOD_KEYS:
        for value in tried:
            if value in legal:
                continue
            yield Case(
                "method settings",
                f"train {overrides[0]} {key}={VALUES[value]}",
                (*base, *overrides, f"{key}={VALUES[value]}"),
                watch=("{case}/run",),
            )
    for overrides, _ in METHOD_OTHER:
        yield Case(
            "method settings",
            "train " + " ".join(o for o in overrides if o not in AUP_TINY),
            (*base, *overrides),
            watch=("{case}/run",),
        )


#: Overrides ``compare`` hands every job: refused in one line before any job is launched
COMPARE_OVERRIDES = (
    "lr=nan",
    "n_envs=0",
    "n_envs=abc",
    "device=meta",
    "device=cuda:99",
    "compile=true",
    "algo.learning_rate=nan",
    "algo.n_steps=0",
    "torch_threads=0",
    "seed=-1",
    "total_timesteps=0",
    "vec_env=threads",
    "env.kwargs.view_shape=[0,0]",
    "policy=nope",
)


def compare_cases() -> Iterator[Case]:
    for override in COMPARE_OVERRIDES:
        yield Case(
            "compare overrides",
            f"compare {override}",
            (
                "safelife_rl",
                "compare",
                "--quick",
                "--methods",
                "ppo,aup",
                "--out",
                "{case}/out",
                override,
            ),
            watch=("{case}/out",),
        )


def drest_cases() -> Iterator[Case]:
    for base, key, tried, legal in DREST_KEYS:
        for value in tried:
            if value in legal:
                continue
            yield Case(
                "drest settings",
                f"drest train {base[0]} {key}={VALUES[value]}",
                ("drest", "train", *base, f"{key}={VALUES[value]}", "hydra.run.dir={case}/run"),
                watch=("{case}/run",),
            )
    for override in DREST_OTHER:
        yield Case(
            "drest settings",
            f"drest train {override}",
            ("drest", "train", *DREST_BASE, override, "hydra.run.dir={case}/run"),
            watch=("{case}/run",),
        )


def extended_cases() -> Iterator[Case]:
    for base, key, tried, legal in EXT_KEYS:
        for value in tried:
            if value in legal:
                continue
            text = VALUES[value]
            if key == "seeds":
                text = f"[{text}]" if value != "text" else text
            yield Case(
                "extended-envs settings",
                f"{base[0]} {key}={text}",
                ("extended_envs", *base, f"{key}={text}", "hydra.run.dir={case}/run"),
                watch=("{case}/run",),
            )
    for command, override in EXT_OTHER:
        base = (
            ("steps=20", "progress=false")
            if command == "benchmark"
            else ("rounds=50", "seeds=[0]", "bobs=[random]", "progress=false")
        )
        yield Case(
            "extended-envs settings",
            f"{command} {override}",
            ("extended_envs", command, *base, override, "hydra.run.dir={case}/run"),
            watch=("{case}/run",),
        )


def flag_cases() -> Iterator[Case]:
    for (package, command, *base), flags, legal in COMMAND_FLAGS:
        for flag in flags:
            for value in FLAGS:
                if value in legal.get(flag, ()):
                    continue
                text = FLAG_VALUES[value]
                yield Case(
                    "command flags",
                    f"{package} {command} {flag} {text!r}",
                    (package, command, *base, flag, text),
                    watch=("{case}",),
                )
    for argv in OTHER_ARGS:
        yield Case("command flags", " ".join(argv[:2] + argv[-2:]), argv, watch=("{case}",))


def level_cases() -> Iterator[Case]:
    surfaces = {
        "benchmark": (
            "safelife_rl",
            "benchmark",
            "{level}",
            "--policy",
            "noop",
            "--episodes",
            "1",
            "--time-limit",
            "5",
            "--out",
            "{case}/b.json",
        ),
        "random-run": (
            "safelife_rl",
            "random-run",
            "--levels",
            "{level}",
            "--episodes",
            "1",
            "--time-limit",
            "5",
            "--logdir",
            "{case}/rr",
        ),
        "train": (
            "safelife_rl",
            "train",
            *TINY,
            "env.kwargs.levels={level}",
            "hydra.run.dir={case}/run",
        ),
        "play": ("safelife_rl", "play", "{level}"),
    }
    for name in LEVEL_NAMES:
        for surface, argv in surfaces.items():
            if surface in ("train", "play") and name not in (
                "board_huge",
                "pickled",
                "bomb",
                "fifo",
                "sparse",
                "spawn_nan",
                "agent_outside",
                "board_float",
                "huge_header",
                "truncated",
            ):
                continue
            level = f"{{fx}}/levels/{name}.npz" if name != "empty_dir" else "{fx}/levels/empty_dir"
            yield Case(
                "level files",
                f"{surface} {name}",
                tuple(a.replace("{level}", level) for a in argv),
                watch=("{case}",),
            )
    yield Case(
        "level files",
        "benchmark empty_dir",
        ("safelife_rl", "benchmark", "{fx}/levels/empty_dir", "--policy", "noop"),
        watch=("{case}",),
    )
    for name in (
        "trace_actions",
        "trace_float",
        "trace_missing",
        "pickled",
        "bomb",
        "fifo",
        "huge_header",
        "board_huge",
        "not_a_zip",
    ):
        yield Case(
            "level files",
            f"replay {name}",
            ("safelife_rl", "replay", f"{{fx}}/levels/{name}.npz", "--out", "{case}/r.npz"),
            watch=("{case}",),
        )
    for name in ("pickled", "bomb", "board_huge", "fifo", "not_a_zip"):
        yield Case(
            "level files",
            f"play-multi {name}",
            ("safelife_rl", "play-multi", f"{{fx}}/levels/{name}.npz"),
        )


def model_cases(names: list[str]) -> Iterator[Case]:
    for name in names:
        # a payload the safe load never reads leaves a usable model: run or refused, no code
        yield Case(
            "model files",
            f"benchmark --policy {name}",
            bad=not name.endswith("payload"),
            argv=(
                "safelife_rl",
                "benchmark",
                "append-still",
                "--policy",
                f"{{fx}}/models/{name}.zip",
                "--episodes",
                "1",
                "--levels",
                "1",
                "--time-limit",
                "5",
                "--out",
                "{case}/b.json",
            ),
            watch=("{case}",),
        )
    for name in ("lr_payload", "timesteps_huge"):
        yield Case(
            "model files",
            f"benchmark --policy {name} --algo a2c",
            (
                "safelife_rl",
                "benchmark",
                "append-still",
                "--policy",
                f"{{fx}}/models/{name}.zip",
                "--algo",
                "a2c",
            ),
            watch=("{case}",),
        )


def run_folder_cases(markers: Path) -> Iterator[Case]:
    for name, change in _run_setups(markers).items():

        def setup(folder: Path, fixtures: Path, change=change) -> None:
            copy_run(fixtures, folder / "run")
            change(folder / "run")

        yield Case(
            "run folders",
            f"resume {name}",
            ("safelife_rl", "train", "resume={case}/run", "total_timesteps=96"),
            setup=setup,
            bad=not name.endswith("payload"),
            timeout=90,
        )

    def linked_checkpoints(folder: Path, fixtures: Path) -> None:
        copy_run(fixtures, folder / "run")
        shutil.move(folder / "run" / "checkpoints", folder / "elsewhere")
        (folder / "run" / "checkpoints").symlink_to(folder / "elsewhere")

    yield Case(
        "symlinks",
        "resume with checkpoints/ a link",
        (
            "safelife_rl",
            "train",
            "resume={case}/run",
            "total_timesteps=96",
            "callbacks.checkpoint.keep=1",
        ),
        setup=linked_checkpoints,
        bad=False,
        watch=("{case}/elsewhere",),
        timeout=90,
    )
    for target in (
        "{case}/nowhere",
        "{fx}/levels/not_a_zip.npz",
        "{fx}/levels/loop.npz",
        "{fx}/levels/fifo.npz",
        "''",
    ):
        yield Case(
            "run folders",
            f"resume={target}",
            ("safelife_rl", "train", f"resume={target}"),
            watch=("{case}",),
        )


def bank_cases(fixtures: Path) -> Iterator[Case]:
    bank = ("env.kwargs.bank={size:4}",)
    base = ("safelife_rl", "train", *TINY, *bank, "hydra.run.dir={case}/run")

    def cache_with(change):
        def setup(folder: Path, fixtures: Path) -> None:
            shutil.copytree(fixtures / "cache", folder / "cache")
            change(folder / "cache")

        return setup

    def bank_files(cache: Path) -> list[Path]:
        return [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")]

    def each_bank(make):
        def change(cache: Path) -> None:
            for path in bank_files(cache):
                path.unlink()
                make(path)

        return change

    def read_only(cache: Path) -> None:
        for path in sorted([cache, *cache.rglob("*")], reverse=True):
            path.chmod(0o555 if path.is_dir() else 0o444)

    def empty_read_only(folder: Path, fixtures: Path) -> None:
        (folder / "cache").mkdir()
        (folder / "cache").chmod(0o555)

    cases = {
        "cache empty string": (None, {"SAFELIFE_CACHE": ""}, True),
        **(
            {}
            if ROOT_USER
            else {
                "cache read-only, holding the bank": (cache_with(read_only), {}, False),
                "cache read-only, empty": (empty_read_only, {}, True),
            }
        ),
        "cache a file": (lambda f, x: (f / "cache").write_text("x"), {}, True),
        "cache /dev/null": (None, {"SAFELIFE_CACHE": "/dev/null"}, True),
        "cache /proc": (None, {"SAFELIFE_CACHE": "/proc/self"}, True),
        "cache a dangling link": (lambda f, x: (f / "cache").symlink_to(f / "nowhere"), {}, False),
        "bank a FIFO": (cache_with(each_bank(_fifo)), {}, False),
        "bank junk": (cache_with(each_bank(lambda p: p.write_bytes(b"junk"))), {}, False),
        "bank truncated": (
            cache_with(each_bank(lambda p: p.write_bytes(b"PK\x03\x04" * 9))),
            {},
            False,
        ),
        "bank pickled": (
            cache_with(each_bank(lambda p: shutil.copy(fixtures / "levels" / "pickled.npz", p))),
            {},
            False,
        ),
        "bank a directory": (cache_with(each_bank(lambda p: p.mkdir())), {}, False),
        "bank sparse": (cache_with(each_bank(_sparse)), {}, False),
    }
    for name, (setup, env, bad) in cases.items():
        env = {"SAFELIFE_CACHE": "{case}/cache", **env}
        yield Case(
            "bank caches",
            name,
            base,
            env=env,
            setup=setup,
            bad=bad,
            watch=("{case}/run",),
            timeout=120,
        )
    for value in ("abc", "-1", "nan", "0", "1e400", ""):
        yield Case(
            "bank caches",
            f"SAFELIFE_MAX_READ_MB={value!r}",
            base,
            env={"SAFELIFE_CACHE": "{fx}/cache", "SAFELIFE_MAX_READ_MB": value},
            bad=value != "",
            watch=("{case}/run",),
        )
    for value in ("abc", "-1", "nan", "0", "2.5"):
        yield Case(
            "bank caches",
            f"SAFELIFE_MAX_SIDE={value!r}",
            base,
            env={"SAFELIFE_CACHE": "{fx}/cache", "SAFELIFE_MAX_SIDE": value},
            watch=("{case}/run",),
        )
    for value in ("nan", "-1", "abc", "1000000"):
        yield Case(
            "bank caches",
            f"bank workers={value}",
            (*base, f"env.kwargs.workers={value}"),
            env={"SAFELIFE_CACHE": "{fx}/cache"},
            watch=("{case}/run",),
        )


def reproduce_cases() -> Iterator[Case]:
    run = "runs/append-still/penalty_0/seed_0"
    argv = (
        "safelife_rl",
        "reproduce",
        "table1",
        "--quick",
        "--tasks",
        "append-still",
        "--penalties",
        "0",
        "--steps",
        "64",
        "--levels",
        "1",
        "--episodes",
        "1",
        "--out",
        "{case}/r",
    )

    def changed(change):
        def setup(folder: Path, fixtures: Path) -> None:
            shutil.copytree(fixtures / "repro", folder / "r", symlinks=True)
            for lock in (folder / "r").rglob("train.lock"):
                lock.unlink()
            change(folder / "r")

        return setup

    def csv_column(column, value):
        def change(out: Path) -> None:
            path = out / run / "benchmark.csv"
            lines = path.read_text().splitlines()
            header = lines[0].split(",")
            index = header.index(column)
            rows = [line.split(",") for line in lines[1:]]
            for row in rows:
                row[index] = value
            path.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")

        return change

    def write(name, content):
        def change(out: Path) -> None:
            (out / name).unlink(missing_ok=True)
            (out / name).write_text(content)

        return change

    cases = {
        "performance nan": csv_column("performance", "nan"),
        "performance 5.0": csv_column("performance", "5.0"),
        "length -1e9": csv_column("length", "-1e9"),
        "length 2.5": csv_column("length", "2.5"),
        "success 2": csv_column("success", "2"),
        "reward inf": csv_column("reward", "inf"),
        "reward text": csv_column("reward", "abc"),
        "benchmark.csv empty": write(f"{run}/benchmark.csv", ""),
        "benchmark.csv header only": lambda out: (out / run / "benchmark.csv").write_text(
            (out / run / "benchmark.csv").read_text().splitlines()[0] + "\n"
        ),
        "benchmark.csv binary": lambda out: (out / run / "benchmark.csv").write_bytes(
            bytes(range(256)) * 4
        ),
        "benchmark.csv a FIFO": lambda out: (
            (out / run / "benchmark.csv").unlink(),
            _fifo(out / run / "benchmark.csv"),
        ),
        "sweep.json deleted": lambda out: (out / "sweep.json").unlink(),
        "sweep.json corrupt": write("sweep.json", "{"),
        "sweep.json a list": write("sweep.json", "[]"),
        "sweep.json NaN": write("sweep.json", '{"steps": NaN}'),
        "sweep.json a FIFO": lambda out: ((out / "sweep.json").unlink(), _fifo(out / "sweep.json")),
        "evaluation.json corrupt": write(f"{run}/evaluation.json", "{"),
        "runs a dangling link": lambda out: (
            shutil.rmtree(out / "runs"),
            (out / "runs").symlink_to(out / "nowhere"),
        ),
    }
    for name, change in cases.items():
        yield Case("reproduce files", f"reproduce {name}", argv, setup=changed(change), timeout=120)
    yield Case(
        "reproduce files",
        "reproduce other settings over a sweep",
        (*argv[:-6], "--levels", "1", "--episodes", "3", "--out", "{case}/r"),
        setup=changed(lambda out: None),
        timeout=120,
    )


def output_cases() -> Iterator[Case]:
    """Where a command writes: a full disk, a read-only folder, links."""

    def read_only(folder: Path, fixtures: Path) -> None:
        (folder / "ro").mkdir()
        (folder / "ro").chmod(0o555)

    targets = {
        # a special file (not /dev/full: as root, an atomic write once renamed over it)
        "a FIFO": ("{case}/fifo", lambda f, x: _fifo(f / "fifo")),
        **({} if ROOT_USER else {"read-only folder": ("{case}/ro/x", read_only)}),
        "a link loop": ("{case}/loop", lambda f, x: (f / "loop").symlink_to(f / "loop")),
        "under a file": ("{case}/file/x", lambda f, x: (f / "file").write_text("x")),
    }
    for label, (target, setup) in targets.items():
        for name, argv in {
            "benchmark --out": (
                "safelife_rl",
                "benchmark",
                "append-still",
                "--policy",
                "noop",
                "--episodes",
                "1",
                "--levels",
                "1",
                "--time-limit",
                "5",
                "--out",
                target,
            ),
            "replay --out": ("safelife_rl", "replay", str(TRACE), "--out", target),
            "replay --gif": (
                "safelife_rl",
                "replay",
                str(TRACE),
                "--out",
                "{case}/r.npz",
                "--gif",
                target,
            ),
            "random-run --logdir": (
                "safelife_rl",
                "random-run",
                "--task",
                "append-still",
                "--episodes",
                "1",
                "--time-limit",
                "5",
                "--logdir",
                target,
            ),
            "plots --out": ("safelife_rl", "plots", "{fx}/run", "--out", target),
            "train hydra.run.dir": ("safelife_rl", "train", *TINY, f"hydra.run.dir={target}"),
            "reproduce --out": (
                "safelife_rl",
                "reproduce",
                "table1",
                "--quick",
                "--tasks",
                "append-still",
                "--out",
                target,
            ),
            "drest train hydra.run.dir": ("drest", "train", *DREST_BASE, f"hydra.run.dir={target}"),
            "extended-envs benchmark hydra.run.dir": (
                "extended_envs",
                "benchmark",
                "steps=20",
                "progress=false",
                f"hydra.run.dir={target}",
            ),
        }.items():
            yield Case("symlinks", f"{name} {label}", argv, setup=setup)


def all_cases(fixtures: Path, markers: Path, models: list[str]) -> list[Case]:
    return [
        *train_cases(),
        *method_cases(),
        *compare_cases(),
        *drest_cases(),
        *extended_cases(),
        *flag_cases(),
        *level_cases(),
        *model_cases(models),
        *run_folder_cases(markers),
        *method_run_cases(),
        *bank_cases(fixtures),
        *reproduce_cases(),
        *output_cases(),
    ]


# ---------------------------------------------------------------------------------------------
# fixtures


def _python(*argv: str, cwd: Path, env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if result.returncode:
        raise RuntimeError(f"fixture {' '.join(argv[:3])} failed:\n{result.stderr[-3000:]}")


def make_fixtures(fixtures: Path, markers: Path, reproduce: bool = True) -> list[str]:
    """The tiny run (with a bank in ``cache``), the crafted files and a finished reproduction;
    the names of the crafted models."""
    fixtures.mkdir(parents=True)
    env = {"SAFELIFE_CACHE": str(fixtures / "cache")}
    _python(
        "safelife_rl",
        "train",
        *TINY,
        "env.kwargs.bank={size:4}",
        f"hydra.run.dir={fixtures / 'run'}",
        cwd=fixtures,
        env=env,
    )
    (fixtures / "run" / "train.lock").unlink(missing_ok=True)
    for name, method in (
        ("aup_run", ("method=aup", *AUP_TINY)),
        ("lagrangian_run", ("method=ppo_lagrangian", "cost_limit=2")),
    ):
        _python(
            "safelife_rl",
            "train",
            *TINY,
            *method,
            "env.kwargs.bank={size:4}",
            f"hydra.run.dir={fixtures / name}",
            cwd=fixtures,
            env=env,
        )
        (fixtures / name / "train.lock").unlink(missing_ok=True)
    level_files(fixtures / "levels", markers)
    models = model_files(fixtures / "models", fixtures / "run" / "final_model.zip", markers)
    if reproduce:
        _python(
            "safelife_rl",
            "reproduce",
            "table1",
            "--quick",
            "--tasks",
            "append-still",
            "--penalties",
            "0",
            "--steps",
            "64",
            "--levels",
            "1",
            "--episodes",
            "1",
            "--out",
            str(fixtures / "repro"),
            cwd=fixtures,
            env=env,
        )
    return models
