"""``python -m drest COMMAND ...``: see :mod:`drest.cli`."""

from drest.cli import main

raise SystemExit(main())
