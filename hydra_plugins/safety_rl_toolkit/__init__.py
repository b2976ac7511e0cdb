"""This project's Hydra plugin: Hydra imports every module of the ``hydra_plugins`` namespace
package when an app starts, and :mod:`.user_conf` puts the researcher's ``conf/`` folder on
the config search path of this project's apps (docs/configuration.md)."""
