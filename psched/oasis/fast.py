"""The fast exact best-schedule search used by the OASiS policy.

It solves exactly the problem of :mod:`psched.oasis.literal` -- the maximum over completion
slots ``t`` and schedules of ``f(t - a + 1) - cost`` -- and returns the same optimum. Speed
comes from four exact devices, none of which drops a schedule that could win:

1. **All slot costs at once.** The greedy placement (Theorem 1) of ``n = 0..N`` workers and
   their PS is vectorised over the whole window (:func:`~psched.oasis.schedule.slot_costs`).
2. **Vectorised min-plus step.** ``cost(t, .) = cost(t - 1, .) (+) c_t`` is one
   ``(D, n)`` array operation over a strided view, limited to the reachable ``D``
   (``D <= sum`` of the slot capacities so far) and to the feasible ``n`` of the slot. The
   recursion is shared by every candidate completion slot (prefix ``t`` of the window).
3. **Exact pruning of completion slots.** Every cost is at least ``LB``, the cheapest
   fractional fill of ``W`` workers at each slot's least average cost per worker
   ``min_n c_t(n) / n`` within its capacity (:func:`cost_lower_bound`, a relaxation). Once
   ``max_{t' >= t} f(t') - LB`` is no better than the best payoff found, no later completion
   can win and the search stops.
4. **Stationary runs of identical slots.** Slots whose prices and residual capacities match
   give identical cost vectors (typically the untouched future). If adding such a slot left
   ``cost(t, .)`` unchanged, another identical slot cannot change it either
   (``h (+) c = h  =>  (h (+) c) (+) c = h``), so it is skipped without computing -- with the
   rest of its run when the ledger marked the run (:attr:`~psched.oasis.ledger.JobInputs.runs`,
   e.g. the untouched future of a 2,500-slot window); its minimisers are those of the previous
   slot (same ``h``, same ``c``), so the schedule read back is the one the literal recursion
   picks.

Ties: the schedule returned is the one of the tie rule in :mod:`psched.oasis.schedule`
(earliest completion among equal payoffs, then the most workers in the latest slots), the
same as :func:`~psched.oasis.literal.solve_literal` returns.

Complexity: O(Tw (H + K) R + Tw N log H) for the slot costs, and at most O(Tw W N) for the
recursion, usually far less after pruning.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from psched.oasis.ledger import JobInputs
from psched.oasis.schedule import ARG_RTOL, Best, beats, slot_costs

__all__ = ["ARG_RTOL", "completion_costs", "cost_lower_bound", "minplus_step", "solve_fast"]


def minplus_step(h: np.ndarray, c: np.ndarray, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``new[D] = min_{0 <= n <= min(D, k)} h[D - n] + c[n]`` for ``D = 0..hi``.

    Returns ``new`` and the minimising ``n`` per ``D``: the largest ``n`` within
    :data:`ARG_RTOL` of the minimum (the tie rule of :mod:`psched.oasis.schedule`, as
    :func:`~psched.oasis.schedule.last_argmin`), so that float noise (units, utility scale)
    never changes which of two equal-cost schedules is chosen.
    ``h`` must hold at least ``hi + 1`` entries. Complexity O(hi k).
    """
    k = c.shape[0] - 1
    hp = np.concatenate((np.full(k, np.inf), h[: hi + 1]))
    step = hp.strides[0]
    m = as_strided(hp, shape=(hi + 1, k + 1), strides=(step, step), writeable=False) + c[::-1]
    low = m.min(axis=1)
    j = (m <= (low + ARG_RTOL * low)[:, None]).argmax(axis=1)
    new = m[np.arange(hi + 1), j]
    return new, (k - j).astype(np.int32)


def _minplus_values(h: np.ndarray, c: np.ndarray, hi: int) -> np.ndarray:
    """The values of :func:`minplus_step` alone (no minimiser). Complexity O(hi k)."""
    k = c.shape[0] - 1
    hp = np.concatenate((np.full(k, np.inf), h[: hi + 1]))
    step = hp.strides[0]
    m = as_strided(hp, shape=(hi + 1, k + 1), strides=(step, step), writeable=False) + c[::-1]
    return np.asarray(m.min(axis=1))


def cost_lower_bound(costs: np.ndarray, work: int) -> float:
    """A lower bound on the cost of ``work`` workers over all slots of ``costs`` (Tw, n).

    Slot ``t`` costs at least ``r_t n`` for ``n`` workers, ``r_t = min_{n >= 1} c_t(n) / n``,
    and holds at most ``m_t`` (its last finite ``n``); the cheapest fractional fill of ``work``
    at those rates (a fractional knapsack, sorted by rate) is a lower bound, at least
    ``work * min_t r_t``. ``inf`` if the slots cannot hold ``work`` at all. O(Tw (n + log Tw)).
    """
    if costs.shape[1] < 2:
        return np.inf
    n = np.arange(1, costs.shape[1])
    finite = np.isfinite(costs[:, 1:])
    m = finite.sum(axis=1)  # feasible n form a prefix
    with np.errstate(invalid="ignore"):
        rate = np.where(finite, costs[:, 1:] / n, np.inf).min(axis=1)
    order = np.argsort(rate, kind="stable")
    cap = m[order]
    before = np.cumsum(cap) - cap
    take = np.clip(work - before, 0, cap)
    if take.sum() < work:
        return np.inf
    used = take > 0
    return float(np.sum(rate[order][used] * take[used]))


