"""A job runtime training within a slot: segments launched and handled, failures recovered,
strikes counted, the slot ended with a checkpoint and a progress point. The last layer of
:class:`ray_cluster.runtime.JobRuntime`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import RayError

from ray_cluster.runtime.boundary import SlotBoundary
from ray_cluster.runtime.types import (
    ProgressPoint,
)

__all__ = ["MAX_STRIKES", "PING_TIMEOUT_S", "Training"]

log = logging.getLogger("ray_cluster.runtime")

#: How long a liveness probe waits for an actor before calling it dead, seconds.
PING_TIMEOUT_S = 30.0
#: Segments in a row in which live workers raised and nothing was applied before a job is
#: declared failed (a bug in the workload, bad hyper-parameters: retrying cannot help).
MAX_STRIKES = 3


def _alive(actor: Any) -> bool:
    try:
        return bool(ray.get(actor.ping.remote(), timeout=PING_TIMEOUT_S))
    except RayError:  # dead (RayActorError), silent (GetTimeoutError) or lost otherwise
        return False



class Training(SlotBoundary):
    """One job's training within a slot."""

    def begin(self, deadline: float, until_batches: int | None = None) -> None:
        """Train until wall time ``deadline`` (``time.time()`` seconds), the sample budget, or
        ``until_batches`` mini-batches applied in all, whichever comes first (async workers in
        flight may overshoot a count by at most one mini-batch each)."""
        self._deadline = deadline
        budget = self.job.budget
        self._stop_at = budget if until_batches is None else min(budget, until_batches)
        self._launch()

    def _launch(self) -> None:
        now = time.time()
        if (self.fatal or not self.workers or self.batches >= self._stop_at
                or now >= self._deadline):
            return
        self._seg_batches, self._errors = self.batches, []
        every = self.config.checkpoint_every_s
        if every is not None and now >= self._last_ckpt + every:
            self.checkpoint()
        self._seg_end = self._deadline if every is None else min(self._deadline,
                                                                 self._last_ckpt + every)
        for i, w in enumerate(self.workers):
            self._pending[self._task(w)] = i

    def _task(self, worker: Any) -> Any:
        if self.config.mode == "async":
            return worker.train.remote(self._seg_end, self._stop_at)
        return worker.sync_step.remote()

    def handle(self, ref: Any) -> None:
        """Take one finished reference from :meth:`pending`; launch what comes next."""
        i = self._pending.pop(ref)
        try:
            self.stats.add(ray.get(ref))
        except RayError as err:
            log.info("%s: worker %d failed: %s", self.job.job_id, i, type(err).__name__)
            worker_alive = _alive(self.workers[i])
            if worker_alive:  # the task raised: an error of the workload, not a lost actor
                self._errors.append(str(err).strip().splitlines()[-1][:300])
            if (self.config.mode == "async" and not worker_alive
                    and all(_alive(s) for s in self.shards)):
                self._replace_worker(i)  # async: the others go on; restart this one now
                self._pending[self._task(self.workers[i])] = i
            else:
                self._failed.append(i)
        if self._pending:
            return
        try:
            self._settle()
        except RayError:
            self._failed.append(-1)
            self._recover()
        self._strike()
        self._launch()

    def _strike(self) -> None:
        """End of a segment: count it against the job if live workers raised and nothing was
        applied; :data:`MAX_STRIKES` in a row make the job :attr:`fatal`."""
        if self._errors and self.batches <= self._seg_batches:
            self._strikes += 1
            if self._strikes >= MAX_STRIKES:
                self.fatal = self._errors[-1]
                self._mark(f"failed for good after {self._strikes} segments: {self.fatal}")
        else:
            self._strikes = 0

    def _settle(self) -> None:
        """Every task of the segment (or sync step) has returned."""
        if self._failed:
            self._recover()
            return
        if self.config.mode == "sync":
            got = set(ray.get([s.apply.remote() for s in self.shards]))
            if len(got) != 1:
                raise RuntimeError(f"shards of {self.job.job_id} disagree: {sorted(got)}")
            self.step, self.batches = got.pop()
        else:
            self._align_counters()

    def _recover(self) -> None:
        failed, self._failed = set(self._failed), []
        if not all(_alive(s) for s in self.shards):
            self._rollback()
        elif self.config.mode == "sync":
            ray.get([s.discard.remote() for s in self.shards])
            self.step, self.batches = self.counters()
        else:
            self._align_counters()
        for i in sorted(failed - {-1}):
            if not _alive(self.workers[i]):
                self._replace_worker(i)

    def _align_counters(self) -> None:
        """Async, at a quiescent point: read the counters; if a worker died between its pushes
        to different shards, its partial push stays applied where it landed (an asynchronous
        update of some slices, which async SGD tolerates) and every shard takes the largest
        counters, so the job is again at one global version."""
        got = ray.get([s.counters.remote() for s in self.shards])
        top = max(got)
        if len(set(got)) > 1:
            ray.get([s.set_counters.remote(*top) for s in self.shards])
            self._mark(f"partial push of a lost worker kept: counters {sorted(set(got))} -> {top}")
        self.step, self.batches = top

    def run_until(self, deadline: float, until_batches: int | None = None) -> None:
        """One job alone: :meth:`begin`, then wait on :meth:`pending` until nothing is left."""
        self.begin(deadline, until_batches)
        while self._pending:
            ready, _ = ray.wait(self.pending(), num_returns=1)
            self.handle(ready[0])

    def end(self) -> ProgressPoint:
        """Slot end: checkpoint, evaluate, record a progress point."""
        if self.running:
            raise RuntimeError("end of slot while training is in flight")
        if self.shards and (self.step, self.batches) != self._ckpt_counters():
            self.checkpoint()
        return self.record()

    def record(self) -> ProgressPoint:
        """Append a progress point (held-out evaluation if configured and shards exist)."""
        s = self.stats
        ev: dict[str, float] = {}
        if self.config.evaluate and self.shards:
            ev = self.job.workload.evaluate(self.params())
        point = ProgressPoint(
            wall_s=time.time() - self._t0, batches=self.batches, step=self.step,
            train_loss=s.loss / s.batches if s.batches else None,
            eval_loss=ev.get("loss"), eval_accuracy=ev.get("accuracy"),
            workers=len(self.workers), shards=len(self.shards))
        s.batches, s.loss, s.seconds = 0, 0.0, 0.0
        self.history.append(point)
        return point

    def run_slot(self, workers: Sequence[int | None], ps: Sequence[int | None],
                 seconds: float) -> ProgressPoint:
        """Resize, train for ``seconds`` (counted from the slot boundary), end the slot."""
        deadline = time.time() + seconds
        self.resize(workers, ps)
        self.run_until(deadline)
        return self.end()
