"""The scheduler service: psched's one loop run live, journaled, restartable.

Its parts, by role (none imports this package; they import each other downwards only):

* :mod:`ray_cluster.service.config` -- :class:`ServiceConfig`, the actor's names, the reasons;
* :mod:`ray_cluster.service.core` -- :class:`SchedulerService`, the real-time driver of
  :class:`psched.core.loop.SchedulerLoop` (submit, cancel, status, the real-time step);
* :mod:`ray_cluster.service.rules` -- the live rules after each slot (failed, behind, ahead
  of plan) and the committed schedules;
* :mod:`ray_cluster.service.nodes` -- lost and joined Ray nodes;
* :mod:`ray_cluster.service.replay` -- a restart rebuilds the loop from the journal;
* :mod:`ray_cluster.service.actor` -- the detached Ray actor, its watcher, ``run_trace``.

This package is the public import path: it re-exports those names.
"""

from ray_cluster.service.actor import run_trace, service_actor, watch_service
from ray_cluster.service.clock import RealtimeClock
from ray_cluster.service.config import (
    CANCELLED,
    DROPPED_BEHIND,
    FAILED,
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    ServiceConfig,
    cluster_from_dict,
)
from ray_cluster.service.core import SchedulerService

__all__ = ["CANCELLED", "DROPPED_BEHIND", "FAILED", "SERVICE_NAME", "SERVICE_NAMESPACE",
           "RealtimeClock", "SchedulerService", "ServiceConfig", "cluster_from_dict",
           "run_trace", "service_actor", "watch_service"]
