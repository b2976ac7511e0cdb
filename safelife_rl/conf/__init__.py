"""The Hydra configs of ``safelife-rl train`` (``train.yaml`` and its groups), shipped in the
package so an installed wheel runs every command; the apps find them as ``pkg://safelife_rl.conf``."""
