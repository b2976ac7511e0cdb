"""``import drest`` and ``import extended_envs`` stand on their own: neither loads safelife_rl
(nor so its Numba engine or its Gymnasium ids), and ``import safelife_rl`` only registers ids."""

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
import gymnasium as gym
import {package}
print(json.dumps({{
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("safelife_rl", "numba")),
    "namespaces": sorted({{s.namespace for s in gym.registry.values() if s.namespace}}),
}}))
"""


def imported(package: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(package=package)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("package", ["drest", "extended_envs"])
def test_importing_a_package_loads_nothing_of_safelife_rl(package):
    after = imported(package)
    assert after["modules"] == []
    assert package in after["namespaces"]
    assert "safelife_rl" not in after["namespaces"]


def test_importing_safelife_rl_registers_its_ids_without_loading_the_engine():
    after = imported("safelife_rl")
    assert "safelife_rl" in after["namespaces"]
    assert not any(
        m.split(".")[0] == "numba" or m.startswith("safelife_rl.engine") for m in after["modules"]
    )


def test_safelife_rls_public_names_load_when_used():
    import safelife_rl

    assert safelife_rl.SafeLifeEnv.__module__ == "safelife_rl.envs.env"
    assert set(safelife_rl.__all__) <= set(dir(safelife_rl))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        safelife_rl.nope  # noqa: B018
