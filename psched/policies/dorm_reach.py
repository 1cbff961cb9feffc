"""Dorm beyond its solver's reach: the window rule of :mod:`psched.policies.reach` on worker counts.

Dorm's MILP (:mod:`psched.policies.dorm`) over every unfinished job of a trace of tens of
thousands of jobs is neither solvable within its time limit nor buildable in time at every
event. The rule, the same as :func:`~psched.policies.reach.within_reach` for the elastic MIP:

1. If at most ``max_jobs`` jobs are unfinished, the MILP sees all of them (nothing changes).
2. Otherwise the MILP sees a *window*: every running job, then queued jobs in arrival order,
   up to ``max_jobs`` jobs in all (:func:`split`). Running jobs beyond ``max_jobs`` keep their
   current counts, taken out of the pool totals first.
3. The queued jobs outside the window are planned by :func:`fifo_fill` on the pool totals the
   window's counts leave: in arrival order each job starts at one worker if it fits, then, in
   arrival order, each started job grows to the most workers (up to its cap) that fit.

Every split decision and every job the MILP did not see is counted
(:class:`~psched.policies.reach.ReachReport`, in :meth:`DormPolicy.report`) and logged at
DEBUG. The fill never exceeds what is left (tested), so the counts fit the pool totals whenever
the window's counts do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from psched.core.model import EPS

__all__ = ["Split", "fifo_fill", "split", "usage"]

_TOL = 1e-9


@dataclass(frozen=True, kw_only=True)
class Split:
    """Positions (arrival order, ascending) of the jobs in each part of one decision."""

    window: np.ndarray  #: jobs the MILP sees
    held: np.ndarray  #: running jobs beyond the window, kept at their counts
    rest: np.ndarray  #: queued jobs beyond the window, planned by the fill


def split(current: np.ndarray, max_jobs: int) -> Split:
    """The window rule (module docstring) on current counts (J,), jobs in arrival order. O(J)."""
    if max_jobs < 1:
        raise ValueError(f"max_jobs must be >= 1, got {max_jobs!r}")
    running = np.flatnonzero(current > 0)
    queued = np.flatnonzero(current <= 0)
    window = np.sort(np.concatenate([running, queued])[:max_jobs])
    held = running[max_jobs:]
    rest = queued[max(0, max_jobs - running.size):]
    return Split(window=window, held=held, rest=rest)


def ps_for(ratio: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """PS by the ratio, ``ceil(b/B n)`` (0 at 0 workers), as
    :meth:`~psched.core.model.Job.ps_needed`."""
    out: np.ndarray = np.where(counts > 0, np.ceil(ratio * counts - EPS), 0.0)
    return out


def usage(counts: np.ndarray, w: np.ndarray, s: np.ndarray, ratio: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """Worker- and PS-pool usage (R each) of counts (J,) with demands ``w``, ``s`` (J x R)."""
    c = np.asarray(counts, dtype=float)
    return c @ w, ps_for(ratio, c) @ s


def _most(start: int, upper: int, w: list[float], s: list[float], ratio: float,
          free_w: list[float], free_p: list[float]) -> int:
    """Largest ``n`` in ``[start, upper]`` with ``n`` workers (after ``start`` are held) fitting
    (fit is monotone in ``n``): bisection. O(R log upper)."""
    lo, hi = start, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        ps_extra = (np.ceil(ratio * mid - EPS) - (np.ceil(ratio * start - EPS) if start else 0))
        ok = (all((mid - start) * a <= f + _TOL * max(1.0, abs(f))
                  for a, f in zip(w, free_w, strict=True))
              and all(ps_extra * b <= f + _TOL * max(1.0, abs(f))
                      for b, f in zip(s, free_p, strict=True)))
        lo, hi = (mid, hi) if ok else (lo, mid - 1)
    return lo


def fifo_fill(w: np.ndarray, s: np.ndarray, ratio: np.ndarray, upper: np.ndarray,
              free_w: np.ndarray, free_p: np.ndarray) -> np.ndarray:
    """FIFO fill of queued jobs (arrival order) on what is left (module docstring, rule 3).

    Parameters
    ----------
    w, s : ndarray
        One worker's and one PS's demand, K x R.
    ratio : ndarray
        PS per worker ``b/B`` (K,).
    upper : ndarray
        Most workers each job may get (K,).
    free_w, free_p : ndarray
        Worker- and PS-pool totals left (R each).

    Returns
    -------
    ndarray
        Worker counts (K,), fitting ``free_w`` / ``free_p``.

    Notes
    -----
    Each start is found by one numpy pass over the jobs still able to fit one worker (the
    pool left only shrinks, so a job that does not fit never fits later). O(S K R + S R log N)
    for S jobs started.
    """
    k = upper.size
    counts = np.zeros(k, dtype=np.int64)
    if k == 0:
        return counts
    ps1 = ps_for(ratio, np.ones(k))[:, None] * s  # PS-pool demand of one worker
    left_w, left_p = free_w.astype(float).copy(), free_p.astype(float).copy()
    cand = np.flatnonzero(upper >= 1)
    started = []
    while cand.size:
        fit = np.all(w[cand] <= left_w + _TOL * np.maximum(1.0, np.abs(left_w)), axis=1) & \
            np.all(ps1[cand] <= left_p + _TOL * np.maximum(1.0, np.abs(left_p)), axis=1)
        cand = cand[fit]
        if not cand.size:
            break
        j = int(cand[0])  # the earliest job that fits one worker on what is left
        left_w -= w[j]
        left_p -= ps1[j]
        counts[j] = 1
        started.append(j)
        cand = cand[1:]
    lw, lp = left_w.tolist(), left_p.tolist()
    for j in started:
        wj, sj, rj = w[j].tolist(), s[j].tolist(), float(ratio[j])
        n = _most(1, int(upper[j]), wj, sj, rj, lw, lp)
        if n > 1:
            ps_extra = float(np.ceil(rj * n - EPS) - np.ceil(rj - EPS))
            for r, a in enumerate(wj):
                lw[r] -= (n - 1) * a
            for r, b in enumerate(sj):
                lp[r] -= ps_extra * b
            counts[j] = n
    return counts
