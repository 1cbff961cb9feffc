"""The recursion of :func:`psched.oasis.solve_fast`, compiled: the same result, one call.

``oasis-rp`` runs thousands of exact searches per run (one per re-planned job); in each, the
min-plus recursion ``cost(t, D) = min_n c_t(n) + cost(t - 1, D - n)`` is most of the time at
the oasis-paper scale (windows of a few hundred slots, W up to 1,000, N up to 100). NumPy
builds a ``(D, n)`` array per slot; :func:`solve_compiled` runs the same loop in one
compiled call (numba: compiled for fixed argument types when one of them is first called,
:mod:`psched.lazy_numba`, then loaded from the cache on disk next to it).

It is the loop of :func:`~psched.oasis.solve_fast` line for line -- the lower-bound pruning
of completion slots, the stationary-run skip, the tie rule of
:mod:`psched.oasis.schedule` (earliest completion among payoffs equal up to
:data:`~psched.oasis.schedule.TIE_RTOL`; per step the largest ``n`` within
:data:`~psched.oasis.schedule.ARG_RTOL` of the minimum), and the back-tracking -- with the
same floating-point operations in the same order (sums of two numbers, exact minima and
comparisons), so the payoff and the schedule are bit-identical
(``tests/test_rp_search.py`` compares them on random and recorded inputs).

Complexity: O(Tw W N) at most, as :func:`~psched.oasis.solve_fast`.
"""

from __future__ import annotations

import numpy as np

from psched.lazy_numba import lazy_numba
from psched.model import EPS
from psched.oasis.ledger import JobInputs
from psched.oasis.schedule import ARG_RTOL, TIE_RTOL, Best

#: numba compiles this module's functions at the first call of one (psched.lazy_numba), not on
#: import: ``import psched.policies`` (every CLI command) does not import numba
numba = lazy_numba(__name__)

__all__ = ["cost_lower_bound_compiled", "greedy_costs_compiled", "greedy_takes_compiled",
           "log_prices_compiled", "placement_groups_compiled", "runs_compiled",
           "scatter_add_compiled", "scatter_add_ready", "solve_compiled", "unit_caps_compiled",
           "window_tables_compiled"]


@numba.njit("boolean(float64, float64)", cache=True, nogil=True)
def _beats(payoff: float, best: float) -> bool:  # pragma: no cover - compiled
    if not np.isfinite(best):
        return payoff > best
    return payoff > best + TIE_RTOL * abs(best)


@numba.njit("void(float64[::1], float64[::1], int64, int64, float64[::1], int32[::1])",
            cache=True, nogil=True)
def _step(h: np.ndarray, c: np.ndarray, k: int, hi: int, new: np.ndarray,
          arg: np.ndarray) -> None:  # pragma: no cover - compiled
    """``new[D] = min_n h[D - n] + c[n]``, ``arg[D]`` the largest minimising ``n`` within
    ARG_RTOL, for ``D = 0..hi`` (``h[x] = inf`` for ``x < 0``): ``minplus_step``."""
    inf = np.inf
    buf = np.empty(k + 1)
    for d in range(hi + 1):
        top = min(k, d)  # n > d reads h[< 0] = inf: those sums are inf
        low = inf
        for n in range(top, -1, -1):
            v = h[d - n] + c[n]
            buf[n] = v
            if v < low:
                low = v
        if low == inf:  # every sum inf: the largest n, as the literal loop picks
            new[d] = inf
            arg[d] = k
            continue
        thr = low + ARG_RTOL * low
        for n in range(top, -1, -1):
            if buf[n] <= thr:
                new[d] = buf[n]
                arg[d] = n
                break


@numba.njit("Tuple((float64, int64[::1]))(float64[:, ::1], int64[::1], float64[::1],"
            " float64[::1], int64[::1], float64, float64, int64)", cache=True, nogil=True)
