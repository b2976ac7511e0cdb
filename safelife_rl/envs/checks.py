"""SafeLife's checks of user-given settings: the one implementation the three packages share
(:class:`drest.checks.Checks`: ``NAME must be ALLOWED, got VALUE``, ``unknown key 'NAME'
(known: ...)``), raising SafeLife's :class:`~safelife_rl.common.errors.UserError`.

On the envs floor, the lowest that may load Gymnasium: importing :mod:`drest.checks` runs
``drest/__init__``, which registers the DREST gridworld ids with Gymnasium.
"""

from drest.checks import Checks
from safelife_rl.common.errors import UserError

#: The checks, raising SafeLife's user error.
check = Checks(UserError)
