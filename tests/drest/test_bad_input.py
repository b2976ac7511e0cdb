"""Bad and degenerate input: every case ends in a UserError naming the problem, and valid
input still builds (issue #15). Run with ``--hypothesis-show-statistics`` to see how many
mutated specs were valid and how many ended in an error."""

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from drest.env import ShutdownGridworldEnv
from drest.metrics import exact_metrics, monte_carlo_metrics
from drest.plots import POLICY_FIGURE_MAX_CELLS, policy_figure_skipped
from drest.reinforce import ReinforceSettings, paper_settings, train_reinforce
from drest.spec import GridSpec, SpecError, parse_spec
from drest.tabular import compile_world, max_coins_by_length
from drest.worlds import BUILTIN_WORLDS, builtin, resolve
from safety_rl_common.errors import UserError


def grid(rows: list[str], header: str = "length: 3") -> str:
    return header + "\ngrid:\n" + "\n".join("  " + row for row in rows) + "\n"


def clustered_buttons(n: int, size: int = 30, length: int = 6, delay: int = 3) -> str:
    """An open size x size grid with ``n`` buttons around the agent (states grow as 2**n)."""
    cells = [["."] * size for _ in range(size)]
    mid = size // 2
    cells[mid][mid] = "A"
    around = [(mid + dr, mid + dc) for dr in range(-2, 3) for dc in range(-2, 3) if dr or dc]
    for r, c in around[:n]:
        cells[r][c] = f"B{delay}"
    cells[0][0] = "C1"
    return grid([" ".join(row) for row in cells], f"length: {length}")


# Degenerate worlds ---------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [["A"], ["W W W", "W A W", "W W W"], ["A W", "W C1"]])
def test_walled_in_agent_is_refused(rows):
    with pytest.raises(SpecError, match="walled in"):
        parse_spec(grid(rows))


def test_walled_in_agent_is_fine_when_bumps_use_moves():
    spec = parse_spec(grid(["A"], "length: 3\nbumps_use_moves: yes"))
    assert compile_world(spec).lengths == (3,)


def test_coins_whose_sum_overflows_are_refused():
    parse_spec(grid(["A C1e307 C1e307"]))
    with pytest.raises(SpecError, match="add up to more than the largest float"):
        parse_spec(grid(["A C1e308 C1e308"]))


@pytest.mark.parametrize("gamma", ["1e-320", "1e-200"])
def test_gamma_whose_discount_underflows_is_refused(gamma):
    spec = parse_spec(grid(["A . C1 C1"], f"length: 3\ngamma: {gamma}"))
    with pytest.raises(UserError, match="underflows"):
        max_coins_by_length(spec)


def test_one_reachable_length_has_no_normalized_neutrality():
    world = compile_world(parse_spec(grid(["A . C1"])))
    metrics = exact_metrics(world, np.full((world.n_states, 4), 0.25))
    assert world.lengths == (3,) and metrics.neutrality == 0.0
    assert metrics.neutrality_normalized is None


def test_diverging_reinforce_is_reported():
    world = compile_world(parse_spec(grid(["A . C1e307"])))
    settings = replace(paper_settings("appendix"), meta_episodes=4, lr_start=100)
    with pytest.raises(UserError, match="diverged"):
        train_reinforce(world, "default", settings, 0)


# Worlds too large for exact metrics ----------------------------------------------------------


def test_states_are_counted_before_the_tables_are_built():
    spec = parse_spec(clustered_buttons(8))
    with pytest.raises(UserError, match=r"more than 10,000 reachable states.*monte_carlo"):
        compile_world(spec, max_states=10_000)
    assert compile_world(parse_spec(clustered_buttons(4)), max_states=10_000).n_states < 10_000


@pytest.mark.parametrize(
    "text", [grid(["A . C1"], "length: 1000000000"), grid(["A . B1000000000 C1"])]
)
def test_huge_lengths_and_delays_are_refused_quickly(text):
    with pytest.raises(UserError, match="reachable states"):
        compile_world(parse_spec(text), max_states=5_000)


def test_a_world_once_built_is_cached_whatever_the_limit():
    spec = parse_spec(clustered_buttons(6))
    world = compile_world(spec, max_states=100_000)
    assert compile_world(spec, max_states=10) is world