def _solve(c_all: np.ndarray, n_cap: np.ndarray, util: np.ndarray, util_after: np.ndarray,
           run_end: np.ndarray, lb: float, floor: float, work: int
           ) -> tuple[float, np.ndarray]:  # pragma: no cover - compiled
    n_slots = c_all.shape[0]
    best = floor
    best_i = -1
    h = np.full(work + 1, np.inf)
    h[0] = 0.0
    new = np.empty(work + 1)
    reach = 0
    # the minimisers of every computed step, and for every slot the step it uses (-1: none)
    steps = np.zeros((0, work + 1), dtype=np.int32)
    n_steps = 0
    row = np.full(n_slots, -1, dtype=np.int64)
    prev_row = -1
    prev_i = -1
    prev_k = -1
    prev_changed = True
    i = -1
    while i + 1 < n_slots:
        i += 1
        if not _beats(util_after[i] - lb, best):
            break
        k = n_cap[i]
        if k <= 0:
            continue
        same = prev_i >= 0 and prev_k == k
        if same:
            for n in range(k + 1):
                if c_all[i, n] != c_all[prev_i, n]:
                    same = False
                    break
        if same and not prev_changed:
            end = run_end[i]
            for s in range(i, end):
                row[s] = prev_row
            i = end - 1
            continue
        hi = min(work, reach + k)
        if n_steps == steps.shape[0]:
            grown = np.zeros((max(4, 2 * n_steps), work + 1), dtype=np.int32)
            grown[:n_steps] = steps[:n_steps]
            steps = grown
        _step(h, c_all[i], k, hi, new, steps[n_steps])
        changed = False
        for d in range(hi + 1):
            if new[d] != h[d]:
                changed = True
            h[d] = new[d]
        prev_changed = changed
        reach = hi
        row[i] = prev_row = n_steps
        n_steps += 1
        prev_i = i
        prev_k = k
        payoff = util[i] - h[work]
        if _beats(payoff, best):
            best = payoff
            best_i = i
    counts = np.zeros(n_slots, dtype=np.int64)
    if best_i < 0:
        return best, counts[:0]
    left = work
    for s in range(best_i, -1, -1):
        if row[s] >= 0 and left > 0:
            counts[s] = steps[row[s], left]
            left -= counts[s]
    if left != 0:
        raise RuntimeError("backtracking did not reach zero work")
    return best, counts


@numba.njit("Tuple((int64[::1], float64[::1], boolean))(float64[:, ::1], int64)", cache=True,
            nogil=True)
def _bound_parts(c_all: np.ndarray, work: int
                 ) -> tuple[np.ndarray, np.ndarray, bool]:  # pragma: no cover - compiled
    """Per slot the largest ``n`` before the first infinite cost, and the terms of
    :func:`~psched.oasis.fast.cost_lower_bound` (``rate * take`` of the slots it fills, in
    its order) with whether they hold ``work``: the same divisions, minima, stable order and
    products."""
    n_slots, width = c_all.shape
    n_cap = np.empty(n_slots, dtype=np.int64)
    rate = np.full(n_slots, np.inf)
    m = np.zeros(n_slots, dtype=np.int64)
    for i in range(n_slots):
        first = width
        for n in range(width):
            if not np.isfinite(c_all[i, n]):
                first = n
                break
        n_cap[i] = first - 1
        for n in range(1, width):
            if np.isfinite(c_all[i, n]):
                m[i] += 1
                v = c_all[i, n] / n
                if v < rate[i]:
                    rate[i] = v
    parts = np.empty(n_slots)
    k = 0
    before = 0
    for i in np.argsort(rate, kind="mergesort"):  # stable, as numpy's
        take = min(max(work - before, 0), m[i])
        before += m[i]
        if take > 0:
            parts[k] = rate[i] * take
            k += 1
    return n_cap, parts[:k].copy(), before >= work


def _caps_and_bound(c_all: np.ndarray, work: int) -> tuple[np.ndarray, float]:
    n_cap, parts, holds = _bound_parts(c_all, int(work))
    # the last sum by numpy, as cost_lower_bound sums the same terms (pairwise order)
    return n_cap, float(np.sum(parts)) if holds and c_all.shape[1] >= 2 else np.inf


