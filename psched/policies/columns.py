"""Per-job facts as numpy columns, so a policy evaluates every active job at once.

:class:`JobColumns` holds one row per job in the order jobs were added (arrival order for the
rivals), with an ``alive`` mask; finished jobs are dropped lazily by compaction, which keeps
the order. :func:`utility_of` evaluates many jobs' utilities with exactly the float operations
of :class:`psched.core.utility.Utility` (the same values, bit for bit: tested against it), for
every kind of :data:`~psched.core.utility.ALL_KINDS`: the four numbers ``kind``, ``value``,
``decay``, ``target`` give every kind but ``step``, whose rows also read a :class:`StepTable`
(each row's step times and values, padded to the longest).
"""

from __future__ import annotations

import numpy as np

from psched.core.model import Job
from psched.core.utility import ALL_KINDS, STEP_KIND, Utility, expit

__all__ = ["KIND_CODE", "STEP_CODE", "JobColumns", "StepTable", "step_table", "utility_of"]

#: Code of each utility kind in a ``kind`` column (the order of :data:`ALL_KINDS`).
KIND_CODE: dict[str, int] = {k: i for i, k in enumerate(ALL_KINDS)}
#: Code of the ``step`` kind.
STEP_CODE = KIND_CODE[STEP_KIND]
_START = 64

#: Step utilities of aligned rows: ``(times, values)``, times ``n x K`` padded with ``+inf``,
#: values ``n x (K + 1)`` padded with 0 (the utility past a row's last step); rows of other
#: kinds are all padding.
StepTable = tuple[np.ndarray, np.ndarray]


def step_table(utilities: list[Utility]) -> StepTable:
    """The :data:`StepTable` of ``utilities`` (one row each; O(n K))."""
    width = max((len(u.steps) for u in utilities), default=0)
    times = np.full((len(utilities), width), np.inf)
    values = np.zeros((len(utilities), width + 1))
    for i, u in enumerate(utilities):
        if u.steps:
            times[i, : len(u.steps)] = [t for t, _ in u.steps]
            values[i, : len(u.steps)] = [v for _, v in u.steps]
    return times, values


def utility_of(kind: np.ndarray, value: np.ndarray, decay: np.ndarray, target: np.ndarray,
               d: np.ndarray, steps: StepTable | None = None) -> np.ndarray:
    """f_i(d_i) for many jobs; the arguments are aligned 1-D arrays (``steps``: aligned rows,
    needed only when a ``step`` kind is present). O(n), O(n K) with K steps.

    Element by element the same float operations whether the jobs share one kind (computed
    on the whole arrays at once) or not (one masked pass per kind).

    Raises
    ------
    ValueError
        A ``step`` row without ``steps``.
    """
    x = np.asarray(d, dtype=float)
    present = np.bincount(kind, minlength=len(ALL_KINDS)) if kind.size else np.zeros(0)
    codes = np.flatnonzero(present).tolist()  # the kinds present, ascending
    if STEP_CODE in codes and steps is None:
        raise ValueError("utility_of: step utilities need their steps (a StepTable)")
    if len(codes) == 1:
        if codes[0] == STEP_CODE:
            assert steps is not None
            return _of_steps(x, *steps)
        return _of_kind(ALL_KINDS[codes[0]], x, np.asarray(value, dtype=float),
                        np.asarray(decay, dtype=float), np.asarray(target, dtype=float))
    out = np.empty(x.shape)
    for code in codes:
        m = kind == code
        if code == STEP_CODE:
            assert steps is not None
            out[m] = _of_steps(x[m], steps[0][m], steps[1][m])
        else:
            out[m] = _of_kind(ALL_KINDS[code], x[m], value[m], decay[m], target[m])
    return out


def _of_steps(xv: np.ndarray, times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Step utilities: the value of each row's first step with ``d <= t_k``, 0 past the last
    (:meth:`Utility.scalar`'s rule: the count of steps with ``not d <= t_k`` is that step's
    index, as times increase; a NaN duration is past every step). A lookup: no rounding."""
    xv = np.broadcast_to(xv, times.shape[:1])
    k = np.count_nonzero(~(xv[:, None] <= times), axis=1)
    return np.asarray(values[np.arange(xv.size), k], dtype=float)


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
    elif name == "deadline":
        out = np.where(xv <= tg, v, 0.0)
    else:
        raise ValueError(f"utility kind {name!r} is not given by value, decay and target")
    return out


class JobColumns:
    """Growable columns of per-job numbers (one row per job, in the order added).

    Parameters
    ----------
    n_resources : int
        Length of a demand vector.

    Notes
    -----
    ``add`` is amortised O(R + K) (K: the most steps of a ``step`` utility added so far, 0
    until one is); ``drop`` O(1); ``rows`` O(1) unless more than half the rows are dead, when
    it compacts in O(rows (R + K)).
    """

    def __init__(self, n_resources: int) -> None:
        self._n = 0
        self._r = n_resources
        self.row: dict[str, int] = {}  #: job id -> row
        self.ids: list[str | None] = []  #: row -> job id (None once dropped)
        self._k = 0  # width of the step columns
        self._alloc(_START)

    def _alloc(self, size: int) -> None:
        def grow(a: np.ndarray | None, shape: tuple[int, ...], dtype: type,
                 fill: float = 0.0) -> np.ndarray:
            out: np.ndarray = np.full(shape, fill, dtype=dtype)
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
        #: step utilities' times and values (a :data:`StepTable`, K columns wide)
        self.step_t = grow(g("step_t"), (size, self._k), float, np.inf)
        self.step_v = grow(g("step_v"), (size, self._k + 1), float)
        self.alive = grow(g("alive"), (size,), bool)  #: not dropped

    def _widen(self, k: int) -> None:
        """Make the step columns ``k`` steps wide (padding: times +inf, values 0)."""
        t = np.full((self.alive.size, k), np.inf)
        v = np.zeros((self.alive.size, k + 1))
        t[:, : self._k], v[:, : self._k] = self.step_t, self.step_v[:, : self._k]
        self.step_t, self.step_v, self._k = t, v, k

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
        self.kind[i], self.value[i] = KIND_CODE[u.kind], u.value
        self.decay[i], self.target[i] = u.decay, u.target
        if len(u.steps) > self._k:
            self._widen(len(u.steps))
        if self._k:
            self.step_t[i], self.step_v[i] = np.inf, 0.0
            self.step_t[i, : len(u.steps)] = [t for t, _ in u.steps]
            self.step_v[i, : len(u.steps)] = [v for _, v in u.steps]
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
                     "value", "decay", "target", "step_t", "step_v", "alive"):
            a = getattr(self, name)
            a[: keep.size] = a[keep]
            a[keep.size: self._n] = np.inf if name == "step_t" else 0
        self.ids = [self.ids[i] for i in keep.tolist()]
        self.row = {j: i for i, j in enumerate(self.ids) if j is not None}
        self._n = keep.size

    @property
    def has_steps(self) -> bool:
        """Whether a ``step`` utility was ever added (the step columns are in use)."""
        return self._k > 0

    def steps(self, rows: np.ndarray) -> StepTable | None:
        """The :data:`StepTable` of ``rows``; None while no ``step`` utility was added."""
        return (self.step_t[rows], self.step_v[rows]) if self._k else None

    def utility(self, rows: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Utilities of ``rows`` at durations ``d``."""
        return utility_of(self.kind[rows], self.value[rows], self.decay[rows], self.target[rows],
                          d, self.steps(rows))
