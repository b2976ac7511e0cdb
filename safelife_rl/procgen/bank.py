"""Level banks: procedural levels generated once, cached on disk, and played in their
symmetric variants.

Generating a level takes a fraction of a second or more (see the README), far too long for a
trainer that resets thousands of boards a second. A :class:`LevelBank` generates ``size``
levels of a type once, in worker processes, and caches them as a level archive (the format of
:func:`~safelife_rl.engine.level_files.save_levels`, loadable as a fixed suite too) whose name and
content carry a key: a hash of the generator's parameters, the levels' seeds, and the generator's
code and NumPy version. Later runs with the same key load the file; a file whose stored key differs,
or that cannot be read, is regenerated with a logged warning. Files are written whole or not at all
(:func:`~safety_rl_common.files.atomic_path`), and a lock lets processes that start together
(subprocess envs) wait for one to generate the bank instead of each making it.

As a level sampler, the bank draws a level and moves it by a random one of the 8 symmetries of
the square (those that keep the board's shape) and a random translation on the wrapped board
(:mod:`safelife_rl.engine.symmetry`), which play exactly like the level itself seen turned or
shifted.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from safelife_rl.engine.level_files import level_from_record, read_npz, save_levels
from safelife_rl.engine.levels import Level, LevelFormatError
from safelife_rl.engine.symmetry import IDENTITY, SYMMETRIES, transform_level
from safelife_rl.procgen.params import load_params
from safelife_rl.procgen.source import SEED_BOUND, _label, generate_levels
from safety_rl_common.errors import UserError
from safety_rl_common.files import atomic_path
from safety_rl_common.limits import BANK_LIMIT, READ_LIMIT

log = logging.getLogger(__name__)

_KEY = "bank_key"  # the archive member holding the key, beside the ``levels`` records
# The code that makes a level from its parameters and seed.
_GENERATOR_FILES = (
    "procgen/generator.py",
    "procgen/params.py",
    "procgen/partition.py",
    "procgen/patterns.py",
    "procgen/regions.py",
    "engine/physics.py",
    "engine/cells.py",
    "engine/scoring.py",
)
#: Keys of the ``bank`` option of the registered envs (see :func:`bank_from_options`).
OPTIONS = ("size", "seed", "symmetries", "translations", "cache_dir", "progress")


def default_cache_dir() -> Path:
    """``$SAFELIFE_CACHE/banks``, by default ``~/.cache/safelife_rl/banks``."""
    folder = os.environ.get("SAFELIFE_CACHE", "~/.cache/safelife_rl")
    if not folder.strip():
        raise UserError(
            "SAFELIFE_CACHE is set but empty; give it a folder for the level bank "
            "cache, or unset it for ~/.cache/safelife_rl"
        )
    return Path(folder).expanduser() / "banks"


def generator_version() -> str:
    """A hash of the generator's source and of the NumPy version its random streams need."""
    digest = hashlib.sha256(np.__version__.encode())
    package = Path(__file__).resolve().parents[1]
    for name in _GENERATOR_FILES:
        digest.update((package / name).read_bytes())
    return digest.hexdigest()[:16]


