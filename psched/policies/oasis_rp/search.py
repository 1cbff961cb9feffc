"""The exact search of ``oasis-rp``, run-compressed: the same result as the reference path,
at a cost that grows with the runs of identical slots in a window, not with its length.

The reference search (:func:`search_reference`) builds a job's priced
inputs over the whole window (:meth:`psched.oasis.ledger.Ledger.inputs`: prices and residual
capacities per slot, server and resource, ``Tw x H x R`` per pool), the placement tables and the
slot costs (computed once per run of identical slots, then copied to every slot of the run),
then runs :func:`psched.oasis.solve_fast`. Here every per-slot array stays per run
(``U x H x R``) except the slot costs (``Tw x (N + 1)``), which the search reads slot by slot;
placements are read back through each slot's run. Each number is computed by the same numpy
operation on the same rows as in the reference, so the result -- payoff, schedule and
placement -- is bit-identical (``tests/test_rp_search.py`` holds the two paths against each
other, search by search and over whole runs).

Three exact devices on top:

1. **Feasibility first.** A job can do ``work`` worker-slots by the deadline iff the slots of
   the window can hold it: ``sum_t min(N, work, W_t, n_PS(P_t)) >= work``, with ``W_t`` the
   worker containers and ``P_t`` the PS containers that fit in slot ``t`` (the count of
   finite slot costs, which is exactly when :func:`~psched.oasis.fast.cost_lower_bound` is
   finite). It needs only the residual capacities; prices, costs and the recursion are
   skipped when it fails (most pull-forward searches at trace scale).
2. **Run boundaries kept incrementally** by the ledger
   (:meth:`psched.policies.oasis_rp.book.PlanLedger.runs`): O(Tw) instead of comparing every row.
3. **One placement per run and worker count**: slots of one run with the same number of
   workers get the same placement (the greedy of :func:`psched.oasis.schedule.place` on the
   same row), computed once, for all such pairs in one array operation.

The schedule comes back as a :class:`Schedule`, a dict that keeps its container groups as
arrays for the ledger (a plan is added and taken out many times during re-packs).

Complexity: O(U (H + K) R + U N log(H + K) + Tw N) for U runs, plus the recursion of
:func:`~psched.oasis.fast.solve_fast`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from psched.core.model import Alloc, Job
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, Ledger, PoolInputs
from psched.oasis.prices import log_utility
from psched.oasis.schedule import (
    Best,
    PlacementTables,
    placement_tables,
    schedule_allocs,
    slot_costs,
    unit_prices,
)
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.dp import solve_compiled
from psched.policies.oasis_rp.kernels import (
    greedy_costs_compiled,
    greedy_takes_compiled,
    placement_groups_compiled,
    unit_caps_compiled,
)
from psched.policies.oasis_rp.plans import Found, Schedule

__all__ = ["RunTables", "assemble", "feasible_work", "placed_slots", "priced_pools",
           "priced_pools_reference", "run_tables", "search", "search_reference", "search_runs",
           "slot_allocs", "window_inputs", "window_tables", "window_tables_reference"]


_EMPTY = np.zeros(0)  # a run table's pools before pricing: no prices, no residual


@dataclass(frozen=True, kw_only=True)
class RunTables:
    """A job's window, one row per run of identical slots."""

    start: int  #: first slot of the window (absolute)
    starts: np.ndarray  #: (U,) window index of the first slot of each run
    row_of: np.ndarray  #: (Tw,) run of every window slot
    #: workers, PS: servers, demands and (once priced) prices per run; the residual is not
    #: built (``caps`` are computed from the usage directly)
    pools: tuple[PoolInputs, PoolInputs]
    caps: tuple[np.ndarray, np.ndarray]  #: (U, H), (U, K) containers that fit
    ps_needed: np.ndarray  #: (N+1,) fewest PS for n workers

    @property
    def n_slots(self) -> int:
        """Tw, the window length in slots."""
        return int(self.row_of.shape[0])


def run_tables(ledger: PlanLedger, job: Job, t0: int, t1: int) -> RunTables:
    """Container caps of ``job`` over slots ``t0..t1-1``, per run
    (prices are added by :func:`priced_pools`, only when the search goes on).
    O(U (H + K) R + Tw)."""
    starts = ledger.runs(t0, t1)
    n = t1 - t0
    row_of = np.repeat(np.arange(starts.size), np.diff(np.append(starts, n)))
    psn = ledger.ps_needed_of(job)
    pools = []
    caps = []
    rows = t0 + starts
    for p, d, norm, limit in zip((0, 1), ledger.demands_of(job), ledger.norms_of(job),
                                 (job.max_workers, int(psn[-1])), strict=True):
        pools.append(PoolInputs(servers=ledger.servers[p], price=_EMPTY, resid=_EMPTY,
                                demand=d, norm=norm))
        caps.append(unit_caps_compiled(ledger.usage[p], ledger.capacity[p], rows, d, limit))
    return RunTables(start=t0, starts=starts, row_of=row_of, pools=(pools[0], pools[1]),
                     caps=(caps[0], caps[1]), ps_needed=psn)


