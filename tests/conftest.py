"""Project-wide test settings."""

import os
from pathlib import Path

from hypothesis import settings

# The original SafeLife suites (reference data beside the project, read only where named): the
# tests and the docs examples they run use them through $SAFELIFE_LEVELS.
os.environ.setdefault(
    "SAFELIFE_LEVELS",
    str(Path(__file__).resolve().parents[2] / "shared" / "safelife" / "benchmarks" / "v1.0"),
)

# Compiled kernels load on first call, so per-example timings are not meaningful.
settings.register_profile("project", deadline=None)
settings.load_profile("project")