class LevelBank:
    """A fixed bank of procedural levels, and a level sampler over their symmetric variants.

    ``sample(rng)`` draws a level, a symmetry and a translation from ``rng`` (the env's seeded
    generator), so the same seed gives the same levels.

    :param params: a level type (``"prune-still"``), a YAML parameter file, or parameters.
    :param size: number of levels.
    :param seed: the bank's seed; the levels' seeds are drawn from it.
    :param symmetries: turn or mirror each drawn level by a random symmetry of the square
        (one of 8 on square boards, of 4 on others).
    :param translations: roll each drawn level by a random offset on the wrapped board.
    :param workers: worker processes generating the bank when it is not cached.
    :param cache_dir: folder of bank files (default :func:`default_cache_dir`).
    :param progress: show a progress bar while generating.
    """

    def __init__(
        self,
        params: str | os.PathLike | dict[str, Any],
        size: int = 1000,
        seed: int = 0,
        symmetries: bool = True,
        translations: bool = True,
        workers: int = 0,
        cache_dir: str | os.PathLike | None = None,
        progress: bool = True,
    ):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise UserError(f"a level bank's size must be a positive integer, got {size!r}")
        BANK_LIMIT.check(int(size), "the level bank's size")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise UserError(f"a level bank's seed must be an integer >= 0, got {seed!r}")
        for name, flag in (("symmetries", symmetries), ("translations", translations)):
            if not isinstance(flag, bool):
                raise UserError(f"a level bank's {name} must be true or false, got {flag!r}")
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 0:
            raise UserError(f"a level bank's workers must be an integer >= 0, got {workers!r}")
        self._source = params  # what levels are named after (the level type or file)
        self.label = _label(params)
        self.params = params if isinstance(params, dict) else load_params(params)
        self.size = int(size)
        self.seeds = np.random.default_rng(int(seed)).integers(SEED_BOUND, size=self.size)
        self.symmetries = symmetries
        self.translations = translations
        self.workers = workers
        self.progress = progress
        self.key = json.dumps(
            {
                "params": self.params,
                "seeds": hashlib.sha256(self.seeds.tobytes()).hexdigest(),
                "generator": generator_version(),
            },
            sort_keys=True,
            default=str,
        )
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:16]
        folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.path = folder / f"{self.label}-{self.size}-{digest}.npz"
        self.levels = self._load_or_generate()

    def __repr__(self) -> str:
        return f"LevelBank({self.label!r}, size={self.size}, path={str(self.path)!r})"

    def sample(self, rng: np.random.Generator) -> Level:
        """A random level of the bank, moved by a random symmetry and translation."""
        level = self.levels[int(rng.integers(self.size))]
        symmetry, shift = IDENTITY, (0, 0)
        if self.symmetries:
            choices = [s for s in SYMMETRIES if s.keeps_shape(level.shape)]
            symmetry = choices[int(rng.integers(len(choices)))]
        if self.translations:
            shift = (int(rng.integers(level.shape[0])), int(rng.integers(level.shape[1])))
        return transform_level(level, symmetry, shift)

    def _load_or_generate(self) -> list[Level]:
        with _locked(self.path) as unwritable:
            if self.path.exists():
                levels = self._read()
                if levels is not None:
                    return levels
            if unwritable is not None:  # a read-only cache without this bank
                raise self._unwritable(unwritable)
            levels = generate_levels(
                self._source,
                [int(s) for s in self.seeds],
                workers=self.workers,
                progress=self.progress,
            )
            if self.path.is_fifo():
                self.path.unlink()  # a FIFO in the cache holds nothing; a device stays refused
            if len({level.shape for level in levels}) > 1:
                raise UserError(
                    f"{self.label}: a level bank needs levels of one board shape, "
                    f"got {sorted({level.shape for level in levels})}"
                )
            try:
                with atomic_path(self.path) as tmp:
                    save_levels(levels, tmp)
                    with (
                        zipfile.ZipFile(tmp, "a") as archive,
                        archive.open(f"{_KEY}.npy", "w") as key,
                    ):
                        np.lib.format.write_array(key, np.array(self.key))
            except OSError as error:  # a full disk
                raise self._unwritable(error) from None
            return levels

    def _unwritable(self, error: OSError) -> UserError:
        return UserError(
            f"cannot write the level bank {self.path}: "
            f"{error.strerror or error}; free space or make the folder writable, "
            "or choose another with bank.cache_dir or SAFELIFE_CACHE"
        )

    def _read(self) -> list[Level] | None:
        """The cached levels, or ``None`` (with a warning) if the file is not this bank's."""
        READ_LIMIT.get()  # a bad setting of the limit is refused, not taken for a corrupt bank
        try:
            arrays = read_npz(self.path, "level bank")
            stored = str(arrays[_KEY]) if _KEY in arrays else None
            records = arrays.get("levels")
            if stored == self.key and records is not None and records.shape == (self.size,):
                return [
                    level_from_record(record, f"{self.path} level {i}")
                    for i, record in enumerate(records)
                ]
            problem = "was made from other generator parameters, seeds or code"
        except LevelFormatError as error:
            problem = f"is corrupt ({error})"
        log.warning("level bank %s %s; generating it again", self.path, problem)
        return None


@contextmanager
def _locked(path: Path) -> Iterator[OSError | None]:
    """Hold an exclusive lock beside ``path`` (other processes wait for it). In a folder where
    the lock cannot be made (a read-only cache) it yields that error instead: a bank there can
    be read, never written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(f".{path.name}.lock"), "a")  # noqa: SIM115
    except OSError as error:
        yield error
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield None
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def bank_from_options(
    params: str | os.PathLike | dict[str, Any], options: Mapping[str, Any], workers: int = 0
) -> LevelBank:
    """The level bank of an env's ``bank`` option, e.g. ``{"size": 1000, "symmetries": True}``
    (keys: :data:`OPTIONS`)."""
    if not isinstance(options, Mapping):
        raise UserError(
            f"bank must be a mapping of options ({', '.join(OPTIONS)}), got {options!r}"
        )
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise UserError(
            f"bank: unknown option(s) {', '.join(map(str, unknown))}; known: {', '.join(OPTIONS)}"
        )
    return LevelBank(params, workers=workers, **options)