def feasible_work(tab: RunTables, max_workers: int, work: int) -> int:
    """Worker-slots the window can hold, each slot at most ``min(N, work)``: the count of
    finite slot costs summed over the slots, as the search's lower bound counts them. O(U + Tw)."""
    w_fit = tab.caps[0].sum(axis=1)
    p_fit = tab.caps[1].sum(axis=1)
    n_ps = np.searchsorted(tab.ps_needed, p_fit, side="right") - 1  # ps_needed is sorted
    per_run = np.minimum(np.minimum(w_fit, n_ps), min(max_workers, work))
    lengths = np.diff(np.append(tab.starts, tab.n_slots))
    return int(np.sum(per_run * lengths))


def window_tables(ledger: PlanLedger, job: Job, t0: int, t1: int) -> tuple[RunTables, int]:
    """:func:`window_tables_reference` in one compiled call
    (:meth:`~psched.policies.oasis_rp.book.PlanLedger.window_caps`) where the ledger allows it:
    the same tables and count (integers from the same comparisons). O(U (H + K) R + Tw)."""
    got = ledger.window_caps(job, t0, t1, min(job.max_workers, job.work))
    if got is None:
        return window_tables_reference(ledger, job, t0, t1)
    starts, row_of, caps_w, caps_p, fit = got
    psn = ledger.ps_needed_of(job)
    w_dem, p_dem = ledger.demands_of(job)
    w_norm, p_norm = ledger.norms_of(job)
    pools = (PoolInputs(servers=ledger.servers[0], price=_EMPTY, resid=_EMPTY, demand=w_dem,
                        norm=w_norm),
             PoolInputs(servers=ledger.servers[1], price=_EMPTY, resid=_EMPTY, demand=p_dem,
                        norm=p_norm))
    tab = RunTables(start=t0, starts=starts, row_of=row_of, pools=pools, caps=(caps_w, caps_p),
                    ps_needed=psn)
    return tab, int(fit)


def window_tables_reference(ledger: PlanLedger, job: Job, t0: int,
                            t1: int) -> tuple[RunTables, int]:
    """:func:`run_tables` of ``job`` over ``t0..t1-1`` and the worker-slots its window holds
    (:func:`feasible_work`): the composition :func:`window_tables` is tested against."""
    tab = run_tables(ledger, job, t0, t1)
    return tab, feasible_work(tab, job.max_workers, job.work)


def priced_pools(ledger: PlanLedger, tab: RunTables) -> tuple[PoolInputs, PoolInputs]:
    """The pools of ``tab`` with their prices per run, as :meth:`Ledger.inputs` computes them:
    :func:`priced_pools_reference`, the prices read by
    :meth:`~psched.policies.oasis_rp.book.PlanLedger.price_rows` (bit-identical)."""
    src = ledger.price_usage()
    rows = tab.start + tab.starts
    w, p = tab.pools
    return (PoolInputs(servers=w.servers, price=ledger.price_rows(0, src[0], rows),
                       resid=w.resid, demand=w.demand, norm=w.norm),
            PoolInputs(servers=p.servers, price=ledger.price_rows(1, src[1], rows),
                       resid=p.resid, demand=p.demand, norm=p.norm))


def priced_pools_reference(ledger: PlanLedger,
                           tab: RunTables) -> tuple[PoolInputs, PoolInputs]:
    """:func:`priced_pools` by :meth:`~psched.policies.oasis_rp.book.PlanLedger.price_of` on the
    gathered rows: the reference."""
    src = ledger.price_usage()
    out = []
    for p, pool in enumerate(tab.pools):
        price = ledger.price_of(p, src[p][tab.start + tab.starts])
        out.append(replace(pool, price=price))
    return out[0], out[1]