def cost_lower_bound_compiled(costs: np.ndarray, work: int) -> float:
    """:func:`psched.oasis.fast.cost_lower_bound` compiled, bit-identical: the same terms
    in the same order, summed by numpy. O(Tw (n + log Tw))."""
    return _caps_and_bound(np.ascontiguousarray(costs, dtype=np.float64), work)[1]


def solve_compiled(inp: JobInputs, costs: np.ndarray, floor: float = 0.0,
                   row_of: np.ndarray | None = None) -> Best:
    """:func:`psched.oasis.solve_fast` ``(inp, floor, costs)``, compiled. The same result.

    ``costs`` are ``inp``'s slot costs (Tw, N+1), or only their first ``W + 1`` columns;
    ``inp`` is read for the job's work, the utilities and the runs of identical slots only
    (``row_of``: each slot's run, as :meth:`~psched.oasis.ledger.JobInputs.run_index`
    gives it, if the caller has it).
    """
    work = inp.job.work
    c_all = np.ascontiguousarray(costs[:, : min(costs.shape[1], work + 1)], dtype=np.float64)
    n_cap, lb = _caps_and_bound(c_all, work)
    if not np.isfinite(lb):
        return Best(payoff=floor, counts=None)
    util = np.ascontiguousarray(inp.util, dtype=np.float64)
    util_after = np.maximum.accumulate(util[::-1])[::-1].copy()
    if row_of is None:
        starts, row_of = inp.run_index()
    else:
        starts = np.asarray(inp.runs, dtype=np.intp)
    run_end = np.append(starts[1:], inp.n_slots)[row_of].astype(np.int64)
    best, counts = _solve(c_all, n_cap, util, util_after, run_end, float(lb), float(floor),
                          int(work))
    if counts.size == 0:
        return Best(payoff=float(best), counts=None)
    return Best(payoff=float(best), counts=counts)


@numba.njit("float64[:, ::1](float64[:, ::1], int64[:, ::1], int64)", cache=True, nogil=True)
def _greedy(unit: np.ndarray, caps: np.ndarray, n_max: int) -> np.ndarray:  # pragma: no cover
    n_rows, n_srv = unit.shape
    out = np.full((n_rows, n_max + 1), np.inf)
    for r in range(n_rows):
        out[r, 0] = 0.0
        if n_srv == 0:
            continue
        order = np.argsort(unit[r], kind="mergesort")  # stable, as numpy's
        j = 1
        acc = 0.0
        for s in order:
            for _ in range(caps[r, s]):
                if j > n_max:
                    break
                acc = unit[r, s] if j == 1 else acc + unit[r, s]
                out[r, j] = acc
                j += 1
            if j > n_max:
                break
    return out


def greedy_costs_compiled(unit: np.ndarray, caps: np.ndarray, n_max: int) -> np.ndarray:
    """:func:`psched.oasis.schedule.greedy_costs` compiled: the cost of the ``n`` cheapest
    units per row, ``n = 0..n_max`` (``inf`` beyond capacity); the same sums in the same
    order (cheapest first, the lower server among equal prices). O(T H log H + T n_max)."""
    return np.asarray(_greedy(np.ascontiguousarray(unit, dtype=np.float64),
                              np.ascontiguousarray(caps, dtype=np.int64), int(n_max)))


@numba.njit("int64[:, ::1](float64[:, :, ::1], float64[:, ::1], int64[::1], float64[::1], int64)",
            cache=True, nogil=True)
def _caps(usage: np.ndarray, cap: np.ndarray, rows: np.ndarray, dem: np.ndarray,
          limit: int) -> np.ndarray:  # pragma: no cover - compiled
    n_srv, n_res = cap.shape
    out = np.empty((rows.size, n_srv), dtype=np.int64)
    for u in range(rows.size):
        t = rows[u]
        for h in range(n_srv):
            low = np.inf
            for r in range(n_res):
                if dem[r] > 0:
                    v = np.floor((cap[h, r] - usage[t, h, r]) / dem[r] + EPS)
                    if v < low:
                        low = v
            low = min(max(low, 0.0), float(limit))
            out[u, h] = int(low)
    return out


