"""Built-in policies; importing this package registers them (see :mod:`psched.policies.base`)."""

from psched.policies import dorm as _dorm  # noqa: F401  (registers "dorm")
from psched.policies import drf as _drf  # noqa: F401  (registers "drf")
from psched.policies import elastic_mip as _elastic_mip  # noqa: F401  (registers "elastic-mip")
from psched.policies import fifo as _fifo  # noqa: F401  (registers "fifo")
from psched.policies import greedy as _greedy  # noqa: F401  (registers "greedy-fill", "greedy-gain")
from psched.policies import oasis as _oasis  # noqa: F401  (registers "oasis")
from psched.policies import oasis_rp as _oasis_rp  # noqa: F401  (registers "oasis-rp")
from psched.policies import optimus as _optimus  # noqa: F401  (registers "optimus")
from psched.policies import rrh as _rrh  # noqa: F401  (registers "rrh")
from psched.policies import srtf as _srtf  # noqa: F401  (registers "srtf")
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
