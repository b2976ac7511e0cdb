"""The Hydra configs of ``extended-envs benchmark`` and ``extended-envs debate``, shipped in the
package; the apps find them as ``pkg://extended_envs.conf``."""
