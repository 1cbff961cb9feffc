"""Built-in policies; importing this package registers them (see :mod:`psched.policies.base`)."""

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
