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
from ray_cluster.runtime.types import ProgressPoint

__all__ = ["INFRASTRUCTURE_ERRORS", "INFRA_BACKOFF_MAX_S", "INFRA_BACKOFF_S", "MAX_STRIKES",
           "PING_TIMEOUT_S", "Training", "infrastructure_failure"]

log = logging.getLogger("ray_cluster.runtime")

#: How long a liveness probe waits for an actor before calling it dead, seconds.
PING_TIMEOUT_S = 30.0
#: Strikes before a job is declared failed (a bug in the workload, bad hyper-parameters:
#: retrying cannot help). A strike is a segment in which live workers raised errors of the
#: workload and nothing was applied; after one, the job backs off until its next slot, so
#: the strikes fall in ``MAX_STRIKES`` different slots. Infrastructure failures
#: (:func:`infrastructure_failure`) are never strikes.
MAX_STRIKES = 3
#: Back-off after the second segment in a row lost to infrastructure failures (the first is
#: retried at once, after recovery), seconds; it doubles with each further such segment
#: without progress, up to :data:`INFRA_BACKOFF_MAX_S`.
INFRA_BACKOFF_S = 0.25
INFRA_BACKOFF_MAX_S = 8.0
#: Errors of the machinery rather than of the workload: a lost actor, node, object or
#: worker process. Retried with back-off, never counted as strikes.
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,  # ActorDiedError, ActorUnavailableError
    ray.exceptions.ObjectLostError,  # OwnerDiedError, ObjectReconstructionFailedError, ...
    ray.exceptions.NodeDiedError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.RaySystemError,
    ray.exceptions.ActorUnschedulableError,
    ray.exceptions.GetTimeoutError,
    ray.exceptions.OutOfMemoryError,
)


def infrastructure_failure(err: BaseException) -> bool:
    """Whether ``err`` (a task's error, or any error in its cause chain) is a failure of the
    infrastructure (:data:`INFRASTRUCTURE_ERRORS`) rather than of the workload's code."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, INFRASTRUCTURE_ERRORS):
            return True
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return False


def _alive(actor: Any) -> bool:
    try:
        return bool(ray.get(actor.ping.remote(), timeout=PING_TIMEOUT_S))
    except RayError:  # dead (RayActorError), silent (GetTimeoutError) or lost otherwise
        return False



class Training(SlotBoundary):
    """One job's training within a slot."""

    @property
    def deferred_until(self) -> float | None:
        """Wall time at which a backed-off job launches its next segment within this slot
        (the owner calls :meth:`poll` then), or None."""
        if self._pending or self.fatal or self._resume_at <= 0:
            return None
        return self._resume_at if self._resume_at < self._deadline else None

    def poll(self) -> None:
        """Launch the next segment if a back-off has ended."""
        if self.deferred_until is not None and time.time() >= self._resume_at:
            self._resume_at = 0.0
            self._launch()

    def begin(self, deadline: float, until_batches: int | None = None) -> None:
        """Train until wall time ``deadline`` (``time.time()`` seconds), the sample budget, or
        ``until_batches`` mini-batches applied in all, whichever comes first (async workers in
        flight may overshoot a count by at most one mini-batch each)."""
        self._deadline = deadline
        self._resume_at = 0.0  # a strike's back-off lasts until the next slot
        budget = self.job.budget
        self._stop_at = budget if until_batches is None else min(budget, until_batches)
        self._launch()

    def _launch(self) -> None:
        now = time.time()
        if (self.fatal or not self.workers or self.batches >= self._stop_at
                or now >= self._deadline or now < self._resume_at):
            return
        self._resume_at = 0.0
        self._seg_batches, self._errors, self._infra = self.batches, [], 0
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
            if worker_alive and not infrastructure_failure(err):  # the workload's own error
                self._errors.append(str(err).strip().splitlines()[-1][:300])
            else:
                self._infra += 1
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
            self._infra += 1
            self._recover()
        self._strike()
        self._launch()

    def _strike(self) -> None:
        """End of a segment. Progress clears the record. Otherwise errors of the workload are
        a strike (:data:`MAX_STRIKES` make the job :attr:`fatal`; before that the job backs
        off until its next slot), and infrastructure failures alone are never a strike: the
        first such segment is retried at once, later ones in a row after a back-off doubling
        from :data:`INFRA_BACKOFF_S`."""
        if self.batches > self._seg_batches:
            self._strikes = self._infra_row = 0
            return
        now = time.time()
        if self._errors:
            self._strikes += 1
            if self._strikes >= MAX_STRIKES:
                self.fatal = self._errors[-1]
                self._mark(f"failed for good after {self._strikes} strikes: {self.fatal}")
                return
            self._back_off(f"strike {self._strikes}: {self._errors[-1]}",
                           max(0.0, self._deadline - now))
            self._resume_at = self._deadline  # retried in the job's next slot
        elif self._infra:
            self._infra_row += 1
            if self._infra_row == 1:
                return  # recovered (actor replaced, shards rolled back): retry at once
            wait = min(INFRA_BACKOFF_S * 2 ** (self._infra_row - 2), INFRA_BACKOFF_MAX_S)
            self._back_off(f"infrastructure failure ({self._infra_row} in a row)", wait)
            self._resume_at = now + wait

    def _back_off(self, why: str, seconds: float) -> None:
        self.backoffs.append((why, seconds))
        self._mark(f"back-off {seconds:.2f} s after {why}")

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
        while True:
            until = self.deferred_until
            if not self._pending and until is None:
                return
            timeout = None if until is None else max(0.0, until - time.time())
            if self._pending:
                ready, _ = ray.wait(self.pending(), num_returns=1, timeout=timeout)
                if ready:
                    self.handle(ready[0])
            else:
                time.sleep(timeout or 0.0)  # a back-off: nothing else to wait for
            self.poll()

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
