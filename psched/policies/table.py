"""Per-job numbers of the active jobs as numpy columns, kept between events.

A re-planning rival reads a few numbers of every active job at each event (its priority, its
cap, what kind of container it asks for). Computing them in Python for every active job made
each event O(J) Python steps. :class:`ActiveTable` keeps one row per job and recomputes it only
when the job's :class:`~psched.core.policy.JobStatus` *object* changed: the loop keeps a job's
status object from slot to slot until the job runs or makes progress (``ActiveStatuses`` in
:mod:`psched.core.loop`), so between two events only the jobs that ran, and the new ones, have
new status objects. Finding them is a C-level pass (``map`` of ``dict.get`` and ``is``); a View
built afresh (new status objects every call) is still right, only slower.

:func:`live` walks an order of jobs and drops, in bulk, the jobs of a *kind* that has been found
unable to start: within one event free capacity only shrinks, so such a kind never starts later
in that event.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from psched.core.policy import JobStatus

__all__ = ["ActiveTable", "any_per_row", "live", "max_per_row"]

_START = 64


class ActiveTable:
    """Rows of numbers (``width`` floats) per active job, recomputed only for changed jobs.

    Parameters
    ----------
    width : int
        Numbers per job.
    row : callable
        ``row(status) -> sequence of width floats``; must depend only on the status (and on
        constants of the run).

    Notes
    -----
    :meth:`sync` is O(J) at C speed plus one ``row`` call per job whose status object changed;
    compaction (when dead rows outnumber live ones) is O(J width).
    """

    def __init__(self, width: int, row: Callable[[JobStatus], Sequence[float]]) -> None:
        self._row = row
        self._width = width
        self.clear()

    def clear(self) -> None:
        """Forget every row (after a restart or a new cluster)."""
        self._status: dict[str, JobStatus] = {}
        self._slot: dict[str, int] = {}
        self._buf = np.zeros((_START, self._width))
        self._n = 0

    def sync(self, active: Mapping[str, JobStatus]) -> tuple[list[str], list[JobStatus],
                                                              np.ndarray]:
        """(job ids, statuses, rows (J x width)) of ``active``, in its order."""
        keys, vals = list(active), list(active.values())
        if len(self._slot) > 2 * len(keys) + _START:
            self._compact(active)
        olds = list(map(self._status.get, keys))
        same = np.fromiter(map(operator.is_, olds, vals), dtype=bool, count=len(keys))
        for i in np.flatnonzero(~same).tolist():
            job_id, st = keys[i], vals[i]
            s = self._slot.get(job_id)
            if s is None:
                if self._n == self._buf.shape[0]:
                    self._buf = np.concatenate([self._buf, np.zeros_like(self._buf)])
                s = self._slot[job_id] = self._n
                self._n += 1
            self._buf[s] = self._row(st)
            self._status[job_id] = st
        idx = np.fromiter(map(self._slot.__getitem__, keys), dtype=np.int64, count=len(keys))
        return keys, vals, self._buf[idx]

    def _compact(self, active: Mapping[str, JobStatus]) -> None:
        keep = [(j, s) for j, s in self._slot.items() if j in active]
        rows = np.array([s for _, s in keep], dtype=np.int64)
        buf = np.zeros((max(_START, 2 * len(keep)), self._width))
        buf[: len(keep)] = self._buf[rows] if len(keep) else 0.0
        self._buf, self._n = buf, len(keep)
        self._slot = {j: i for i, (j, _) in enumerate(keep)}
        self._status = {j: self._status[j] for j, _ in keep}


def live(order: np.ndarray, kinds: np.ndarray, dead: set[int]) -> Iterator[int]:
    """The jobs of ``order`` whose kind is not in ``dead``, in order, while the caller adds to
    ``dead``: whenever it grows, the jobs left of the dead kinds are dropped in one numpy step.

    Parameters
    ----------
    order : ndarray of int
        Job positions, in the order to visit them.
    kinds : ndarray of int
        Kind of every job (indexed by position).
    dead : set of int
        Kinds that cannot start any more (the caller adds to it between steps).
    """
    rest = order
    while rest.size:
        if dead:
            rest = rest[~np.isin(kinds[rest], np.fromiter(dead, dtype=np.int64))]
        n_dead = len(dead)
        todo = rest.tolist()
        rest = rest[:0]
        for p, i in enumerate(todo):
            if len(dead) != n_dead:
                rest = np.asarray(todo[p:], dtype=np.int64)
                break
            yield i


def max_per_row(a: np.ndarray) -> np.ndarray:
    """``a.max(axis=1)`` for a few columns (the same values: max is exact), column by column:
    numpy's reduction along a short last axis costs ~0.1 us per row, this ~0.01."""
    if a.shape[1] == 0:
        empty: np.ndarray = a.max(axis=1)  # numpy's own error for no columns
        return empty
    out: np.ndarray = a[:, 0].copy()
    for c in range(1, a.shape[1]):
        np.maximum(out, a[:, c], out=out)
    return out


def any_per_row(a: np.ndarray) -> np.ndarray:
    """``a.any(axis=1)`` column by column (see :func:`max_per_row`)."""
    out = np.zeros(a.shape[0], dtype=bool)
    for c in range(a.shape[1]):
        np.logical_or(out, a[:, c], out=out)
    return out
