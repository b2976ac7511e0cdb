"""Backends of the SafeLife rules beyond the Numba engine of :mod:`safelife_rl.physics`.

* :mod:`.torch_rules`: the board update, the agents' actions, points and exits as batched
  torch operations (the torch backend's one rules module);
* :mod:`.torch_game`: a batch of games on a torch device (state, step, rewards,
  observations), the counterpart of :class:`safelife_rl.SafeLifeGame`;
* :mod:`.torch_side_effects`: the side-effect score with its inaction baseline simulated on
  the device;
* :mod:`.torch_wrappers`: the training wrappers' rules over a batch of games;
* :mod:`.vector_env`: a Gymnasium vector env of such games (the ids' ``vector_entry_point``).

``tests/safelife/test_torch_engine.py`` and ``test_torch_conformance.py`` hold the torch
backend to the Numba engine and to the original's traces bit for bit, and
``test_vector_env.py`` the vector env to single envs under the training wrappers.
"""
