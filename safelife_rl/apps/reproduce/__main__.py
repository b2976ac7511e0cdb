"""``python -m safelife_rl.apps.reproduce``: the same as ``python -m safelife_rl reproduce``."""

from safelife_rl.apps.reproduce.cli import main

raise SystemExit(main())
