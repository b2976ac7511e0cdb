"""The researcher's configs beside the package defaults: a Hydra ``SearchPathPlugin`` and the
config source it reads them with.

Every Hydra app of this project (``safelife-rl train``, ``drest train``, ``extended-envs
benchmark`` and ``debate``, and the apps that compose those configs) finds its defaults in its
package (``pkg://safelife_rl.conf`` ...). This plugin appends ``conf/`` of the folder the
command runs from, if there is one, to their search path, so ``conf/experiment/mine.yaml`` is
``experiment=mine``. ``$SAFETY_RL_CONF`` names another folder instead; set to nothing it turns
the plugin off. Other Hydra apps in the same environment are left alone.

The folder only adds names: a file there whose name is a package option, of the package's
files or of Hydra's ConfigStore (``env=prune-still``, ``train_schema``, a launcher plugin's
options), is never read, so a config runs only where the user selects a name that the folder
alone has. Hydra's own file source would let the folder hide the ConfigStore's options (they
come last on the search path), and it parses any YAML it is given: :class:`UserConfSource`
reads the folder instead, each file through the toolkit's bounded YAML reader (size, nesting
and aliases: :mod:`safety_rl_common.yaml_files`).

Hydra imports this module in every Hydra app of the environment, so it imports Hydra and that
reader alone (PyYAML and the standard library; pyproject.toml's import contracts keep it so).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.core.object_type import ObjectType
from hydra.errors import SearchPathException
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

from safety_rl_common.yaml_files import read_yaml_text

#: The search-path entries of this project's apps (their primary configs' packages).
APP_CONFIGS = ("pkg://safelife_rl.conf", "pkg://drest.conf", "pkg://extended_envs.conf")
#: The folder of the researcher's configs, in the folder the command runs from.
FOLDER = "conf"
#: The environment variable naming another folder (empty: none at all).
ENV_VAR = "SAFETY_RL_CONF"
#: The provider name of the entry (Hydra lists it in ``--info searchpath``).
PROVIDER = "safety-rl-user-conf"
#: The scheme of the entry: the folder read by :class:`UserConfSource`.
SCHEME = "safety-rl-conf"


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
            search_path.append(PROVIDER, f"{SCHEME}://{folder}")


class UserConfSource(ConfigSource):
    """The researcher's folder as Hydra sees it: its YAML files, but for those whose name the
    ConfigStore has (the package's own files come earlier on the search path), each read
    through :func:`~safety_rl_common.yaml_files.read_yaml_text`."""

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def _file(self, config_path: str) -> Path:
        return Path(self.path, self._normalize_file_name(config_path))

    def _stored(self, config_path: str) -> bool:
        name = self._normalize_file_name(config_path.rstrip("/"))
        return ConfigStore.instance().get_type(name) == ObjectType.CONFIG

    def load_config(self, config_path: str) -> ConfigResult:
        if not self.is_config(config_path):
            raise ConfigLoadError(f"Config not found : {self._file(config_path)}")
        text = read_yaml_text(self._file(config_path))
        return ConfigResult(
            config=OmegaConf.load(io.StringIO(text)),
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=ConfigSource._get_header_dict(text[:512]),
        )

    def available(self) -> bool:
        return self.is_group("")

    def is_group(self, config_path: str) -> bool:
        return Path(self.path, config_path).is_dir()

    def is_config(self, config_path: str) -> bool:
        return self._file(config_path).is_file() and not self._stored(config_path)

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        found: list[str] = []
        for entry in Path(self.path, config_path).iterdir():
            path = f"{config_path}/{entry.name}" if config_path else entry.name
            self._list_add_result(found, path, entry.name, results_filter)
        return sorted(set(found))
