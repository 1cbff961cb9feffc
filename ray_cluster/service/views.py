"""What the scheduler service shows: its status (``psched status``), a job's journal lines
(``psched logs``), its price bounds, and the :class:`LiveView` its live page is drawn from.
:class:`ServiceViews` is the read-only part of
:class:`~ray_cluster.service.core.SchedulerService`: each method reads the service's state under
its lock and returns plain data."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from psched.core.eta import eta
from psched.core.executor import JobNote
from psched.core.loop import SchedulerLoop
from psched.core.model import RESOURCES, Alloc, Cluster
from psched.core.policy import Policy
from psched.core.records import HELD
from ray_cluster.service.config import ServiceConfig
from ray_cluster.service.journal import Journal
from ray_cluster.service.replay import DEFERRED, HOLD
from ray_cluster.service.rules import Commitments

__all__ = ["LiveView", "ServiceViews"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiveView:
    """What a watcher of the service sees at one moment (:meth:`SchedulerService.view`)."""

    changes: int  #: :attr:`SchedulerService.changes` when it was taken
    status: dict[str, Any]  #: :meth:`SchedulerService.status`
    cluster: Cluster  #: the servers now
    horizon: int  #: slots the service runs at most
    #: each job's committed schedule (shared, never edited: a decision replaces it)
    schedules: dict[str, dict[int, Alloc]]
    slot_plan: dict[str, Alloc]  #: what runs in the current slot
    #: per job, one worker's and one PS's demand (resources in :data:`RESOURCES` order)
    demands: dict[str, tuple[tuple[float, ...], tuple[float, ...]]]
    slot_started: float  #: wall time the current slot began (0 before the first)
    boundary_ms: tuple[float, ...]  #: the latest slot boundaries' times, oldest first


def _vec(res: Any) -> tuple[float, ...]:
    return tuple(float(getattr(res, r)) for r in RESOURCES)


class ServiceViews:
    """:meth:`status`, :meth:`view`, :meth:`price_bounds` and :meth:`logs` of
    :class:`~ray_cluster.service.core.SchedulerService` (whose state they read)."""

    _lock: threading.RLock
    loop: SchedulerLoop
    policy: Policy
    config: ServiceConfig
    journal: Journal
    commitments: Commitments
    error: str | None
    changes: int
    boundary_ms: deque[float]
    _phase: tuple[str, int]
    _thread: threading.Thread | None
    _slot_plan: Mapping[str, Alloc]
    _slot_started: float
    _slot_info: dict[str, JobNote]

    def status(self) -> dict[str, Any]:
        """The service's slot and every job: state, progress, plan."""
        with self._lock:
            st = self.loop.state
            jobs = [self._job_status(job_id) for job_id in st.records]
            jobs += [{"job_id": s.job_id, "state": "queued", "arrival": s.arrival,
                      "admitted": False, "reason": "", "payoff": None, "work": 0, "done": 0.0,
                      "planned_completion": None, "promised": None, "completion": None,
                      "utility": 0.0,
                      "workers": 0, "ps": 0, "loss": "", "window_end": None}
                     for s in st.booked]
            return {"slot": self._phase[1], "phase": self._phase[0], "policy": self.policy.name,
                    "allow_import": self.config.allow_import,
                    "slot_seconds": self.config.slot_seconds, "error": self.error,
                    "running": self._thread is not None and self._thread.is_alive(),
                    # seconds the running slot has run (0 between slots): for progress bars
                    "slot_elapsed_s": time.time() - self._slot_started
                    if self._phase[0] == "run" and self._slot_started > 0 else 0.0,
                    "jobs": jobs}

    def view(self) -> LiveView:
        """What the service shows now, for its page: copied under the lock in O(jobs)
        (schedules and plans by reference: a decision replaces them, never edits them)."""
        with self._lock:
            records = self.loop.state.records
            demands = {j: (_vec(r.job.spec.worker_demand),
                           _vec(r.job.spec.ps_demand)) for j, r in records.items()}
            demands.update({s.job_id: (_vec(s.worker_demand),
                                       _vec(s.ps_demand))
                            for s in self.loop.state.booked})
            return LiveView(changes=self.changes, status=self.status(),
                            cluster=self.loop.cluster, horizon=self.config.horizon,
                            schedules=dict(self.commitments.schedules),
                            slot_plan=dict(self._slot_plan) if self._phase[0] == "run" else {},
                            demands=demands, slot_started=self._slot_started,
                            boundary_ms=tuple(self.boundary_ms))

    def price_bounds(self) -> dict[str, Any] | None:
        """A priced policy's U and L in force (``U_worker``, ``L_worker``, ``U_ps``,
        ``L_ps``: :class:`~psched.core.policy.PricedPolicy`); None for a policy without
        prices."""
        priced = self.loop.caps.priced
        if priced is None:
            return None
        with self._lock:
            return priced.price_bounds()

    def _job_status(self, job_id: str) -> dict[str, Any]:
        st = self.loop.state
        rec = st.records[job_id]
        if rec.completion is not None:
            state = "done"
        elif job_id in st.active:
            state = "running" if job_id in self._slot_plan else "waiting"
        elif job_id in st.held:
            state = HELD
        elif rec.admitted:
            state = rec.reason or "stopped"
        else:
            state = "rejected"
        alloc = self._slot_plan.get(job_id) if state == "running" else None
        return {
            "job_id": job_id, "state": state, "arrival": rec.job.arrival,
            "admitted": rec.admitted, "reason": st.held.get(job_id, rec.reason),
            "payoff": rec.payoff,
            "work": rec.job.work, "done": rec.done,
            "planned_completion": self.commitments.planned_end.get(job_id),
            "promised": rec.promised, "completion": rec.completion, "utility": rec.utility,
            "workers": alloc.n_workers if alloc else 0,
            "ps": alloc.n_ps if alloc else 0,
            "loss": note.loss if (note := self._slot_info.get(job_id)) else "",
            "window_end": rec.job.last_slot,
            "speed": rec.speed, "speed_sd": rec.speed_sd,
            "first_promise": rec.first_promise, "restated": len(rec.restated),
            "background": rec.background,
            **self._eta(job_id, state),
        }

    def _eta(self, job_id: str, state: str) -> dict[str, Any]:
        """When an unfinished job is expected to start and finish under the current plans,
        and why it waits (``eta_start``, ``eta_finish``: slots, None if unknown; ``waits``)."""
        st = self.loop.state
        now = st.t
        rec = st.records[job_id]
        if state in ("done", "rejected") or (rec.admitted and job_id not in st.active):
            return {"eta_start": None, "eta_finish": None, "waits": ""}
        return eta(now, self.commitments.schedules.get(job_id), held=state == HELD,
                   background=job_id in self.loop.background,
                   running=state == "running").as_dict()

    def logs(self, job_id: str) -> list[str]:
        """The journal's lines about one job, in slot order: at each slot its decisions,
        then the work it did, then its events."""
        out: list[tuple[int, int, str]] = []  # (slot, rank within the slot, line)
        admitted = False
        for d in self.journal.decisions():
            if d.job_id == job_id:
                # a second admitted deferred row is the promise made at the commit point
                promise = d.kind == DEFERRED and d.admitted and admitted
                admitted = admitted or (d.admitted and d.kind in (DEFERRED, "arrival"))
                out.append((d.slot, 0, _decision_line(d, promise)))
        for _, slot, kind, info in self.journal.events(job_id):
            out.append((slot, 2, f"slot {slot}: {kind} {info}".rstrip()))
        for t, _, amount, done, ckpt, info in self.journal.progress(job_id):
            out.append((t, 1, f"slot {t}: ran +{amount:.3f} -> {done:.3f} worker-slots "
                              f"{info} {ckpt}".rstrip()))
        return [line for _, _, line in sorted(out, key=lambda e: e[:2])]


def _decision_line(d: Any, promise: bool) -> str:
    """One journaled decision as ``psched logs`` prints it (numbers rounded)."""
    if d.kind == "release":
        return f"slot {d.slot}: finished early: the rest of its plan released"
    verdict = ("held" if d.kind == HOLD else f"promised slot {d.promised}" if promise
               else "admitted" if d.admitted else "rejected")
    parts = [f"slot {d.slot}: {d.kind}: {verdict}" + (f" ({d.reason})" if d.reason else "")]
    if d.payoff is not None:
        parts.append(f"payoff {d.payoff:.4g}")
    if d.work:
        parts.append(f"work {d.work} worker-slots")
    if d.schedule:
        parts.append(f"planned slots {_ranges(sorted(d.schedule))}")
    return ", ".join(parts) + f" ({d.latency_ms:.1f} ms)"


def _ranges(slots: list[int]) -> str:
    """``[3, 4, 5, 8]`` as ``3-5, 8``."""
    runs: list[list[int]] = []
    for t in slots:
        if runs and t == runs[-1][1] + 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)
