"""Project-wide test settings."""

from hypothesis import settings

# Compiled kernels load on first call, so per-example timings are not meaningful.
settings.register_profile("project", deadline=None)
settings.load_profile("project")
