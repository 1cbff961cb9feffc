"""The exact offline optimum of problem (1)-(13) and its LP relaxation bound.

Solved with HiGHS >= 1.16 through :mod:`psched.offline.milp`, which holds every answer against the
feasible values known for the instance (``known``; an executed schedule given as ``incumbent``
is also the warm start): an optimum or a bound below one is re-solved without presolve and
otherwise reported ``"suspect"``. The model is :mod:`psched.offline.formulation`; every solution
is decoded here, checked by :func:`psched.core.checker.check_plan`, and its utility recomputed
from the decoded schedule (with the simulator's completion rule: the slot where the cumulative
workers reach ``W``). A pool of identical servers solved as one is placed back by first fit.

References: Y. Bao, Y. Peng, C. Wu, Z. Li, "Online Job Scheduling in Distributed Machine
Learning Clusters", IEEE INFOCOM 2018, problem (1)-(13).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from psched.core.aggregate import pack
from psched.core.checker import check_plan
from psched.core.model import Alloc, Cluster, Job, JobSpec, Pool, resolve_job
from psched.offline.formulation import (
    DEFAULT_FORMULATION,
    WINDOWS,
    Formulation,
    JobColumns,
    MilpModel,
    build_model,
    model_caps,
    trivial_bound,
    window_tail,
)
from psched.offline.milp import Solution, Solver, solve

if TYPE_CHECKING:
    from psched.core.records import AllocationRow

__all__ = [
    "OfflineResult",
    "lp_bound",
    "offline_optimum",
    "pooled_bound",
    "schedule_vector",
    "solve_offline",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class OfflineResult:
    """Outcome of one offline solve (MILP or LP relaxation)."""

    #: "optimal", "time_limit" (best found + bound), "lp" (relaxation) or "suspect" (the
    #: solver contradicted a known feasible utility even without presolve; see psched.offline.milp)
    status: str
    objective: float  #: utility of the best schedule found (0.0 for the LP relaxation)
    bound: float  #: proven upper bound on the optimum (= objective when optimal, up to gap)
    gap: float  #: (bound - objective) / max(bound, 1e-9); 0 when proven optimal
    solve_s: float  #: wall time of the solver call, seconds
    cpu_s: float = 0.0  #: CPU time of the solver call, seconds
    n_vars: int  #: variables of the model
    n_cons: int  #: constraint rows of the model
    window: str  #: "job" or "horizon"
    retried: bool = False  #: the guard solved it again without presolve
    completion: dict[str, int] = field(default_factory=dict)  #: completed jobs' last slot
    utility: dict[str, float] = field(default_factory=dict)  #: per completed job, f(d)
    schedule: dict[str, dict[int, Alloc]] = field(default_factory=dict, repr=False)
    """The best schedule found, job -> slot -> allocation (empty for the LP relaxation)."""


def _place(per_job: dict[str, np.ndarray], jobs: dict[str, Job], cap: np.ndarray,
           idx: np.ndarray, ps: bool) -> dict[str, dict[int, int]]:
    """Counts per job (one entry per modelled server) onto the pool's real servers."""
    if idx.size == next(iter(per_job.values())).size:
        return {j: {int(idx[h]): int(n) for h, n in enumerate(v)} for j, v in per_job.items()}
    demand = {j: (jobs[j].spec.ps_demand if ps else jobs[j].spec.worker_demand).as_array()
              for j in per_job}
    placed = pack(cap[0], idx.size, {j: (demand[j], int(v.sum())) for j, v in per_job.items()})
    return {str(j): {int(idx[h]): int(n) for h, n in enumerate(v)} for j, v in placed.items()}


