"""The user error of :mod:`drest`: bad input (a gridworld spec, a setting, a value).

Library code raises :class:`UserError` with a message naming the problem and what is allowed;
the commands (:mod:`drest.cli`) report it as one line ``prog: error: ...`` and exit status 2.
"""


class UserError(ValueError):
    """Bad input to DREST; the message says what is wrong and what is allowed."""
