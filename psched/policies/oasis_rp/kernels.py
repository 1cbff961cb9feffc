"""The compiled loops of ``oasis-rp``'s plan book and searches, besides the recursion
(:mod:`psched.policies.oasis_rp.dp`): the same numbers as the numpy they replace, in one call.

* :func:`greedy_costs_compiled`, :func:`greedy_takes_compiled`,
  :func:`placement_groups_compiled` -- the cheapest-first placement of
  :func:`psched.oasis.schedule.place` per run of identical slots: costs per worker count, the
  containers per server, and a schedule's container groups;
* :func:`unit_caps_compiled` -- the containers of one demand that fit per run and server;
* :func:`scatter_add_compiled`, :func:`scatter_add_ready` -- a plan's usage added to or taken
  out of the book;
* :func:`runs_compiled`, :func:`window_tables_compiled` -- the runs of identical slots of a
  window, kept incrementally, and the window's tables in one pass;
* :func:`log_prices_compiled` -- the exponent of the prices of given usage rows.

Each performs the same floating-point operations in the same order as its numpy reference,
so results are bit-identical (``tests/test_rp_search.py``, ``tests/test_rp_fast_paths.py``).
numba compiles them at the first call of one (:mod:`psched.core.lazy_numba`), not on import.
"""

from __future__ import annotations

import numpy as np

from psched.core.lazy_numba import lazy_numba
from psched.core.model import EPS

numba = lazy_numba(__name__)

__all__ = ["greedy_costs_compiled", "greedy_takes_compiled", "log_prices_compiled",
           "own_groups_compiled", "placement_groups_compiled", "runs_compiled",
           "scatter_add_compiled", "scatter_add_ready", "unit_caps_compiled",
           "window_tables_compiled"]


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
def _groups(unit: np.ndarray, caps: np.ndarray, order: np.ndarray, k_max: int, own: bool,
            rows: np.ndarray, need: np.ndarray, servers: np.ndarray, key: np.ndarray
            ) -> tuple[np.ndarray | bool, ...]:  # pragma: no cover
    """:func:`placement_groups_compiled` (``own`` False: the greedy of ``unit`` and
    ``caps``) and :func:`own_groups_compiled` (``own``: the first units of ``order``)."""
    n = rows.size
    width = servers.size
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
        if own:
            take[:] = 0
            for q in range(need[i]):
                take[order[rows[i], q] // k_max] += 1
        elif not _place_row(unit, caps, rows[i], need[i], take):
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


_NO_UNITS = np.zeros((0, 0))  # the placement a mode of _groups does not read
_NO_CAPS = np.zeros((0, 0), dtype=np.int64)


def own_groups_compiled(order: np.ndarray, k_max: int, rows: np.ndarray, need: np.ndarray,
                        servers: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, ...]:
    """The own-usage placements (``need[i]`` containers of row ``rows[i]``: the first
    ``need[i]`` units of ``order[rows[i]]``, unit ``q`` on the server at position
    ``q // k_max`` of ``servers``) as container groups, with the contract of
    :func:`placement_groups_compiled`: ``(off, srv, cnt, uid, s_srv, s_cnt)``, zero counts
    dropped, servers ascending. O(M (need + H))."""
    *out, _ = _groups(_NO_UNITS, _NO_CAPS, np.ascontiguousarray(order, dtype=np.int64),
                      int(k_max), True, np.ascontiguousarray(rows, dtype=np.int64),
                      np.ascontiguousarray(need, dtype=np.int64),
                      np.ascontiguousarray(servers, dtype=np.int64),
                      np.ascontiguousarray(key, dtype=np.int64))
    return tuple(np.asarray(a) for a in out)


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
                       np.ascontiguousarray(caps, dtype=np.int64), _NO_CAPS, 1, False,
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
    :class:`~psched.policies.oasis_rp.plans.Schedule`'s groups: read-only contiguous int64 ``ts``
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
    from the row before): :meth:`psched.policies.oasis_rp.book.PlanLedger.runs` in one compiled
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
    (:func:`psched.policies.oasis_rp.search.feasible_work`, ``per_slot = min(N, work)``) in one
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
    """The exponent of :meth:`psched.policies.oasis_rp.book.PlanLedger.price_of` for the rows
    ``rows`` of ``usage`` (T, H, R), (|rows|, H, R): ``log_l + clip(g / c, 0, 1) * span -
    log_scale`` (``g / c`` read as 0 where ``pos`` is False), the same operations in the same
    order, without the gathered copy of the rows. Bit-identical. O(|rows| H R)."""
    return np.asarray(_log_prices(usage, np.ascontiguousarray(rows, dtype=np.int64), pos, safe,
                                  span, log_l, float(log_scale)))
