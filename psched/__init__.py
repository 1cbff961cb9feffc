"""psched: online scheduling of parameter-server training jobs on shared clusters.

In a notebook, start with :func:`psched.compare` (a trace and policies in, a
:class:`psched.Results` with pandas DataFrames and plots out).

The names below are loaded on first use (PEP 562), so that importing a light module such as
``psched.core.errors`` (as every Ray worker does) does not import the whole library.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "RESOURCES": "psched.core.model",
    "Alloc": "psched.core.model",
    "Cluster": "psched.core.model",
    "Decision": "psched.core.model",
    "Job": "psched.core.model",
    "JobSpec": "psched.core.model",
    "Pool": "psched.core.model",
    "Resources": "psched.core.model",
    "Server": "psched.core.model",
    "resolve_job": "psched.core.model",
    "Executor": "psched.core.executor",
    "SimulatedExecutor": "psched.core.executor",
    "SlotReport": "psched.core.executor",
    "Policy": "psched.core.policy",
    "RunContext": "psched.core.policy",
    "View": "psched.core.policy",
    "available_policies": "psched.policies",
    "make_policy": "psched.policies",
    "RunResult": "psched.core.loop",
    "SchedulerLoop": "psched.core.loop",
    "simulate": "psched.api",  # psched.core.simulator.simulate, with a clear error for a path
    "Results": "psched.api",
    "compare": "psched.api",
    "Utility": "psched.core.utility",
    "make_utility": "psched.core.utility",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'psched' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
