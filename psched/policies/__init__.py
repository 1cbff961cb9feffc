"""Built-in policies and the registry by name: importing this package registers them (the
protocol and :func:`register_policy` are :mod:`psched.core.policy`)."""

from collections.abc import Callable
from typing import Any

from psched.core.policy import REGISTRY, JobStatus, Policy, RunContext, View, register_policy
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

__all__ = [
    "JobStatus",
    "Policy",
    "RunContext",
    "View",
    "available_policies",
    "make_policy",
    "policy_factory",
    "register_policy",
]


def available_policies() -> list[str]:
    """Names of every registered policy, in registration order."""
    return list(REGISTRY)


def policy_factory(name: str) -> Callable[..., Policy]:
    """The factory (class) registered as ``name``: read its declared capabilities (class
    attributes such as ``commits_on_arrival``) without making one.

    Raises
    ------
    KeyError
        No policy of that name.
    """
    if name not in REGISTRY:
        raise KeyError(f"unknown policy {name!r}; available: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def make_policy(name: str, **options: Any) -> Policy:
    """A fresh policy by name; ``options`` go to its factory."""
    return policy_factory(name)(**options)
