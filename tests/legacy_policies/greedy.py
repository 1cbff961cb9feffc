"""The greedy baselines of the elastic MIP allocator (``elastic_mip.md``, Hu et al. 2021).

Both see the same :class:`~psched.policies.epoch.Epoch` as the MIP and plan against the same
pool totals; neither pre-empts nor shrinks a running job (it keeps ``a_j``, trimmed to the work
left).

1. **FIFO + fill** (:func:`fifo_fill`): start queued jobs in arrival order at their smallest
   count while they fit; then, in arrival order, step each job with workers up through its
   allowed counts while the next step fits.
2. **Marginal gain** (:func:`marginal_gain`): start queued jobs as in 1; then repeatedly give
   the next allowed step to the job with the largest gain per added worker. Under the linear
   speed model the raw throughput gain per worker is 1 for every job (a tie), so the gain is
   counted in the MIP's objective unit, ``w_j (min(W_j, Delta s_j(n')) - min(W_j, Delta s_j(n)))
   / W_j`` per added worker -- the strongest reading: it is greedy on the very objective the MIP
   maximises. Ties go to the earlier arrival.

A job whose next step does not fit is frozen for the epoch (free capacity only shrinks).
Complexity: O(J R + S_steps (R + log J)) for S_steps steps tried.
"""

from __future__ import annotations

import heapq

import numpy as np

from legacy_policies.epoch import Epoch, EpochPolicy

__all__ = ["GreedyFillPolicy", "GreedyGainPolicy", "density_fill", "fifo_fill", "marginal_gain"]

_TOL = 1e-9


class _Room:
    """Pool totals left while a greedy fills."""

    def __init__(self, epoch: Epoch) -> None:
        self.e = epoch
        self.w = epoch.worker_cap.astype(float).copy()
        self.p = epoch.ps_cap.astype(float).copy()
        self.k = np.full(len(epoch.ids), -1, dtype=np.int64)  #: index into allowed; -1 = 0

    def count(self, j: int) -> int:
        return 0 if self.k[j] < 0 else int(self.e.allowed[j][self.k[j]])

    def step(self, j: int, k: int) -> bool:
        """Move job ``j`` to ``allowed[j][k]`` if the difference fits; done?"""
        e = self.e
        dn = int(e.allowed[j][k]) - self.count(j)
        dp = int(e.ps[j][k]) - (0 if self.k[j] < 0 else int(e.ps[j][self.k[j]]))
        w = self.w - dn * e.worker_demand[j]
        p = self.p - dp * e.ps_demand[j]
        if np.any(w < -_TOL * np.maximum(1.0, e.worker_cap)) or np.any(
                p < -_TOL * np.maximum(1.0, e.ps_cap)):
            return False
        self.w, self.p, self.k[j] = w, p, k
        return True

    def counts(self) -> np.ndarray:
        return np.array([self.count(j) for j in range(len(self.e.ids))], dtype=np.int64)


def _start(epoch: Epoch) -> _Room:
    """Running jobs at their current count, then queued ones at their smallest, in order."""
    room = _Room(epoch)
    for j in np.flatnonzero(epoch.current > 0):
        ok = room.step(int(j), epoch.index(int(j), int(epoch.current[j])))
        assert ok, "running jobs fit at their current counts"
    for j in np.flatnonzero(epoch.current == 0):
        room.step(int(j), 0)
    return room


def fifo_fill(epoch: Epoch) -> np.ndarray:
    """FIFO + fill (module docstring): counts (J,)."""
    room = _start(epoch)
    for j in range(len(epoch.ids)):
        while room.k[j] >= 0 and room.k[j] + 1 < epoch.allowed[j].size:
            if not room.step(j, int(room.k[j]) + 1):
                break
    return room.counts()


def _gain(epoch: Epoch, j: int, k: int) -> float:
    """Objective gain per added worker of moving job ``j`` from ``allowed[k-1]`` to ``[k]``."""
    d, w = epoch.interval_slots, epoch.remaining[j]
    a, b = epoch.speed[j][k - 1], epoch.speed[j][k]
    gain = epoch.weight[j] * (min(w, d * b) - min(w, d * a)) / w
    return float(gain / (epoch.allowed[j][k] - epoch.allowed[j][k - 1]))


def marginal_gain(epoch: Epoch) -> np.ndarray:
    """Marginal-gain greedy (module docstring): counts (J,)."""
    room = _start(epoch)
    heap = [(-_gain(epoch, j, int(room.k[j]) + 1), j) for j in range(len(epoch.ids))
            if room.k[j] >= 0 and room.k[j] + 1 < epoch.allowed[j].size]
    heapq.heapify(heap)
    while heap:
        neg, j = heapq.heappop(heap)
        if neg >= 0:
            break  # no step gains anything any more
        if room.step(j, int(room.k[j]) + 1) and room.k[j] + 1 < epoch.allowed[j].size:
            heapq.heappush(heap, (-_gain(epoch, j, int(room.k[j]) + 1), j))
    return room.counts()


def density_fill(epoch: Epoch) -> np.ndarray:
    """A primal heuristic for the MIP (not one of the paper's baselines): running jobs at their
    current counts; then every job, in order of objective gain per worker over the dominant
    pool share of one worker (with its PS by the ratio), steps up its allowed counts while they
    fit. It is what the MIP optimum looks like when capacity is tight (finish the jobs nearest
    completion, cheapest first), so it is a good incumbent when a solve is cut short.
    O(J log J + steps R)."""
    room = _Room(epoch)
    for j in np.flatnonzero(epoch.current > 0):
        room.step(int(j), epoch.index(int(j), int(epoch.current[j])))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.maximum(
            np.where(epoch.worker_cap > 0, epoch.worker_demand / epoch.worker_cap, 0).max(axis=1),
            np.where(epoch.ps_cap > 0, epoch.ps_demand / epoch.ps_cap, 0).max(axis=1))
    gain = np.array([  # objective gain per worker of the smallest count
        epoch.weight[i] * min(1.0, epoch.interval_slots * epoch.speed[i][0] / epoch.remaining[i])
        / epoch.allowed[i][0] for i in range(len(epoch.ids))])
    order = np.lexsort((np.arange(gain.size), -gain / np.maximum(share, 1e-12)))
    for i in (int(x) for x in order):
        while room.k[i] + 1 < epoch.allowed[i].size and room.step(i, int(room.k[i]) + 1):
            pass
    return room.counts()


class GreedyFillPolicy(EpochPolicy):
    """FIFO + fill at every event (options as :class:`~psched.policies.epoch.EpochPolicy`)."""

    name = "greedy-fill"

    def choose(self, epoch: Epoch) -> np.ndarray:
        return fifo_fill(epoch)


class GreedyGainPolicy(EpochPolicy):
    """Marginal-gain greedy at every event (options as :class:`EpochPolicy`)."""

    name = "greedy-gain"

    def choose(self, epoch: Epoch) -> np.ndarray:
        return marginal_gain(epoch)
