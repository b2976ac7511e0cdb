"""The code a saved config may name.

``_target_`` makes Hydra's ``instantiate`` import and call whatever a config names, so a run's
``config.yaml`` is code unless what it names is limited. A config read back from a run folder
(``resume=``, the benchmark) goes through :func:`check_targets` first: it may name classes of
the packages in :data:`PACKAGES` and the functions in :data:`FUNCTIONS` (and Hydra's getters
for those), and its env id may import only those packages.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from hydra._internal.utils import _locate  # what instantiate resolves: checked as it will be
from omegaconf import DictConfig, ListConfig, OmegaConf

from safety_rl_common.errors import UserError

#: Packages whose classes a saved config may instantiate.
PACKAGES = (
    "safelife_rl", "drest", "extended_envs", "stable_baselines3", "gymnasium", "torch.nn",
    "torch.optim",
)  # fmt: skip
#: Modules of those packages left out: their classes open for writing a file the config names.
REFUSED_MODULES = ("stable_baselines3.common.logger",)
#: Functions a saved config may call (functions, unlike classes, are allowed one by one).
FUNCTIONS = (
    "safelife_rl.envs.registration.suite_file",
    "safelife_rl.envs.registration.benchmark_file",
)
#: Hydra's lookups, allowed as targets when their ``path`` is allowed.
GETTERS = ("hydra.utils.get_class", "hydra.utils.get_method", "hydra.utils.get_object")


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _importable(module: str) -> bool:
    """Whether a saved config may import ``module``: a public module of an allowed package
    (private names, dunders and ``__main__`` modules, whose import runs them, are refused)."""
    return (
        _in(module, PACKAGES)
        and not _in(module, REFUSED_MODULES)
        and not any(part.startswith("_") for part in module.split("."))
    )


def _allowed(name: Any) -> bool:
    """Whether ``name`` is a dotted path to an allowed class or function.

    The path is checked before anything is imported (only public modules of allowed packages
    are), and the object it leads to after: an attribute path may reach into other modules
    (``pkg.os.system``).
    """
    if not isinstance(name, str):
        return False
    if name in FUNCTIONS:
        return True
    if not _importable(name):
        return False
    try:
        found = _locate(name)
    except Exception:  # a missing module or attribute: nothing allowed there
        return False
    module = getattr(found, "__module__", None) or ""
    return inspect.isclass(found) and _in(module, PACKAGES) and not _in(module, REFUSED_MODULES)


def _nodes(node: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """``node`` and everything below it, each with its key path (``a.b[0].c``)."""
    yield key, node
    items = (
        node.items()
        if isinstance(node, Mapping)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for name, value in items:
        path = f"{key}[{name}]" if isinstance(node, list) else f"{key}.{name}" if key else name
        yield from _nodes(value, path)


def _refuse(source: str, key: str, value: Any) -> UserError:
    return UserError(
        f"{source}: {key}: {value!r} is not allowed in a saved config: it may name classes of "
        f"{', '.join(PACKAGES)} and the functions {', '.join(FUNCTIONS)} (see docs/security.md)"
    )


def check_targets(cfg: DictConfig | ListConfig | Mapping[str, Any], source: str) -> None:
    """Refuse (:class:`~safety_rl_common.errors.UserError` naming ``source`` and the key) a config
    that names code outside the allowlist, anywhere in it.

    Saved configs are written resolved, so an interpolation (``${...}``, whose resolvers could
    build a ``_target_`` later) is refused too.

    :param source: the config's file, for the message.
    """
    if isinstance(cfg, (DictConfig, ListConfig)):
        cfg = OmegaConf.to_container(cfg, resolve=False)
    for key, node in _nodes(cfg):
        if isinstance(node, str) and "${" in node:
            raise UserError(
                f"{source}: {key}: interpolation {node!r} is not allowed in a saved "
                "config (runs save theirs resolved)"
            )
        if not isinstance(node, Mapping) or "_target_" not in node:
            continue
        where = f"{key}." if key else ""
        target = node["_target_"]
        if target in GETTERS:
            if not _allowed(node.get("path")):
                raise _refuse(source, f"{where}path", node.get("path"))
        elif not _allowed(target):
            raise _refuse(source, f"{where}_target_", target)
    env = cfg.get("env") if isinstance(cfg, Mapping) else None
    env_id = env.get("id") if isinstance(env, Mapping) else None
    if isinstance(env_id, str) and ":" in env_id:
        module = env_id.rpartition(":")[0]
        if not _importable(module):
            raise UserError(
                f"{source}: env.id: {env_id!r} imports module {module!r}; a saved "
                f"config may import only public modules of {', '.join(PACKAGES)}"
            )
