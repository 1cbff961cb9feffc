"""FIFO, the Hadoop/Spark default (``baselines.md``; Bao et al., INFOCOM 2018, section V).

Admit every job. Each job asks for a fixed worker count ``min(N, r)``, ``r ~ U{1..30}`` drawn
once per job, plus its PS ``ceil(b/B * workers)``. Jobs start strictly in arrival order, each
when its whole request fits (no backfill: a waiting job blocks every later one); counts and
placement (round-robin, :mod:`psched.core.placement`) never change until the job completes.

Choices the specification leaves open, made to keep the rival strong (``baselines.md``):

* **The draw** comes from a generator seeded by ``(RunContext.seed, crc32(job_id))``, so a
  job's request does not depend on which other jobs exist or in which order they are seen.
* **A request that could never fit** even an empty cluster would block the queue forever. It
  is shrunk to the largest worker count (with its PS) that fits the empty cluster.
* **Trimming** (``trim=True``): a job with ``n`` workers finishes in ``k = ceil(W / n)``
  slots; ``ceil(W / k) <= n`` workers finish in the same ``k`` slots, so the request is cut to
  that. The job's duration is unchanged and the workers it would waste in its last slot (or
  all slots, when ``n > W``) are left to the queue.
* A job that can never run (``b > B``; or not one worker fits) is rejected at arrival.
"""

from __future__ import annotations

import zlib
from collections import deque
from typing import Any

import numpy as np

from psched.core.model import Alloc, Decision, Job, ceil_eps
from psched.core.placement import Cursor, most_workers, place
from psched.core.policy import View, register_policy
from psched.policies.replan import REJECT_NO_PS_RULE, ReplanPolicy

__all__ = ["MAX_REQUEST", "FifoPolicy", "job_rng"]

#: r ~ U{1..MAX_REQUEST} (the paper's range [1, 30]).
MAX_REQUEST = 30


def job_rng(seed: int, job_id: str) -> np.random.Generator:
    """A generator for one job's random choices: the same for the same (seed, job id)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(job_id.encode())])


@register_policy("fifo")
class FifoPolicy(ReplanPolicy):
    """First in, first out, with fixed counts and no backfill."""

    name = "fifo"

    def __init__(self, max_request: int = MAX_REQUEST, trim: bool = True) -> None:
        super().__init__()
        if max_request < 1:
            raise ValueError(f"max_request must be >= 1, got {max_request!r}")
        self.max_request = max_request  #: r ~ U{1..max_request}
        self.trim = trim  #: cut a request to the fewest workers with the same duration
        self._requests: dict[str, int] = {}
        self._shrunk = 0
        self._trimmed = 0
        self._cursor = Cursor()
        self._waiting: deque[str] = deque()  # admitted, not started, in arrival order
        self._held: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # running: rows, amounts
        self._fits: dict[tuple[Any, ...], int] = {}  # most_workers on the empty cluster
        self._fits_for: np.ndarray | None = None  # the capacity _fits was computed for

    def reset(self) -> None:
        self._requests = {}
        self._shrunk = self._trimmed = 0
        self._cursor = Cursor()
        self._waiting, self._held = deque(), {}

    def request(self, job: Job) -> int:
        """The job's fixed worker count (its PS are ``job.ps_needed`` of it); 0 = never fits.

        Deterministic in ``(RunContext.seed, job_id)``; computed once and remembered.
        """
        if job.job_id in self._requests:
            return self._requests[job.job_id]
        assert self.ctx is not None, "start() first"
        r = int(job_rng(self.ctx.seed, job.job_id).integers(1, self.max_request + 1))
        want = min(job.max_workers, r)
        # the most that fit the empty cluster depends only on the request and the demands
        spec = job.spec
        key = (want, spec.ps_ratio, spec.worker_demand.as_array().tobytes(),
               spec.ps_demand.as_array().tobytes())
        if self._fits_for is not self.capacity:
            self._fits, self._fits_for = {}, self.capacity
        n = self._fits.get(key, -1)
        if n < 0:
            n = self._fits[key] = most_workers(self.capacity, self.pools, job, want)
        self._shrunk += int(0 < n < want)
        if self.trim and n > 0:
            slots = ceil_eps(job.work / n)
            trimmed = ceil_eps(job.work / slots)
            self._trimmed += int(trimmed < n)
            n = trimmed
        self._requests[job.job_id] = n
        return n

    def on_arrival(self, job: Job, view: View) -> Decision:
        decision = super().on_arrival(job, view)
        if decision.admitted and self.request(job) == 0:
            return Decision(admitted=False, reason=REJECT_NO_PS_RULE)
        return decision

    def replan(self, view: View) -> dict[str, Alloc]:
        """Keep running jobs as they are; start waiting ones in order while the head fits.

        Incremental: the waiting queue is kept between events (arrivals join its tail), and
        the free capacity is the capacity minus the running jobs' containers, subtracted in
        the order the jobs started (each job's rows and amounts computed once), so an event
        costs O(running containers) numpy work plus one placement per job started.
        """
        running = {j: a for j, a in self.current.items() if j in view.active}
        if not self._planned_once:  # first plan after start(): every other job waits
            self._waiting = deque(j for j in view.active if j not in running)
        else:
            self._waiting.extend(view.arrived)
        for j in [j for j in self._held if j not in running]:
            del self._held[j]
        free = self.capacity.copy()
        parts = [self._held.get(j) or self._rows(view.active[j].job, a)
                 for j, a in running.items()]
        if parts:
            np.subtract.at(free, np.concatenate([p[0] for p in parts]),
                           np.concatenate([p[1] for p in parts]))
        while self._waiting:
            job_id = self._waiting[0]
            status = view.active.get(job_id)
            if status is None or job_id in running:  # dropped meanwhile
                self._waiting.popleft()
                continue
            job = status.job
            n = self.request(job)
            w, s = self.demands(job)
            placed = place(free, self.pools, worker_demand=w, ps_demand=s, workers=n,
                           ps=job.ps_needed(n), cursor=self._cursor) if n > 0 else None
            if placed is None:
                break  # strictly in order: the head waits and so does everyone behind it
            self._waiting.popleft()
            running[job_id] = placed.alloc
            self._held[job_id] = self._rows(job, placed.alloc)
            free, self._cursor = placed.free, placed.cursor
        return running

    def _rows(self, job: Job, alloc: Alloc) -> tuple[np.ndarray, np.ndarray]:
        """Servers and amounts a job's containers take, in the order they are subtracted."""
        w, s = self.demands(job)
        rows = [h for h, _ in alloc.workers] + [k for k, _ in alloc.ps]
        amounts = [c * w for _, c in alloc.workers] + [c * s for _, c in alloc.ps]
        return (np.asarray(rows, dtype=np.int64),
                np.asarray(amounts, dtype=float).reshape(len(rows), w.size))

    def report(self) -> dict[str, Any]:
        return {"fifo_requests_shrunk": self._shrunk, "fifo_requests_trimmed": self._trimmed}