def _decode(model: MilpModel, xv: np.ndarray, jobs: Sequence[Job], cluster: Cluster,
            wi: np.ndarray, ki: np.ndarray) -> tuple[dict[str, dict[int, Alloc]],
                                                     dict[str, int], dict[str, float]]:
    """Schedule of a MILP solution, cut at each job's completion, placed on the servers (first
    fit where a pool was aggregated) and checked slot by slot."""
    n_h, n_k = model.n_h, model.n_k
    counts: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}  # slot -> job -> (y, z)
    done: dict[str, int] = {}
    util: dict[str, float] = {}
    for job, jc in zip(jobs, model.cols, strict=True):
        total, plan = 0, {}
        for j, t in enumerate(jc.slots):
            if total >= job.work:
                break
            y = np.rint(xv[jc.y0 + j * n_h: jc.y0 + (j + 1) * n_h]).astype(int)
            z = np.rint(xv[jc.z0 + j * n_k: jc.z0 + (j + 1) * n_k]).astype(int)
            if y.sum() == 0:
                continue
            plan[t] = (y, z)
            total += int(y.sum())
            if total >= job.work:
                done[job.job_id] = t
        if job.job_id in done:
            for t, yz in plan.items():
                counts.setdefault(t, {})[job.job_id] = yz
            util[job.job_id] = job.utility_at(done[job.job_id] - job.arrival + 1)
    by_id = {j.job_id: j for j in jobs}
    cap = cluster.capacity
    sched: dict[str, dict[int, Alloc]] = {j: {} for j in done}
    for t in sorted(counts):
        ys = _place({jid: yz[0] for jid, yz in counts[t].items()}, by_id, cap[wi], wi, ps=False)
        zs = _place({jid: yz[1] for jid, yz in counts[t].items()}, by_id, cap[ki], ki, ps=True)
        plan_t = {jid: Alloc.of(ys[jid], zs[jid]) for jid in counts[t]}
        check_plan(t, plan_t, cluster, {jid: by_id[jid] for jid in plan_t})
        for jid, a in plan_t.items():
            sched[jid][t] = a
    return sched, done, util


def _job_vector(xv: np.ndarray, jc: JobColumns, done_t: int,
                usage: dict[tuple[int, str, int], int], pos: dict[str, np.ndarray],
                n_h: int, n_k: int) -> None:
    """Write one completed job's columns: ``x``, ``c``, ``d``, ``y``, ``z``, ``w``."""
    end = done_t - jc.slots.start
    xv[jc.x] = 1.0
    xv[jc.c0 + end] = 1.0
    if jc.d0 >= 0:
        xv[jc.d0: jc.d0 + end + 1] = 1.0
    work = 0.0
    for j, t in enumerate(jc.slots[: end + 1]):
        for (tt, role, srv), n in usage.items():
            if tt != t:
                continue
            base, width = (jc.y0, n_h) if role == "worker" else (jc.z0, n_k)
            xv[base + j * width + int(pos[role][srv])] += n
        work += float(xv[jc.y0 + j * n_h: jc.y0 + (j + 1) * n_h].sum())
        if jc.w0 >= 0:
            xv[jc.w0 + j: jc.w0 + len(jc.slots)] = work  # no work after the completion


def schedule_vector(model: MilpModel, jobs: Sequence[Job], cluster: Cluster,
                    allocations: Iterable[AllocationRow]) -> np.ndarray:
    """An executed schedule (``RunResult.allocations``) as a point of the model.

    Jobs that complete inside their modelled slots keep their allocations through their
    completion slot; the others are dropped (``x = 0``; dropping work only frees room). The
    point is feasible whenever the schedule is (tested for every policy); its value is the
    schedule's utility over the modelled jobs. O(rows of the schedule x slots).
    """
    wi, ki = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    pos = {"worker": np.zeros(len(cluster.servers), dtype=np.int64),
           "ps": np.zeros(len(cluster.servers), dtype=np.int64)}
    if model.n_h == wi.size:  # else aggregated: every server is column 0
        pos["worker"][wi] = np.arange(wi.size)
    if model.n_k == ki.size:
        pos["ps"][ki] = np.arange(ki.size)
    per_job: dict[str, dict[tuple[int, str, int], int]] = {}
    for t, jid, srv, role, n in allocations:
        key = (int(t), role, int(srv))
        use = per_job.setdefault(jid, {})
        use[key] = use.get(key, 0) + int(n)
    xv = np.zeros(model.problem.n_cols)
    for job, jc in zip(jobs, model.cols, strict=True):
        use = per_job.get(job.job_id, {})
        slot_work: dict[int, int] = {}
        for (t, role, _srv), n in use.items():
            if role == "worker":
                slot_work[t] = slot_work.get(t, 0) + n
        total, done_t = 0, None
        for t in sorted(slot_work):
            total += slot_work[t]
            if total >= job.work:
                done_t = t
                break
        if done_t is None or done_t not in jc.slots:
            continue  # not completed within the modelled slots: dropped
        _job_vector(xv, jc, done_t, use, pos, model.n_h, model.n_k)
    return xv


