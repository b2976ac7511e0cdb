"""The engine floor: the SafeLife rules and nothing above them (no Gymnasium wrapper, SB3 or
Hydra).

* the level model: :mod:`.cells`, :mod:`.levels` and :mod:`.multi_agent_levels` (levels of
  one agent and of several), :mod:`.level_files` (reading and writing both), :mod:`.symmetry`;
* the interface of a batch of games on either backend: :mod:`.game_batch`;
* the Numba backend: :mod:`.physics` (board update and actions), :mod:`.scoring`,
  :mod:`.observation`, :mod:`.game` (a batch of games of 1..A agents each),
  :mod:`.numba_batch` (one-agent games in slots, stepped in one call);
* the torch backend: :mod:`.torch_rules` (its one rules module), :mod:`.torch_game`,
  :mod:`.torch_observation`, :mod:`.torch_side_effects`;
* side effects against the inaction baseline: :mod:`.side_effects`;
* replaying recorded traces (single- or multi-agent) with either backend: :mod:`.replay`.

``tests/safelife/test_torch_engine.py``, ``test_torch_conformance.py`` and
``test_game_batch.py`` hold the torch backend to the Numba engine and to the original's traces
bit for bit.
"""
