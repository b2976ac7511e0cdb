"""Backends of the SafeLife rules beyond the Numba engine of :mod:`safelife_rl.physics`.

* :mod:`.torch_rules`: the board update and the agents' actions as batched torch operations;
* :mod:`.torch_game`: a batch of games on a torch device (points, exits, rewards,
  observations), the counterpart of :class:`safelife_rl.SafeLifeGame`.

Both are held to the Numba engine bit for bit by ``tests/safelife/test_torch_engine.py``.
"""
