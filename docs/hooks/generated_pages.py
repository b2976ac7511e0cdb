"""MkDocs hook: the pages made at build time from the code itself.

* ``reference/ids.md``: every Gymnasium id the three packages register, read from
  ``gymnasium.registry`` after importing them, with the spaces, render modes and time limit of an
  env made from it and the keyword arguments its entry point takes.
* ``api/<package>.md``: the API reference of each package, one ``::: module`` block (rendered by
  mkdocstrings from the docstrings) per public module found on disk.
* ``<!-- command-help: module [subcommand] -->`` in a page becomes the output of
  ``python -m module [subcommand] --help``, so a command's page shows its current flags.
* Pages other sessions add (``OPTIONAL_PAGES``) appear in the nav once their file exists.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.generated_pages")

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "safelife_rl": "SafeLife: environments, engine, procedural levels, training",
    "drest": "DREST: shutdown gridworlds, the DREST reward, USEFULNESS and NEUTRALITY",
    "extended_envs": "Extended environments: core, agents, reality check, library, combinations",
}
#: Registry namespaces and the package whose import registers them: the same name (an id is
#: ``<package>/<Name>-v<N>``).
NAMESPACES = {package: package for package in PACKAGES}
#: The API reference's pages: the three packages and the floor they stand on.
API_PACKAGES = {
    **PACKAGES,
    "safety_rl_common": "The floor under all three packages: the user "
    "error, the settings checks, command lines, files, limits and figures",
}
#: Pages written in other branches: listed in the nav, left out of it until the file exists.
OPTIONAL_PAGES = ("multi_agent.md", "paper_results.md")


def _drop_missing(nav: list, docs_dir: Path) -> list:
    kept = []
    for item in nav:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, list):
                kept.append({title: _drop_missing(value, docs_dir)})
                continue
            if value in OPTIONAL_PAGES and not (docs_dir / value).exists():
                log.info("nav: %s is not written yet, left out of the nav", value)
                continue
        kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    config["nav"] = _drop_missing(config["nav"], Path(config["docs_dir"]))
    return config


# ---------------------------------------------------------------------------------------------
# Registered ids
# ---------------------------------------------------------------------------------------------


def _first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _space(space: Any) -> str:
    """A space in short: its class and shape (a Box's bounds can fill a line)."""
    if type(space).__name__ == "Box":
        return f"Box({space.dtype}, shape={space.shape})"
    return repr(space)


def _render_modes(env: Any) -> str:
    return ", ".join(f"`{m}`" for m in env.metadata.get("render_modes", [])) or "none"


def _parameters(func: Any) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(func).parameters.values() if p.name != "self"]


def _format_param(p: inspect.Parameter) -> str:
    if p.kind is inspect.Parameter.VAR_KEYWORD:
        return f"`**{p.name}`"
    if p.default is inspect.Parameter.empty:
        return f"`{p.name}` (required)"
    return f"`{p.name}={p.default!r}`"


