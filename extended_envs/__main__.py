"""``python -m extended_envs COMMAND ...``: see :mod:`extended_envs.apps.cli`."""

from extended_envs.apps.cli import main

raise SystemExit(main())
