"""Plain data: resources, servers, clusters, jobs, allocations and decisions.

Conventions are those of ``shared/papers/oasis.md`` section 7:

* slots are numbered 0, 1, 2, ...; a job arriving in slot ``a`` may run from slot ``a``;
  finishing its last work in slot ``t`` gives duration ``d = t - a + 1``;
* work is counted in integer worker-slots ``W = ceil(E N M (tau + 2e/b))``;
* units: GPU (count), CPU (vCPU), memory (GB), storage (GB), bandwidth (Gbps), gradient (MB).

This module knows no policy, no simulator and no Ray.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING

from psched.core.utility import Utility

if TYPE_CHECKING:  # numpy is imported where used: the commands' client path never needs it
    import numpy as np

__all__ = [
    "EPS",
    "RESOURCES",
    "Alloc",
    "Cluster",
    "Decision",
    "Job",
    "JobSpec",
    "Pool",
    "Resources",
    "Server",
    "SlotPlan",
    "ceil_eps",
    "comm_seconds",
    "resolve_job",
    "window_length",
    "window_length_reference",
]

#: Tolerance of every ceiling in the project (section 7: ``ceil(x - 1e-9)``).
EPS = 1e-9

#: Resource types, in the order of every resource array. Capacity keys in cluster files and
#: demand columns in traces (``worker_<name>``, ``ps_<name>``) use exactly these names.
RESOURCES: tuple[str, ...] = ("gpu", "cpu", "memory_gb", "storage_gb", "bandwidth_gbps")

#: The old cap on a job's window, ``max(WINDOW_FASTEST_FACTOR * fastest, WINDOW_MIN_SLOTS)``:
#: since ``oasis.md`` section 7 was revised it only sizes a trace's default horizon
#: (:func:`psched.core.horizon.trace_horizon`); no window is capped by it.
WINDOW_FASTEST_FACTOR = 10
WINDOW_MIN_SLOTS = 50
#: A job's window ends at the first duration whose utility is below this share of its maximum.
WINDOW_UTILITY_FLOOR = 1e-6


def ceil_eps(x: float) -> int:
    """The one ceiling of the project: ``ceil(x - 1e-9)``, so float noise never adds a unit."""
    return math.ceil(x - EPS)


def comm_seconds(grad_mb: float, bandwidth_gbps: float) -> float:
    """Push plus pull of one gradient: ``2 e / b`` seconds for ``e`` in MB and ``b`` in Gbps."""
    return 2.0 * grad_mb * 8.0 / (bandwidth_gbps * 1000.0)


@dataclass(frozen=True, kw_only=True)
class Resources:
    """An amount of every resource type (one container's demand, or a server's capacity)."""

    gpu: float = 0.0  #: GPUs (count)
    cpu: float = 0.0  #: vCPUs
    memory_gb: float = 0.0  #: memory, GB
    storage_gb: float = 0.0  #: storage, GB
    bandwidth_gbps: float = 0.0  #: network bandwidth, Gbps

    def as_array(self) -> np.ndarray:
        """The amounts as a float array in :data:`RESOURCES` order."""
        import numpy as np

        return np.array([getattr(self, r) for r in RESOURCES], dtype=float)

    def to_dict(self) -> dict[str, float]:
        return {r: float(getattr(self, r)) for r in RESOURCES}

    @classmethod
    def from_mapping(cls, values: Mapping[str, float]) -> Resources:
        unknown = set(values) - set(RESOURCES)
        if unknown:
            raise ValueError(f"unknown resource(s) {sorted(unknown)}; known: {list(RESOURCES)}")
        return cls(**{k: float(v) for k, v in values.items()})

    @classmethod
    def from_array(cls, values: Iterable[float]) -> Resources:
        return cls(**dict(zip(RESOURCES, (float(v) for v in values), strict=True)))


class Pool(str, Enum):
    """The two disjoint server pools of the model."""

    WORKER = "worker"
    PS = "ps"


@dataclass(frozen=True, kw_only=True)
class Server:
    server_id: str  #: unique name, e.g. ``w00`` or a Ray node id
    pool: Pool  #: the pool it serves
    capacity: Resources  #: c_h^r or c_k^r


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """Servers in a worker pool and a PS pool; servers are referred to by index."""

    servers: tuple[Server, ...]  #: every server; plans refer to them by index here
    slot_seconds: float = 3600.0  #: length of one slot, seconds

    def __post_init__(self) -> None:
        ids = [s.server_id for s in self.servers]
        if len(set(ids)) != len(ids):
            raise ValueError("server ids must be unique")
        if self.slot_seconds <= 0 or not math.isfinite(self.slot_seconds):
            raise ValueError(f"slot_seconds must be positive, got {self.slot_seconds!r}")

    @cached_property
    def capacity(self) -> np.ndarray:
        """Capacity matrix, servers x resources (read-only, computed once)."""
        import numpy as np

        cap = np.array([s.capacity.as_array() for s in self.servers], dtype=float)
        cap = cap.reshape(-1, len(RESOURCES))
        cap.setflags(write=False)
        return cap

    @cached_property
    def _pool_indices(self) -> dict[Pool, np.ndarray]:
        import numpy as np

        out = {}
        for pool in Pool:
            idx = np.array([i for i, s in enumerate(self.servers) if s.pool == pool], dtype=int)
            idx.setflags(write=False)
            out[pool] = idx
        return out

    def indices(self, pool: Pool) -> np.ndarray:
        """Indices of the servers of one pool, in order (read-only)."""
        return self._pool_indices[pool]

    def pool_of(self, index: int) -> Pool:
        return self.servers[index].pool

    def to_dict(self) -> dict[str, object]:
        """The ``cluster.json`` schema."""
        return {
            "slot_seconds": self.slot_seconds,
            "servers": [
                {"id": s.server_id, "pool": s.pool.value, "capacity": s.capacity.to_dict()}
                for s in self.servers
            ],
        }


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A job as submitted: every parameter of the paper, in the units of section 7."""

    job_id: str  #: unique name
    arrival: int  #: a_i, slot of arrival
    epochs: int  #: E_i
    max_workers: int  #: N_i, data partitions = most concurrent workers
    minibatches: int  #: M_i, mini-batches per partition
    tau_s: float  #: tau_i in seconds: compute time of one mini-batch on one worker
    grad_mb: float  #: e_i, gradient (= parameter) size, MB
    worker_demand: Resources  #: w_i^r; its bandwidth is b_i
    ps_demand: Resources  #: s_i^r; its bandwidth is B_i
    utility: Utility  #: f_i(d), d = duration in slots
    tau_includes_comm: bool = False  #: tau measured with communication included (no 2e/b)
    workload: str = ""  #: what trains for real (built-in name or import path); "" = simulated
    hparams: str = ""  #: JSON object of hyper-parameters for ``workload``

    @property
    def worker_bw_gbps(self) -> float:
        """b_i: bandwidth of one worker."""
        return self.worker_demand.bandwidth_gbps

    @property
    def ps_bw_gbps(self) -> float:
        """B_i: bandwidth of one PS."""
        return self.ps_demand.bandwidth_gbps

    @property
    def ps_ratio(self) -> float:
        """b_i / B_i: PS needed per worker."""
        return self.worker_bw_gbps / self.ps_bw_gbps

    def minibatch_seconds(self) -> float:
        """Time of one mini-batch on one worker: ``tau + 2e/b`` (or tau when measured)."""
        if self.tau_includes_comm:
            return self.tau_s
        return self.tau_s + comm_seconds(self.grad_mb, self.worker_bw_gbps)

    def work(self, slot_seconds: float) -> int:
        """W_i in worker-slots: ``ceil(E N M (tau + 2e/b) / slot_seconds)``, at least 1."""
        total = self.epochs * self.max_workers * self.minibatches * self.minibatch_seconds()
        return max(1, ceil_eps(total / slot_seconds))


