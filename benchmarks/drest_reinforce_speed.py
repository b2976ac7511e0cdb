"""Time the paper's main tabular run (example world, 2,048 meta-episodes of 64 mini-episodes)
against the issue's target of one CPU minute; prints the ratio (< 1 meets it)."""

import time

from drest.reinforce import paper_settings, train_reinforce
from drest.tabular import compile_world
from drest.worlds import example

TARGET_SECONDS = 60.0

if __name__ == "__main__":
    world = compile_world(example())
    for reward in ("default", "drest"):
        start = time.process_time()
        train_reinforce(world, reward, paper_settings("example"), seed=0, eval_every=16)
        cpu = time.process_time() - start
        print(
            f"{reward:8s} 131,072 mini-episodes: {cpu:.1f} s CPU, "
            f"ratio to the 60 s target {cpu / TARGET_SECONDS:.2f}"
        )
