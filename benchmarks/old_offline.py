"""FROZEN COPY of psched/offline.py as of a018e5a (scipy.optimize.milp, HiGHS 1.12), kept only so
that benchmarks/bench_offline.py can run the previous path beside the new one in one run.
Not used by psched; do not edit.

The exact offline optimum of problem (1)-(13) as a MILP (HiGHS), and its LP relaxation bound.

The work model is the one of ``oasis.md`` section 7, the same as OASiS's, so the two compare
soundly. For every job ``i`` (arrival ``a``, work ``W`` worker-slots, at most ``N`` workers) and
every slot ``t`` of its window ``a..e`` (``e = Job.last_slot`` by default, exactly the slots
OASiS may use; ``window="horizon"`` lets every job use every slot up to ``T - 1``):

=====================  ==================================================================
variable               meaning
=====================  ==================================================================
``x_i`` in {0, 1}      admitted (and completed)
``c_it`` in {0, 1}     job ``i`` completes in slot ``t``; ``sum_t c_it = x_i``
``y_iht`` in Z>=0      workers of ``i`` on worker server ``h`` in slot ``t``
``z_ikt`` in Z>=0      PS of ``i`` on PS server ``k`` in slot ``t``
=====================  ==================================================================

    max  sum_i sum_t f_i(t - a + 1) c_it
    sum_h y_iht <= N_i sum_{t' >= t} c_it'          workers only up to the completion slot
    sum_t sum_h y_iht >= W_i x_i                    work covered by the completion slot
    sum_k z_ikt <= sum_h y_iht                      PS <= workers
    sum_k z_ikt >= (b_i/B_i) sum_h y_iht - delta_i  PS >= ceil(b/B workers)  (see below)
    sum_i w_i^r y_iht <= c_h^r,  sum_i s_i^r z_ikt <= c_k^r     capacities, per server

Exactness. A MILP solution is a schedule whose real completion slot is at or before the ``t``
with ``c_it = 1`` (its work is covered by then and it has no workers after); ``f`` is
non-increasing, so its real utility is at least the objective, and every feasible schedule is
a MILP solution with ``c`` at its completion slot: the optimum is the offline optimum. The PS
rule ``z >= ceil_eps(r n)`` (:func:`psched.core.model.ceil_eps`, ``r = b/B``) is linearised without
float doubt: for integer ``z`` it equals ``z >= r n - delta`` for every ``delta`` in
``[max_n (r n - p_n), min_n (r n - p_n + 1))`` with ``p_n = ceil_eps(r n)``, ``n = 0..N``; the
midpoint of that interval is used, so the solver's feasibility tolerance cannot flip a count.
Every solution is decoded, checked by :func:`psched.core.checker.check_plan`, and its utility
recomputed from the decoded schedule (with the simulator's completion rule: the slot where the
cumulative workers reach ``W``).

Windows. ``window="job"`` is the schedule set OASiS searches; a schedule finishing after its
window earns at most ``f(window + 1)`` (``f`` is non-increasing, and the window ends where
``f`` fell below 1e-6 of its maximum), so the horizon optimum is at most the window optimum plus
:func:`window_tail` -- the term OASiS's dual certificate adds for the same reason.

Complexity: ``sum_i |window_i| (H + K + 1)`` integer variables and as many constraints plus
``T (H + K) R`` capacity rows; branch and bound is exponential in the worst case (Fig. 5
instances, 10 jobs x 10 slots x 12 servers, solve in well under a second to a few seconds).

References: Y. Bao, Y. Peng, C. Wu, Z. Li, "Online Job Scheduling in Distributed Machine
Learning Clusters", IEEE INFOCOM 2018, problem (1)-(13).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from psched.core.checker import check_plan
from psched.core.model import Alloc, Cluster, Job, JobSpec, Pool, ceil_eps, resolve_job

__all__ = [
    "OfflineResult",
    "lp_bound",
    "offline_optimum",
    "ps_slack",
    "solve_offline",
    "window_tail",
]

log = logging.getLogger(__name__)

_WINDOWS = ("job", "horizon")


@dataclass(frozen=True, kw_only=True)
class OfflineResult:
    """Outcome of one offline solve (MILP or LP relaxation)."""

    status: str  #: "optimal", "time_limit" (best found + bound) or "lp" (relaxation)
    objective: float  #: utility of the best schedule found (0.0 for the LP relaxation)
    bound: float  #: proven upper bound on the optimum (= objective when optimal, up to gap)
    gap: float  #: (bound - objective) / max(bound, 1e-9); 0 when proven optimal
    solve_s: float  #: wall time of the solver call, seconds
    n_vars: int  #: variables of the model
    n_cons: int  #: constraint rows of the model
    window: str  #: "job" or "horizon"
    completion: dict[str, int] = field(default_factory=dict)  #: completed jobs' last slot
    utility: dict[str, float] = field(default_factory=dict)  #: per completed job, f(d)
    schedule: dict[str, dict[int, Alloc]] = field(default_factory=dict, repr=False)
    """The best schedule found, job -> slot -> allocation (empty for the LP relaxation)."""


def ps_slack(ratio: float, max_workers: int) -> float:
    """``delta`` making ``z >= ratio n - delta`` equal ``z >= ceil_eps(ratio n)`` for integers.

    Returns the midpoint of ``[max_n (r n - p_n), min_n (r n - p_n + 1))``, ``n = 0..N``.
    """
    n = np.arange(max_workers + 1)
    rn = ratio * n
    p = np.array([ceil_eps(float(v)) for v in rn])
    lo, hi = float(np.max(rn - p)), float(np.min(rn - p + 1.0))
    if not lo < hi:  # cannot happen: every r n - p_n lies in [-1e-9 .. 1e-9 + 0] + (-1, 0]
        raise ValueError(f"no exact PS slack for ratio {ratio!r}, N = {max_workers}")
    return 0.5 * (lo + hi)


def window_tail(jobs: Sequence[Job], horizon: int) -> float:
    """Most that schedules past the windows can add to the optimum (see the module doc).

    ``sum_i f_i(window_i + 1)`` over the jobs whose window ends before the horizon's last slot;
    a window cut by the horizon excludes nothing, since a job unfinished at the horizon earns 0.
    """
    return float(sum(j.utility_at(j.window + 1) for j in jobs
                     if j.window > 0 and j.last_slot < horizon - 1))


def _slots(job: Job, horizon: int, window: str) -> range:
    end = job.last_slot if window == "job" else horizon - 1
    return range(job.arrival, min(end, horizon - 1) + 1)


@dataclass(frozen=True, kw_only=True)
class _Model:
    c: np.ndarray  # objective (minimise -utility)
    a: coo_array  # constraint matrix
    lo: np.ndarray  # row lower bounds
    hi: np.ndarray  # row upper bounds
    ub: np.ndarray  # variable upper bounds
    cols: list[tuple[int, int, int, int, range]]  # per job: x col, c0, y0, z0, slots


def _build(jobs: Sequence[Job], cap_w: np.ndarray, cap_p: np.ndarray, horizon: int,
           window: str) -> _Model:
    """Assemble the MILP; ``cap_w`` (H x R) and ``cap_p`` (K x R) are the server capacities."""
    n_h, n_k = cap_w.shape[0], cap_p.shape[0]
    obj: list[float] = []
    ub: list[float] = []
    rows: list[int] = []
    cols_: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    cols: list[tuple[int, int, int, int, range]] = []
    # capacity rows: (pool, slot, server, resource) -> list of (col, demand)
    cap_terms: dict[tuple[int, int, int, int], list[tuple[int, float]]] = {}

    def row(entries: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lo)
        for col, v in entries:
            rows.append(r)
            cols_.append(col)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    for job in jobs:
        slots = _slots(job, horizon, window)
        n_s, n_max = len(slots), job.max_workers
        w_dem, s_dem = job.spec.worker_demand.as_array(), job.spec.ps_demand.as_array()
        x = len(obj)
        c0, y0 = x + 1, x + 1 + n_s
        z0 = y0 + n_s * n_h
        first_done = job.arrival + job.fastest - 1  # no completion before the fastest duration
        obj.append(0.0)
        ub.append(1.0)
        for t in slots:
            obj.append(-job.utility_at(t - job.arrival + 1))
            ub.append(1.0 if t >= first_done else 0.0)
        for dem, cap, n_srv in ((w_dem, cap_w, n_h), (s_dem, cap_p, n_k)):
            per = np.array([math.floor(min((cap[h, r] + 1e-9) / dem[r]
                                           for r in range(dem.size) if dem[r] > 0)
                                       if np.any(dem > 0) else n_max) for h in range(n_srv)])
            limit = np.minimum(per, n_max).astype(float)
            for _ in slots:
                obj.extend([0.0] * n_srv)
                ub.extend(limit.tolist())
        cols.append((x, c0, y0, z0, slots))
        if n_s == 0:
            row([(x, 1.0)], 0.0, 0.0)
            continue
        row([(c0 + j, 1.0) for j in range(n_s)] + [(x, -1.0)], 0.0, 0.0)
        ratio, delta = job.spec.ps_ratio, ps_slack(job.spec.ps_ratio, n_max)
        work: list[tuple[int, float]] = [(x, -float(job.work))]
        for j, t in enumerate(slots):
            ys = [y0 + j * n_h + h for h in range(n_h)]
            zs = [z0 + j * n_k + k for k in range(n_k)]
            work += [(v, 1.0) for v in ys]
            row([(v, 1.0) for v in ys] + [(c0 + jj, -float(n_max)) for jj in range(j, n_s)],
                -np.inf, 0.0)
            row([(v, 1.0) for v in zs] + [(v, -1.0) for v in ys], -np.inf, 0.0)
            row([(v, 1.0) for v in zs] + [(v, -ratio) for v in ys], -delta, np.inf)
            for pool, dem, vs in ((0, w_dem, ys), (1, s_dem, zs)):
                for srv, v in enumerate(vs):
                    for r in np.nonzero(dem > 0)[0]:
                        cap_terms.setdefault((pool, t, srv, int(r)), []).append(
                            (v, float(dem[r])))
        row(work, 0.0, np.inf)
    for (pool, _t, srv, r), terms in cap_terms.items():
        cap = (cap_w if pool == 0 else cap_p)[srv, r]
        if len(terms) > 1:  # a single term is already bounded by its variable's upper bound
            row(terms, -np.inf, float(cap))
    a = coo_array((vals, (rows, cols_)), shape=(len(lo), len(obj)))
    return _Model(c=np.array(obj), a=a, lo=np.array(lo), hi=np.array(hi), ub=np.array(ub),
                  cols=cols)


def _trivial_bound(model: _Model) -> float:
    """``sum_i max_t f_i``: each job completes at most once (a bound with no solve at all)."""
    total = 0.0
    for _, c0, _, _, slots in model.cols:
        ends = -model.c[c0:c0 + len(slots)][model.ub[c0:c0 + len(slots)] > 0]
        total += float(max(0.0, ends.max())) if ends.size else 0.0
    return total


def _pool_caps(cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    cap = cluster.capacity
    wi, ki = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    return cap[wi], cap[ki], wi, ki


def _decode(model: _Model, xv: np.ndarray, jobs: Sequence[Job], cluster: Cluster,
            wi: np.ndarray, ki: np.ndarray) -> tuple[dict[str, dict[int, Alloc]],
                                                     dict[str, int], dict[str, float]]:
    """Schedule of a MILP solution, cut at each job's completion, checked slot by slot."""
    n_h, n_k = wi.size, ki.size
    sched: dict[str, dict[int, Alloc]] = {}
    done: dict[str, int] = {}
    util: dict[str, float] = {}
    for job, (_x, _c0, y0, z0, slots) in zip(jobs, model.cols, strict=True):
        total, plan = 0, {}
        for j, t in enumerate(slots):
            if total >= job.work:
                break
            y = np.rint(xv[y0 + j * n_h: y0 + (j + 1) * n_h]).astype(int)
            z = np.rint(xv[z0 + j * n_k: z0 + (j + 1) * n_k]).astype(int)
            if y.sum() == 0:
                continue
            plan[t] = Alloc.of({int(wi[h]): int(n) for h, n in enumerate(y)},
                               {int(ki[k]): int(n) for k, n in enumerate(z)})
            total += int(y.sum())
            if total >= job.work:
                done[job.job_id] = t
        if job.job_id in done:
            sched[job.job_id] = plan
            util[job.job_id] = job.utility_at(done[job.job_id] - job.arrival + 1)
    by_id = {j.job_id: j for j in jobs}
    for t in sorted({t for p in sched.values() for t in p}):
        plan_t = {jid: p[t] for jid, p in sched.items() if t in p}
        check_plan(t, plan_t, cluster, {jid: by_id[jid] for jid in plan_t})
    return sched, done, util


