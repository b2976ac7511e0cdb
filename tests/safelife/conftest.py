from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[3] / "shared" / "safelife"


@pytest.fixture(scope="session")
def benchmarks() -> Path:
    return SHARED / "benchmarks" / "v1.0"
