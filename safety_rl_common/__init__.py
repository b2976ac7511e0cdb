"""The floor under all three packages (``safelife_rl``, ``drest``, ``extended_envs``), which
each import it and never one another: the one user error and the command-line machinery that
reports it (:mod:`.errors`, :mod:`.cli`), the settings checks (:mod:`.checks`), bounds on what
a file or setting may make a command read or allocate (:mod:`.limits`), atomic file writes and
bounded reads (:mod:`.files`, :mod:`.yaml_files`), run-folder locks (:mod:`.locks`), worker
processes (:mod:`.workers`), figures (:mod:`.figures`), scores over seeds (:mod:`.statistics`)
and counts of torch's host syncs (:mod:`.torch_counts`). Importing it loads none of them.
"""