def _solve_model(model: MilpModel, *, known: float, start: np.ndarray | None,
                 time_limit: float, rel_gap: float, presolve: bool,
                 solver: Solver | None) -> Solution:
    return solve(model.problem, time_limit_s=time_limit, mip_rel_gap=rel_gap,
                 presolve=presolve, start=start, known=-known, solver=solver)


def solve_offline(jobs: Sequence[Job], cluster: Cluster, horizon: int, *,
                  window: str = "job", time_limit: float = 60.0, rel_gap: float = 1e-7,
                  known: float = 0.0, incumbent: Iterable[AllocationRow] | None = None,
                  presolve: bool = True, formulation: Formulation | None = None,
                  solver: Solver | None = None) -> OfflineResult:
    """The offline optimum of (1)-(13) over resolved ``jobs`` by MILP (HiGHS branch and cut).

    Parameters
    ----------
    jobs : resolved jobs (:func:`psched.core.model.resolve_job` against ``horizon``).
    cluster : the servers (two pools).
    horizon : slots ``0..horizon-1``.
    window : ``"job"`` (each job's window, as OASiS) or ``"horizon"`` (every slot to ``T-1``).
    time_limit : seconds; on expiry the best schedule found and the best bound are returned.
    rel_gap : relative optimality gap at which HiGHS stops (default 1e-7: proven optimal).
    known : a utility some feasible schedule of the modelled jobs reaches (e.g. the best
        policy's, less the window tail); an "optimum" or bound below it is refused
        (:func:`psched.offline.milp.solve`: re-solved without presolve, else status ``"suspect"``).
    incumbent : an executed schedule (``RunResult.allocations``) to start from
        (:func:`schedule_vector`); its value also counts as known.
    presolve : HiGHS presolve (on by default; the guard turns it off when it misleads).
    formulation : optional strengthenings (:class:`Formulation`).
    solver : the :data:`psched.offline.milp.Solver` (HiGHS through highspy by default).

    Returns
    -------
    OfflineResult
        ``objective`` is recomputed from the decoded, checked schedule.

    Raises
    ------
    ValueError
        Unknown ``window``.
    RuntimeError
        The solver failed (no status a schedule can be read from).
    """
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    form = formulation or DEFAULT_FORMULATION
    cap_w, cap_p, wi, ki = model_caps(jobs, cluster, form)
    model = build_model(jobs, cap_w, cap_p, horizon, window, form)
    start = None if incumbent is None else schedule_vector(model, jobs, cluster, incumbent)
    if start is not None and not model.problem.feasible(start):
        log.warning("offline: the incumbent schedule is not a point of the model (violation "
                    "%.3g); not used", model.problem.violation(start))
        start = None
    sol = _solve_model(model, known=known, start=start, time_limit=time_limit,
                       rel_gap=rel_gap, presolve=presolve, solver=solver)
    if sol.status in ("infeasible", "error"):
        raise RuntimeError(f"offline MILP failed: {sol.status}")
    sched, done, util = ({}, {}, {}) if sol.x is None else _decode(model, sol.x, jobs, cluster,
                                                                    wi, ki)
    obj = float(sum(util.values()))
    bound = min(-sol.dual_bound if math.isfinite(sol.dual_bound) else math.inf,
                trivial_bound(model))
    if sol.status == "optimal":
        bound = max(bound, obj) if np.isfinite(bound) else obj
    gap = max(0.0, (bound - obj) / max(bound, 1e-9)) if np.isfinite(bound) else math.inf
    status = sol.status if sol.status in ("optimal", "suspect") else "time_limit"
    log.debug("offline MILP: %s obj=%.6g bound=%.6g in %.2fs", status, obj, bound, sol.solve_s)
    return OfflineResult(status=status, objective=obj, bound=bound, gap=gap,
                         solve_s=sol.solve_s, cpu_s=sol.cpu_s, n_vars=model.problem.n_cols,
                         n_cons=model.problem.n_rows, window=window, retried=sol.retried,
                         completion=done, utility=util, schedule=sched)


