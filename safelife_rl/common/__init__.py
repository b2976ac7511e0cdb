"""The floor under everything: user errors (:mod:`.errors`), atomic file writes
(:mod:`.files`) and worker-process helpers (:mod:`.workers`)."""
