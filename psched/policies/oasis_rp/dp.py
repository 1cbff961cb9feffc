"""The recursion of :func:`psched.oasis.solve_fast`, compiled: the same result, one call.

``oasis-rp`` runs thousands of exact searches per run (one per re-planned job); in each, the
min-plus recursion ``cost(t, D) = min_n c_t(n) + cost(t - 1, D - n)`` is most of the time at
the oasis-paper scale (windows of a few hundred slots, W up to 1,000, N up to 100). NumPy
builds a ``(D, n)`` array per slot; :func:`solve_compiled` runs the same loop in one
compiled call (numba: compiled for fixed argument types when one of them is first called,
:mod:`psched.core.lazy_numba`, then loaded from the cache on disk next to it).

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

from psched.core.lazy_numba import lazy_numba
from psched.oasis.ledger import JobInputs
from psched.oasis.schedule import ARG_RTOL, TIE_RTOL, Best

#: numba compiles this module's functions at the first call of one (psched.core.lazy_numba), not on
#: import: ``import psched.policies`` (every CLI command) does not import numba
numba = lazy_numba(__name__)

__all__ = ["cost_lower_bound_compiled", "solve_compiled"]


@numba.njit("boolean(float64, float64)", cache=True, nogil=True)
def _beats(payoff: float, best: float) -> bool:  # pragma: no cover - compiled
    if not np.isfinite(best):
        return payoff > best
    return payoff > best + TIE_RTOL * abs(best)


@numba.njit(inline="always")
def _fold(v: float, n: float, low: float, thr: float,
          cand: float) -> tuple[float, float, float]:  # pragma: no cover - compiled
    """One sum ``v = h[D - n] + c[n]`` into ``D``'s running minimum ``low``, its threshold
    ``thr`` and candidate ``cand`` (:func:`_step`)."""
    cand = n if (v <= thr or v < low) else cand
    thr = (v + ARG_RTOL * v) if v < low else thr
    return min(v, low), thr, cand


@numba.njit("void(float64[::1], float64[::1], int64, int64, float64[::1], int32[::1],"
            " float64[::1], float64[::1], float64[::1])", cache=True, nogil=True,
            error_model="numpy")
def _step(h: np.ndarray, c: np.ndarray, k: int, hi: int, new: np.ndarray, arg: np.ndarray,
          low: np.ndarray, thr: np.ndarray, cand: np.ndarray
          ) -> None:  # pragma: no cover - compiled
    """``new[D] = min_n h[D - n] + c[n]``, ``arg[D]`` the largest minimising ``n`` within
    ARG_RTOL, for ``D = 0..hi`` (``h[x] = inf`` for ``x < 0``): ``minplus_step``.

    The sums are folded in ``n`` ascending (:func:`_fold`; ``low``, ``thr`` and ``cand`` are
    scratch of length ``>= hi + 1``): per ``D`` the running minimum ``low``, its threshold
    ``thr = low + ARG_RTOL * low`` and ``cand``, the last ``n`` whose sum is within the
    threshold of the minimum *so far*. That last ``n`` is the largest within the threshold of
    the final minimum: past the last ``n`` that sets the minimum, the threshold is the final
    one, and every ``n`` up to it is compared with a threshold at least as high as the final
    one (the literal loop takes the largest ``n`` with ``sum <= thr`` of the final minimum).
    Two ``n`` are folded per pass over ``D`` (``n`` then ``n + 1``, the order of one pass
    each; the compiler vectorises the pass over ``D``), so the scratch is read and written
    half as often. The sums are the same additions, the minimum the same exact comparisons,
    so ``new`` and ``arg`` are bit-identical to the two-pass loop over ``n`` descending
    (``tests/test_rp_search.py``). O(hi k)."""
    inf = np.inf
    for d in range(hi + 1):
        low[d] = inf
        thr[d] = inf
        cand[d] = 0.0
    n = 0
    while n <= k:
        ca = c[n]
        fa = float(n)
        a = np.uint64(n)  # unsigned indices: no negative-index wrap, so the loop vectorises
        if n == k:  # the last n alone
            for d in range(a, np.uint64(hi + 1)):
                low[d], thr[d], cand[d] = _fold(h[d - a] + ca, fa, low[d], thr[d], cand[d])
            break
        cb = c[n + 1]
        fb = float(n + 1)
        b = np.uint64(n + 1)
        if n <= hi:  # D = n: only n (D - (n + 1) < 0)
            low[n], thr[n], cand[n] = _fold(h[0] + ca, fa, low[n], thr[n], cand[n])
        for d in range(b, np.uint64(hi + 1)):
            x, t, m = _fold(h[d - a] + ca, fa, low[d], thr[d], cand[d])
            low[d], thr[d], cand[d] = _fold(h[d - b] + cb, fb, x, t, m)
        n += 2
    for d in range(hi + 1):
        if low[d] == inf:  # every sum inf: the largest n, as the literal loop picks
            new[d] = inf
            arg[d] = k
        else:
            n = int(cand[d])
            arg[d] = n
            new[d] = h[d - n] + c[n]


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
    low = np.empty(work + 1)  # _step's scratch
    thr = np.empty(work + 1)
    cand = np.empty(work + 1)
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
        _step(h, c_all[i], k, hi, new, steps[n_steps], low, thr, cand)
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
