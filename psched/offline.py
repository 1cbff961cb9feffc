"""The exact offline optimum of problem (1)-(13) as a MILP, and its LP relaxation bound.

Solved with HiGHS >= 1.16 through :mod:`psched.milp`, which holds every answer against the
feasible values known for the instance (``known``; an executed schedule given as ``incumbent``
is also the warm start): an optimum or a bound below one is re-solved without presolve and
otherwise reported ``"suspect"``.

The work model is the one of ``oasis.md`` section 7, the same as OASiS's, so the two compare
soundly. For every job ``i`` (arrival ``a``, work ``W`` worker-slots, at most ``N`` workers) and
every slot ``t`` of its window ``a..e`` (``e = Job.last_slot`` by default, exactly the slots
OASiS may use; ``window="horizon"`` lets every job use every slot up to ``T - 1``):

=====================  ==================================================================
variable               meaning
=====================  ==================================================================
``x_i`` in {0, 1}      admitted (and completed)
``c_it`` in {0, 1}     job ``i`` completes in slot ``t``; ``sum_t c_it = x_i``
``d_it`` in [0, 1]     alive: ``d_it = sum_{t' >= t} c_it'`` (one row per slot)
``y_iht`` in Z>=0      workers of ``i`` on worker server ``h`` in slot ``t``
``z_ikt`` in Z>=0      PS of ``i`` on PS server ``k`` in slot ``t``
=====================  ==================================================================

    max  sum_i sum_t f_i(t - a + 1) c_it
    sum_h y_iht <= N_i d_it                         workers only up to the completion slot
    sum_t sum_h y_iht >= W_i x_i                    work covered by the completion slot
    sum_k z_ikt <= sum_h y_iht                      PS <= workers
    sum_k z_ikt >= (b_i/B_i) sum_h y_iht - delta_i  PS >= ceil(b/B workers)  (see below)
    sum_i w_i^r y_iht <= c_h^r,  sum_i s_i^r z_ikt <= c_k^r     capacities, per server

Exactness. A MILP solution is a schedule whose real completion slot is at or before the ``t``
with ``c_it = 1`` (its work is covered by then and it has no workers after); ``f`` is
non-increasing, so its real utility is at least the objective, and every feasible schedule is
a MILP solution with ``c`` at its completion slot: the optimum is the offline optimum. The PS
rule ``z >= ceil_eps(r n)`` (:func:`psched.model.ceil_eps`, ``r = b/B``) is linearised without
float doubt: for integer ``z`` it equals ``z >= r n - delta`` for every ``delta`` in
``[max_n (r n - p_n), min_n (r n - p_n + 1))`` with ``p_n = ceil_eps(r n)``, ``n = 0..N``; the
midpoint of that interval is used, so the solver's feasibility tolerance cannot flip a count.
Every solution is decoded, checked by :func:`psched.checker.check_plan`, and its utility
recomputed from the decoded schedule (with the simulator's completion rule: the slot where the
cumulative workers reach ``W``).

Windows. ``window="job"`` is the schedule set OASiS searches; a schedule finishing after its
window earns at most ``f(window + 1)`` (``f`` is non-increasing; by default the window ends
where ``f`` fell below 1e-6 of its maximum or at the horizon, ``oasis.md`` section 7), so the
horizon optimum is at most the window optimum plus :func:`window_tail` -- the term OASiS's dual
certificate adds for the same reason. It is 0 when every window reaches the horizon.

Servers. A pool of identical servers is one server of the summed capacity where that is exact
(:mod:`psched.aggregate`: the Fig. 5 worker pool); the decoded schedule is placed back by first
fit. :class:`Formulation` switches this and two optional strengthenings (each measured alone
in ``BENCHMARKS.md``).

Complexity: ``sum_i |window_i| (H + K + 2)`` variables and as many constraints plus
``T (H + K) R`` capacity rows (``H = 1`` when aggregated); branch and bound is exponential in
the worst case (Fig. 5 instances, 10 jobs x 10 slots x 12 servers: a fraction of a second to a
few seconds, ``BENCHMARKS.md``).

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

from psched.aggregate import exact_aggregate, pack
from psched.checker import check_plan
from psched.milp import Problem, Rows, Solution, Solver, solve
from psched.model import Alloc, Cluster, Job, JobSpec, Pool, ceil_eps, resolve_job

if TYPE_CHECKING:
    from psched.simulator import AllocationRow

__all__ = [
    "DEFAULT_FORMULATION",
    "Formulation",
    "OfflineResult",
    "lp_bound",
    "offline_optimum",
    "pooled_bound",
    "ps_slack",
    "schedule_vector",
    "solve_offline",
    "window_tail",
]

log = logging.getLogger(__name__)

_WINDOWS = ("job", "horizon")


@dataclass(frozen=True, kw_only=True)
class OfflineResult:
    """Outcome of one offline solve (MILP or LP relaxation)."""

    #: "optimal", "time_limit" (best found + bound), "lp" (relaxation) or "suspect" (the
    #: solver contradicted a known feasible utility even without presolve; see psched.milp)
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
class _JobCols:
    """Where one job's variables sit in the model's column vector."""

    x: int  #: admitted and completed
    c0: int  #: completion indicators, one per slot of ``slots``
    d0: int  #: alive indicators ``d_t = sum_{t' >= t} c_t'``, one per slot (-1: not modelled)
    y0: int  #: workers, slot-major (``len(slots) x H``)
    z0: int  #: PS, slot-major (``len(slots) x K``)
    w0: int  #: cumulative work through each slot (-1 when not modelled)
    slots: range  #: the slots the job may use


@dataclass(frozen=True, kw_only=True)
class _Model:
    problem: Problem  #: minimise -utility
    cols: list[_JobCols]  #: per job, in the order of ``jobs``
    n_h: int  #: worker servers (or 1, pooled or aggregated)
    n_k: int  #: PS servers (or 1, pooled or aggregated)


@dataclass(frozen=True, kw_only=True)
class Formulation:
    """Optional strengthenings of the model; each keeps the optimum and was measured alone
    (``benchmarks/bench_offline.py formulation``)."""

    #: ``sum_{t' <= t} workers >= W (x - d_{t+1})``: work done by the completion slot, per
    #: slot (the plain model has it only at the window's end); tightens the LP relaxation
    cumulative_work: bool = False
    #: identical servers of a pool ordered by load in every slot (placement within a slot is
    #: free, so one of every permutation class stays)
    symmetry: bool = False
    #: ``d_t`` as variables (``d_t = c_t + d_{t+1}``, linear in the window) rather than each
    #: link row summing ``c_t' , t' >= t`` (quadratic in the window; easier for the simplex)
    alive_vars: bool = False
    #: a pool of identical servers is one server of the summed capacity where that is exact
    #: (:func:`psched.aggregate.exact_aggregate`); schedules are placed back by first fit
    aggregate: bool = True


#: What :func:`solve_offline` and :func:`lp_bound` use unless told otherwise.
DEFAULT_FORMULATION = Formulation()


def _server_limits(dem: np.ndarray, cap: np.ndarray, n_max: int) -> np.ndarray:
    """Most workers (or PS) of one job each server can hold, capped at ``N``."""
    out = []
    for h in range(cap.shape[0]):
        fits = [(cap[h, r] + 1e-9) / dem[r] for r in range(dem.size) if dem[r] > 0]
        out.append(math.floor(min(fits)) if fits else n_max)
    limits: np.ndarray = np.minimum(np.array(out), n_max).astype(float)
    return limits


def _variables(jobs: Sequence[Job], cap_w: np.ndarray, cap_p: np.ndarray, horizon: int,
               window: str, form: Formulation) -> tuple[list[_JobCols], np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """Column layout, objective (-f at each completion slot), upper bounds, integrality."""
    cols: list[_JobCols] = []
    obj: list[np.ndarray] = []
    ub: list[np.ndarray] = []
    integer: list[np.ndarray] = []
    n = 0
    for job in jobs:
        slots = _slots(job, horizon, window)
        n_s, n_h, n_k = len(slots), cap_w.shape[0], cap_p.shape[0]
        n_w = n_s if form.cumulative_work else 0
        n_d = n_s if form.alive_vars else 0
        c0 = n + 1
        y0 = c0 + n_s + n_d
        jc = _JobCols(x=n, c0=c0, d0=c0 + n_s if n_d else -1, y0=y0, z0=y0 + n_s * n_h,
                      w0=y0 + n_s * (n_h + n_k) if n_w else -1, slots=slots)
        first_done = job.arrival + job.fastest - 1  # no completion before the fastest duration
        util = np.array([job.utility_at(t - job.arrival + 1) for t in slots])
        done_ok = np.array([t >= first_done for t in slots], dtype=float)
        lim_y = _server_limits(job.spec.worker_demand.as_array(), cap_w, job.max_workers)
        lim_z = _server_limits(job.spec.ps_demand.as_array(), cap_p, job.max_workers)
        obj.append(np.concatenate([[0.0], -util, np.zeros(n_d + n_s * (n_h + n_k) + n_w)]))
        ub.append(np.concatenate([[1.0], done_ok, np.ones(n_d), np.tile(lim_y, n_s),
                                  np.tile(lim_z, n_s), np.full(n_w, float(job.max_workers * n_s))]))
        integer.append(np.concatenate([np.ones(1 + n_s, bool), np.zeros(n_d, bool),
                                       np.ones(n_s * (n_h + n_k), bool), np.zeros(n_w, bool)]))
        cols.append(jc)
        n += 1 + n_s * (1 + n_h + n_k) + n_d + n_w
    cat = np.concatenate
    return (cols, cat(obj) if obj else np.zeros(0), cat(ub) if ub else np.zeros(0),
            cat(integer) if integer else np.zeros(0, bool))


def _alive(jc: _JobCols, j: int) -> tuple[list[int], list[float]]:
    """The expression ``d`` of slot ``j`` (0-based in the window): 0 past the window."""
    n_s = len(jc.slots)
    if j >= n_s:
        return [], []
    if jc.d0 >= 0:
        return [jc.d0 + j], [1.0]
    return list(range(jc.c0 + j, jc.c0 + n_s)), [1.0] * (n_s - j)


def _completion_rows(rows: Rows, jc: _JobCols) -> None:
    """``sum_t c_t = x``; with alive variables ``d_t = c_t + d_{t+1}`` and ``d_first = x``."""
    n_s = len(jc.slots)
    if n_s == 0:
        rows.add([jc.x], [1.0], 0.0, 0.0)
        return
    if jc.d0 < 0:
        rows.add([*range(jc.c0, jc.c0 + n_s), jc.x], [1.0] * n_s + [-1.0], 0.0, 0.0)
        return
    for j in range(n_s):
        nxt = [jc.d0 + j + 1] if j + 1 < n_s else []
        rows.add([jc.d0 + j, jc.c0 + j, *nxt], [1.0, -1.0] + [-1.0] * len(nxt), 0.0, 0.0)
    rows.add([jc.d0, jc.x], [1.0, -1.0], 0.0, 0.0)


def _worker_rows(rows: Rows, job: Job, jc: _JobCols, n_h: int, n_k: int) -> None:
    """Workers only while alive (``sum_h y_t <= N d_t``); PS ``<=`` workers and ``>=`` the
    ratio (exact linearisation, :func:`ps_slack`)."""
    ratio, delta = job.spec.ps_ratio, ps_slack(job.spec.ps_ratio, job.max_workers)
    for j in range(len(jc.slots)):
        ys = list(range(jc.y0 + j * n_h, jc.y0 + (j + 1) * n_h))
        zs = list(range(jc.z0 + j * n_k, jc.z0 + (j + 1) * n_k))
        dc, dv = _alive(jc, j)
        rows.add([*ys, *dc], [1.0] * n_h + [-float(job.max_workers) * v for v in dv],
                 -np.inf, 0.0)
        rows.add(zs + ys, [1.0] * n_k + [-1.0] * n_h, -np.inf, 0.0)
        rows.add(zs + ys, [1.0] * n_k + [-ratio] * n_h, -delta, np.inf)


def _work_rows(rows: Rows, job: Job, jc: _JobCols, n_h: int, cumulative: bool) -> None:
    """Work covered: ``sum_t sum_h y >= W x``; with ``cumulative``, at every slot
    ``w_t = w_{t-1} + sum_h y_t >= W (x - d_{t+1})``."""
    n_s = len(jc.slots)
    if n_s == 0:
        return
    all_y = list(range(jc.y0, jc.y0 + n_s * n_h))
    rows.add([*all_y, jc.x], [1.0] * len(all_y) + [-float(job.work)], 0.0, np.inf)
    if not cumulative:
        return
    for j in range(n_s):
        ys = list(range(jc.y0 + j * n_h, jc.y0 + (j + 1) * n_h))
        prev = [jc.w0 + j - 1] if j else []
        rows.add([jc.w0 + j, *prev, *ys], [1.0] + [-1.0] * (len(prev) + n_h), 0.0, 0.0)
        if j + 1 < n_s:  # the last slot is the plain work row
            dc, dv = _alive(jc, j + 1)
            rows.add([jc.w0 + j, jc.x, *dc],
                     [1.0, -float(job.work)] + [float(job.work) * v for v in dv], 0.0, np.inf)


def _capacity_rows(rows: Rows, jobs: Sequence[Job], cols: list[_JobCols], cap_w: np.ndarray,
                   cap_p: np.ndarray) -> None:
    """``sum_i w_i^r y_iht <= c_h^r`` and ``sum_i s_i^r z_ikt <= c_k^r``, every server and r."""
    terms: dict[tuple[int, int, int, int], tuple[list[int], list[float]]] = {}
    for job, jc in zip(jobs, cols, strict=True):
        for pool, dem, cap, base in ((0, job.spec.worker_demand.as_array(), cap_w, jc.y0),
                                     (1, job.spec.ps_demand.as_array(), cap_p, jc.z0)):
            n_srv = cap.shape[0]
            for j, t in enumerate(jc.slots):
                for srv in range(n_srv):
                    for r in np.nonzero(dem > 0)[0]:
                        ent = terms.setdefault((pool, t, srv, int(r)), ([], []))
                        ent[0].append(base + j * n_srv + srv)
                        ent[1].append(float(dem[r]))
    for (pool, _t, srv, res), (cs, vs) in terms.items():
        if len(cs) > 1:  # a single term is already bounded by its variable's upper bound
            rows.add(cs, vs, -np.inf, float((cap_w if pool == 0 else cap_p)[srv, res]))


def _symmetry_rows(rows: Rows, cols: list[_JobCols], cap_w: np.ndarray, cap_p: np.ndarray,
                   horizon: int) -> None:
    """In every slot, identical servers of a pool carry non-increasing load
    (``sum_i g_i y_iht >= sum_i g_i y_i,h+1,t`` with ``g_i`` a job's index + 1, so that two
    different loads rarely tie)."""
    for cap, attr in ((cap_w, "y0"), (cap_p, "z0")):
        n_srv = cap.shape[0]
        same = [h for h in range(n_srv - 1) if np.array_equal(cap[h], cap[h + 1])]
        for t in range(horizon):
            for h in same:
                cs: list[int] = []
                vs: list[float] = []
                for i, jc in enumerate(cols):
                    if t in jc.slots:
                        base = getattr(jc, attr) + (t - jc.slots.start) * n_srv
                        cs += [base + h, base + h + 1]
                        vs += [float(i + 1), -float(i + 1)]
                if len(cs) > 2:
                    rows.add(cs, vs, 0.0, np.inf)


def _build(jobs: Sequence[Job], cap_w: np.ndarray, cap_p: np.ndarray, horizon: int,
           window: str, form: Formulation = Formulation()) -> _Model:
    """Assemble the MILP; ``cap_w`` (H x R) and ``cap_p`` (K x R) are the server capacities."""
    n_h, n_k = cap_w.shape[0], cap_p.shape[0]
    cols, obj, ub, integer = _variables(jobs, cap_w, cap_p, horizon, window, form)
    rows = Rows()
    for job, jc in zip(jobs, cols, strict=True):
        _completion_rows(rows, jc)
        _worker_rows(rows, job, jc, n_h, n_k)
        _work_rows(rows, job, jc, n_h, form.cumulative_work)
    _capacity_rows(rows, jobs, cols, cap_w, cap_p)
    if form.symmetry:
        _symmetry_rows(rows, cols, cap_w, cap_p, horizon)
    problem = Problem.of(obj, rows, ub, integer=integer)
    return _Model(problem=problem, cols=cols, n_h=n_h, n_k=n_k)


def _trivial_bound(model: _Model) -> float:
    """``sum_i max_t f_i``: each job completes at most once (a bound with no solve at all)."""
    c, ub = model.problem.c, model.problem.col_hi
    total = 0.0
    for jc in model.cols:
        sl = slice(jc.c0, jc.c0 + len(jc.slots))
        ends = -c[sl][ub[sl] > 0]
        total += float(max(0.0, ends.max())) if ends.size else 0.0
    return total


def _pool_caps(cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    cap = cluster.capacity
    wi, ki = cluster.indices(Pool.WORKER), cluster.indices(Pool.PS)
    return cap[wi], cap[ki], wi, ki


def _model_caps(jobs: Sequence[Job], cluster: Cluster, form: Formulation
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Capacity rows the model uses per pool: the servers', or one summed row where
    aggregation is exact (``form.aggregate``)."""
    cap_w, cap_p, wi, ki = _pool_caps(cluster)
    if form.aggregate:
        if exact_aggregate(cap_w, [j.spec.worker_demand.as_array() for j in jobs]):
            cap_w = cap_w.sum(axis=0, keepdims=True)
        if exact_aggregate(cap_p, [j.spec.ps_demand.as_array() for j in jobs]):
            cap_p = cap_p.sum(axis=0, keepdims=True)
    return cap_w, cap_p, wi, ki


