"""The user error of :mod:`extended_envs`: bad input (an agent's action, a setting, a value).

Library code raises :class:`UserError` with a message naming who gave the bad value, the value
and what is allowed; the commands (:mod:`extended_envs.cli`) report it as one line
``prog: error: ...`` and exit status 2.
"""


class UserError(ValueError):
    """Bad input to the extended environments; the message says what is wrong and what is
    allowed."""
