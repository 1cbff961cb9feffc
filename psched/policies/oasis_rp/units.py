"""The own-usage unit prices of ``oasis-rp``'s searches (lever (f)), with their per-job
terms kept and the selection compiled: :func:`psched.policies.oasis_rp.units.marginal_units`
exactly, at a fraction of its calls.

:func:`~psched.policies.oasis_rp.units.marginal_units` runs per search and pool about twenty numpy
calls on arrays of a few hundred numbers; at trace scale (tens of thousands of searches) the
calls, not the numbers, are its cost. Here:

1. **Terms kept.** The price slope of every server and resource (``ln(U/L) / c``), the
   stretch factor of a container (``(exp(a w) - 1) / (a w)`` or ``exp(a w)``) times the
   normalised demand, and the growth of the k-th container (``exp(a w k)``) depend on the
   ledger's capacities and price parameters, the job's demand and the number of
   containers only: they are computed once (by the same numpy operations on the same
   numbers) and kept while the capacity array and the parameters are the same objects.
2. **The same products, summed in a fixed order.** A unit's price is
   ``sum_r weight_r growth_r`` over the resources, added left to right
   (:func:`unit_prices_sum`) here and in the reference, so both give the same numbers on
   any machine.
3. **Units priced as the selection reaches them.** The growth terms are ``exp`` of rising
   exponents, so where they never fall in ``k`` (checked once per kept term) and the
   weighted prices are non-negative, every server's units rise in ``k`` (IEEE products by a
   non-negative number and sums of rising terms are monotone). The cheapest ``limit`` units
   of a run are then a merge of the servers' rows (a heap of their next units, ties by
   position: the first ``limit`` of a stable sort, as :func:`cheapest_units`), and a unit
   is priced only when it becomes its server's next one: ``H + limit`` units a run instead
   of ``H K``. The costs are the rank-order sums (``cumsum`` is a left-to-right sum).
   Otherwise every unit is priced and one compiled call selects them (the merge where each
   row rises, else the threshold and a stable sort). Comparisons and the same additions in
   the same order: bit-identical (``tests/test_rp_units.py``).

Complexity: O(U (H R + L (R + log H))) where the units rise, O(U H K R + U H K log(H K))
otherwise, with O(1) numpy calls per pool.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from psched.core.lazy_numba import lazy_numba
from psched.oasis.ledger import PoolInputs
from psched.policies.oasis_rp.book import PlanLedger

numba = lazy_numba(__name__)

__all__ = ["OwnUnits", "cheapest_units", "marginal_units", "marginal_units_kept", "price_slope",
           "select_rising_compiled", "select_units_compiled", "unit_prices_sum"]


@dataclass(frozen=True, kw_only=True)
class OwnUnits:
    """Marginal unit prices of one pool over a job's window, one row per run of slots."""

    k: int  #: K, the units per server: unit ``h K + k`` is the k-th container on server h
    #: (U, min(limit, H*K)) the cheapest units of each run, cheapest first (stable)
    order: np.ndarray
    costs: np.ndarray  #: (U, limit + 1) cost of the n cheapest units; inf beyond capacity
    #: (U, H, K) price of the k-th container on server h, inf beyond capacity; None where
    #: the units were priced only as the selection reached them (:func:`marginal_units_kept`)
    marg: np.ndarray | None = None


