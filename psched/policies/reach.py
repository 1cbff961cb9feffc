"""Jobs beyond a solver's reach: the solver sees one window of the epoch, a greedy the rest.

An exact allocator (the elastic MIP, Dorm) solves within a time limit, and a time limit on an
epoch of thousands of jobs either returns a poor incumbent or nothing. :func:`within_reach`
wraps any count chooser (``Epoch -> counts``) with one documented rule instead of a silent
cut:

1. If the epoch has at most ``max_jobs`` jobs, the chooser sees all of it (the wrapper changes
   nothing).
2. Otherwise the chooser sees a *window*: every running job (it may not be pre-empted), then
   queued jobs in arrival order, up to ``max_jobs`` jobs in all. Running jobs beyond
   ``max_jobs`` (more running jobs than the window holds) keep their current counts, taken
   out of the capacity first.
3. The jobs outside the window are planned by a greedy (default :func:`window_fill`, the
   plan of :func:`~psched.policies.greedy.fifo_fill` -- arrival order, smallest count first,
   then step up -- found with numpy passes instead of one Python step per job) on the
   capacity the window's plan leaves.

:class:`ReachReport` counts every split decision and every job the chooser did not see, so a
run states how much of it was exact. The plan is feasible whenever the chooser's is
(:func:`~psched.policies.epoch.feasible` on the whole epoch; tested). The anti-starvation
order is kept inside each part, not across the split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from psched.policies.epoch import Epoch

__all__ = ["ReachReport", "sub_epoch", "window_fill", "within_reach"]

Chooser = Callable[[Epoch], np.ndarray]


@dataclass(kw_only=True)
class ReachReport:
    """What the wrapper did over a run."""

    decisions: int = 0  #: epochs decided
    split: int = 0  #: epochs larger than the window
    jobs_in_window: int = 0  #: jobs the chooser saw, summed over split epochs
    jobs_beyond: int = 0  #: jobs planned by the greedy (or held), summed over split epochs

    def as_dict(self, prefix: str) -> dict[str, int]:
        """Figures for a policy's ``report()``, keys prefixed."""
        return {f"{prefix}_reach_decisions": self.decisions, f"{prefix}_reach_split": self.split,
                f"{prefix}_reach_jobs_in_window": self.jobs_in_window,
                f"{prefix}_reach_jobs_beyond": self.jobs_beyond}


def sub_epoch(epoch: Epoch, rows: np.ndarray, worker_cap: np.ndarray,
              ps_cap: np.ndarray) -> Epoch:
    """The epoch of the jobs ``rows`` (ascending) against the given pool capacities."""
    idx = [int(i) for i in rows]
    return replace(
        epoch, ids=tuple(epoch.ids[i] for i in idx),
        allowed=tuple(epoch.allowed[i] for i in idx), speed=tuple(epoch.speed[i] for i in idx),
        ps=tuple(epoch.ps[i] for i in idx), remaining=epoch.remaining[idx],
        weight=epoch.weight[idx], penalty=epoch.penalty[idx], current=epoch.current[idx],
        worker_demand=epoch.worker_demand[idx], ps_demand=epoch.ps_demand[idx],
        worker_cap=worker_cap, ps_cap=ps_cap)


def _first_interval(counts: np.ndarray) -> np.ndarray:
    return counts if counts.ndim == 1 else counts[:, 0]