def solve_offline(jobs: Sequence[Job], cluster: Cluster, horizon: int, *,
                  window: str = "job", time_limit: float = 60.0,
                  rel_gap: float = 1e-7) -> OfflineResult:
    """The offline optimum of (1)-(13) over resolved ``jobs`` by MILP (HiGHS branch and cut).

    Parameters
    ----------
    jobs : resolved jobs (:func:`psched.core.model.resolve_job` against ``horizon``).
    cluster : the servers (two pools).
    horizon : slots ``0..horizon-1``.
    window : ``"job"`` (each job's window, as OASiS) or ``"horizon"`` (every slot to ``T-1``).
    time_limit : seconds; on expiry the best schedule found and the best bound are returned.
    rel_gap : relative optimality gap at which HiGHS stops (default 1e-7: proven optimal).

    Returns
    -------
    OfflineResult
        ``objective`` is recomputed from the decoded, checked schedule.
    """
    if window not in _WINDOWS:
        raise ValueError(f"window must be one of {_WINDOWS}, got {window!r}")
    cap_w, cap_p, wi, ki = _pool_caps(cluster)
    model = _build(jobs, cap_w, cap_p, horizon, window)
    t0 = time.perf_counter()
    res = milp(model.c, integrality=np.ones_like(model.c),
               bounds=Bounds(np.zeros_like(model.ub), model.ub),
               constraints=LinearConstraint(model.a.tocsr(), model.lo, model.hi),
               options={"time_limit": float(time_limit), "mip_rel_gap": float(rel_gap),
                        "disp": False})
    solve_s = time.perf_counter() - t0
    if res.status not in (0, 1):
        raise RuntimeError(f"offline MILP failed: {res.message}")
    if res.x is None:  # time limit before any incumbent: the empty schedule is feasible
        sched, done, util = {}, {}, {}
    else:
        sched, done, util = _decode(model, res.x, jobs, cluster, wi, ki)
    obj = float(sum(util.values()))
    dual = getattr(res, "mip_dual_bound", None)
    bound = -float(dual) if dual is not None and np.isfinite(dual) else math.inf
    bound = min(bound, _trivial_bound(model))
    if res.status == 0:
        bound = max(bound, obj) if np.isfinite(bound) else obj
    gap = max(0.0, (bound - obj) / max(bound, 1e-9)) if np.isfinite(bound) else math.inf
    status = "optimal" if res.status == 0 else "time_limit"
    log.debug("offline MILP: %s obj=%.6g bound=%.6g in %.2fs", status, obj, bound, solve_s)
    return OfflineResult(status=status, objective=obj, bound=bound, gap=gap, solve_s=solve_s,
                         n_vars=int(model.c.size), n_cons=int(model.lo.size), window=window,
                         completion=done, utility=util, schedule=sched)


