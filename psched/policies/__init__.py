"""Built-in policies; importing this package registers them (see :mod:`psched.policies.base`)."""

from psched.policies import drf as _drf  # noqa: F401  (registers "drf")
from psched.policies import fifo as _fifo  # noqa: F401  (registers "fifo")
from psched.policies import oasis as _oasis  # noqa: F401  (registers "oasis")
from psched.policies.base import (
    JobStatus,
    Policy,
    RunContext,
    View,
    available_policies,
    make_policy,
    register_policy,
)

__all__ = [
    "JobStatus",
    "Policy",
    "RunContext",
    "View",
    "available_policies",
    "make_policy",
    "register_policy",
]