@dataclass(frozen=True, kw_only=True)
class Job:
    """A job resolved against a slot length and horizon: what policies and the loop use."""

    spec: JobSpec  #: the submitted job
    work: int  #: W_i, worker-slots
    window: int  #: longest duration (slots) any schedule may take; 0 if it arrives too late

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    @property
    def arrival(self) -> int:
        return self.spec.arrival

    @property
    def max_workers(self) -> int:
        return self.spec.max_workers

    @property
    def fastest(self) -> int:
        """Fastest duration in slots, ``ceil(W / N)``."""
        return ceil_eps(self.work / self.spec.max_workers)

    @property
    def last_slot(self) -> int:
        """Last slot a schedule may use: ``arrival + window - 1``."""
        return self.spec.arrival + self.window - 1

    def ps_needed(self, workers: int) -> int:
        """Fewest PS that serve ``workers`` workers: ``ceil(b/B * workers)``."""
        return ceil_eps(self.spec.ps_ratio * workers) if workers > 0 else 0

    def utility_at(self, duration: int) -> float:
        return float(self.spec.utility(duration))


def window_length(spec: JobSpec, fastest: int, cap: int) -> int:
    """Longest duration of a job's window, at most ``cap`` slots (section 7).

    The first duration at which utility falls below ``1e-6`` of its maximum ``f(1)``, or
    ``cap`` if the utility stays above that floor through ``cap``. ``fastest`` is unused by
    the rule itself and kept for callers that size ``cap`` from it.

    Exactly :func:`window_length_reference`: the durations are scanned in the same order, in
    blocks, and a utility is evaluated elementwise (each duration's float does not depend on
    the block it is in), but the first block ends just past where a sigmoid's closed form
    puts the crossing (:func:`_crossing_guess`), so a job whose utility decays is read over
    tens of durations, not the whole horizon; if the crossing is not in it, the scan goes on.
    """
    import numpy as np

    del fastest
    if cap < 1:
        return 0
    floor = 0.0
    lo, hi = 1, min(cap, _crossing_guess(spec.utility, cap), _WINDOW_BLOCK)
    while lo <= cap:
        d = np.arange(lo, hi + 1)
        f = np.asarray(spec.utility(d), dtype=float)
        if lo == 1:
            floor = WINDOW_UTILITY_FLOOR * f[0]
        below = np.nonzero(f < floor)[0]
        if below.size:
            return int(d[below[0]])
        lo, hi = hi + 1, min(cap, hi + _WINDOW_BLOCK)
    return cap