def _place(per_job: dict[str, np.ndarray], jobs: dict[str, Job], cap: np.ndarray,
           idx: np.ndarray, ps: bool) -> dict[str, dict[int, int]]:
    """Counts per job (one entry per modelled server) onto the pool's real servers."""
    if idx.size == next(iter(per_job.values())).size:
        return {j: {int(idx[h]): int(n) for h, n in enumerate(v)} for j, v in per_job.items()}
    demand = {j: (jobs[j].spec.ps_demand if ps else jobs[j].spec.worker_demand).as_array()
              for j in per_job}
    placed = pack(cap[0], idx.size, {j: (demand[j], int(v.sum())) for j, v in per_job.items()})
    return {str(j): {int(idx[h]): int(n) for h, n in enumerate(v)} for j, v in placed.items()}


def _decode(model: _Model, xv: np.ndarray, jobs: Sequence[Job], cluster: Cluster,
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


def _job_vector(xv: np.ndarray, jc: _JobCols, done_t: int,
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


def schedule_vector(model: _Model, jobs: Sequence[Job], cluster: Cluster,
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


def _solve_model(model: _Model, *, known: float, start: np.ndarray | None,
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
    jobs : resolved jobs (:func:`psched.model.resolve_job` against ``horizon``).
    cluster : the servers (two pools).
    horizon : slots ``0..horizon-1``.
    window : ``"job"`` (each job's window, as OASiS) or ``"horizon"`` (every slot to ``T-1``).
    time_limit : seconds; on expiry the best schedule found and the best bound are returned.
    rel_gap : relative optimality gap at which HiGHS stops (default 1e-7: proven optimal).
    known : a utility some feasible schedule of the modelled jobs reaches (e.g. the best
        policy's, less the window tail); an "optimum" or bound below it is refused
        (:func:`psched.milp.solve`: re-solved without presolve, else status ``"suspect"``).
    incumbent : an executed schedule (``RunResult.allocations``) to start from
        (:func:`schedule_vector`); its value also counts as known.
    presolve : HiGHS presolve (on by default; the guard turns it off when it misleads).
    formulation : optional strengthenings (:class:`Formulation`).
    solver : the :data:`psched.milp.Solver` (HiGHS through highspy by default).

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
    if window not in _WINDOWS:
        raise ValueError(f"window must be one of {_WINDOWS}, got {window!r}")
    form = formulation or DEFAULT_FORMULATION
    cap_w, cap_p, wi, ki = _model_caps(jobs, cluster, form)
    model = _build(jobs, cap_w, cap_p, horizon, window, form)
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
                _trivial_bound(model))
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
    if window not in _WINDOWS:
        raise ValueError(f"window must be one of {_WINDOWS}, got {window!r}")
    form = formulation or DEFAULT_FORMULATION
    cap_w, cap_p, _, _ = _model_caps(jobs, cluster, form)
    if pooled:
        cap_w, cap_p = cap_w.sum(axis=0, keepdims=True), cap_p.sum(axis=0, keepdims=True)
    model = _build(jobs, cap_w, cap_p, horizon, window, form)
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