def marginal_units(pool: PoolInputs, caps: np.ndarray, a: np.ndarray, limit: int
                   ) -> OwnUnits:
    """Marginal unit prices and cheapest-``n`` costs of one pool.

    Parameters
    ----------
    pool : the pool's inputs restricted to one slot per run (price (U, H, R) in cost units).
    caps : (U, H) containers that fit per run and server.
    a : (H, R) ``ln(U^r/L) / c_h^r`` (0 where the capacity is 0).
    limit : the most containers of this pool the job ever needs in a slot.

    Complexity O(U H K R + U H K log(H K)), ``K = min(limit, max caps)``.
    """
    n_runs, n_srv = caps.shape
    k_max = int(min(limit, caps.max(initial=0)))
    if k_max == 0 or n_srv == 0:
        z = np.zeros((n_runs, n_srv, 0))
        costs = np.full((n_runs, limit + 1), np.inf)
        costs[:, 0] = 0.0
        return OwnUnits(k=0, marg=z, order=np.zeros((n_runs, 0), dtype=np.intp), costs=costs)
    ad = a * pool.demand[None, :]  # (H, R) exponent per container
    with np.errstate(invalid="ignore", divide="ignore"):
        stretch = np.where(ad > 0, np.expm1(ad) / np.where(ad > 0, ad, 1.0), 1.0)
    k = np.arange(k_max)
    # (U, H, K): sum_r norm_r p_hr exp(ad_hr k) stretch_hr
    weight = pool.price * (pool.norm[None, None, :] * stretch[None, :, :])  # (U, H, R)
    grow = np.exp(ad[None, :, :] * k[:, None, None])  # (K, H, R)
    marg = unit_prices_sum(weight, grow)
    marg = np.where(k[None, None, :] < caps[:, :, None], marg, np.inf)
    flat = marg.reshape(n_runs, -1)
    order = cheapest_units(flat, limit)
    ranked = np.take_along_axis(flat, order, axis=1)
    costs = np.full((n_runs, limit + 1), np.inf)
    costs[:, 0] = 0.0
    costs[:, 1:ranked.shape[1] + 1] = np.cumsum(ranked, axis=1)
    return OwnUnits(k=k_max, marg=marg, order=order, costs=costs)


def unit_prices_sum(weight: np.ndarray, grow: np.ndarray) -> np.ndarray:
    """``marg[u, h, k] = sum_r weight[u, h, r] grow[k, h, r]`` (U, H, K), summed over the
    resources left to right (``((w_0 g_0 + w_1 g_1) + w_2 g_2) + ...``): one product and one
    addition per term, each rounded as IEEE arithmetic rounds it, so a compiled loop in the
    same order gives the same numbers on any machine (``np.einsum`` sums in an order its
    build's vector width decides). O(U H K R)."""
    prod = weight[:, :, None, :] * grow.transpose(1, 0, 2)[None, :, :, :]  # (U, H, K, R)
    out: np.ndarray = prod[..., 0].copy()
    for r in range(1, prod.shape[3]):
        out += prod[..., r]
    return out


def cheapest_units(flat: np.ndarray, limit: int) -> np.ndarray:
    """Per row of ``flat`` (U, M), the positions of its ``min(limit, M)`` cheapest entries,
    cheapest first, ties by position: exactly the first ``limit`` columns of
    ``np.argsort(flat, axis=1, kind="stable")``, without sorting whole rows. The
    ``limit``-th smallest value ``v`` of each row (``np.partition``) splits it: every entry
    below ``v`` is taken, then the entries equal to ``v`` by position, and the ``limit``
    taken (kept in position order) are sorted stably by value. No NaN in ``flat`` (prices
    and ``inf`` only). O(U M) plus O(U limit log limit)."""
    n_rows, m = flat.shape
    k = min(limit, m)
    if k == 0:
        return np.zeros((n_rows, 0), dtype=np.intp)
    if k == 1:
        return np.asarray(np.argmin(flat, axis=1)[:, None])  # the first smallest: stable
    if 4 * k >= m:
        return np.argsort(flat, axis=1, kind="stable")[:, :k]
    v = np.partition(flat, k - 1, axis=1)[:, k - 1:k]
    below = flat < v
    tie = flat == v
    room = k - below.sum(axis=1, keepdims=True)
    take = below | (tie & (np.cumsum(tie, axis=1) <= room))
    pos = np.nonzero(take)[1].reshape(n_rows, k)  # each row's k, in position order
    vals = np.take_along_axis(flat, pos, axis=1)
    return np.take_along_axis(pos, np.argsort(vals, axis=1, kind="stable"), axis=1)


def price_slope(ledger: PlanLedger, pool: int) -> np.ndarray:
    """``ln(U^r/L) / c_h^r`` per server and resource of ``pool`` (0 where ``c = 0``)."""
    cap = ledger.capacity[pool]
    span = ledger.params.log_u[pool] - ledger.params.log_l[pool]
    return np.asarray(np.where(cap > 0, span[None, :] / np.where(cap > 0, cap, 1.0), 0.0))