def lp_bound(jobs: Sequence[Job], cluster: Cluster, horizon: int, *, window: str = "job",
             pooled: bool = False, known: float = 0.0, presolve: bool = True,
             formulation: Formulation | None = None,
             solver: Solver | None = None) -> OfflineResult:
    """Upper bound on the offline optimum: the LP relaxation of :func:`solve_offline`'s model.

    ``pooled=True`` further merges each pool into one server with the summed capacity (a
    relaxation of the relaxation, still an upper bound) so that instances far too large for
    the MILP -- hundreds of jobs and servers -- stay a small LP: ``sum_i |window_i| * 4``
    variables and as many rows plus ``T * 2R`` capacity rows. ``known`` is guarded as in
    :func:`solve_offline`: a bound below a feasible utility is refused (status ``"suspect"``
    when a re-solve without presolve does not clear it).

    Complexity: one LP (HiGHS, simplex or IPM), polynomial.
    """
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    form = formulation or DEFAULT_FORMULATION
    cap_w, cap_p, _, _ = model_caps(jobs, cluster, form)
    if pooled:
        cap_w, cap_p = cap_w.sum(axis=0, keepdims=True), cap_p.sum(axis=0, keepdims=True)
    model = build_model(jobs, cap_w, cap_p, horizon, window, form)
    sol = solve(model.problem.relaxed(), presolve=presolve, known=-known, solver=solver)
    if sol.status not in ("optimal", "suspect"):
        raise RuntimeError(f"offline LP failed: {sol.status}")
    return OfflineResult(status="lp" if sol.status == "optimal" else "suspect", objective=0.0,
                         bound=-sol.objective, gap=math.inf, solve_s=sol.solve_s,
                         cpu_s=sol.cpu_s, n_vars=model.problem.n_cols,
                         n_cons=model.problem.n_rows, window=window, retried=sol.retried)


def offline_optimum(specs: Sequence[JobSpec], cluster: Cluster, horizon: int, *,
                    max_window: int | None = None, window: str = "job",
                    time_limit: float = 60.0, known: float = 0.0) -> OfflineResult:
    """:func:`solve_offline` on specs, resolved as the simulator resolves them."""
    jobs = [resolve_job(s, cluster.slot_seconds, horizon, max_window) for s in specs]
    return solve_offline([j for j in jobs if j.window > 0], cluster, horizon, window=window,
                         time_limit=time_limit, known=known)


def pooled_bound(specs: Sequence[JobSpec], cluster: Cluster, horizon: int, *,
                 utilities: Mapping[str, float], max_window: int | None = None
                 ) -> dict[str, Any]:
    """The pooled LP bound of a whole run, for ``summary.json`` (``psched simulate --bound lp``).

    ``bound = lp + tail`` bounds the utility of every schedule (a job finishing past its window
    earns at most ``f(window + 1)``, :func:`window_tail`); ``utilities`` (every policy's total)
    are the known feasible values the guard holds the LP against.

    Returns
    -------
    dict
        ``bound``, ``lp``, ``tail``, ``status`` ("lp" or "suspect"), ``solve_s``, ``cpu_s``,
        ``n_vars``, ``best_policy`` and ``best_over_bound``.
    """
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon, max_window)
                        for s in specs) if j.window > 0]
    tail = window_tail(jobs, horizon)
    best = max(utilities, key=lambda k: utilities[k]) if utilities else None
    known = utilities[best] - tail if best is not None else 0.0
    res = lp_bound(jobs, cluster, horizon, pooled=True, known=known)
    bound = res.bound + tail
    return {"kind": "lp_pooled", "bound": bound, "lp": res.bound, "tail": tail,
            "status": res.status, "solve_s": res.solve_s, "cpu_s": res.cpu_s,
            "n_vars": res.n_vars, "best_policy": best,
            "best_over_bound": utilities[best] / bound if best is not None and bound > 0
            else None}
