"""psched: online scheduling of parameter-server training jobs on shared clusters.

In a notebook, start with :func:`psched.compare` (a trace and policies in, a
:class:`psched.Results` with pandas DataFrames and plots out).

The names below are loaded on first use (PEP 562), so that importing a light module such as
``psched.errors`` (as every Ray worker does) does not import the whole library.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "RESOURCES": "psched.model",
    "Alloc": "psched.model",
    "Cluster": "psched.model",
    "Decision": "psched.model",
    "Job": "psched.model",
    "JobSpec": "psched.model",
    "Pool": "psched.model",
    "Resources": "psched.model",
    "Server": "psched.model",
    "resolve_job": "psched.model",
    "Executor": "psched.executor",
    "SimulatedExecutor": "psched.executor",
    "SlotReport": "psched.executor",
    "Policy": "psched.policies.base",
    "RunContext": "psched.policies.base",
    "View": "psched.policies.base",
    "available_policies": "psched.policies.base",
    "make_policy": "psched.policies.base",
    "RunResult": "psched.simulator",
    "SchedulerLoop": "psched.simulator",
    "simulate": "psched.api",  # psched.simulator.simulate, with a clear error for a path
    "Results": "psched.api",
    "compare": "psched.api",
    "Utility": "psched.utility",
    "make_utility": "psched.utility",
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