def lp_bound(jobs: Sequence[Job], cluster: Cluster, horizon: int, *, window: str = "job",
             pooled: bool = False) -> OfflineResult:
    """Upper bound on the offline optimum: the LP relaxation of :func:`solve_offline`'s model.

    ``pooled=True`` further merges each pool into one server with the summed capacity (a
    relaxation of the relaxation, still an upper bound) so that instances far too large for
    the MILP -- hundreds of jobs and servers -- stay a small LP: ``sum_i |window_i| * 3``
    variables and ``T * 2R`` capacity rows.

    Complexity: one LP (HiGHS, simplex or IPM), polynomial.
    """
    if window not in _WINDOWS:
        raise ValueError(f"window must be one of {_WINDOWS}, got {window!r}")
    cap_w, cap_p, _, _ = _pool_caps(cluster)
    if pooled:
        cap_w, cap_p = cap_w.sum(axis=0, keepdims=True), cap_p.sum(axis=0, keepdims=True)
    model = _build(jobs, cap_w, cap_p, horizon, window)
    t0 = time.perf_counter()
    res = milp(model.c, integrality=np.zeros_like(model.c),
               bounds=Bounds(np.zeros_like(model.ub), model.ub),
               constraints=LinearConstraint(model.a.tocsr(), model.lo, model.hi),
               options={"disp": False})
    solve_s = time.perf_counter() - t0
    if res.status != 0:
        raise RuntimeError(f"offline LP failed: {res.message}")
    bound = -float(res.fun)
    return OfflineResult(status="lp", objective=0.0, bound=bound, gap=math.inf,
                         solve_s=solve_s, n_vars=int(model.c.size), n_cons=int(model.lo.size),
                         window=window)


def offline_optimum(specs: Sequence[JobSpec], cluster: Cluster, horizon: int, *,
                    max_window: int | None = None, window: str = "job",
                    time_limit: float = 60.0) -> OfflineResult:
    """:func:`solve_offline` on specs, resolved as the simulator resolves them."""
    jobs = [resolve_job(s, cluster.slot_seconds, horizon, max_window) for s in specs]
    return solve_offline([j for j in jobs if j.window > 0], cluster, horizon, window=window,
                         time_limit=time_limit)
