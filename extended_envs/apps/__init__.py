"""The ExtendedEnvironments commands (``extended-envs COMMAND``), over the environments,
agents and checks of the package below them."""