def unit_caps_compiled(usage: np.ndarray, capacity: np.ndarray, rows: np.ndarray,
                       demand: np.ndarray, limit: int) -> np.ndarray:
    """:func:`psched.oasis.schedule.unit_caps` of the residual ``capacity - usage[rows]``
    compiled, without building the residual: containers that fit per row and server,
    ``min_r floor((c - g) / w + EPS)`` over the resources the container demands, clipped to
    ``[0, limit]`` (``limit`` everywhere if it demands none). O(|rows| H R)."""
    dem = np.ascontiguousarray(demand, dtype=np.float64)
    if not (dem > 0).any():
        return np.full((rows.size, capacity.shape[0]), limit, dtype=np.int64)
    return np.asarray(_caps(np.ascontiguousarray(usage, dtype=np.float64),
                            np.ascontiguousarray(capacity, dtype=np.float64),
                            np.ascontiguousarray(rows, dtype=np.int64), dem, int(limit)))


@numba.njit("int64[:, ::1](float64[:, ::1], int64[:, ::1], int64[::1], int64[::1])",
            cache=True, nogil=True)
def _takes(unit: np.ndarray, caps: np.ndarray, rows: np.ndarray,
           need: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    out = np.zeros((rows.size, unit.shape[1]), dtype=np.int64)
    for i in range(rows.size):
        r = rows[i]
        left = need[i]
        if left <= 0:
            continue
        for s in np.argsort(unit[r], kind="mergesort"):  # stable, as numpy's
            take = min(caps[r, s], left)
            out[i, s] = take
            left -= take
            if left <= 0:
                break
        if left > 0:
            out[i, 0] = -1  # does not fit
    return out


def greedy_takes_compiled(unit: np.ndarray, caps: np.ndarray, rows: np.ndarray,
                          need: np.ndarray) -> np.ndarray:
    """Containers per server of the greedy placement (:func:`psched.oasis.schedule.place`:
    cheapest unit price first, the lower server among equal prices, each up to its
    capacity) of ``need[i]`` containers on row ``rows[i]`` of ``unit`` / ``caps``, (M, H).
    Integer counts, so the same as the numpy composition exactly. Raises ``ValueError`` if
    some ``need`` does not fit. O(M H log H)."""
    out = np.asarray(_takes(np.ascontiguousarray(unit, dtype=np.float64),
                            np.ascontiguousarray(caps, dtype=np.int64),
                            np.ascontiguousarray(rows, dtype=np.int64),
                            np.ascontiguousarray(need, dtype=np.int64)))
    if out.size and np.any(out < 0):
        raise ValueError("containers do not fit")
    return out


@numba.njit(cache=True, nogil=True)
def _place_row(unit: np.ndarray, caps: np.ndarray, r: int, need: int,
               take: np.ndarray) -> bool:  # pragma: no cover - compiled
    """``take[:] =`` containers per server of the greedy placement of ``need`` on row ``r``
    (as :func:`_takes`); False if they do not fit."""
    take[:] = 0
    left = need
    if left <= 0:
        return True
    for s in np.argsort(unit[r], kind="mergesort"):  # stable, as numpy's
        t = min(caps[r, s], left)
        take[s] = t
        left -= t
        if left <= 0:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _groups(unit: np.ndarray, caps: np.ndarray, rows: np.ndarray, need: np.ndarray,
            servers: np.ndarray, key: np.ndarray
            ) -> tuple[np.ndarray | bool, ...]:  # pragma: no cover
    n = rows.size
    width = unit.shape[1]
    uid = np.empty(n, dtype=np.int64)  # each item's placement: a new one where key changes
    u_off = np.zeros(n + 1, dtype=np.int64)
    u_srv = np.empty(n * max(width, 1), dtype=np.int64)
    u_cnt = np.empty(n * max(width, 1), dtype=np.int64)
    take = np.zeros(width, dtype=np.int64)
    n_uid = 0
    k = 0
    for i in range(n):
        if i > 0 and key[i] == key[i - 1]:  # the same (row, need): the same placement
            uid[i] = n_uid - 1
            continue
        if not _place_row(unit, caps, rows[i], need[i], take):
            return u_off[:1], u_srv[:0], u_cnt[:0], uid[:0], u_srv[:0], u_cnt[:0], False
        for h in range(width):
            if take[h] > 0:
                u_srv[k] = servers[h]
                u_cnt[k] = take[h]
                k += 1
        n_uid += 1
        u_off[n_uid] = k
        uid[i] = n_uid - 1
    total = 0
    for i in range(n):
        total += u_off[uid[i] + 1] - u_off[uid[i]]
    s_srv = np.empty(total, dtype=np.int64)  # slot by slot, each slot's pairs
    s_cnt = np.empty(total, dtype=np.int64)
    m = 0
    for i in range(n):
        for q in range(u_off[uid[i]], u_off[uid[i] + 1]):
            s_srv[m] = u_srv[q]
            s_cnt[m] = u_cnt[q]
            m += 1
    return (u_off[:n_uid + 1].copy(), u_srv[:k].copy(), u_cnt[:k].copy(), uid, s_srv, s_cnt,
            True)


def placement_groups_compiled(unit: np.ndarray, caps: np.ndarray, rows: np.ndarray,
                              need: np.ndarray, servers: np.ndarray, key: np.ndarray
                              ) -> tuple[np.ndarray, ...]:
    """The greedy placements of :func:`greedy_takes_compiled` (``need[i]`` containers on
    row ``rows[i]``) as container groups, zero counts dropped, servers (``servers[column]``)
    ascending: ``(off, srv, cnt, uid, s_srv, s_cnt)`` -- placement ``u``'s ``(server, count)``
    pairs at ``off[u]:off[u + 1]`` of ``srv, cnt`` (one placement per stretch of equal
    ``key``, which must change wherever ``(row, need)`` does), ``uid[i]`` the placement of
    item ``i``, and every item's pairs one after
    the other in ``s_srv, s_cnt``. Integer counts: the same placements exactly. Raises
    ``ValueError`` if some ``need`` does not fit. O(M H log H)."""
    *out, ok = _groups(np.ascontiguousarray(unit, dtype=np.float64),
                       np.ascontiguousarray(caps, dtype=np.int64),
                       np.ascontiguousarray(rows, dtype=np.int64),
                       np.ascontiguousarray(need, dtype=np.int64),
                       np.ascontiguousarray(servers, dtype=np.int64),
                       np.ascontiguousarray(key, dtype=np.int64))
    if not ok:
        raise ValueError("containers do not fit")
    return tuple(np.asarray(a) for a in out)


_RO_INT = numba.types.Array(numba.int64, 1, "C", readonly=True)  # a schedule's groups


@numba.njit(numba.void(numba.float64[:, :, ::1], _RO_INT, numba.int64[::1], _RO_INT,
                       numba.int64, numba.float64[::1], numba.boolean[::1]),
            cache=True, nogil=True)
def _scatter(usage: np.ndarray, ts: np.ndarray, pos: np.ndarray, cnt: np.ndarray, sign: int,
             dem: np.ndarray, stale: np.ndarray) -> None:  # pragma: no cover - compiled
    last = usage.shape[0] - 1
    for i in range(ts.size):
        c = float(sign * cnt[i])
        t = ts[i]
        for r in range(dem.size):
            usage[t, pos[i], r] += c * dem[r]
        stale[t] = True
        stale[min(t + 1, last)] = True


def scatter_add_compiled(usage: np.ndarray, ts: np.ndarray, pos: np.ndarray, cnt: np.ndarray,
                         sign: int, dem: np.ndarray, stale: np.ndarray) -> None:
    """``np.add.at(usage, (ts, pos), (sign * cnt)[:, None] * dem[None, :])`` in one compiled
    loop: the same products and sums in the same order (bit-identical), and the slots' run
    boundaries marked stale (``stale[ts]``, ``stale[min(ts + 1, T - 1)]``). O(|ts| R)."""
    ts, cnt = (_read_only(np.ascontiguousarray(a, dtype=np.int64)) for a in (ts, cnt))
    _scatter(usage, ts, np.ascontiguousarray(pos, dtype=np.int64), cnt, int(sign),
             np.ascontiguousarray(dem, dtype=np.float64), stale)


def scatter_add_ready(usage: np.ndarray, ts: np.ndarray, pos: np.ndarray, cnt: np.ndarray,
                      sign: int, dem: np.ndarray, stale: np.ndarray) -> None:
    """:func:`scatter_add_compiled` for arrays already in the compiled loop's types (a
    :class:`~psched.policies.rp_search.Schedule`'s groups: read-only contiguous int64 ``ts``
    and ``cnt``, contiguous int64 ``pos``, float64 ``dem``): no conversions. O(|ts| R)."""
    _scatter(usage, ts, pos, cnt, sign, dem, stale)


@numba.njit("boolean(float64[:, :, ::1], int64)", cache=True, nogil=True)
def _row_differs(u: np.ndarray, t: int) -> bool:  # pragma: no cover - compiled
    """Row ``t`` of ``u`` differs from row ``t - 1`` somewhere (``!=``, as numpy's)."""
    a = u[t]
    b = u[t - 1]
    for h in range(a.shape[0]):
        for r in range(a.shape[1]):
            if a[h, r] != b[h, r]:
                return True
    return False


@numba.njit("int64[::1](float64[:, :, ::1], float64[:, :, ::1], float64[:, :, ::1],"
            " float64[:, :, ::1], boolean, boolean[::1], boolean[::1], int64, int64)",
            cache=True, nogil=True)
def _runs(u0: np.ndarray, u1: np.ndarray, h0: np.ndarray, h1: np.ndarray, high: bool,
          stale: np.ndarray, change: np.ndarray, t0: int,
          t1: int) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty(t1 - t0, dtype=np.int64)
    out[0] = 0
    k = 1
    for t in range(t0 + 1, t1):
        if stale[t]:
            diff = _row_differs(u0, t) or _row_differs(u1, t)
            if high and not diff:
                diff = _row_differs(h0, t) or _row_differs(h1, t)
            change[t] = diff
            stale[t] = False
        if change[t]:
            out[k] = t - t0
            k += 1
    return out[:k].copy()


def runs_compiled(usage: tuple[np.ndarray, ...], high: tuple[np.ndarray, ...] | None,
                  stale: np.ndarray, change: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """First slot (relative to ``t0``) of every run of identical rows over ``t0..t1-1`` from
    the kept boundaries ``change``, refreshing the ``stale`` ones first (a boundary changes
    where a row of either pool's usage, or of the high-water mark ``high`` if given, differs
    from the row before): :meth:`psched.policies.rp_book.PlanLedger.runs` in one compiled
    loop, the same comparisons. Needs ``t1 > t0``. O(t1 - t0 + stale rows (H + K) R)."""
    h = usage if high is None else high
    return np.asarray(_runs(usage[0], usage[1], h[0], h[1], high is not None, stale, change,
                            int(t0), int(t1)))


def _read_only(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@numba.njit(cache=True, nogil=True)
def _window(u0: np.ndarray, u1: np.ndarray, h0: np.ndarray, h1: np.ndarray, high: bool,
            stale: np.ndarray, change: np.ndarray, t0: int, t1: int, cap0: np.ndarray,
            cap1: np.ndarray, dem0: np.ndarray, dem1: np.ndarray, lim0: int, lim1: int,
            psn: np.ndarray, per_slot: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover
    starts = _runs(u0, u1, h0, h1, high, stale, change, t0, t1)
    n = t1 - t0
    n_runs = starts.size
    row_of = np.empty(n, dtype=np.int64)
    rows = np.empty(n_runs, dtype=np.int64)
    for u in range(n_runs):
        end = starts[u + 1] if u + 1 < n_runs else n
        row_of[starts[u]:end] = u
        rows[u] = t0 + starts[u]
    caps0 = _caps(u0, cap0, rows, dem0, lim0)
    caps1 = _caps(u1, cap1, rows, dem1, lim1)
    total = 0
    for u in range(n_runs):
        w_fit = 0
        for h in range(caps0.shape[1]):
            w_fit += caps0[u, h]
        p_fit = 0
        for h in range(caps1.shape[1]):
            p_fit += caps1[u, h]
        # the largest n with psn[n] <= p_fit (psn sorted): searchsorted(side="right") - 1
        lo = 0
        hi = psn.size
        while lo < hi:
            mid = (lo + hi) // 2
            if psn[mid] <= p_fit:
                lo = mid + 1
            else:
                hi = mid
        per = min(min(w_fit, lo - 1), per_slot)
        end = starts[u + 1] if u + 1 < n_runs else n
        total += per * (end - starts[u])
    return starts, row_of, caps0, caps1, total


def window_tables_compiled(usage: tuple[np.ndarray, ...], high: tuple[np.ndarray, ...] | None,
                           stale: np.ndarray, change: np.ndarray, t0: int, t1: int,
                           capacity: tuple[np.ndarray, ...], demand: tuple[np.ndarray, ...],
                           limit: tuple[int, int], ps_needed: np.ndarray, per_slot: int
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`runs_compiled`, the run index of every slot, :func:`unit_caps_compiled` of both
    pools at the first slot of each run, and the worker-slots the window can hold
    (:func:`psched.policies.rp_search.feasible_work`, ``per_slot = min(N, work)``) in one
    compiled call: ``(starts, row_of, caps_workers, caps_ps, feasible)``. Integer counts from
    the same comparisons and the same floor divisions: equal to the numpy composition
    exactly. Needs ``t1 > t0`` and arrays in the compiled loops' types (float64, C order;
    ``ps_needed`` int64, sorted). O(t1 - t0 + U (H + K) R + stale rows (H + K) R)."""
    h = usage if high is None else high
    return _window(usage[0], usage[1], h[0], h[1], high is not None, stale, change, int(t0),
                   int(t1), capacity[0], capacity[1], demand[0], demand[1], int(limit[0]),
                   int(limit[1]), ps_needed, int(per_slot))


@numba.njit(cache=True, nogil=True)
def _log_prices(usage: np.ndarray, rows: np.ndarray, pos: np.ndarray, safe: np.ndarray,
                span: np.ndarray, log_l: np.ndarray,
                log_scale: float) -> np.ndarray:  # pragma: no cover - compiled
    n_srv, n_res = safe.shape
    out = np.empty((rows.size, n_srv, n_res))
    for u in range(rows.size):
        t = rows[u]
        for h in range(n_srv):
            for r in range(n_res):
                v = usage[t, h, r] / safe[h, r] if pos[h, r] else 0.0
                v = min(max(v, 0.0), 1.0)
                out[u, h, r] = (log_l[r] + v * span[r]) - log_scale
    return out


def log_prices_compiled(usage: np.ndarray, rows: np.ndarray, pos: np.ndarray,
                        safe: np.ndarray, span: np.ndarray, log_l: np.ndarray,
                        log_scale: float) -> np.ndarray:
    """The exponent of :meth:`psched.policies.rp_book.PlanLedger.price_of` for the rows
    ``rows`` of ``usage`` (T, H, R), (|rows|, H, R): ``log_l + clip(g / c, 0, 1) * span -
    log_scale`` (``g / c`` read as 0 where ``pos`` is False), the same operations in the same
    order, without the gathered copy of the rows. Bit-identical. O(|rows| H R)."""
    return np.asarray(_log_prices(usage, np.ascontiguousarray(rows, dtype=np.int64), pos, safe,
                                  span, log_l, float(log_scale)))