def search_runs(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
                flat: bool = False, floor: float = 0.0) -> Found:
    """Exactly :func:`search_reference`, run-compressed.

    Parameters and result as there: the best schedule of ``work`` worker-slots of ``job`` in
    slots ``start..deadline`` (``flat``: a constant utility, the cheapest schedule by the
    deadline); ``Found`` with an empty schedule and ``floor`` as payoff if none beats it.
    """
    last = min(job.last_slot, deadline)
    if work <= 0 or last < max(start, job.arrival):
        return Found(payoff=floor, schedule={})
    sub = replace(job, work=int(work), window=last - job.arrival + 1)
    t0 = max(job.arrival, start)
    t1 = max(t0, sub.last_slot + 1)
    if t1 <= t0:
        return Found(payoff=floor, schedule={})
    tab, fit = window_tables(ledger, sub, t0, t1)
    if fit < sub.work:
        return Found(payoff=floor, schedule={})
    w_pool, p_pool = priced_pools(ledger, tab)
    unit = (unit_prices(w_pool), unit_prices(p_pool))
    psn = tab.ps_needed
    wc = greedy_costs_compiled(unit[0], tab.caps[0], sub.max_workers)
    pc = greedy_costs_compiled(unit[1], tab.caps[1], int(psn[-1]))
    # only the first W + 1 columns are read: cut per run, before the rows are expanded
    costs = (wc + pc[:, psn])[:, : min(wc.shape[1], sub.work + 1)][tab.row_of]
    if flat:
        util = np.ones(tab.n_slots)
    else:
        log_f = log_utility(sub, np.arange(t0 - sub.arrival + 1, t1 - sub.arrival + 1))
        util = np.exp(log_f - ledger.log_scale)
    inp = JobInputs(job=sub, start=t0, util=util, workers=w_pool, ps=p_pool, ps_needed=psn,
                    runs=tab.starts)  # the recursion reads job, util and runs only
    best = solve_compiled(inp, costs, floor, row_of=tab.row_of)
    if best.counts is None:
        return Found(payoff=best.payoff, schedule={})
    return Found(payoff=best.payoff, schedule=slot_allocs(tab, unit, best.counts))


def slot_allocs(tab: RunTables, unit: tuple[np.ndarray, np.ndarray],
            counts: np.ndarray) -> Schedule:
    """The allocation per absolute slot, as :func:`psched.oasis.schedule.schedule_allocs`
    builds it: per slot, the greedy of :func:`~psched.oasis.schedule.place` (cheapest
    servers first, stable order among equal prices, each up to its capacity), compiled
    (:func:`~psched.policies.oasis_rp.kernels.placement_groups_compiled`), one ``Alloc`` per
    distinct
    (run, workers) pair. Pool servers are in ascending index order
    (:meth:`~psched.core.model.Cluster.indices`), so the pairs come out as ``Alloc.of`` sorts them;
    the schedule keeps the container groups for the ledger."""
    slots, rows, ns, key = placed_slots(counts, tab.row_of)
    if slots.size == 0:
        return Schedule()
    w, p = (placement_groups_compiled(unit[q], tab.caps[q], rows, need, tab.pools[q].servers,
                                      key)
            for q, need in ((0, ns), (1, tab.ps_needed[ns])))
    return assemble(slots + tab.start, w, p)


