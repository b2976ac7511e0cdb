"""The user errors every SafeLife command reports as one line: SafeLife's own, and those of
the DREST and extended environments, whose Gymnasium ids the commands also run (``train
env.id=drest:drest/Example-v0``), with the file errors of a bad path."""

from drest.errors import UserError as DrestError
from extended_envs.errors import UserError as ExtendedEnvsError
from safelife_rl.common.errors import OS_ERRORS, UserError

REPORTED = (UserError, DrestError, ExtendedEnvsError, *OS_ERRORS)
