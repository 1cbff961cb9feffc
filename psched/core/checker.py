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
from psched.core.model import RESOURCES, Alloc, Cluster, Job, Pool, SlotPlan

__all__ = ["PlanChecker", "check_plan", "plan_usage"]

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
    for job_id, alloc in plan.items():
        _check_job(t, job_id, alloc, active, cluster)
    _check_capacity(t, plan_usage(plan, cluster, active), cluster)


def _check_job(t: int, job_id: str, alloc: Alloc, active: Mapping[str, Job],
               cluster: Cluster) -> None:
    job = _active_job(t, job_id, active)
    n_servers = len(cluster.servers)
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


def _active_job(t: int, job_id: str, active: Mapping[str, Job]) -> Job:
    job = active.get(job_id)
    if job is None:
        raise PlanViolation(f"slot {t}: job {job_id!r} is not admitted and unfinished")
    if t < job.arrival:
        raise PlanViolation(f"slot {t}: job {job_id!r} runs before its arrival {job.arrival}")
    return job


def _check_capacity(t: int, usage: np.ndarray, cluster: Cluster) -> None:
    cap = cluster.capacity
    over = usage > cap + _TOL * np.maximum(1.0, cap)
    if over.any():
        h, r = map(int, np.argwhere(over)[0])
        raise PlanViolation(
            f"slot {t}: server {cluster.servers[h].server_id} {RESOURCES[r]}: "
            f"used {usage[h, r]:g} > capacity {cap[h, r]:g}")


class PlanChecker:
    """:func:`check_plan` and :func:`plan_usage` for a loop whose plans change little.

    The same verdicts and the same usage matrices, with work proportional to what changed:
    a job's per-slot rules are re-derived only when its allocation differs from the last one
    checked for it (they depend on nothing else); the usage matrix is rebuilt, and capacities
    checked, only when the plan differs from the previous slot's (a re-planning policy holds
    its plan between events). Every slot still checks that each planned job is admitted,
    unfinished and arrived. Memory: one allocation per job of the last plan.
    """

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self._plan: dict[str, Alloc] = {}
        self._usage: np.ndarray | None = None
        self._usage_ok = False  # the cached usage passed the capacity check
        self._ok: dict[str, Alloc] = {}  # job -> allocation whose rules were checked

    def _fresh(self, cluster: Cluster) -> None:
        if cluster is not self._cluster:
            self._cluster, self._plan, self._usage, self._ok = cluster, {}, None, {}
            self._usage_ok = False

    def usage(self, plan: SlotPlan, cluster: Cluster, jobs: Mapping[str, Job]) -> np.ndarray:
        """:func:`plan_usage`, reusing the last matrix when ``plan`` is the last plan."""
        self._fresh(cluster)
        if self._usage is None or len(plan) != len(self._plan) or any(
                self._plan.get(j) != a for j, a in plan.items()):
            self._usage = plan_usage(plan, cluster, jobs)
            self._plan = dict(plan)
            self._usage_ok = False
        return self._usage

    def check(self, t: int, plan: SlotPlan, cluster: Cluster,
              active: Mapping[str, Job]) -> None:
        """:func:`check_plan` (the same violations, raised in the same order)."""
        self._fresh(cluster)
        for job_id, alloc in plan.items():
            if self._ok.get(job_id) == alloc:
                _active_job(t, job_id, active)
                continue
            _check_job(t, job_id, alloc, active, cluster)
            self._ok[job_id] = alloc
        if len(self._ok) > 2 * len(plan) + 64:
            self._ok = {j: a for j, a in self._ok.items() if j in plan}
        usage = self.usage(plan, cluster, active)
        if not self._usage_ok:
            _check_capacity(t, usage, cluster)
            self._usage_ok = True