def _kwargs_text(spec: Any, env: Any) -> str:
    """The keyword arguments ``gym.make(id, ...)`` accepts: the entry point's parameters; where
    a factory function passes ``**kwargs`` on to the env class, that class's parameters."""
    from gymnasium.envs.registration import load_env_creator

    creator = load_env_creator(spec.entry_point)
    params = _parameters(creator)
    names = {p.name for p in params}
    forwards = inspect.isfunction(creator) and any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params
    )
    shown = [
        p
        for p in params
        if p.name not in spec.kwargs and not (forwards and p.kind is inspect.Parameter.VAR_KEYWORD)
    ]
    text = ", ".join(_format_param(p) for p in shown)
    if forwards:
        env_class = type(env.unwrapped)
        extra = [
            p
            for p in _parameters(env_class.__init__)
            if p.name not in names and p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        text += f"; passed on to `{env_class.__module__}.{env_class.__qualname__}`: " + ", ".join(
            _format_param(p) for p in extra
        )
    return text


def registry_page() -> str:
    import importlib

    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    for module in NAMESPACES.values():
        importlib.import_module(module)
    lines = [
        "# Registered environment ids",
        "",
        (
            "This page is generated when the site is built (`docs/hooks/generated_pages.py`): it "
            "imports `safelife_rl`, `drest` and `extended_envs`, reads every id they register from "
            "`gymnasium.registry`, makes an env of each with its registered kwargs and lists what "
            "that env reports. `gym.make(id, **kwargs)` takes the keyword arguments listed; "
            "any other keyword is a `TypeError` when the env is made."
        ),
        "",
        (
            "The ids are registered when their package is imported. A client that imports "
            "nothing of the project (CleanRL's scripts, a config file naming an id) gives the "
            "package before a colon, Gymnasium's `module:id` form: "
            '`gym.make("drest:drest/Example-v0")`, '
            '`gym.make_vec("safelife_rl:safelife_rl/PruneStill-v1", 4)`, '
            "`--env-id extended_envs:extended_envs/CartPole-IgnoreRewards-v0`."
        ),
        "",
    ]
    for namespace, module in NAMESPACES.items():
        ids = sorted(k for k, s in gym.registry.items() if s.namespace == namespace)
        summary = [
            "| id | observation space | action space | max_episode_steps |",
            "|---|---|---|---|",
        ]
        details = []
        for env_id in ids:
            spec = gym.registry[env_id]
            env = gym.make(env_id)
            try:
                creator = load_env_creator(spec.entry_point)
                described = creator if not inspect.isfunction(creator) else type(env.unwrapped)
                anchor = env_id.lower().replace("/", "").replace("-", "")
                summary.append(
                    f"| [`{env_id}`](#{anchor}) | `{_space(env.observation_space)}` | "
                    f"`{env.action_space!r}` | `{env.spec.max_episode_steps}` |"
                )
                details += [
                    f"### `{env_id}` {{#{anchor}}}",
                    "",
                    _first_paragraph(described).replace("``", "`"),
                    "",
                    "| | |",
                    "|---|---|",
                    f"| entry point | `{spec.entry_point}` |",
                    f"| registered kwargs | `{spec.kwargs!r}` |",
                    f"| observation space | `{env.observation_space!r}` |",
                    f"| action space | `{env.action_space!r}` |",
                    f"| render modes | {_render_modes(env)} |",
                    f"| max_episode_steps | `{env.spec.max_episode_steps}` |",
                    f"| vector entry point | `{spec.vector_entry_point}` |",
                    f"| other kwargs | {_kwargs_text(spec, env)} |",
                    "",
                ]
            finally:
                env.close()
        lines += [
            f"## `{namespace}/*` (registered by `import {module}`)",
            "",
            *summary,
            "",
            *details,
        ]
    return "\n".join(lines).replace("| `None` |", "| none |")


# ---------------------------------------------------------------------------------------------
# API reference
# ---------------------------------------------------------------------------------------------


def public_modules(package: str) -> list[str]:
    """Every module of ``package`` on disk whose dotted name has no private part."""
    base = ROOT / package
    modules = []
    for path in sorted(base.rglob("*.py")):
        parts = (package, *path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(part.startswith("_") for part in parts):
            continue
        modules.append(".".join(parts))
    return modules


def api_page(package: str) -> str:
    lines = [
        f"# `{package}` API",
        "",
        API_PACKAGES[package] + ". Generated from the docstrings.",
        "",
    ]
    for module in public_modules(package):
        lines += [f"::: {module}", "    options:", "      members_order: source", ""]
    return "\n".join(lines)


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/ids.md", content=registry_page()))
    for package in API_PACKAGES:
        files.append(File.generated(config, f"api/{package}.md", content=api_page(package)))
    return files


# ---------------------------------------------------------------------------------------------
# Command help
# ---------------------------------------------------------------------------------------------

HELP_MARKER = re.compile(r"<!-- command-help: ([\w.]+)((?: [\w-]+)*) -->")


@cache
def command_help(module: str, subcommand: str) -> str:
    # SAFETY_RL_CONF empty: the help of the package's configs alone, not of the repository's
    # conf/ (docs/configuration.md), whose experiments a Hydra app's help would list too
    result = subprocess.run(
        [sys.executable, "-m", module, *subcommand.split(), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "100", "SAFETY_RL_CONF": ""},
    )
    return result.stdout.rstrip()


def on_pre_build(config: Any) -> None:
    """Run every page's ``--help`` commands at once (each is a Python start-up)."""
    from concurrent.futures import ThreadPoolExecutor

    wanted = {
        (m.group(1), m.group(2).strip())
        for page in Path(config["docs_dir"]).rglob("*.md")
        for m in HELP_MARKER.finditer(page.read_text())
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda args: command_help(*args), sorted(wanted)))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(match: re.Match) -> str:
        module, subcommand = match.group(1), match.group(2).strip()
        command = f"python -m {module} {subcommand} --help".replace("  ", " ")
        body = "\n".join(
            "    " + line if line else ""
            for line in ["```text", *command_help(module, subcommand).splitlines(), "```"]
        )
        return f'??? info "`{command}` (generated when the site is built)"\n\n{body}\n'

    return HELP_MARKER.sub(replace, markdown)