def placed_slots(counts: np.ndarray, row_of: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The window slots with workers in ``counts``, their runs, their worker counts and the
    key both pools place by (one placement per stretch of equal ``(run, workers)``).
    O(Tw)."""
    slots = np.flatnonzero(counts)
    rows = row_of[slots]
    ns = counts[slots]
    return slots, rows, ns, rows * (int(ns.max(initial=0)) + 1) + ns


def assemble(at: np.ndarray, workers: tuple[np.ndarray, ...],
             ps: tuple[np.ndarray, ...]) -> Schedule:
    """The schedule of the slots ``at`` (ascending) from the container groups of both pools
    (:func:`~psched.policies.oasis_rp.kernels.placement_groups_compiled`'s ``(off, srv, cnt,
    uid, s_srv, s_cnt)``, one item per slot, keyed alike in both pools): one ``Alloc`` per
    placement, the groups kept for the ledger. O(slots + pairs)."""
    (w_off, w_srv, w_cnt, w_uid, w_s_srv, w_s_cnt) = workers
    (p_off, p_srv, p_cnt, p_uid, p_s_srv, p_s_cnt) = ps
    out = Schedule()
    w_pairs = list(zip(w_srv.tolist(), w_cnt.tolist(), strict=True))
    p_pairs = list(zip(p_srv.tolist(), p_cnt.tolist(), strict=True))
    wo, po = w_off.tolist(), p_off.tolist()
    made = [Alloc(workers=tuple(w_pairs[wo[u]:wo[u + 1]]), ps=tuple(p_pairs[po[u]:po[u + 1]]))
            for u in range(len(wo) - 1)]
    out.update(zip(at.tolist(), [made[u] for u in w_uid.tolist()], strict=True))
    out._preset("workers", np.repeat(at, np.diff(w_off)[w_uid]), w_s_srv, w_s_cnt)
    out._preset("ps", np.repeat(at, np.diff(p_off)[p_uid]), p_s_srv, p_s_cnt)
    return out


def _allocs_reference(tab: RunTables, unit: tuple[np.ndarray, np.ndarray],
                      counts: np.ndarray) -> Schedule:
    """:func:`slot_allocs` by numpy array operations on the placements of the distinct
    (run, workers) pairs (:func:`~psched.policies.oasis_rp.kernels.greedy_takes_compiled`): the
    reference the compiled groups are tested against."""
    slots = np.nonzero(counts)[0]
    out = Schedule()
    if slots.size == 0:
        return out
    keys = tab.row_of[slots] * (int(counts.max()) + 1) + counts[slots]
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rr = tab.row_of[slots[first]]
    nn = counts[slots[first]]
    takes = [greedy_takes_compiled(unit[p], tab.caps[p], rr, need)
             for p, need in ((0, nn), (1, tab.ps_needed[nn]))]
    groups = []
    arrays = []
    for p in (0, 1):  # per row, its (server, count) pairs in server order, zeros dropped
        rows, cols = np.nonzero(takes[p])
        srv, cnt = tab.pools[p].servers[cols], takes[p][rows, cols]
        pairs = list(zip(srv.tolist(), cnt.tolist(), strict=True))
        per_row = np.bincount(rows, minlength=uniq.size)
        ends = np.cumsum(per_row)
        groups.append([tuple(pairs[a:b]) for a, b in zip([0, *ends[:-1].tolist()],
                                                          ends.tolist(), strict=True)])
        # the ledger's arrays: each slot's pairs, slot by slot (rows are unique pairs)
        rep = per_row[inverse]
        lead = np.repeat(ends[inverse] - rep, rep)
        within = np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)
        arrays.append((np.repeat(slots + tab.start, rep), srv[lead + within], cnt[lead + within]))
    made = [Alloc(workers=w, ps=k) for w, k in zip(groups[0], groups[1], strict=True)]
    out.update(zip((slots + tab.start).tolist(), [made[j] for j in inverse.tolist()],
                   strict=True))
    for role, (ts, srv, cnt) in zip(("workers", "ps"), arrays, strict=True):
        out._preset(role, ts, srv, cnt)
    return out


def search(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
           flat: bool = False, floor: float = 0.0) -> Found:
    """The exact best schedule of ``work`` worker-slots of ``job`` in slots
    ``start..deadline`` at the ledger's prices and residual capacities.

    ``flat``: a constant utility, so the search finds the cheapest schedule that completes by
    ``deadline`` (earliest completion among equal costs); the payoff is then meaningless and
    ``floor`` should be ``-inf``. Durations count from the job's arrival.
    Run-compressed (:func:`psched.policies.oasis_rp.search.search_runs`) unless the ledger was made
    with ``fast=False``; both give the same result (:func:`search_reference`).
    Complexity: that of :func:`~psched.oasis.solve_fast` over the window.
    """
    if ledger.fast:
        return search_runs(ledger, job, start=start, work=work, deadline=deadline, flat=flat,
                           floor=floor)
    return search_reference(ledger, job, start=start, work=work, deadline=deadline, flat=flat,
                            floor=floor)


def window_inputs(ledger: Ledger, job: Job, *, start: int, work: int,
                  deadline: int) -> JobInputs | None:
    """The priced inputs of ``work`` more worker-slots of ``job`` from slot ``start`` to
    ``min(deadline, job.last_slot)`` (:meth:`~psched.oasis.ledger.Ledger.inputs` of the job
    cut to that window), or None when there is no work or no slot to search."""
    last = min(job.last_slot, deadline)
    if work <= 0 or last < max(start, job.arrival):
        return None
    sub = replace(job, work=int(work), window=last - job.arrival + 1)
    inp = ledger.inputs(sub, start=start)
    return inp if inp.n_slots else None


def search_reference(ledger: PlanLedger, job: Job, *, start: int, work: int, deadline: int,
                     flat: bool = False, floor: float = 0.0) -> Found:
    """:func:`search` composed literally: the job's priced inputs over the whole window
    (:meth:`~psched.oasis.ledger.Ledger.inputs`), its placement tables and slot costs, then
    :func:`~psched.oasis.solve_fast`. The reference the run-compressed path is tested against.
    """
    inp = window_inputs(ledger, job, start=start, work=work, deadline=deadline)
    if inp is None:
        return Found(payoff=floor, schedule={})
    if flat:
        inp = replace(inp, util=np.ones(inp.n_slots))
    tables = placement_tables(inp)
    best = solve_fast(inp, floor, costs=slot_costs(inp, tables))
    return _found(inp, best, tables)


def _found(inp: JobInputs, best: Best, tables: PlacementTables) -> Found:
    if best.counts is None:
        return Found(payoff=best.payoff, schedule={})
    return Found(payoff=best.payoff, schedule=schedule_allocs(inp, best.counts, tables))
