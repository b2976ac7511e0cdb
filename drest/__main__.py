"""``python -m drest COMMAND ...``: see :mod:`drest.apps.cli`."""

from drest.apps.cli import main

raise SystemExit(main())