def solve_fast(inp: JobInputs, floor: float = 0.0, costs: np.ndarray | None = None) -> Best:
    """Best schedule of one job, exactly as :func:`~psched.oasis.literal.solve_literal`.

    Parameters
    ----------
    inp : the job's priced inputs over its window.
    floor : only payoffs above it count (0 for admission); pruning uses it.
    costs : precomputed slot costs of ``inp`` (Tw, N+1), ``slot_costs(inp)``; else computed
        here. They must be ``inp``'s: runs of identical slots (``inp.runs``) are skipped whole.

    Returns
    -------
    Best : payoff ``max(floor, optimum)`` in cost units and, if above the floor, the workers
    per window slot of the optimal schedule the tie rule picks (earliest optimal completion
    slot, then the most workers in the latest slots; :mod:`psched.oasis.schedule`).
    """
    work = inp.job.work
    c_all = slot_costs(inp) if costs is None else costs
    c_all = c_all[:, : min(c_all.shape[1], work + 1)]
    finite = np.isfinite(c_all)
    first_inf = np.where(finite.all(axis=1), c_all.shape[1], np.argmin(finite, axis=1))
    n_cap = first_inf - 1  # feasible n form a prefix: costs rise with n
    lb = cost_lower_bound(c_all, work)
    best, best_i = floor, -1
    if not np.isfinite(lb):
        return Best(payoff=best, counts=None)
    util_after = np.maximum.accumulate(inp.util[::-1])[::-1]
    h = np.full(work + 1, np.inf)
    h[0] = 0.0
    reach = 0
    args: list[np.ndarray | None] = [None] * inp.n_slots
    run_end = _run_ends(inp)
    prev_arg: np.ndarray | None = None
    prev_c: np.ndarray | None = None
    prev_changed = True
    i = -1
    while i + 1 < inp.n_slots:
        i += 1
        if not beats(util_after[i] - lb, best):
            break
        k = int(n_cap[i])
        if k <= 0:
            continue
        c = c_all[i, : k + 1]
        same = prev_c is not None and prev_c.shape == c.shape and np.array_equal(prev_c, c)
        if same and not prev_changed:
            # same h, same c: the same minimisers, here and along the rest of the run of
            # identical slots; h stays unchanged, so no completion there can win
            end = int(run_end[i])
            args[i:end] = [prev_arg] * (end - i)
            i = end - 1
            continue
        hi = min(work, reach + k)
        new, arg = minplus_step(h, c, hi)
        prev_changed = not np.array_equal(new, h[: hi + 1])
        h[: hi + 1] = new
        reach = hi
        args[i] = prev_arg = arg
        prev_c = c
        payoff = float(inp.util[i]) - float(h[work])
        if beats(payoff, best):
            best, best_i = payoff, i
    if best_i < 0:
        return Best(payoff=best, counts=None)
    counts = np.zeros(inp.n_slots, dtype=np.int64)
    left = work
    for i in range(best_i, -1, -1):
        step = args[i]
        if step is not None and left > 0:
            counts[i] = int(step[left])
            left -= int(counts[i])
    if left != 0:  # pragma: no cover - the recursion guarantees a path
        raise RuntimeError("backtracking did not reach zero work")
    return Best(payoff=best, counts=counts)


def _run_ends(inp: JobInputs) -> np.ndarray:
    """For every window slot, one past the last slot of its run of identical slots."""
    starts, row_of = inp.run_index()
    ends = np.append(starts[1:], inp.n_slots)
    return np.asarray(ends[row_of])


def completion_costs(inp: JobInputs, costs: np.ndarray | None = None) -> np.ndarray:
    """Cheapest cost of completing the job's work by each window slot: ``cost(t, W)``, (Tw,).

    The recursion of :func:`solve_fast` (the literal Alg. 2 ``cost(t, W)``) without pruning
    of completion slots, so every entry is exact; ``inf`` where ``W`` cannot be done by then.
    Entries are non-increasing (a slot may take no workers). Only the exact stationary-run
    device is kept: an identical slot after one that left ``cost(t, .)`` unchanged leaves it
    unchanged again. The min-plus recursion is positively homogeneous in the costs, so the
    best payoff with every cost scaled by ``theta >= 0`` is
    ``max(0, max_t f(t) - theta * cost(t, W))`` (used by the dual certificate).

    Complexity: O(Tw (H + K) R + Tw N log H) for the slot costs when not given, O(Tw W N)
    for the recursion.
    """
    work = inp.job.work
    out = np.full(inp.n_slots, np.inf)
    c_all = slot_costs(inp) if costs is None else costs
    c_all = c_all[:, : min(c_all.shape[1], work + 1)]
    finite = np.isfinite(c_all)
    first_inf = np.where(finite.all(axis=1), c_all.shape[1], np.argmin(finite, axis=1))
    n_cap = first_inf - 1
    h = np.full(work + 1, np.inf)
    h[0] = 0.0
    reach = 0
    prev_c: np.ndarray | None = None
    prev_changed = True
    for i in range(inp.n_slots):
        k = int(n_cap[i])
        if k > 0:
            c = c_all[i, : k + 1]
            same = prev_c is not None and prev_c.shape == c.shape and np.array_equal(prev_c, c)
            if not (same and not prev_changed):
                hi = min(work, reach + k)
                new = _minplus_values(h, c, hi)
                prev_changed = not np.array_equal(new, h[: hi + 1])
                h[: hi + 1] = new
                reach = hi
                prev_c = c
        out[i] = h[work]
    return out
