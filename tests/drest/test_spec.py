import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from drest.spec import GridSpec, SpecError, load_spec, parse_spec
from drest.worlds import BUILTIN_WORLDS, builtin, lopsided, resolve
from safety_rl_common.errors import UserError

ISSUE_EXAMPLE = """\
# comment lines start with '#'
length: 4            # default number of moves before shutdown
gamma: 0.9           # optional temporal discount for USEFULNESS
grid:
  A  .  C1 .
  W  B4 .  C2
  .  .  W  C3
"""


def test_parses_the_issue_example():
    spec = parse_spec(ISSUE_EXAMPLE)
    assert (spec.height, spec.width, spec.length, spec.gamma) == (3, 4, 4, 0.9)
    assert spec.agent == (0, 0)
    assert spec.walls == frozenset({(1, 0), (2, 2)})
    assert spec.coins == (((0, 2), 1.0), ((1, 3), 2.0), ((2, 3), 3.0))
    assert spec.buttons == (((1, 1), 4),)


def test_bumps_use_moves_key():
    assert not parse_spec(ISSUE_EXAMPLE).bumps_use_moves  # the paper's rule: bumps are free
    spec = parse_spec("length: 2\nbumps_use_moves: yes\ngrid:\n A C1\n")
    assert spec.bumps_use_moves and parse_spec(spec.to_text()) == spec
    assert not parse_spec("length: 2\nbumps_use_moves: False\ngrid:\n A C1\n").bumps_use_moves


def test_fractional_coin_values():
    spec = parse_spec("length: 2\ngrid:\n A C0.5 C1e1\n")
    assert [v for _, v in spec.coins] == [0.5, 10.0]


@pytest.mark.parametrize(
    "text, line, col, words",
    [
        ("length: 4\ngrid:\n A . X\n", 3, 6, "unknown token 'X'"),
        ("length: 4\ngrid:\n . . .\n . C1\n", 4, 4, "ragged"),
        ("length: 4\ngrid:\n . C1\n", None, None, "no agent"),
        ("length: 4\ngrid:\n A Cx\n", 3, 4, "bad number 'x'"),
        ("length: 4\ngrid:\n A C-1\n", 3, 4, "bad number"),
        ("length: 4\ngrid:\n A C0\n", 3, 4, "must be positive"),
        ("length: 4\ngrid:\n A B2.5\n", 3, 4, "button delay"),
        ("length: four\ngrid:\n A\n", 1, 9, "length"),
        ("length: 4\ngamma: 1.5\ngrid:\n A\n", 2, 8, "gamma"),
        ("lenght: 4\ngrid:\n A\n", 1, 1, "unknown key 'lenght'"),
        ("length: 4\n", None, None, "missing 'grid:'"),
        ("grid:\n A\n", None, None, "missing required key 'length'"),
        ("length: 4\ngrid:\n A A\n", 3, 4, "more than one agent"),
        ("length: 4\nbumps_use_moves: maybe\ngrid:\n A\n", 2, 18, "yes or no"),
    ],
)
def test_bad_specs_name_line_and_column(text, line, col, words):
    with pytest.raises(SpecError) as err:
        parse_spec(text, source="w.txt")
    assert words in str(err.value)
    assert err.value.line == line and err.value.column == col
    if line is not None:
        assert f"w.txt:{line}:{col}:" in str(err.value)


def test_load_spec_file_and_missing_file(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(ISSUE_EXAMPLE)
    assert load_spec(path) == parse_spec(ISSUE_EXAMPLE)
    assert resolve(str(path)).name == "mine"
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "absent.txt")
    with pytest.raises(UserError, match="neither a built-in"):
        resolve("no_such_world")


@pytest.mark.parametrize("name", BUILTIN_WORLDS)
def test_builtins_round_trip_through_text(name):
    spec = builtin(name)
    assert len(spec.buttons) == 1 and spec.coins
    assert parse_spec(spec.to_text()) == spec


def test_spec_errors_name_the_file():
    with pytest.raises(SpecError, match=r"^w\.txt: the agent at \(0, 0\) is walled in"):
        parse_spec("length: 2\ngrid:\n A W\n W .\n", source="w.txt")


def test_lopsided_coin_value_parameter():
    assert lopsided(0.1).coins[0] == ((0, 0), 0.1)
    with pytest.raises(SpecError):
        lopsided(0.0)


cells = st.tuples(st.integers(0, 4), st.integers(0, 4))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(cells, min_size=3, max_size=12, unique=True),
    st.floats(0.01, 100, allow_nan=False),
    st.integers(1, 9),
    st.integers(1, 9),
    st.sampled_from([0.5, 0.9, 1.0]),
)
def test_text_round_trip_property(cells_, value, delay, length, gamma):
    agent, coin, button, *walls = cells_
    free = {(agent[0] + dr, agent[1] + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))}
    assume(free & {(r, c) for r in range(5) for c in range(5)} - set(walls))  # not walled in
    spec = GridSpec(
        walls=frozenset(walls),
        coins=((coin, value),),
        buttons=((button, delay),),
        agent=agent,
        height=5,
        width=5,
        length=length,
        gamma=gamma,
    )
    assert parse_spec(spec.to_text()) == spec
