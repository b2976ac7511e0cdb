"""The DREST commands (``drest COMMAND``), over the gridworlds, rewards, agents and metrics
of the package below them."""
