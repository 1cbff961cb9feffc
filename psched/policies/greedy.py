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

A job whose next step does not fit is frozen for the epoch (free capacity only shrinks); so is a
queued job whose start does not fit, and those are dropped in bulk (:func:`_start`).
Complexity: O(J R) numpy per refresh of the queued jobs (at most one per job started) +
O(S_steps (R + log J)) Python for S_steps steps tried (started jobs, and up to
:data:`_MISSES` failed starts per refresh).
"""

from __future__ import annotations

import heapq

import numpy as np

from psched.core.policy import register_policy
from psched.policies.epoch import Epoch, EpochPolicy
from psched.policies.table import any_per_row

__all__ = ["GreedyFillPolicy", "GreedyGainPolicy", "density_fill", "fifo_fill", "marginal_gain"]

_TOL = 1e-9
#: Failed starts in a row after which :func:`_start` drops the queued jobs that cannot fit.
_MISSES = 8


class _Room:
    """Pool totals left while a greedy fills (Python floats: the same operations as numpy
    row arithmetic, without its per-call cost on R-long vectors)."""

    def __init__(self, epoch: Epoch) -> None:
        self.e = epoch
        self.w = epoch.worker_cap.astype(float).tolist()
        self.p = epoch.ps_cap.astype(float).tolist()
        self.w_lim = [-_TOL * max(1.0, c) for c in epoch.worker_cap.astype(float).tolist()]
        self.p_lim = [-_TOL * max(1.0, c) for c in epoch.ps_cap.astype(float).tolist()]
        self.k = [-1] * len(epoch.ids)  #: index into allowed; -1 = 0
        self.started: list[int] = []  #: jobs with workers (k >= 0), ascending after _start
        self._first: tuple[np.ndarray, np.ndarray] | None = None
        self._rows: dict[int, tuple[list[int], list[int], list[float], list[float]]] = {}

    def _row(self, j: int) -> tuple[list[int], list[int], list[float], list[float]]:
        row = self._rows.get(j)
        if row is None:
            e = self.e
            row = (e.allowed[j].tolist(), e.ps[j].tolist(), e.worker_demand[j].tolist(),
                   e.ps_demand[j].tolist())
            self._rows[j] = row
        return row

    def count(self, j: int) -> int:
        return 0 if self.k[j] < 0 else int(self.e.allowed[j][self.k[j]])

    def step(self, j: int, k: int) -> bool:
        """Move job ``j`` to ``allowed[j][k]`` if the difference fits; done?"""
        allowed, ps, wd, pd = self._row(j)
        kj = self.k[j]
        dn = allowed[k] - (0 if kj < 0 else allowed[kj])
        dp = ps[k] - (0 if kj < 0 else ps[kj])
        w = [a - dn * d for a, d in zip(self.w, wd, strict=True)]
        p = [a - dp * d for a, d in zip(self.p, pd, strict=True)]
        if any(x < lim for x, lim in zip(w, self.w_lim, strict=True)) or any(
                x < lim for x, lim in zip(p, self.p_lim, strict=True)):
            return False
        if kj < 0:
            self.started.append(j)
        self.w, self.p, self.k[j] = w, p, k
        return True

    def first(self) -> tuple[np.ndarray, np.ndarray]:
        """Every job's smallest allowed count and the PS it needs there (J each)."""
        if self._first is None:
            self._first = self.e.first_counts()
        return self._first

    def counts(self) -> np.ndarray:
        """Counts (J,): 0 for every job not started."""
        out = np.zeros(len(self.e.ids), dtype=np.int64)
        for j in self.started:
            out[j] = self.count(j)
        return out


def _start(epoch: Epoch) -> _Room:
    """Running jobs at their current count, then queued ones at their smallest, in order.

    The queued jobs are stepped in arrival order as one by one, but those that cannot fit are
    dropped in bulk: the room only shrinks while the greedy fills and a step's test
    (``room - n d < lim``, float for float) is monotone in the room, so a queued job that does
    not fit now never fits later in this epoch. A vectorised test over the queued jobs left
    (:func:`_fitting`, the same float operations as :meth:`_Room.step`) drops them whenever
    :data:`_MISSES` steps in a row have failed. Python work is O(started + misses), numpy
    O(J R) per refresh, at most one refresh per job started."""
    room = _Room(epoch)
    for j in np.flatnonzero(epoch.current > 0).tolist():
        ok = room.step(j, epoch.index(j, int(epoch.current[j])))
        assert ok, "running jobs fit at their current counts"
    queued = np.flatnonzero(epoch.current == 0)
    while queued.size:
        queued = queued[_fitting(epoch, room, queued)]
        misses, i = 0, 0
        for j in queued.tolist():
            i += 1
            if room.step(j, 0):
                misses = 0
            else:
                misses += 1
                if misses >= _MISSES:
                    break
        queued = queued[i:]
    room.started.sort()
    return room


def _fitting(epoch: Epoch, room: _Room, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` (queued jobs) :meth:`_Room.step` would let start now (bool mask)."""
    if not rows.size:
        return np.zeros(0, dtype=bool)
    first_n, first_p = room.first()
    dn, dp = first_n[rows], first_p[rows]
    w = np.asarray(room.w, dtype=float) - dn[:, None] * epoch.worker_demand[rows]
    p = np.asarray(room.p, dtype=float) - dp[:, None] * epoch.ps_demand[rows]
    ok: np.ndarray = ~(any_per_row(w < np.asarray(room.w_lim))
                       | any_per_row(p < np.asarray(room.p_lim)))
    return ok


def fifo_fill(epoch: Epoch) -> np.ndarray:
    """FIFO + fill (module docstring): counts (J,)."""
    room = _start(epoch)
    for j in room.started:
        while room.k[j] + 1 < epoch.allowed[j].size:
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
    heap = [(-_gain(epoch, j, int(room.k[j]) + 1), j) for j in room.started
            if room.k[j] + 1 < epoch.allowed[j].size]
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


@register_policy("greedy-fill")
class GreedyFillPolicy(EpochPolicy):
    """FIFO + fill at every event (options as :class:`~psched.policies.epoch.EpochPolicy`)."""

    name = "greedy-fill"

    def choose(self, epoch: Epoch) -> np.ndarray:
        return fifo_fill(epoch)


@register_policy("greedy-gain")
class GreedyGainPolicy(EpochPolicy):
    """Marginal-gain greedy at every event (options as :class:`EpochPolicy`)."""

    name = "greedy-gain"

    def choose(self, epoch: Epoch) -> np.ndarray:
        return marginal_gain(epoch)