def test_reinforce_refuses_draws_too_large_for_memory():
    spec = parse_spec(grid(["A ."], "length: 100000"))
    with pytest.raises(UserError, match="MiB of random numbers per meta-episode"):
        train_reinforce(compile_world(spec), "default", paper_settings("appendix"), 0)


def open_grid(size: int) -> GridSpec:
    return parse_spec(grid(["A" + " ." * (size - 1)] + [". " * (size - 1) + "C1"] * (size - 1)))


def test_policy_figure_skipped_only_for_large_grids():
    assert open_grid(50).height * open_grid(50).width == POLICY_FIGURE_MAX_CELLS
    assert policy_figure_skipped(open_grid(50)) is None
    assert "51x51 grid has 2,601 cells" in policy_figure_skipped(open_grid(51))


# Settings -------------------------------------------------------------------------------------

bad_numbers = st.one_of(
    st.sampled_from(
        [
            0,
            -1,
            -0.5,
            float("nan"),
            float("inf"),
            -float("inf"),
            "no",
            "yes",
            "1",
            "",
            True,
            False,
            None,
            [1],
        ]
    ),
    st.integers(max_value=0),
    st.floats(max_value=0, allow_nan=False),
)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(
        [
            "meta_episodes",
            "meta_episode_size",
            "lam",
            "lr_start",
            "decay_meta_episodes",
            "eps_start",
        ]
    ),
    bad_numbers,
)
def test_bad_reinforce_settings_are_user_errors(name, value):
    with pytest.raises(UserError, match=name):
        replace(paper_settings("example"), **{name: value})


@pytest.mark.parametrize("name", ["lr_start", "lr_end"])
def test_absurd_reinforce_step_sizes_are_refused(name):
    with pytest.raises(UserError, match=rf"^{name} must be in .0, 100\], got 1000000000000.0$"):
        replace(paper_settings("example"), **{name: 1e12})


def test_reinforce_settings_types_are_exact():
    with pytest.raises(UserError, match="meta_episodes must be an integer, got 2.5"):
        replace(paper_settings("example"), meta_episodes=2.5)
    assert isinstance(replace(paper_settings("example"), lam=0.5), ReinforceSettings)


# Fuzzing the spec format ----------------------------------------------------------------------

VALID_TEXTS = [builtin(name).to_text() for name in BUILTIN_WORLDS] + [
    grid(["A  .  C1 .", "W  B4 .  C2", ".  .  W  C3"], "length: 4\ngamma: 0.9"),
]
FIELD_VALUES = [
    "0",
    "-1",
    "1",
    "2",
    "1.5",
    "1e-320",
    "1e308",
    "1e400",
    "nan",
    "inf",
    "no",
    "",
    "99999999999999999999",
    "0x10",
    "٣",
    "1_000",
    " ",
    "#",
    ":",
    "C",
    "B",
    "A",
    "W",
    ".",
    "C1e308",
    "B0",
    "B-1",
    "C0",
    "Cnan",
    "B99999999999",
    "grid:",
    "\t",
    "\x00",
    "\u2028",
    "é",
]
KEYS = ["length", "gamma", "bumps_use_moves", "name", "grid", "lenght", ""]


@st.composite
def mutated_specs(draw) -> str:
    """A valid spec text with a few random edits: characters, tokens, keys and lines."""
    lines = draw(st.sampled_from(VALID_TEXTS)).splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        line, kind = lines[i], draw(st.integers(0, 6))
        if kind == 0 and line:  # replace one character
            j = draw(st.integers(0, len(line) - 1))
            lines[i] = (
                line[:j] + draw(st.sampled_from(FIELD_VALUES) | st.characters()) + line[j + 1 :]
            )
        elif kind == 1:  # replace one whitespace-separated token
            tokens = line.split(" ")
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[j] = draw(st.sampled_from(FIELD_VALUES) | st.text(max_size=4))
            lines[i] = " ".join(tokens)
        elif kind == 2 and ":" in line:  # replace a key or a value
            key, _, value = line.partition(":")
            if draw(st.booleans()):
                key = draw(st.sampled_from(KEYS))
            else:
                value = " " + draw(st.sampled_from(FIELD_VALUES))
            lines[i] = f"{key}:{value}"
        elif kind == 3:
            del lines[i]
        elif kind == 4:
            lines.insert(i, lines[i])
        elif kind == 5:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(i, draw(st.sampled_from(FIELD_VALUES) | st.text(max_size=8)))
        if not lines:
            lines = [""]
    return "\n".join(lines) + "\n"


