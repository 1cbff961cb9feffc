"""The offline problem (1)-(13) as a MILP (and its LP relaxation) for HiGHS.

Solved and decoded by :mod:`psched.offline.optimum`.

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
rule ``z >= ceil_eps(r n)`` (:func:`psched.core.model.ceil_eps`, ``r = b/B``) is linearised without
float doubt: for integer ``z`` it equals ``z >= r n - delta`` for every ``delta`` in
``[max_n (r n - p_n), min_n (r n - p_n + 1))`` with ``p_n = ceil_eps(r n)``, ``n = 0..N``; the
midpoint of that interval is used, so the solver's feasibility tolerance cannot flip a count.
Every solution is decoded, checked by :func:`psched.core.checker.check_plan`, and its utility
recomputed from the decoded schedule (with the simulator's completion rule: the slot where the
cumulative workers reach ``W``).

Windows. ``window="job"`` is the schedule set OASiS searches; a schedule finishing after its
window earns at most ``f(window + 1)`` (``f`` is non-increasing; by default the window ends
where ``f`` fell below 1e-6 of its maximum or at the horizon, ``oasis.md`` section 7), so the
horizon optimum is at most the window optimum plus :func:`window_tail` -- the term OASiS's dual
certificate adds for the same reason. It is 0 when every window reaches the horizon.

Servers. A pool of identical servers is one server of the summed capacity where that is exact
(:mod:`psched.core.aggregate`: the Fig. 5 worker pool); the decoded schedule is placed back by first
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

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from psched.core.aggregate import exact_aggregate
from psched.core.model import Cluster, Job, Pool, ceil_eps
from psched.offline.milp import Problem, Rows

__all__ = ["DEFAULT_FORMULATION", "WINDOWS", "Formulation", "JobColumns", "MilpModel",
           "build_model", "model_caps", "ps_slack", "trivial_bound", "window_tail"]


WINDOWS = ("job", "horizon")


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
class JobColumns:
    """Where one job's variables sit in the model's column vector."""

    x: int  #: admitted and completed
    c0: int  #: completion indicators, one per slot of ``slots``
    d0: int  #: alive indicators ``d_t = sum_{t' >= t} c_t'``, one per slot (-1: not modelled)
    y0: int  #: workers, slot-major (``len(slots) x H``)
    z0: int  #: PS, slot-major (``len(slots) x K``)
    w0: int  #: cumulative work through each slot (-1 when not modelled)
    slots: range  #: the slots the job may use


@dataclass(frozen=True, kw_only=True)
class MilpModel:
    problem: Problem  #: minimise -utility
    cols: list[JobColumns]  #: per job, in the order of ``jobs``
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
    #: (:func:`psched.core.aggregate.exact_aggregate`); schedules are placed back by first fit
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
               window: str, form: Formulation) -> tuple[list[JobColumns], np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """Column layout, objective (-f at each completion slot), upper bounds, integrality."""
    cols: list[JobColumns] = []
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
        jc = JobColumns(x=n, c0=c0, d0=c0 + n_s if n_d else -1, y0=y0, z0=y0 + n_s * n_h,
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


def _alive(jc: JobColumns, j: int) -> tuple[list[int], list[float]]:
    """The expression ``d`` of slot ``j`` (0-based in the window): 0 past the window."""
    n_s = len(jc.slots)
    if j >= n_s:
        return [], []
    if jc.d0 >= 0:
        return [jc.d0 + j], [1.0]
    return list(range(jc.c0 + j, jc.c0 + n_s)), [1.0] * (n_s - j)


def _completion_rows(rows: Rows, jc: JobColumns) -> None:
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


def _worker_rows(rows: Rows, job: Job, jc: JobColumns, n_h: int, n_k: int) -> None:
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


def _work_rows(rows: Rows, job: Job, jc: JobColumns, n_h: int, cumulative: bool) -> None:
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


def _capacity_rows(rows: Rows, jobs: Sequence[Job], cols: list[JobColumns], cap_w: np.ndarray,
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


def _symmetry_rows(rows: Rows, cols: list[JobColumns], cap_w: np.ndarray, cap_p: np.ndarray,
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


def build_model(jobs: Sequence[Job], cap_w: np.ndarray, cap_p: np.ndarray, horizon: int,
           window: str, form: Formulation = Formulation()) -> MilpModel:
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
    return MilpModel(problem=problem, cols=cols, n_h=n_h, n_k=n_k)


def trivial_bound(model: MilpModel) -> float:
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


def model_caps(jobs: Sequence[Job], cluster: Cluster, form: Formulation
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
