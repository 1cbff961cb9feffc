"""The scheduler service: psched's one loop run in real time, journaled, restartable.

:class:`SchedulerService` is a thin real-time driver of
:class:`psched.core.loop.SchedulerLoop`,
the way SimPy's ``RealtimeEnvironment`` only overrides ``step``: the loop, the policy and the
rules are the simulator's; what differs is the clock (:class:`RealtimeClock`, wall time that a
stop interrupts), the executor (:class:`ray_cluster.runtime.executor.RayExecutor`: real training),
and a lock that lets submissions in while the loop waits for the clock or the executor trains.
Everything the service does to the loop goes through the loop's API: ``admit`` (decision and
committed schedule), ``book`` (a later arrival slot), ``replan``, ``release``, ``drop``,
``restore`` (:mod:`ray_cluster.service.replay`) and its before/after-slot hooks (node changes,
cancellations, the journal, the live rules).

Decisions. A job submitted while the loop waits for slot ``t`` arrives in slot ``t``; one
submitted while slot ``t`` runs arrives in ``t + 1``. It is decided at once and journaled with
its decision in one transaction. A job submitted with an explicit future arrival (``psched
run``) is journaled at once, booked in the loop and decided when its slot begins.

Reality differs from the plan. A *cancel* stops the job at the next slot boundary and releases
it (its future commitments stay in the ledger); the rules after each slot (a job failed for
good, behind plan, ahead of plan) are :mod:`ray_cluster.service.rules`; lost and joined nodes
are :mod:`ray_cluster.service.nodes`.

A re-planning policy (FIFO, SRTF...) sees every completion and every admission as an event of
the next slot and re-plans then: freed capacity is reused without a rule. Prices then no longer
follow the paper's assumptions exactly (re-plans add usage, cancellations keep it, releases
remove it), and the dual certificate covers the decisions made, counting a job once per
decision: indicative only.

A policy that revises plans (``oasis-rp``: :mod:`ray_cluster.service.revisions`) is planned
like a re-planning one, each slot; after every decision and every slot's plan the service
journals the plans it changed (``revise`` rows, with the policy's boundary state, in the
decision's or its own transaction), keeps them as the job's committed schedule (status
``planned_completion``), and a restart re-applies them. The promise of each admission is
journaled with it (status ``promised``).

Deferred admission. A policy that holds an arrival (``Decision(hold=True)`` and an
``admit_held`` method, e.g. ``oasis-rp`` with ``defer``) runs as in the simulator: the loop
keeps the job held (status ``held``, with the reason the policy gave) and offers it to the
policy at every slot boundary from its arrival slot's on while its window is open (the
loop's ``admit_held``); once the window closes it is rejected with that reason. ``submit``
replies ``held`` with ``next_boundary`` (the first boundary it is offered at) and
``window_end`` (its window's last slot). The journal records the hold (kind ``hold``, in the
submission's transaction) and the decision made later at a boundary (kind ``deferred``:
slot, admitted or rejected, schedule and promise, with the revisions it caused); a window
closing is not journaled: it follows from the journal (the job's window and the slots run).

Restart: :mod:`ray_cluster.service.replay`. A held job is held again, its deferred decision
re-applied; a job still held is offered again at the next boundary, and one whose window
closed before it is rejected with its held reason. U and L come from the configuration (``prices``)
or from history jobs (``history``, with the estimate factor); both are journaled, so a restart
prices exactly as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from psched.core.arrivals import QueueArrivals
from psched.core.errors import InputError
from psched.core.executor import Executor, JobNote, SlotReport
from psched.core.keeping import Restatement
from psched.core.loop import SchedulerLoop
from psched.core.model import RESOURCES, Alloc, Cluster, JobSpec, SlotPlan
from psched.core.records import Admission, LoopState, RunResult
from ray_cluster.service.clock import RealtimeClock, private_folder
from ray_cluster.service.config import (
    CANCELLED,
    ServiceConfig,
    cluster_from_dict,
)
from ray_cluster.service.journal import DecisionRow, Journal, check_journal
from ray_cluster.service.nodes import Nodes
from ray_cluster.service.replay import (
    BACKGROUND,
    DEFERRED,
    HOLD,
    PRIOR,
    RESTATED,
    STATED,
    restore_loop,
)
from ray_cluster.service.revisions import PlanRevisions
from ray_cluster.service.rules import Commitments, LiveRules, decision_row
from ray_cluster.service.views import LiveView, ServiceViews
from ray_cluster.workloads.jobspec import CheckedJob, check_submission

__all__ = ["LiveView", "SchedulerService"]

log = logging.getLogger("ray_cluster.service")


#: Slot boundaries whose time the service keeps (:attr:`SchedulerService.boundary_ms`).
BOUNDARIES_KEPT = 1000


class SchedulerService(ServiceViews):
    """The live scheduler. See the module docstring.

    Parameters
    ----------
    workdir
        Folder of the journal (``journal.db``) and checkpoints (``ckpt/``).
    config
        Used on first start; a journal's own configuration wins on restart.
    cluster, node_of
        The cluster model and server index -> Ray node id (on restart, the journal's cluster).
    executor
        Default: a :class:`~ray_cluster.runtime.executor.RayExecutor` placing on ``node_of``.
    """

    def __init__(self, workdir: str | Path, *, config: ServiceConfig | None = None,
                 cluster: Cluster | None = None, node_of: dict[int, str] | None = None,
                 executor: Executor | None = None) -> None:
        self.workdir = Path(workdir)
        check_journal(self.workdir)
        private_folder(self.workdir)  # unreadable, or empty while checkpoints exist: one line
        self.journal = Journal(self.workdir / "journal.db")
        meta = self.journal.meta()
        self.restored = "config" in meta
        if self.restored:
            config = ServiceConfig.from_json(meta["config"])
            cluster = cluster_from_dict(meta["cluster"])
        if config is None or cluster is None:
            raise ValueError("a new service needs a config and a cluster")
        self.config = config
        if not self.restored:
            self.journal.set_meta({"config": config.to_json(), "cluster": cluster.to_dict(),
                                   "node_of": {str(k): v for k, v in (node_of or {}).items()}})
        self.executor = executor if executor is not None else self._ray_executor(cluster,
                                                                                 node_of)
        self.executor.set_lookahead(self.lookahead)  # the committed schedules' next slot
        self.commitments = Commitments()
        self.error: str | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._phase: tuple[str, int] = ("wait", 0)
        self._cancels: list[str] = []  # requested while a slot runs
        self._booked: set[str] = set()  # journaled without a decision: decided when due
        self._held: set[str] = set()  # journaled as held: decided at a later boundary
        self._replaying = False  # re-applying the journal: its decisions are not journaled again
        self._slot_started = 0.0
        self._slot_plan: SlotPlan = {}
        self._slot_info: dict[str, JobNote] = {}  # each job's latest, kept after it ends
        self._thread: threading.Thread | None = None
        #: bumped under the lock whenever what :meth:`status` shows may have changed
        self.changes = 0
        #: wall time of each recent slot boundary, ms: the clock's tick (or the previous
        #: slot's end) to the executor's start, plus the slot's end to its journaled record
        self.boundary_ms: deque[float] = deque(maxlen=BOUNDARIES_KEPT)
        self._quiet = threading.Event()  # set while no slot boundary is in progress
        self._quiet.set()
        self.policy = config.make_policy()
        self.loop = SchedulerLoop(
            cluster=cluster, policy=self.policy, horizon=config.horizon,
            arrivals=QueueArrivals(), executor=self.executor,
            history_jobs=config.history, max_window=config.max_window,
            state=LoopState(usage=np.zeros((2, len(RESOURCES)))),
            before_slot=[self._before_slot], after_slot=[self._after_slot])
        self.loop.on_decision.append(self._decided)
        self.loop.on_restate.append(self._restated)
        self.nodes = Nodes(self.loop, self.journal, self.executor, node_of)
        self.rules = LiveRules(self.loop, self.journal, config, self.commitments)
        self.revisions = PlanRevisions(self.loop.caps.revises, self.commitments)
        if self.restored:
            self.nodes.regrow()
            self._replaying = True
            try:
                restore_loop(self.loop, self.journal, on_revision=self.revisions.replayed)
            finally:
                self._replaying = False
            self._booked = {s.job_id for s in self.loop.state.booked}
            self._held = set(self.loop.state.held)
            self.executor.seed_progress({j: self.loop.state.records[j].done
                                         for j in self.loop.state.active})
        self._phase = ("wait", self.loop.state.t)
        self.clock = RealtimeClock(config.slot_seconds,
                                   time.time() - self.loop.state.t * config.slot_seconds,
                                   self._stop)
        self.loop.clock = self.clock

    def _ray_executor(self, cluster: Cluster, node_of: dict[int, str] | None) -> Executor:
        from ray_cluster.runtime.executor import RayExecutor
        from ray_cluster.runtime.types import RuntimeConfig

        rcfg = RuntimeConfig(**{"checkpoint_dir": str(self.workdir / "ckpt"),
                                **dict(self.config.runtime)})
        return RayExecutor(cluster, rcfg, slot_seconds=self.config.slot_seconds,
                           node_of=node_of, allow_import=self.config.allow_import,
                           warm_processes=self.config.warm_processes)

    # -- what other modules read -------------------------------------------------------------
    @property
    def cluster(self) -> Cluster:
        """The cluster model now (it grows when nodes join)."""
        return self.loop.cluster

    @property
    def node_of(self) -> dict[int, str] | None:
        """Server index -> Ray node id (changed in place on node loss and growth)."""
        return self.nodes.node_of

    @property
    def schedules(self) -> dict[str, dict[int, Alloc]]:
        """Each job's committed schedule (slot -> allocation)."""
        return self.commitments.schedules

    @property
    def planned_end(self) -> dict[str, int]:
        """The last slot of each job's committed schedule."""
        return self.commitments.planned_end

    def lookahead(self, t: int) -> SlotPlan | None:
        """The plan of slot ``t`` as far as committed schedules know it (None for a policy
        that re-plans every slot): the executor starts that slot's new actors a slot early.
        Not for a policy that revises plans (``oasis-rp``): its boundary may revise slot
        ``t``'s plan, and a spare started for the old one holds its demand (a GPU) that the
        new plan gives another job, whose start then waits out ``start_timeout_s``."""
        if not self.policy.commits_on_arrival:
            return None
        with self._lock:
            return self.commitments.plan_at(t, self.loop.state.active)

    # -- decisions -------------------------------------------------------------------------
    def _decided(self, adm: Admission) -> None:
        """Every decision of the loop: keep the committed schedule; journal the decision of
        a booked job, made when its slot began, and the decision of a held job or a deferred
        promise, made at a slot boundary (kind ``deferred``)."""
        self.commitments.record(adm)
        if not self._replaying and adm.planned_speed != 1.0:
            self.journal.event(adm.job_id, adm.slot, PRIOR, repr(adm.planned_speed))
        if not self._replaying and adm.stated is not None and adm.stated != adm.promised:
            self.journal.event(adm.job_id, adm.slot, STATED,
                               json.dumps({"promised": adm.promised, "stated": adm.stated}))
        if adm.behind:
            if not self._replaying:
                self.journal.decide(decision_row(adm, "replan", adm.latency_ms or 0.0))
                if not adm.admitted:
                    self.journal.event(adm.job_id, adm.slot, BACKGROUND,
                                       "no plan pays: runs on idle capacity until done")
            log.info("slot %d: job %s behind its schedule: %s", adm.slot, adm.job_id,
                     "re-planned" if adm.admitted else "runs in the background")
        elif adm.deferred_promise:
            if not self._replaying:
                self.journal.decide(decision_row(adm, DEFERRED, adm.latency_ms or 0.0))
        elif adm.job_id in self._booked:
            self._booked.discard(adm.job_id)
            self.journal.decide(self._arrival_row(adm, adm.latency_ms or 0.0))
            self.journal.revise(*self.revisions.capture(adm.slot))
        elif adm.job_id in self._held:
            self._held.discard(adm.job_id)
            self.journal.decide(decision_row(adm, DEFERRED, adm.latency_ms or 0.0))
            self.journal.revise(*self.revisions.capture(adm.slot))

    def _restated(self, r: Restatement) -> None:
        """A promise that can no longer be kept, re-stated: journaled (a restart re-applies
        it) and logged."""
        job_id, t, old, new = r
        if not self._replaying:
            self.journal.event(job_id, t, RESTATED, json.dumps({"old": old, "new": new}))
        log.warning("slot %d: job %s cannot finish by slot %d: promise re-stated to slot %d",
                    t, job_id, old, new)

    def _arrival_row(self, adm: Admission, latency_ms: float) -> DecisionRow:
        """The journal row of an arrival's decision: kind ``hold`` with the reason the policy
        gave (its rejection reason if never admitted) for a held job, else ``arrival``."""
        held = self.loop.state.held.get(adm.job_id)
        if held is None:
            return decision_row(adm, "arrival", latency_ms)
        self._held.add(adm.job_id)
        return dataclasses.replace(decision_row(adm, HOLD, latency_ms), reason=held)

    # -- public API --------------------------------------------------------------------------
    def submit(self, job: JobSpec | CheckedJob, *, arrival: int | None = None
               ) -> dict[str, Any]:
        """Journal and decide a job (at once, or at ``arrival`` if that slot is later). A
        :class:`~ray_cluster.workloads.jobspec.CheckedJob` checked for this service (its slot
        length and import rule) is taken as it is; any other job is checked here, once.

        Raises
        ------
        InputError
            A job this service refuses, or one with an id submitted before (never admitted
            twice).
        """
        t0 = time.perf_counter()
        spec = self._checked(job)
        if spec.tau_s < 0:
            spec = self._profile(spec)
        with self._lock:
            if self.loop.known(spec.job_id):
                raise InputError(f"job {spec.job_id!r} was submitted before", field="id")
            phase, slot = self._phase
            now = slot if phase != "run" else slot + 1
            if arrival is not None and arrival > now:
                spec = dataclasses.replace(spec, arrival=arrival)
                try:
                    self.journal.submit(spec)
                except sqlite3.IntegrityError:
                    raise InputError(f"job {spec.job_id!r} was submitted before",
                                     field="id") from None
                self.loop.book(spec)
                self._booked.add(spec.job_id)
                self.changes += 1
                return {"job_id": spec.job_id, "arrival": arrival, "decided": False}
            spec = dataclasses.replace(spec, arrival=now)
            adm = self.loop.admit(now, [spec])[0]
            row = self._arrival_row(adm, (time.perf_counter() - t0) * 1e3)
            last_slot = self.loop.state.records[spec.job_id].job.last_slot
            revised, state = self.revisions.capture(now)
            try:
                self.journal.submit(spec, row, revised, state)
            except sqlite3.IntegrityError:
                raise InputError(f"job {spec.job_id!r} was submitted before",
                                 field="id") from None
            self.changes += 1
        out = {"job_id": spec.job_id, "arrival": now, "decided": row.kind != HOLD,
               "admitted": row.admitted, "reason": row.reason, "payoff": row.payoff,
               "planned_completion": max(row.schedule) if row.schedule else None,
               "promised": adm.stated if adm.stated is not None else row.promised,
               "latency_ms": row.latency_ms}
        if row.kind == HOLD:  # decided at a slot boundary, from this slot's on
            out.update(held=True, next_boundary=now, window_end=last_slot)
        return out

    def _checked(self, job: JobSpec | CheckedJob) -> JobSpec:
        """``job``'s spec, checked once: already, for this service, or now (trusts no other
        caller)."""
        cfg = self.config
        if isinstance(job, CheckedJob) and (job.slot_seconds, job.allow_import) == (
                cfg.slot_seconds, cfg.allow_import):
            return job.spec
        spec = job.spec if isinstance(job, CheckedJob) else job
        return check_submission(spec, allow_import=cfg.allow_import,
                                slot_seconds=cfg.slot_seconds)

    def _profile(self, spec: JobSpec) -> JobSpec:
        from ray_cluster.runtime.executor import profiled_spec
        from ray_cluster.runtime.types import RuntimeConfig

        out = profiled_spec(spec, RuntimeConfig(**dict(self.config.runtime)), steps=40,
                            allow_import=self.config.allow_import)
        log.info("profiled %s: %.4f s per mini-batch", spec.job_id, out.tau_s)
        return check_submission(out, allow_import=self.config.allow_import,
                                slot_seconds=self.config.slot_seconds)  # work now known

    def cancel(self, job_id: str) -> bool:
        """Stop a job at the next slot boundary (at once if the loop is between slots)."""
        with self._lock:
            if job_id not in self.loop.state.active:
                return False
            self.journal.event(job_id, self._phase[1], "cancel_requested")
            self.changes += 1
            if self._phase[0] != "run":
                self._apply_cancel(job_id, self._phase[1])
            else:
                self._cancels.append(job_id)
            return True

    def _apply_cancel(self, job_id: str, t: int) -> None:
        if self.loop.drop(job_id, CANCELLED):
            self.journal.event(job_id, t, "cancel")

    def idle(self) -> bool:
        """No job is active, waiting for its arrival slot, or held for deferred admission
        (``start(until_idle=True)``, ``psched run``: a held job is decided before it stops)."""
        with self._lock:
            return self.loop.idle() and not self.loop.state.held

    # -- running: the real-time step ----------------------------------------------------------
    def start(self, *, until_idle: bool = False) -> None:
        """Run the loop in a thread (``until_idle``: stop once no job is left)."""
        self._thread = threading.Thread(target=self._run, args=(until_idle,), daemon=True,
                                        name="psched-service")
        self._thread.start()

    def run_for(self, slots: int) -> None:
        """Run ``slots`` slots (or until the horizon) in the calling thread."""
        self._run(False, slots)

    def _run(self, until_idle: bool, max_slots: int | None = None) -> None:
        st = self.loop.state
        end = self.config.horizon if max_slots is None else min(self.config.horizon,
                                                                 st.t + max_slots)
        try:
            while not self._stop.is_set() and st.t < end:
                if until_idle and self.idle():
                    break
                self._step()
        except Exception as err:  # the service reports, never dies silently
            log.exception("service loop failed")
            self.error = f"{type(err).__name__}: {err}"
        finally:
            with self._lock:
                self._phase = ("stopped", st.t)
                self.changes += 1

    def _step(self) -> None:
        """One slot, as :meth:`SchedulerLoop.step`, with the lock held except while the clock
        waits and the executor trains (submissions are decided meanwhile)."""
        loop = self.loop
        with self._lock:
            t = loop.state.t
            self._phase = ("wait", t)
            self.changes += 1
            for job_id in self._cancels:
                self._apply_cancel(job_id, t)
            self._cancels.clear()
        self.clock.wait_until(t)
        if self._stop.is_set():
            return
        tick = time.perf_counter()
        with self._boundary(), self._lock:
            plan, jobs = loop.begin_slot(t)
            self.journal.revise(*self.revisions.capture(t, executed=plan))
            self._slot_started, self._slot_plan = time.time(), dict(plan)
            self._phase = ("run", t)
            self.changes += 1
        begun = time.perf_counter() - tick
        report = self.executor.apply(t, plan, jobs)
        tick = time.perf_counter()
        with self._boundary(), self._lock:
            notes = self.executor.notes(plan)
            for job_id, note in notes.items():  # each worker's device, when it changes
                before = self._slot_info.get(job_id)
                if note.devices and (before is None or before.devices != note.devices):
                    self.journal.event(job_id, t, "devices", note.devices)
            self._slot_info.update(notes)
            loop.end_slot(t, plan, jobs, report)
            self.changes += 1
            self.boundary_ms.append((begun + time.perf_counter() - tick) * 1e3)

    @contextlib.contextmanager
    def _boundary(self) -> Iterator[None]:
        """A slot boundary in progress: :meth:`wait_quiet` waits while it lasts."""
        self._quiet.clear()
        try:
            yield
        finally:
            self._quiet.set()

    def wait_quiet(self, timeout_s: float) -> bool:
        """Wait until no slot boundary is in progress (at most ``timeout_s``; False if one
        still is). Work beside the loop in this process (the live page's document) calls it
        between small steps, so it never holds the interpreter while a boundary runs."""
        return self._quiet.wait(timeout_s)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self) -> None:
        """Stop after the current slot (at once if waiting); the journal stays."""
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self.join()
        self.executor.close()
        self.journal.close()

    def result(self) -> RunResult:
        with self._lock:
            return self.loop.result()

    # -- the loop's hooks (called with the lock held) -----------------------------------------
    def _before_slot(self, t: int) -> None:
        self.nodes.refresh(t)

    def _after_slot(self, t: int, plan: SlotPlan, report: SlotReport) -> None:
        self.rules.after_slot(t, plan, report, started=self._slot_started, info=self._slot_info)
