"""Safety methods as plug-ins: each folder here is one family of the training app's
``method=NAME`` choices, owning its pieces (vec-env wrappers, algorithms, callbacks, their
device twins and logging) and the checks of its settings; its config is
``safelife_rl/conf/method/NAME.yaml``. The run (:mod:`~safelife_rl.training.run`), the
settings check (:mod:`~safelife_rl.training.config`) and the commands name no method: they ask
:func:`method_of` and :func:`device_twins`.

Adding a method is a folder here whose ``__init__`` lists its :class:`Method` objects in
``METHODS``, plus its config (``docs/safelife/methods.md`` works one through).
"""

from safelife_rl.training.methods.plugin import (
    HostBuffer,
    Method,
    device_twins,
    method_of,
    observation_bytes,
    registry,
    replay_buffer,
)

__all__ = [
    "HostBuffer",
    "Method",
    "device_twins",
    "method_of",
    "observation_bytes",
    "registry",
    "replay_buffer",
]
