"""Multi-agent levels from the original multi-agent parameter files, compared with the levels
the original generator made for the recorded traces."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from safelife_rl.apps.make_suites import make_suite, same_levels
from safelife_rl.engine import cells
from safelife_rl.engine.level_files import load_levels
from safelife_rl.engine.replay import load_trace
from safelife_rl.engine.scoring import DEFAULT_POINTS_TABLE
from safelife_rl.envs.registration import suite_file
from safelife_rl.procgen.generator import generate_multi_agent_level
from safelife_rl.procgen.params import MULTI_AGENT_DIR, MULTI_AGENT_TYPES, ParamsError, load_params

SHARED = Path(__file__).resolve().parents[1] / "data/safelife"
TRACE_TASKS = ("asym1", "asym2", "build-compete", "build-coop", "build-parallel")


def test_the_original_parameter_files_are_shipped_unchanged():
    originals = sorted((SHARED / "procgen/multi-agent").glob("*.yaml"))
    assert sorted(p.stem for p in originals) == sorted(MULTI_AGENT_TYPES)
    for original in originals:
        ours = yaml.safe_load((MULTI_AGENT_DIR / original.name).read_text())
        assert ours == yaml.safe_load(original.read_text()), original.name


@pytest.mark.parametrize("task", MULTI_AGENT_TYPES)
def test_levels_follow_their_parameters_and_seed(task):
    params = load_params(task, multi_agent=True)
    level = generate_multi_agent_level(task, 7, "x")
    again = generate_multi_agent_level(params, 7, "x")
    assert np.array_equal(level.board, again.board) and level.agent_locs == again.agent_locs
    assert not np.array_equal(level.board, generate_multi_agent_level(task, 8).board)
    assert list(level.agent_names) == params["agents"]
    assert level.min_performance == params["min_performance"]
    for (row, col), name, table in zip(level.agent_locs, level.agent_names, level.points_tables):
        agent_type = params["agent_types"][name]
        cell = int(level.board[row, col])
        assert cell & cells.AGENT and cell & cells.FROZEN and not cell & cells.DESTRUCTIBLE
        color = cells.COLOR_NAMES[cells.color_index(cell)]
        assert color == agent_type["color"]
        assert np.array_equal(table, agent_type.get("points_table", DEFAULT_POINTS_TABLE))
    assert np.count_nonzero((level.board & (cells.EXIT | cells.AGENT)) == cells.EXIT) == 1


@pytest.mark.parametrize("task", TRACE_TASKS)
def test_levels_look_like_the_originals(task):
    """Agent cells and points tables as the original made them, and the same goal and life
    colours over many levels as in its five recorded levels."""
    originals = [
        load_trace(t)[0] for t in sorted((SHARED / "traces-multiagent").glob(f"multi-{task}-*.npz"))
    ]
    ours = [generate_multi_agent_level(task, seed) for seed in range(8)]

    def agent_cells(level):  # without the exit flag (the traces' levels have exits updated)
        return [int(level.board[loc]) & ~cells.EXIT for loc in level.agent_locs]

    def colors(levels, array):
        return {
            int(c)
            for level in levels
            for c in np.unique(cells.color_index(getattr(level, array)[getattr(level, array) > 0]))
        }

    assert agent_cells(ours[0]) == agent_cells(originals[0])
    assert np.array_equal(ours[0].points_tables, originals[0].points_tables)
    assert colors(originals, "goals") <= colors(ours, "goals")
    assert colors(originals, "board") <= colors(ours, "board")


def test_the_default_agent_type_is_known_only_to_multi_agent_files(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text("agents: [default, default]\n")
    assert load_params(path, multi_agent=True)["agents"] == ["default", "default"]
    with pytest.raises(ParamsError, match="exactly one agent is supported"):
        load_params(path)
    (tmp_path / "none.yaml").write_text("agents: []\n")
    with pytest.raises(ParamsError, match="expected a non-empty list of agent types"):
        load_params(tmp_path / "none.yaml", multi_agent=True)
    path = tmp_path / "purple.yaml"
    path.write_text("agents: [default, purple]\n")
    with pytest.raises(ParamsError, match=r"agents\[1\]: unknown agent type 'purple'"):
        load_params(path, multi_agent=True)


@pytest.mark.parametrize("task", MULTI_AGENT_TYPES)
def test_shipped_suites_regenerate_bit_identically(task):
    shipped = load_levels(suite_file(task), multi_agent=True)
    assert len(shipped) == 100 and len({level.name for level in shipped}) == 100
    assert {level.n_agents for level in shipped} == {len(load_params(task, True)["agents"])}
    assert same_levels(make_suite(task, size=3, progress=False, multi_agent=True), shipped[:3])
