"""The researcher's configs beside the package defaults: a Hydra ``SearchPathPlugin``.

Every Hydra app of this project (``safelife-rl train``, ``drest train``, ``extended-envs
benchmark`` and ``debate``, and the apps that compose those configs) finds its defaults in its
package (``pkg://safelife_rl.conf`` ...). This plugin appends ``conf/`` of the folder the
command runs from, if there is one, to their search path, so ``conf/experiment/mine.yaml`` is
``experiment=mine``. It comes after the package's configs: a file of ``conf/`` adds options to
the package's groups and never hides one of the package's own (a name both have is the
package's). ``$SAFETY_RL_CONF`` names another folder instead; set to nothing it turns the
plugin off. Other Hydra apps in the same environment are left alone.

Hydra imports this module in every Hydra app of the environment, so it imports Hydra alone
(pyproject.toml's import contracts keep it so).
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.errors import SearchPathException
from hydra.plugins.search_path_plugin import SearchPathPlugin

#: The search-path entries of this project's apps (their primary configs' packages).
APP_CONFIGS = ("pkg://safelife_rl.conf", "pkg://drest.conf", "pkg://extended_envs.conf")
#: The folder of the researcher's configs, in the folder the command runs from.
FOLDER = "conf"
#: The environment variable naming another folder (empty: none at all).
ENV_VAR = "SAFETY_RL_CONF"
#: The provider name of the entry (Hydra lists it in ``--info searchpath``).
PROVIDER = "safety-rl-user-conf"


def user_conf_folder() -> Path | None:
    """The folder of the researcher's configs: ``$SAFETY_RL_CONF`` if it is set (a relative
    path from the current folder; set to nothing: none), else ``./conf`` if it is a folder.

    :raises SearchPathException: ``$SAFETY_RL_CONF`` names no folder (a typo would otherwise
        leave the configs in it silently unused).
    """
    named = os.environ.get(ENV_VAR)
    if named is None:
        folder = Path.cwd() / FOLDER
        return folder if folder.is_dir() else None
    if not named.strip():
        return None
    folder = Path(named).expanduser().absolute()
    if not folder.is_dir():
        raise SearchPathException(f"${ENV_VAR} is {named!r}, which is not a folder")
    return folder


class UserConfSearchPath(SearchPathPlugin):
    """Appends :func:`user_conf_folder` to the search path of this project's apps."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(entry.path in APP_CONFIGS for entry in search_path.get_path()):
            return
        folder = user_conf_folder()
        if folder is not None:
            search_path.append(PROVIDER, f"file://{folder}")