def _crossing_guess(u: Utility, cap: int) -> int:
    """A duration a little past where a sigmoid falls below ``1e-6 f(1)`` (closed form:
    ``target + (ln(1 + e^(decay (1 - target))) + ln 1e6) / decay``, plus 2); ``cap`` for
    any other utility or a flat one. Only the scan's first block depends on it. O(1)."""
    import numpy as np

    if u.kind != "sigmoid" or u.decay <= 0.0:
        return cap
    lead = float(np.logaddexp(0.0, u.decay * (1.0 - u.target))) - math.log(WINDOW_UTILITY_FLOOR)
    guess = u.target + lead / u.decay + 2.0
    return cap if not guess < cap else max(1, math.ceil(guess))


def window_length_reference(spec: JobSpec, fastest: int, cap: int) -> int:
    """:func:`window_length` in fixed blocks from duration 1: the reference it is tested
    against. O(cap)."""
    import numpy as np

    del fastest
    if cap < 1:
        return 0
    floor = 0.0
    for lo in range(1, cap + 1, _WINDOW_BLOCK):  # blocks: memory O(block) for any cap
        d = np.arange(lo, min(cap, lo + _WINDOW_BLOCK - 1) + 1)
        f = np.asarray(spec.utility(d), dtype=float)
        if lo == 1:
            floor = WINDOW_UTILITY_FLOOR * f[0]
        below = np.nonzero(f < floor)[0]
        if below.size:
            return int(d[below[0]])
    return cap


#: Durations evaluated at once by :func:`window_length` (a 512 KB array).
_WINDOW_BLOCK = 65536


def resolve_job(
    spec: JobSpec, slot_seconds: float, horizon: int, max_window: int | None = None
) -> Job:
    """Resolve ``spec``: its work in worker-slots and its window within ``horizon`` slots.

    The window ends where the utility falls below ``1e-6`` of its maximum or at the horizon,
    whichever comes first (``oasis.md`` section 7); ``max_window`` is an explicit cap for
    experiments, never a default.
    """
    work = spec.work(slot_seconds)
    fastest = ceil_eps(work / spec.max_workers)
    cap = max(0, horizon - spec.arrival)
    if max_window is not None:
        cap = min(cap, max_window)
    return Job(spec=spec, work=work, window=window_length(spec, fastest, cap))


@dataclass(frozen=True)
class Alloc:
    """One job's containers in one slot: ``(server index, count)`` pairs per role."""

    workers: tuple[tuple[int, int], ...] = ()
    ps: tuple[tuple[int, int], ...] = ()

    @property
    def n_workers(self) -> int:
        return sum(c for _, c in self.workers)

    @property
    def n_ps(self) -> int:
        return sum(c for _, c in self.ps)

    @staticmethod
    def of(workers: Mapping[int, int], ps: Mapping[int, int]) -> Alloc:
        """Build from ``{server: count}`` maps, dropping zero counts, sorted by server."""
        return Alloc(
            workers=tuple(sorted((int(h), int(c)) for h, c in workers.items() if c > 0)),
            ps=tuple(sorted((int(k), int(c)) for k, c in ps.items() if c > 0)),
        )


#: What every job gets in one slot; jobs absent from it get nothing.
SlotPlan = Mapping[str, Alloc]


@dataclass(frozen=True, kw_only=True)
class Decision:
    """A policy's answer to an arrival."""

    admitted: bool  #: admitted (it will be scheduled) or rejected for good
    reason: str = ""  #: why rejected: a short category, counted in the summary
    payoff: float | None = None  #: utility minus priced cost, for pricing policies
    schedule: Mapping[int, Alloc] | None = field(default=None, repr=False)
    """The committed future schedule by slot, for policies that commit on arrival."""
    promised: int | None = None
    """The completion slot promised on admission (OASiS-family policies), else None."""
    hold: bool = False
    """Not admitted *yet*: keep the job for deferred admission (the policy's ``admit_held``)
    while its window is open; ``reason`` is then the rejection reason if it never is."""