@numba.njit(cache=True, nogil=True)
def _first(marg: np.ndarray, head: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover
    """Server ``a``'s next unit comes before server ``b``'s: cheaper, or as cheap and a lower
    server (a lower position ``h K + k``)."""
    va = marg[a, head[a]]
    vb = marg[b, head[b]]
    return va < vb or (va == vb and a < b)


@numba.njit(cache=True, nogil=True)
def _sift(marg: np.ndarray, head: np.ndarray, heap: np.ndarray, size: int,
          at: int) -> None:  # pragma: no cover - compiled
    """Restore the heap order of ``heap[:size]`` below position ``at``."""
    while True:
        low = at
        child = 2 * at + 1
        if child < size and _first(marg, head, heap[child], heap[low]):
            low = child
        child += 1
        if child < size and _first(marg, head, heap[child], heap[low]):
            low = child
        if low == at:
            return
        heap[at], heap[low] = heap[low], heap[at]
        at = low


@numba.njit(cache=True, nogil=True)
def _merge(marg: np.ndarray, take: int, order: np.ndarray,
           costs: np.ndarray) -> None:  # pragma: no cover - compiled
    """The ``take`` cheapest units of one run whose servers' units rise in ``k``, by merging
    the servers' rows (a heap of their next units): the next unit is the cheapest next one,
    the lowest server among equal ones. Each row is sorted by (value, position), so this is
    the order of a stable sort of the flattened row (ties by position ``h K + k``); the costs
    are the same left-to-right sums. O(H + take log H)."""
    n_srv, k_max = marg.shape
    head = np.zeros(n_srv, dtype=np.int64)
    heap = np.arange(n_srv)
    size = n_srv
    for at in range(size // 2 - 1, -1, -1):
        _sift(marg, head, heap, size, at)
    acc = 0.0
    for q in range(take):
        h = heap[0]
        v = marg[h, head[h]]
        order[q] = h * k_max + head[h]
        acc = v if q == 0 else acc + v
        costs[q + 1] = acc
        head[h] += 1
        if head[h] == k_max:  # the server's row is spent
            size -= 1
            heap[0] = heap[size]
        _sift(marg, head, heap, size, 0)


@numba.njit(cache=True, nogil=True)
def _select(raw: np.ndarray, caps: np.ndarray, limit: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    n_runs, n_srv, k_max = raw.shape
    m = n_srv * k_max
    take = min(limit, m)
    marg = np.empty((n_runs, n_srv, k_max))
    order = np.empty((n_runs, take), dtype=np.int64)
    costs = np.full((n_runs, limit + 1), np.inf)
    flat = np.empty(m)
    pos = np.empty(take, dtype=np.int64)
    vals = np.empty(take)
    for u in range(n_runs):
        rising = True
        for h in range(n_srv):
            c = caps[u, h]
            for k in range(k_max):
                v = raw[u, h, k] if k < c else np.inf
                marg[u, h, k] = v
                if 0 < k < c and v < raw[u, h, k - 1]:
                    rising = False
        costs[u, 0] = 0.0
        if take == 0:
            continue
        if rising:
            _merge(marg[u], take, order[u], costs[u])
            continue
        for h in range(n_srv):
            for k in range(k_max):
                flat[h * k_max + k] = marg[u, h, k]
        # the take-th smallest value: every entry below it, then the entries equal to it
        # by position, until take are chosen (kept in position order)
        cut = np.sort(flat)[take - 1]
        below = 0
        for i in range(m):
            if flat[i] < cut:
                below += 1
        room = take - below
        j = 0
        for i in range(m):
            f = flat[i]
            if f < cut or (f == cut and room > 0):
                if f == cut:
                    room -= 1
                pos[j] = i
                vals[j] = f
                j += 1
        rank = np.argsort(vals, kind="mergesort")  # stable: ties by position
        acc = 0.0
        for q in range(take):
            i = pos[rank[q]]
            order[u, q] = i
            acc = flat[i] if q == 0 else acc + flat[i]
            costs[u, q + 1] = acc
    return marg, order, costs


def select_units_compiled(raw: np.ndarray, caps: np.ndarray, limit: int
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(marg, order, costs)`` of :func:`psched.policies.oasis_rp.units.marginal_units` from its
    unmasked marginal prices ``raw`` (U, H, K) and the container caps (U, H): units at
    ``k >= caps`` priced ``inf``, each run's ``min(limit, H K)`` cheapest units cheapest
    first (ties by position), the cost of the ``n`` cheapest (``inf`` beyond). O(U (H K +
    limit log H)) where every server's units rise in ``k`` (a merge), O(U H K log(H K))
    for a run where they do not."""
    return _select(np.ascontiguousarray(raw, dtype=np.float64),
                   np.ascontiguousarray(caps, dtype=np.int64), int(limit))


@numba.njit(cache=True, nogil=True)
def _unit(pw: np.ndarray, grow: np.ndarray, u: int, h: int,
          k: int) -> float:  # pragma: no cover - compiled
    """``sum_r pw[u, h, r] grow[k, h, r]``, left to right, as :func:`unit_prices_sum`."""
    acc: float = pw[u, h, 0] * grow[k, h, 0]
    for r in range(1, pw.shape[2]):
        acc = acc + pw[u, h, r] * grow[k, h, r]
    return acc


@numba.njit(cache=True, nogil=True)
def _ahead(cur: np.ndarray, a: int, b: int) -> bool:  # pragma: no cover - compiled
    """Server ``a``'s next unit comes before server ``b``'s, as :func:`_first` decides."""
    va = cur[a]
    vb = cur[b]
    return va < vb or (va == vb and a < b)


@numba.njit(cache=True, nogil=True)
def _sift_next(cur: np.ndarray, heap: np.ndarray, size: int,
               at: int) -> None:  # pragma: no cover - compiled
    """:func:`_sift` on the servers' next unit prices ``cur``."""
    while True:
        low = at
        child = 2 * at + 1
        if child < size and _ahead(cur, heap[child], heap[low]):
            low = child
        child += 1
        if child < size and _ahead(cur, heap[child], heap[low]):
            low = child
        if low == at:
            return
        heap[at], heap[low] = heap[low], heap[at]
        at = low


@numba.njit(cache=True, nogil=True)
def _select_lazy(pw: np.ndarray, grow: np.ndarray, caps: np.ndarray, limit: int
                 ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``(order, costs)`` of :func:`_select` on ``unit_prices_sum(pw, grow)`` for units
    that rise in ``k`` on every server, each unit priced only when the merge reaches it:
    :func:`_merge` with ``marg[h, k]`` computed by :func:`_unit` (the same sum) when ``k``
    becomes server ``h``'s next unit, ``inf`` at ``k >= caps``. The same comparisons on the
    same numbers in the same order, so the same order and costs. O(U (H R + take (R +
    log H)))."""
    n_runs, n_srv, _ = pw.shape
    k_max = grow.shape[0]
    take = min(limit, n_srv * k_max)
    order = np.empty((n_runs, take), dtype=np.int64)
    costs = np.full((n_runs, limit + 1), np.inf)
    head = np.empty(n_srv, dtype=np.int64)
    cur = np.empty(n_srv)
    heap = np.empty(n_srv, dtype=np.int64)
    for u in range(n_runs):
        costs[u, 0] = 0.0
        if take == 0:
            continue
        for h in range(n_srv):
            head[h] = 0
            cur[h] = _unit(pw, grow, u, h, 0) if caps[u, h] > 0 else np.inf
            heap[h] = h
        size = n_srv
        for at in range(size // 2 - 1, -1, -1):
            _sift_next(cur, heap, size, at)
        acc = 0.0
        for q in range(take):
            h = heap[0]
            v = cur[h]
            order[u, q] = h * k_max + head[h]
            acc = v if q == 0 else acc + v
            costs[u, q + 1] = acc
            head[h] += 1
            if head[h] == k_max:  # the server's row is spent
                size -= 1
                heap[0] = heap[size]
            else:
                k = head[h]
                cur[h] = _unit(pw, grow, u, h, k) if k < caps[u, h] else np.inf
            _sift_next(cur, heap, size, 0)
    return order, costs


def select_rising_compiled(pw: np.ndarray, grow: np.ndarray, caps: np.ndarray, limit: int
                           ) -> tuple[np.ndarray, np.ndarray]:
    """``(order, costs)`` of :func:`select_units_compiled` on ``unit_prices_sum(pw, grow)``
    where every server's units rise in ``k`` (the caller's to know), pricing a unit only when
    the merge reaches it (:func:`_select_lazy`). O(U (H R + limit (R + log H)))."""
    return _select_lazy(np.ascontiguousarray(pw, dtype=np.float64),
                        np.ascontiguousarray(grow, dtype=np.float64),
                        np.ascontiguousarray(caps, dtype=np.int64), int(limit))


#: the most kept terms per ledger (each a few (K, H, R) arrays)
_MEMO_MAX = 1024

#: per ledger: (capacity arrays, params) the terms were computed for, and the terms
_TERMS: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], dict[Any, Any]]] = (
    weakref.WeakKeyDictionary())


def _terms(ledger: PlanLedger, pool: int, pinp: PoolInputs,
           k_max: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``norm * stretch`` (1, H, R) and ``exp(a w k)`` (K, H, R) of one pool, computed as
    :func:`~psched.policies.oasis_rp.units.marginal_units` computes them, and whether that
    growth never falls in ``k`` (``exp`` of rising exponents; checked, not assumed), kept per
    ledger while its capacities and price parameters are the same objects."""
    valid = (ledger.capacity[0], ledger.capacity[1], ledger.params)
    got = _TERMS.get(ledger)
    if got is None or any(a is not b for a, b in zip(got[0], valid, strict=True)):
        got = (valid, {})
        _TERMS[ledger] = got
    memo = got[1]
    if len(memo) > _MEMO_MAX:  # many distinct demands (a trace of continuous sizes): start over
        memo.clear()
    key = (pool, k_max, pinp.demand.tobytes(), pinp.norm.tobytes())
    terms = memo.get(key)
    if terms is None:
        slope = memo.get(pool)
        if slope is None:
            slope = memo[pool] = price_slope(ledger, pool)
        ad = slope * pinp.demand[None, :]  # (H, R) exponent per container
        with np.errstate(invalid="ignore", divide="ignore"):
            stretch = np.where(ad > 0, np.expm1(ad) / np.where(ad > 0, ad, 1.0), 1.0)
        k = np.arange(k_max)
        grow = np.exp(ad[None, :, :] * k[:, None, None])
        rises = bool(np.all(grow[1:] >= grow[:-1]))
        terms = memo[key] = (pinp.norm[None, None, :] * stretch[None, :, :], grow, rises)
    return terms


def marginal_units_kept(ledger: PlanLedger, pool: int, pinp: PoolInputs, caps: np.ndarray,
                        limit: int) -> OwnUnits:
    """:func:`marginal_units` ``(pinp, caps, price_slope(ledger, pool), limit)``, the same
    ``order`` and ``costs`` bit for bit: the per-job terms kept (:func:`_terms`), the same
    products, and the selection and sums compiled.

    Where the growth terms never fall in ``k`` and the weighted prices are non-negative,
    every server's units rise in ``k`` (IEEE products by a non-negative number and sums of
    rising terms are monotone), so the selection is the merge of :func:`_select`, and a unit
    is priced only when the merge reaches it (:func:`select_rising_compiled`: ``H + limit``
    units a run, not ``H K``; ``marg`` is then not built). Otherwise every unit is priced
    (:func:`unit_prices_sum`) and selected by :func:`select_units_compiled`."""
    n_srv = caps.shape[1]
    k_max = int(min(limit, caps.max(initial=0)))
    if k_max == 0 or n_srv == 0:
        return marginal_units(pinp, caps, price_slope(ledger, pool), limit)
    weight_of, grow, rises = _terms(ledger, pool, pinp, k_max)
    pw = pinp.price * weight_of
    if rises and bool(np.all(pw >= 0.0)):  # False for a NaN
        order, costs = select_rising_compiled(pw, grow, caps, limit)
        return OwnUnits(k=k_max, order=order, costs=costs)
    marg, order, costs = select_units_compiled(unit_prices_sum(pw, grow), caps, limit)
    return OwnUnits(k=k_max, marg=marg, order=order, costs=costs)
