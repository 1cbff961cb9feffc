"""Per-job facts as numpy columns, so a policy evaluates every active job at once.

:class:`JobColumns` holds one row per job in the order jobs were added (arrival order for the
rivals), with an ``alive`` mask; finished jobs are dropped lazily by compaction, which keeps
the order. :func:`utility_of` evaluates many jobs' utilities with exactly the float operations
of :class:`psched.core.utility.Utility` (the same values, bit for bit: tested against it).
"""

from __future__ import annotations

import numpy as np

from psched.core.model import Job
from psched.core.utility import UTILITY_KINDS, expit

__all__ = ["JobColumns", "utility_of"]

_KIND = {k: i for i, k in enumerate(UTILITY_KINDS)}
_START = 64


def utility_of(kind: np.ndarray, value: np.ndarray, decay: np.ndarray, target: np.ndarray,
               d: np.ndarray) -> np.ndarray:
    """f_i(d_i) for many jobs; the arguments are aligned 1-D arrays. O(n).

    Element by element the same float operations whether the jobs share one kind (computed
    on the whole arrays at once) or not (one masked pass per kind)."""
    x = np.asarray(d, dtype=float)
    present = np.bincount(kind, minlength=len(UTILITY_KINDS)) if kind.size else np.zeros(0)
    codes = np.flatnonzero(present).tolist()  # the kinds present, ascending
    if len(codes) == 1:
        return _of_kind(UTILITY_KINDS[codes[0]], x, np.asarray(value, dtype=float),
                        np.asarray(decay, dtype=float), np.asarray(target, dtype=float))
    out = np.empty(x.shape)
    for code in codes:
        m = kind == code
        out[m] = _of_kind(UTILITY_KINDS[code], x[m], value[m], decay[m], target[m])
    return out


def _of_kind(name: str, xv: np.ndarray, v: np.ndarray, g: np.ndarray,
             tg: np.ndarray) -> np.ndarray:
    """Utilities of jobs of one kind (a new array)."""
    out: np.ndarray
    if name == "sigmoid":
        out = v * expit(-g * (xv - tg))
    elif name == "constant":
        out = np.array(v, dtype=float)
    elif name == "linear":
        out = np.clip(v - g * np.maximum(xv - tg, 0.0), 0.0, None)
    else:  # deadline
        out = np.where(xv <= tg, v, 0.0)
    return out


class JobColumns:
    """Growable columns of per-job numbers (one row per job, in the order added).

    Parameters
    ----------
    n_resources : int
        Length of a demand vector.

    Notes
    -----
    ``add`` is amortised O(R); ``drop`` O(1); ``rows`` O(1) unless more than half the rows
    are dead, when it compacts in O(rows R).
    """

    def __init__(self, n_resources: int) -> None:
        self._n = 0
        self._r = n_resources
        self.row: dict[str, int] = {}  #: job id -> row
        self.ids: list[str | None] = []  #: row -> job id (None once dropped)
        self._alloc(_START)

    def _alloc(self, size: int) -> None:
        def grow(a: np.ndarray | None, shape: tuple[int, ...], dtype: type) -> np.ndarray:
            out: np.ndarray = np.zeros(shape, dtype=dtype)
            if a is not None:
                out[: self._n] = a[: self._n]
            return out

        old = getattr(self, "arrival", None) is not None
        g = (lambda name: getattr(self, name)) if old else (lambda name: None)
        self.arrival = grow(g("arrival"), (size,), np.int64)  #: arrival slot
        self.request = grow(g("request"), (size,), np.int64)  #: a fixed worker count
        self.ratio = grow(g("ratio"), (size,), float)  #: b/B
        self.worker = grow(g("worker"), (size, self._r), float)  #: one worker's demand
        self.ps = grow(g("ps"), (size, self._r), float)  #: one PS's demand
        self.left = grow(g("left"), (size,), float)  #: work left, worker-slots
        self.kind = grow(g("kind"), (size,), np.int64)  #: utility kind code
        self.demand = grow(g("demand"), (size,), np.int64)  #: a caller's demand-kind code
        self.value = grow(g("value"), (size,), float)
        self.decay = grow(g("decay"), (size,), float)
        self.target = grow(g("target"), (size,), float)
        self.alive = grow(g("alive"), (size,), bool)  #: not dropped

    def add(self, job: Job, *, request: int, left: float, demand: int = 0) -> int:
        """Append ``job``; returns its row."""
        if self._n == self.alive.size:
            self._alloc(2 * self.alive.size)
        i = self._n
        spec = job.spec
        u = spec.utility
        self.arrival[i], self.request[i], self.ratio[i] = spec.arrival, request, spec.ps_ratio
        self.worker[i] = spec.worker_demand.as_array()
        self.ps[i] = spec.ps_demand.as_array()
        self.left[i] = left
        self.demand[i] = demand
        self.kind[i], self.value[i] = _KIND[u.kind], u.value
        self.decay[i], self.target[i] = u.decay, u.target
        self.alive[i] = True
        self.row[job.job_id] = i
        self.ids.append(job.job_id)
        self._n += 1
        return i

    def drop(self, job_id: str) -> None:
        """Forget a job (finished)."""
        i = self.row.pop(job_id)
        self.alive[i] = False
        self.ids[i] = None

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.row

    def __len__(self) -> int:
        return len(self.row)

    def rows(self) -> np.ndarray:
        """Rows of the live jobs, in the order added (compacting first when worth it)."""
        if self._n > 2 * len(self.row) + _START:
            self._compact()
        return np.flatnonzero(self.alive[: self._n])

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self._n])
        for name in ("arrival", "request", "ratio", "worker", "ps", "left", "kind", "demand",
                     "value", "decay", "target", "alive"):
            a = getattr(self, name)
            a[: keep.size] = a[keep]
            a[keep.size: self._n] = 0
        self.ids = [self.ids[i] for i in keep.tolist()]
        self.row = {j: i for i, j in enumerate(self.ids) if j is not None}
        self._n = keep.size

    def utility(self, rows: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Utilities of ``rows`` at durations ``d``."""
        return utility_of(self.kind[rows], self.value[rows], self.decay[rows], self.target[rows],
                          d)
