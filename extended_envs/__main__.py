"""``python -m extended_envs COMMAND ...``: see :mod:`extended_envs.cli`."""

from extended_envs.cli import main

raise SystemExit(main())
