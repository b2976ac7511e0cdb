"""The SafeLife paper's Table 1, Table 2 and Figures 3, 5 and 6 in one command
(``python -m safelife_rl reproduce``, see :mod:`safelife_rl.apps.reproduce.cli`): the runs and their
folders (:mod:`.runs`), one run as a Hydra job (:mod:`.job`), the sweep through Hydra's
launchers (:mod:`.sweep`), the tables (:mod:`.tables`), figures (:mod:`.figures`) and the
paper's statements beside ours (:mod:`.claims`)."""
