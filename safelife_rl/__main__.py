"""``python -m safelife_rl COMMAND ...``: see :mod:`safelife_rl.apps.cli`."""

from safelife_rl.apps.cli import main

raise SystemExit(main())