def _peak_usage(epoch: Epoch, counts: np.ndarray, window: np.ndarray,
                inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Most the held jobs and the window's plan use of each pool resource in any interval."""
    if inner.ndim == 1:
        return epoch.usage(counts.astype(float))
    w_peak = p_peak = None
    for t in range(inner.shape[1]):
        c = counts.copy()
        c[window] = inner[:, t]
        w, p = epoch.usage(c.astype(float))
        w_peak = w if w_peak is None else np.maximum(w_peak, w)
        p_peak = p if p_peak is None else np.maximum(p_peak, p)
    assert w_peak is not None and p_peak is not None
    return w_peak, p_peak


def window_fill(epoch: Epoch) -> np.ndarray:
    """The counts :func:`~psched.policies.greedy.fifo_fill` returns (tested equal), for epochs
    of thousands of queued jobs.

    Running jobs keep their counts; queued jobs start at their smallest count in arrival order
    while they fit: each start is the first job that still fits, found by one numpy pass over
    the jobs not yet ruled out (what is left only shrinks, so a job that does not fit never
    fits later); then, in arrival order, every job with workers steps up its allowed counts
    while the next step fits. Same float operations and tolerance as the greedy.
    O(S J R) numpy for S starts, plus the steps.
    """
    n = len(epoch.ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    wcap, pcap = epoch.worker_cap.astype(float), epoch.ps_cap.astype(float)
    lim_w, lim_p = -1e-9 * np.maximum(1.0, wcap), -1e-9 * np.maximum(1.0, pcap)
    k = np.full(n, -1, dtype=np.int64)
    w_left, p_left = wcap.tolist(), pcap.tolist()
    wd, pd = epoch.worker_demand, epoch.ps_demand

    def step(j: int, to: int) -> bool:
        kj = int(k[j])
        dn = int(epoch.allowed[j][to]) - (0 if kj < 0 else int(epoch.allowed[j][kj]))
        dp = int(epoch.ps[j][to]) - (0 if kj < 0 else int(epoch.ps[j][kj]))
        w = [a - dn * d for a, d in zip(w_left, wd[j].tolist(), strict=True)]
        p = [a - dp * d for a, d in zip(p_left, pd[j].tolist(), strict=True)]
        if any(x < lim for x, lim in zip(w, lim_w.tolist(), strict=True)) or any(
                x < lim for x, lim in zip(p, lim_p.tolist(), strict=True)):
            return False
        w_left[:], p_left[:], k[j] = w, p, to
        return True

    for j in np.flatnonzero(epoch.current > 0).tolist():
        ok = step(j, epoch.index(j, int(epoch.current[j])))
        assert ok, "running jobs fit at their current counts"
    cand = np.flatnonzero(epoch.current == 0)
    if cand.size:
        n0 = np.array([epoch.allowed[j][0] for j in cand.tolist()], dtype=float)
        p0 = np.array([epoch.ps[j][0] for j in cand.tolist()], dtype=float)
        need_w, need_p = n0[:, None] * wd[cand], p0[:, None] * pd[cand]
        while cand.size:
            fit = (np.all(np.asarray(w_left) - need_w >= lim_w, axis=1)
                   & np.all(np.asarray(p_left) - need_p >= lim_p, axis=1))
            first = np.flatnonzero(fit)
            if not first.size:
                break
            i = int(first[0])
            ok = step(int(cand[i]), 0)
            assert ok, "the filter and the step agree"
            cand, need_w, need_p = cand[i + 1:], need_w[i + 1:], need_p[i + 1:]
    for j in np.flatnonzero(k >= 0).tolist():
        while k[j] + 1 < epoch.allowed[j].size and step(j, int(k[j]) + 1):
            pass
    return np.array([0 if kj < 0 else int(epoch.allowed[j][kj]) for j, kj in enumerate(k)],
                    dtype=np.int64)


def within_reach(choose: Chooser, max_jobs: int, *, fill: Chooser = window_fill,
                 report: ReachReport | None = None) -> Chooser:
    """``choose`` on at most ``max_jobs`` jobs of an epoch, ``fill`` on the rest (module doc).

    Parameters
    ----------
    choose : callable
        The exact chooser, ``Epoch -> counts`` (J,) or (J, T').
    max_jobs : int
        Most jobs the chooser sees (>= 1).
    fill : callable
        Chooser for the jobs outside the window (one interval: its counts are kept over
        every interval).
    report : ReachReport, optional
        Updated at every decision.

    Returns
    -------
    callable
        ``Epoch -> counts`` with the shape ``choose`` returns (the greedy's counts repeated
        over intervals when ``choose`` returns a plan per interval).

    Notes
    -----
    O(J R) besides the two choosers.
    """
    if max_jobs < 1:
        raise ValueError(f"max_jobs must be >= 1, got {max_jobs!r}")
    rep = report if report is not None else ReachReport()

    def chooser(epoch: Epoch) -> np.ndarray:
        rep.decisions += 1
        n = len(epoch.ids)
        if n <= max_jobs:
            return choose(epoch)
        running = np.flatnonzero(epoch.current > 0)
        queued = np.flatnonzero(epoch.current == 0)
        window = np.sort(np.concatenate([running, queued])[:max_jobs])
        held = running[max_jobs:] if running.size > max_jobs else running[:0]
        rest = np.setdiff1d(queued, window)
        counts = np.zeros(n, dtype=np.int64)
        counts[held] = epoch.current[held]
        w_held, p_held = epoch.usage(counts.astype(float))
        inner = choose(sub_epoch(epoch, window, epoch.worker_cap - w_held,
                                 epoch.ps_cap - p_held))
        counts[window] = _first_interval(inner)
        w_used, p_used = _peak_usage(epoch, counts, window, inner)
        if rest.size:
            outer = fill(sub_epoch(epoch, rest, epoch.worker_cap - w_used,
                                   epoch.ps_cap - p_used))
            counts[rest] = _first_interval(outer)
        rep.split += 1
        rep.jobs_in_window += int(window.size)
        rep.jobs_beyond += int(n - window.size)
        if inner.ndim == 2:
            plan = np.repeat(counts[:, None], inner.shape[1], axis=1)
            plan[window] = inner
            return plan
        return counts

    return chooser
