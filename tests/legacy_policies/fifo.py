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
from typing import Any

import numpy as np

from legacy_policies.placement import Cursor, most_workers, place
from legacy_policies.replan import REJECT_NO_PS_RULE, ReplanPolicy
from psched.core.model import Alloc, Decision, Job, ceil_eps
from psched.core.policy import View

__all__ = ["MAX_REQUEST", "FifoPolicy", "job_rng"]

#: r ~ U{1..MAX_REQUEST} (the paper's range [1, 30]).
MAX_REQUEST = 30


def job_rng(seed: int, job_id: str) -> np.random.Generator:
    """A generator for one job's random choices: the same for the same (seed, job id)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(job_id.encode())])


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

    def reset(self) -> None:
        self._requests = {}
        self._shrunk = self._trimmed = 0
        self._cursor = Cursor()

    def request(self, job: Job) -> int:
        """The job's fixed worker count (its PS are ``job.ps_needed`` of it); 0 = never fits.

        Deterministic in ``(RunContext.seed, job_id)``; computed once and remembered.
        """
        if job.job_id in self._requests:
            return self._requests[job.job_id]
        assert self.ctx is not None, "start() first"
        r = int(job_rng(self.ctx.seed, job.job_id).integers(1, self.max_request + 1))
        want = min(job.max_workers, r)
        n = most_workers(self.capacity, self.pools, job, want)
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
        """Keep running jobs as they are; start waiting ones in order while the head fits."""
        running = {j: a for j, a in self.current.items() if j in view.active}
        free = self.capacity.copy()
        for job_id, alloc in running.items():
            w, s = self.demands(view.active[job_id].job)
            for h, c in alloc.workers:
                free[h] -= c * w
            for k, c in alloc.ps:
                free[k] -= c * s
        for job_id, status in view.active.items():
            if job_id in running:
                continue
            job = status.job
            n = self.request(job)
            w, s = self.demands(job)
            placed = place(free, self.pools, worker_demand=w, ps_demand=s, workers=n,
                           ps=job.ps_needed(n), cursor=self._cursor) if n > 0 else None
            if placed is None:
                break  # strictly in order: the head waits and so does everyone behind it
            running[job_id] = placed.alloc
            free, self._cursor = placed.free, placed.cursor
        return running

    def report(self) -> dict[str, Any]:
        return {"fifo_requests_shrunk": self._shrunk, "fifo_requests_trimmed": self._trimmed}
