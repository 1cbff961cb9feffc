"""The own-usage unit prices of ``oasis-rp``'s searches (lever (f)), with their per-job
terms kept and the selection compiled: :func:`psched.policies.rp_own.marginal_units`
exactly, at a fraction of its calls.

:func:`~psched.policies.rp_own.marginal_units` runs per search and pool about twenty numpy
calls on arrays of a few hundred numbers; at trace scale (tens of thousands of searches) the
calls, not the numbers, are its cost. Here:

1. **Terms kept.** The price slope of every server and resource (``ln(U/L) / c``), the
   stretch factor of a container (``(exp(a w) - 1) / (a w)`` or ``exp(a w)``) times the
   normalised demand, and the growth of the k-th container (``exp(a w k)``) depend on the
   ledger's capacities and price parameters, the job's demand, the mode and the number of
   containers only: they are computed once (by the same numpy operations on the same
   numbers) and kept while the capacity array and the parameters are the same objects.
2. **The same products and the same einsum** give the marginal prices.
3. **One compiled call** masks the units beyond capacity, selects each run's cheapest
   ``limit`` units (ties by position: the first ``limit`` of a stable sort, as
   :func:`~psched.policies.rp_own.cheapest_units`) and sums them in rank order (``cumsum``
   is a left-to-right sum, as here). Comparisons and the same additions in the same order:
   bit-identical (``tests/test_rp_units.py``).

Complexity: O(U H K R) for the einsum plus O(U H K + U L log L) for the selection, with
O(1) numpy calls per pool.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from psched.lazy_numba import lazy_numba
from psched.oasis.ledger import PoolInputs

if TYPE_CHECKING:
    from psched.policies.rp_book import PlanLedger
    from psched.policies.rp_own import OwnUnits

numba = lazy_numba(__name__)

__all__ = ["marginal_units_kept", "select_units_compiled"]


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
        for h in range(n_srv):
            for k in range(k_max):
                v = raw[u, h, k] if k < caps[u, h] else np.inf
                marg[u, h, k] = v
                flat[h * k_max + k] = v
        costs[u, 0] = 0.0
        if take == 0:
            continue
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
    """``(marg, order, costs)`` of :func:`psched.policies.rp_own.marginal_units` from its
    unmasked marginal prices ``raw`` (U, H, K) and the container caps (U, H): units at
    ``k >= caps`` priced ``inf``, each run's ``min(limit, H K)`` cheapest units cheapest
    first (ties by position), the cost of the ``n`` cheapest (``inf`` beyond). O(U H K
    log(H K))."""
    return _select(np.ascontiguousarray(raw, dtype=np.float64),
                   np.ascontiguousarray(caps, dtype=np.int64), int(limit))


#: the most kept terms per ledger (each a few (K, H, R) arrays)
_MEMO_MAX = 1024

#: per ledger: (capacity arrays, params) the terms were computed for, and the terms
_TERMS: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], dict[Any, Any]]] = (
    weakref.WeakKeyDictionary())


def _terms(ledger: PlanLedger, pool: int, pinp: PoolInputs, mode: str,
           k_max: int) -> tuple[np.ndarray, np.ndarray]:
    """``norm * stretch`` (1, H, R) and ``exp(a w k)`` (K, H, R) of one pool, computed as
    :func:`~psched.policies.rp_own.marginal_units` computes them, kept per ledger while its
    capacities and price parameters are the same objects."""
    from psched.policies.rp_own import _slope

    valid = (ledger.capacity[0], ledger.capacity[1], ledger.params)
    got = _TERMS.get(ledger)
    if got is None or any(a is not b for a, b in zip(got[0], valid, strict=True)):
        got = (valid, {})
        _TERMS[ledger] = got
    memo = got[1]
    if len(memo) > _MEMO_MAX:  # many distinct demands (a trace of continuous sizes): start over
        memo.clear()
    key = (pool, mode, k_max, pinp.demand.tobytes(), pinp.norm.tobytes())
    terms = memo.get(key)
    if terms is None:
        slope = memo.get(pool)
        if slope is None:
            slope = memo[pool] = _slope(ledger, pool)
        ad = slope * pinp.demand[None, :]  # (H, R) exponent per container
        with np.errstate(invalid="ignore", divide="ignore"):
            stretch = (np.where(ad > 0, np.expm1(ad) / np.where(ad > 0, ad, 1.0), 1.0)
                       if mode == "integral" else np.exp(ad))
        k = np.arange(k_max)
        terms = memo[key] = (pinp.norm[None, None, :] * stretch[None, :, :],
                             np.exp(ad[None, :, :] * k[:, None, None]))
    return terms


def marginal_units_kept(ledger: PlanLedger, pool: int, pinp: PoolInputs, caps: np.ndarray,
                        limit: int, mode: str) -> OwnUnits:
    """:func:`psched.policies.rp_own.marginal_units` ``(pinp, caps, _slope(ledger, pool),
    limit, mode)``, bit-identical: the per-job terms kept (:func:`_terms`), the same einsum,
    the selection and sums compiled (:func:`select_units_compiled`)."""
    from psched.policies.rp_own import OwnUnits, _slope, marginal_units

    n_srv = caps.shape[1]
    k_max = int(min(limit, caps.max(initial=0)))
    if k_max == 0 or n_srv == 0:
        return marginal_units(pinp, caps, _slope(ledger, pool), limit, mode)
    weight_of, grow = _terms(ledger, pool, pinp, mode, k_max)
    raw = np.einsum("uhr,khr->uhk", pinp.price * weight_of, grow)
    marg, order, costs = select_units_compiled(raw, caps, limit)
    return OwnUnits(marg=marg, order=order, costs=costs)
