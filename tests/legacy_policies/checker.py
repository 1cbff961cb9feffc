"""An independent check of every plan before it is executed.

It re-derives, from the plan alone, the usage of every server and resource in the slot and
every job's per-slot rules (section 7): workers <= N; ceil(b/B * workers) <= PS <= workers;
workers only on worker servers and PS only on PS servers; only admitted, unfinished jobs that
have arrived. Any violation raises :class:`~psched.core.errors.PlanViolation`, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from psched.core.errors import PlanViolation
from psched.core.model import RESOURCES, Cluster, Job, Pool, SlotPlan

__all__ = ["check_plan", "plan_usage"]

_TOL = 1e-9


def plan_usage(plan: SlotPlan, cluster: Cluster, jobs: Mapping[str, Job]) -> np.ndarray:
    """Usage matrix (servers x resources) that ``plan`` puts on ``cluster``."""
    usage = np.zeros((len(cluster.servers), len(RESOURCES)))
    for job_id, alloc in plan.items():
        spec = jobs[job_id].spec
        w, s = spec.worker_demand.as_array(), spec.ps_demand.as_array()
        for h, n in alloc.workers:
            usage[h] += n * w
        for k, n in alloc.ps:
            usage[k] += n * s
    return usage


def check_plan(t: int, plan: SlotPlan, cluster: Cluster, active: Mapping[str, Job]) -> None:
    """Raise :class:`PlanViolation` unless ``plan`` is feasible in slot ``t``.

    ``active`` holds the admitted, unfinished jobs (the only ones that may run).
    """
    n_servers = len(cluster.servers)
    for job_id, alloc in plan.items():
        job = active.get(job_id)
        if job is None:
            raise PlanViolation(f"slot {t}: job {job_id!r} is not admitted and unfinished")
        if t < job.arrival:
            raise PlanViolation(f"slot {t}: job {job_id!r} runs before its arrival {job.arrival}")
        for role, pool, pairs in (("worker", Pool.WORKER, alloc.workers),
                                  ("ps", Pool.PS, alloc.ps)):
            for server, count in pairs:
                if not 0 <= server < n_servers:
                    raise PlanViolation(f"slot {t}: job {job_id!r}: no server {server}")
                if cluster.servers[server].pool != pool:
                    raise PlanViolation(
                        f"slot {t}: job {job_id!r}: {role} on {cluster.servers[server].server_id}"
                        f" of the {cluster.servers[server].pool.value} pool")
                if count <= 0:
                    raise PlanViolation(f"slot {t}: job {job_id!r}: {role} count {count} <= 0")
        workers, ps = alloc.n_workers, alloc.n_ps
        if workers > job.max_workers:
            raise PlanViolation(
                f"slot {t}: job {job_id!r}: {workers} workers > N = {job.max_workers}")
        if ps > workers:
            raise PlanViolation(f"slot {t}: job {job_id!r}: {ps} PS > {workers} workers")
        if ps < job.ps_needed(workers):
            raise PlanViolation(
                f"slot {t}: job {job_id!r}: {ps} PS < ceil(b/B * {workers}) = "
                f"{job.ps_needed(workers)}")
    usage = plan_usage(plan, cluster, active)
    cap = cluster.capacity
    over = usage > cap + _TOL * np.maximum(1.0, cap)
    if over.any():
        h, r = map(int, np.argwhere(over)[0])
        raise PlanViolation(
            f"slot {t}: server {cluster.servers[h].server_id} {RESOURCES[r]}: "
            f"used {usage[h, r]:g} > capacity {cap[h, r]:g}")
