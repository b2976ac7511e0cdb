"""The engine floor: the SafeLife rules and nothing above them (no Gymnasium wrapper, SB3 or
Hydra).

* the level model: :mod:`.cells`, :mod:`.levels` (single-agent level files),
  :mod:`.multi_agent_levels`, :mod:`.symmetry`;
* the Numba backend: :mod:`.physics` (board update and actions), :mod:`.scoring`,
  :mod:`.observation`, :mod:`.game` (a batch of games, one agent each),
  :mod:`.multi_agent_game`, :mod:`.numba_batch` (games in slots, stepped in one call);
* the torch backend: :mod:`.torch_rules` (its one rules module), :mod:`.torch_game`,
  :mod:`.torch_observation`, :mod:`.torch_side_effects`;
* side effects against the inaction baseline: :mod:`.side_effects`;
* replaying recorded traces with either backend: :mod:`.replay`, :mod:`.multi_agent_replay`.

``tests/safelife/test_torch_engine.py`` and ``test_torch_conformance.py`` hold the torch
backend to the Numba engine and to the original's traces bit for bit.
"""
