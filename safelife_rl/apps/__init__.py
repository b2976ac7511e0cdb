"""The apps floor: every command, on top of training, envs and engine, behind one command line
(:mod:`.cli`: ``python -m safelife_rl COMMAND``, ``safelife-rl COMMAND``). Hydra apps:
:mod:`.train` and the reproduction's jobs (:mod:`.reproduce`); argparse commands:
:mod:`.benchmark`, :mod:`.make_suites`, :mod:`.plots`, :mod:`.replay`, :mod:`.play` (single- and
multi-agent), :mod:`.random_run`."""
