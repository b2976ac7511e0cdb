"""The apps floor: every command, on top of training, envs and engine. Hydra apps:
:mod:`.train` and the reproduction's sweep (:mod:`.reproduce`); argparse commands:
:mod:`.benchmark`, :mod:`.make_suites`, and replay, play and random-run (:mod:`.replay`,
:mod:`.play`, :mod:`.multi_agent_play`, :mod:`.random_run`) behind ``python -m safelife_rl``."""
