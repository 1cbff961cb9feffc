"""The paper's best-schedule dynamic program (Alg. 2), literally: the reference implementation.

In the worker-unit model of ``oasis.md`` section 7 the recursion reads

    cost(t, D) = min_{0 <= d <= min(D, N)} cost_t(t, d) + cost(t - 1, D - d),
    cost(a - 1, 0) = 0,  cost(a - 1, D > 0) = +inf                        ([gap] base)

with ``cost_t(t, d)`` the greedy placement of ``d`` workers and ``ceil(b/B d)`` PS in slot
``t`` (Theorem 1), written here as an explicit loop over sorted servers, independent of the
vectorised code in :mod:`psched.oasis.schedule`. The best completion slot maximises
``f(t - a + 1) - cost(t, W)``; a ``cost(t, W)`` whose schedule ends before ``t`` is still a
lower bound of what completing at ``t`` costs, and ``f`` is non-increasing, so the maximum is
the exact optimum.

Ties: each step keeps the largest minimising ``d`` (:func:`~psched.oasis.schedule.last_argmin`)
and the earliest completion wins among equal payoffs (:func:`~psched.oasis.schedule.beats`):
the tie rule of :mod:`psched.oasis.schedule`, so this returns the very schedule the fast
search returns, not only the same payoff.

Complexity: O(Tw (H + K) N) for the slot costs and O(Tw W N) for the recursion, with a Python
loop over ``(t, D)``; ~0.1-1 s per arrival at the paper's scale.
"""

from __future__ import annotations

import math

import numpy as np

from psched.core.model import EPS
from psched.oasis.ledger import JobInputs, PoolInputs
from psched.oasis.schedule import Best, beats, last_argmin

__all__ = ["literal_slot_cost", "solve_literal"]


def _greedy_cost(pool: PoolInputs, i: int, k: int) -> float:
    """Cheapest placement of ``k`` containers in window slot ``i``: explicit greedy loop."""
    if k == 0:
        return 0.0
    n_srv = pool.servers.size
    prices = [float(np.dot(pool.price[i, h], pool.norm)) for h in range(n_srv)]
    caps = []
    for h in range(n_srv):
        fit = math.inf
        for r, dem in enumerate(pool.demand):
            if dem > 0:
                fit = min(fit, math.floor(pool.resid[i, h, r] / dem + EPS))
        caps.append(max(0, int(min(fit, k))))
    left, cost = k, 0.0
    for h in sorted(range(n_srv), key=lambda j: prices[j]):
        take = min(left, caps[h])
        cost += take * prices[h]
        left -= take
        if left == 0:
            return cost
    return math.inf


def literal_slot_cost(inp: JobInputs, i: int, d: int) -> float:
    """``cost_t(t, d)`` for window slot ``i``: ``d`` workers plus their fewest PS."""
    w = _greedy_cost(inp.workers, i, d)
    return w + _greedy_cost(inp.ps, i, int(inp.ps_needed[d])) if w < math.inf else math.inf


def solve_literal(inp: JobInputs, floor: float = 0.0) -> Best:
    """Best schedule of one job by the literal recursion; payoff ``max(floor, best)``."""
    work, n_max, n_slots = inp.job.work, inp.job.max_workers, inp.n_slots
    prev = np.full(work + 1, np.inf)
    prev[0] = 0.0
    choices = np.zeros((n_slots, work + 1), dtype=np.int64)
    best, best_i = floor, -1
    for i in range(n_slots):
        ct = np.array([literal_slot_cost(inp, i, d) for d in range(n_max + 1)])
        cur = np.empty(work + 1)
        for big_d in range(work + 1):
            d = np.arange(min(big_d, n_max) + 1)
            vals = ct[d] + prev[big_d - d]
            j = last_argmin(vals)
            cur[big_d], choices[i, big_d] = vals[j], d[j]
        payoff = float(inp.util[i]) - float(cur[work])
        if beats(payoff, best):
            best, best_i = payoff, i
        prev = cur
    if best_i < 0:
        return Best(payoff=best, counts=None)
    counts = np.zeros(n_slots, dtype=np.int64)
    left = work
    for i in range(best_i, -1, -1):
        counts[i] = choices[i, left]
        left -= int(counts[i])
    return Best(payoff=best, counts=counts)
