"""psched: online scheduling of parameter-server training jobs on shared clusters."""

from psched.executor import Executor, SimulatedExecutor, SlotReport
from psched.model import (
    RESOURCES,
    Alloc,
    Cluster,
    Decision,
    Job,
    JobSpec,
    Pool,
    Resources,
    Server,
    resolve_job,
)
from psched.policies.base import Policy, RunContext, View, available_policies, make_policy
from psched.simulator import RunResult, SchedulerLoop, simulate
from psched.utility import Utility, make_utility

__version__ = "0.1.0"

__all__ = [
    "RESOURCES",
    "Alloc",
    "Cluster",
    "Decision",
    "Executor",
    "Job",
    "JobSpec",
    "Policy",
    "Pool",
    "Resources",
    "RunContext",
    "RunResult",
    "SchedulerLoop",
    "Server",
    "SimulatedExecutor",
    "SlotReport",
    "Utility",
    "View",
    "__version__",
    "available_policies",
    "make_policy",
    "make_utility",
    "resolve_job",
    "simulate",
]
