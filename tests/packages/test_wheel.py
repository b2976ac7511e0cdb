"""A non-editable install from the built wheel runs every command: the wheel is built from a
copy of the sources, installed without its dependencies into a fresh venv outside the
checkout, and each console script's subcommands answer ``--help`` and each package trains.

The venv gets the dependencies from this interpreter's site-packages through a ``.pth`` line
(never installed from the network: CI stays fast). That directory holds no copy of the project,
only, for an editable install, a finder that a ``.pth`` line does not run (``.pth`` files are
read in site directories only), so every project module must come from the venv: the test
checks it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("safety_rl_common", "safelife_rl", "drest", "extended_envs")
#: The Hydra plugin that puts the user's conf/ on the apps' search path (docs/configuration.md),
#: in Hydra's namespace package hydra_plugins.
PLUGIN = "hydra_plugins/safety_rl_toolkit"
SUBCOMMANDS = {
    "safelife-rl": (
        "train",
        "benchmark",
        "reproduce",
        "make-suites",
        "plots",
        "replay",
        "play",
        "play-multi",
        "random-run",
    ),
    "drest": ("train", "reproduce", "generalise"),
    "extended-envs": ("benchmark", "debate", "reproduce"),
}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv holding the installed wheel (and no pip)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in (*PACKAGES, PLUGIN):
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(source)],
        check=True,
        timeout=300,
    )
    (wheel,) = (work / "dist").glob("*.whl")
    env = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    subprocess.run(
        [
            *pip,
            "--python",
            str(env / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    site = Path(
        subprocess.run(
            [
                env / "bin" / "python",
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    dependencies = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "dependencies.pth").write_text("\n".join(sorted(dependencies)) + "\n")
    return env


def run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=300,
    )


def test_the_packages_come_from_the_venv(venv, tmp_path):
    done = run(
        venv,
        "python",
        "-c",
        "import safelife_rl, drest, extended_envs, "
        "safelife_rl.conf, drest.conf, extended_envs.conf\n"
        "for m in (safelife_rl, drest, extended_envs): print(m.__file__)",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    files = [Path(line) for line in done.stdout.split()]
    assert len(files) == 3 and all(f.is_relative_to(venv) for f in files), files
    assert all((f.parent / "conf" / "__init__.py").exists() for f in files)


def test_the_installed_plugin_finds_the_users_conf(venv, tmp_path):
    """Hydra finds the wheel's plugin, which adds ./conf to the apps' configs."""
    done = run(
        venv,
        "python",
        "-c",
        "import hydra_plugins.safety_rl_toolkit.user_conf as m\nprint(m.__file__)",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(venv)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text("# @package _global_\nsteps: 7\n")
    done = run(venv, "extended-envs", "benchmark", "+experiment=mine", "--cfg", "job", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "steps: 7" in done.stdout.splitlines()


def test_every_subcommand_answers_help(venv, tmp_path):
    calls = [(script, ["--help"]) for script in SUBCOMMANDS] + [
        (script, [command, "--help"])
        for script, commands in SUBCOMMANDS.items()
        for command in commands
    ]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda c: run(venv, c[0], *c[1], cwd=tmp_path), calls))
    for (script, argv), done in zip(calls, results):
        assert done.returncode == 0, (script, argv, done.stderr)
        if argv == ["--help"]:
            assert all(f"    {command}" in done.stdout for command in SUBCOMMANDS[script])
        else:  # Hydra's help names the app's config groups or settings; argparse's the usage
            assert "usage:" in done.stdout or "== Config ==" in done.stdout, (script, argv)


def test_each_package_trains_from_the_installed_files(venv, tmp_path):
    runs = {
        "safelife": (
            "safelife-rl",
            "train",
            "experiment=paper",
            "env=append-still",
            "env.kwargs.view_shape=[17,17]",
            "env.kwargs.time_limit=30",
            "policy.kwargs.features_extractor_kwargs.features_dim=16",
            "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
            "n_envs=2",
            "progress_bar=false",
            "algo.n_steps=16",
            "callbacks.evaluation.n_episodes=2",
            "callbacks.evaluation.eval_every=64",
            "callbacks.checkpoint=null",
            "total_timesteps=64",
            f"hydra.run.dir={tmp_path / 'safelife'}",
        ),
        "drest": (
            "drest",
            "train",
            "agent.meta_episodes=64",
            "agent.eval_every=8",
            f"hydra.run.dir={tmp_path / 'drest'}",
        ),
        "extended_envs": (
            "extended-envs",
            "benchmark",
            "steps=50",
            "only=[TemptingButton]",
            "progress=false",
            f"hydra.run.dir={tmp_path / 'extended_envs'}",
        ),
    }
    with ThreadPoolExecutor(2) as pool:
        results = dict(
            zip(runs, pool.map(lambda argv: run(venv, *argv, cwd=tmp_path), runs.values()))
        )
    for name, done in results.items():
        assert done.returncode == 0, (name, done.stderr[-3000:])
    assert (tmp_path / "safelife" / "final_model.zip").is_file()
    assert "USEFULNESS" in results["drest"].stdout
    assert (tmp_path / "drest" / "metrics.json").is_file()
    assert (tmp_path / "extended_envs" / "results.csv").is_file()


def test_the_original_suites_come_with_the_wheel(venv, tmp_path):
    """The paper's levels need no environment variable and nothing beside the install."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SAFELIFE_LEVELS")}
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import safelife_rl\n"
            "from safelife_rl.engine.level_files import load_levels\n"
            "path = safelife_rl.envs.registration.benchmark_file('prune-still')\n"
            "print(path)\nprint(len(load_levels(path)))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    path, count = done.stdout.split()
    assert Path(path).is_relative_to(venv) and Path(path).name == "prune-still.npz"
    assert count == "100"