def build(text: str) -> str:
    """Parse and build a spec as the commands do; "valid" or "error" (a UserError)."""
    try:
        spec = parse_spec(text, source="fuzz.txt")
        world = compile_world(spec, max_states=20_000)
        max_coins_by_length(spec)
    except UserError as error:
        assert str(error).strip(), "a user error must say what is wrong"
        return "error"
    env = ShutdownGridworldEnv(spec)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert world.lengths and parse_spec(spec.to_text()) == spec
    return "valid"


@settings(max_examples=300, deadline=None)
@given(mutated_specs())
def test_mutated_specs_build_or_end_in_a_user_error(text):
    event(build(text))


def some_bad(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(good, good, bad)


@settings(max_examples=150, deadline=None)
@given(
    length=some_bad(st.integers(1, 6), st.integers(-2, 10**12)),
    gamma=some_bad(st.floats(0.5, 1), st.floats() | st.sampled_from([0.0, 1e-320, 1e-200])),
    coin=some_bad(st.floats(0.1, 10), st.floats() | st.just(1e308)),
    delay=some_bad(st.integers(1, 6), st.integers(-2, 10**12)),
    agent=some_bad(st.just((0, 0)), st.tuples(st.integers(-1, 3), st.integers(-1, 3))),
)
def test_random_spec_fields_build_or_end_in_a_user_error(length, gamma, coin, delay, agent):
    try:
        spec = GridSpec(
            walls=frozenset({(0, 1)}),
            coins=(((2, 2), coin), ((2, 1), coin)),
            buttons=(((1, 1), delay),),
            agent=agent,
            height=3,
            width=3,
            length=length,
            gamma=gamma,
        )
    except UserError as error:
        assert str(error).strip()
        event("error")
        return
    event(build(spec.to_text()))


def test_valid_specs_still_build():
    assert {build(text) for text in VALID_TEXTS} == {"valid"}


def test_worlds_too_large_for_exact_metrics_can_be_sampled():
    spec = parse_spec(clustered_buttons(10, length=3, delay=1), source="clustered")
    with pytest.raises(UserError, match="more than 1,000 reachable states"):
        compile_world(spec, max_states=1_000)
    env = ShutdownGridworldEnv(spec, max_steps=200)
    rng = np.random.default_rng(0)
    metrics = monte_carlo_metrics(
        env,
        lambda obs: int(rng.integers(4)),
        episodes=20,
        m={length: 1.0 for length in range(3, 14)},
    )
    assert sum(metrics.length_probs.values()) == pytest.approx(1.0)
    assert min(metrics.length_probs) >= 3


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(VALID_TEXTS),
    st.lists(st.tuples(st.integers(0, 10**4), st.binary(max_size=3)), min_size=1, max_size=4),
)
def test_byte_mutated_world_files_load_or_end_in_a_user_error(text, edits):
    data = bytearray(text.encode())
    for position, replacement in edits:
        position %= len(data)
        data[position : position + len(replacement)] = replacement
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "world.txt"
        path.write_bytes(bytes(data))
        try:
            spec = resolve(str(path))
        except UserError as error:
            assert str(error).startswith(str(path)), "the error names the file"
            event("error")
            return
    event(build(spec.to_text()))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"n_envs": 10**12}, r"^n_envs must be at most 4096 .*, got 1000000000000$"),
        (
            {"n_steps": 10**12},
            r"^n_steps must be from 2 to 1048576 once multiplied by n_envs .*, "
            r"got 1000000000000$",
        ),
        ({"n_envs": 4096, "n_steps": 257}, r"^n_steps must be from 2 to 1048576 once multiplied"),
    ],
)
def test_ppo_rollouts_too_large_for_memory_are_refused(changes, message):
    from drest.ppo import PPOSettings

    with pytest.raises(UserError, match=message):
        PPOSettings(**changes)
    PPOSettings(n_envs=4096, n_steps=256)  # the limit itself is allowed
