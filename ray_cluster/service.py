"""The scheduler service: psched's one loop run live, journaled, restartable.

:class:`SchedulerService` owns a policy (OASiS by default), a wall slot clock, the executor
(:class:`ray_cluster.executor.RayExecutor`: real training) and the journal
(:class:`ray_cluster.journal.Journal`), and runs :class:`psched.simulator.SchedulerLoop` in a
thread. :func:`service_actor` wraps it in a detached, named Ray actor (``psched serve``) and
:func:`run_trace` runs one whole trace through it (both in :mod:`ray_cluster.service_entry`).

Decisions. A job submitted while the loop waits for slot ``t`` arrives in slot ``t``; one
submitted while slot ``t`` runs arrives in ``t + 1``. It is decided at once (the loop's lock is
free whenever the loop waits for the clock or the executor trains) and journaled with its
decision in one transaction. A job submitted with an explicit future arrival (``psched run``)
is journaled at once and decided when its slot begins.

Reality differs from the plan. The service itself handles two cases:

* *cancel*: the job stops at the next slot boundary and is released; its future commitments
  stay in the ledger;
* *a job whose workload raises every time* (:data:`ray_cluster.runtime.MAX_STRIKES`) is
  dropped (reason ``failed``) and released; its future commitments stay, as for a cancel.

Jobs behind plan (re-plans), lost and joined nodes, and restarts from the journal are handled
by :mod:`ray_cluster.recovery`; the configuration and the names the service records live in
:mod:`ray_cluster.service_config`. This module is the public import path: it re-exports those
names and the entry points.

U and L come from the configuration (``prices``) or from history jobs (``history``, with the
estimate factor); both are journaled, so a restart prices exactly as before.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from psched.errors import InputError
from psched.executor import FATAL, Executor, SlotReport
from psched.model import RESOURCES, Cluster, Job, JobSpec, SlotPlan
from psched.simulator import LoopState, QueueArrivals, RunResult, SchedulerLoop, WallClock
from ray_cluster.journal import DecisionRow, Journal, check_journal
from ray_cluster.recovery import RecordingPolicy, refresh_nodes, regrow, replan, replay
from ray_cluster.service_config import (
    CANCELLED,
    DROPPED_BEHIND,
    FAILED,
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    ServiceConfig,
    cluster_from_dict,
)
from ray_cluster.service_entry import run_trace, service_actor

__all__ = ["CANCELLED", "DROPPED_BEHIND", "FAILED", "SERVICE_NAME", "SERVICE_NAMESPACE",
           "SchedulerService", "ServiceConfig", "cluster_from_dict", "run_trace",
           "service_actor"]

log = logging.getLogger(__name__)


class _Stopped(Exception):
    """The service was asked to stop while waiting for the clock."""


class _LockedExecutor:
    """Releases the service lock while the inner executor runs a slot."""

    def __init__(self, svc: SchedulerService, inner: Executor) -> None:
        self.svc, self.inner = svc, inner

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        svc = self.svc
        refresh_nodes(svc, t)
        svc._slot_started, svc._slot_plan = time.time(), dict(plan)
        svc._phase = ("run", t)
        svc._lock.release()
        try:
            report = self.inner.apply(t, plan, jobs)
            svc._slot_info = svc._runtime_info(plan)
        finally:
            svc._lock.acquire()
        svc._last_report = report
        return report

    def release(self, job_id: str) -> None:
        self.inner.release(job_id)

    def close(self) -> None:
        self.inner.close()


class SchedulerService:
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
        Default: a :class:`~ray_cluster.executor.RayExecutor` placing on ``node_of``.
    """

    def __init__(self, workdir: str | Path, *, config: ServiceConfig | None = None,
                 cluster: Cluster | None = None, node_of: dict[int, str] | None = None,
                 executor: Executor | None = None) -> None:
        self.workdir = Path(workdir)
        check_journal(self.workdir)  # unreadable, or empty while checkpoints exist: one line
        self.journal = Journal(self.workdir / "journal.db")
        meta = self.journal.meta()
        self.restored = "config" in meta
        if self.restored:
            config = ServiceConfig.from_json(meta["config"])
            cluster = cluster_from_dict(meta["cluster"])
        if config is None or cluster is None:
            raise ValueError("a new service needs a config and a cluster")
        self.config, self.cluster = config, cluster
        if not self.restored:
            self.journal.set_meta({"config": config.to_json(), "cluster": cluster.to_dict(),
                                   "node_of": {str(k): v for k, v in (node_of or {}).items()}})
        self.node_of = node_of
        if executor is None:
            from ray_cluster.executor import RayExecutor
            from ray_cluster.runtime_types import RuntimeConfig

            rcfg = RuntimeConfig(**{"checkpoint_dir": str(self.workdir / "ckpt"),
                                    **dict(config.runtime)})
            executor = RayExecutor(cluster, rcfg, slot_seconds=config.slot_seconds,
                                   node_of=node_of, allow_import=config.allow_import,
                                   lookahead=self.lookahead,
                                   warm_processes=config.warm_processes)
        elif getattr(executor, "lookahead", False) is None:
            executor.lookahead = self.lookahead  # type: ignore[attr-defined]
        self.inner_executor = executor
        self.policy = RecordingPolicy(config.make_policy())
        self.arrivals = QueueArrivals()
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = False
        self._phase: tuple[str, int] = ("wait", 0)
        self._future: list[JobSpec] = []  # submitted with a later arrival slot
        self._cancels: list[str] = []  # requested while a slot runs
        self.planned_end: dict[str, int] = {}  # last slot of each job's committed schedule
        self.schedules: dict[str, dict[int, Any]] = {}  # each job's committed schedule
        self._slot_started = 0.0
        self._slot_plan: dict[str, Any] = {}
        self._slot_info: dict[str, tuple[str, str]] = {}
        self._last_report: SlotReport | None = None
        self._thread: threading.Thread | None = None
        self._joined: set[str] = set()  # nodes seen joining (logged once)
        #: server -> the node it belongs on (``node_of`` before any loss was remapped)
        self.home: dict[int, str] = dict(node_of or {})
        self.error: str | None = None
        self.loop = SchedulerLoop(
            cluster=cluster, policy=self.policy, horizon=config.horizon,
            arrivals=self.arrivals, executor=_LockedExecutor(self, executor), clock=self,
            history_jobs=config.history, max_window=config.max_window,
            state=LoopState(usage=np.zeros((2, len(RESOURCES)))))
        if self.restored:
            regrow(self)
            replay(self)
        self._phase = ("wait", self.loop.state.t)
        self.wall = WallClock(config.slot_seconds,
                              start=time.time() - self.loop.state.t * config.slot_seconds)

    # -- the clock (the loop calls it with the lock held) -------------------------------------
    def wait_until(self, t: int) -> None:
        """Let submissions in until slot ``t`` begins; then decide the arrivals due."""
        self._phase = ("wait", t)
        for job_id in self._cancels:
            self._apply_cancel(job_id, t)
        self._cancels.clear()
        self._lock.release()
        try:
            while not self._stop:
                delay = self.wall.start + t * self.wall.slot_seconds - time.time()
                if delay <= 0:
                    break
                self._wake.wait(min(delay, 0.5))
        finally:
            self._lock.acquire()
        if self._stop:
            raise _Stopped
        due = [s for s in self._future if s.arrival <= t]
        self._future = [s for s in self._future if s.arrival > t]
        for spec in due:
            self._decide(spec, t, kind="arrival", t0=time.perf_counter())

    def lookahead(self, t: int) -> SlotPlan | None:
        """The plan of slot ``t`` as far as committed schedules know it (None for a policy
        that re-plans every slot): the executor starts that slot's new actors a slot early."""
        if not self.policy.commits_on_arrival:
            return None
        with self._lock:
            active = self.loop.state.active
            return {j: self.schedules[j][t] for j in active
                    if t in self.schedules.get(j, {})}

    # -- decisions -------------------------------------------------------------------------
    def _decide(self, spec: JobSpec, t: int, *, kind: str, t0: float,
                journal: bool = True, submit: bool = False) -> DecisionRow:
        st = self.loop.state
        spec = dataclasses.replace(spec, arrival=max(spec.arrival, t))
        self.policy.last = None
        _, times = self.loop.admit(t, [spec])
        st.decision_ms.extend(times)
        rec = st.records[spec.job_id]
        dec = self.policy.last
        schedule = dict(dec.schedule) if dec is not None and dec.schedule else {}
        if schedule:
            self.planned_end[spec.job_id] = max(schedule)
            self.schedules[spec.job_id] = schedule
        row = DecisionRow(job_id=spec.job_id, kind=kind, slot=t, admitted=rec.admitted,
                          reason=rec.reason, payoff=rec.payoff, work=rec.job.work,
                          schedule=schedule, latency_ms=(time.perf_counter() - t0) * 1e3)
        if journal:
            if submit:
                self.journal.submit(spec, row)
            else:
                self.journal.decide(row)
        return row

    def _drop(self, job_id: str, reason: str) -> None:
        st = self.loop.state
        if job_id in st.active:
            st.active.remove(job_id)
        st.records[job_id].reason = reason
        self.inner_executor.release(job_id)

    # -- public API --------------------------------------------------------------------------
    def submit(self, spec: JobSpec, *, arrival: int | None = None) -> dict[str, Any]:
        """Journal and decide a job (at once, or at ``arrival`` if that slot is later).

        Raises
        ------
        InputError
            A job with this id was submitted before (never admitted twice).
        """
        t0 = time.perf_counter()
        if ":" in spec.workload and not self.config.allow_import:
            raise InputError(f"job {spec.job_id!r}: import path {spec.workload!r} refused: "
                             "the operator does not allow user workloads", field="workload")
        if spec.tau_s < 0:
            spec = self._profile(spec)
        with self._lock:
            if spec.job_id in self.loop.state.records or \
                    any(s.job_id == spec.job_id for s in self._future):
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
                self._future.append(spec)
                return {"job_id": spec.job_id, "arrival": arrival, "decided": False}
            spec = dataclasses.replace(spec, arrival=now)
            try:
                row = self._decide(spec, now, kind="arrival", t0=t0, submit=True)
            except sqlite3.IntegrityError:
                raise InputError(f"job {spec.job_id!r} was submitted before",
                                 field="id") from None
        return {"job_id": spec.job_id, "arrival": now, "decided": True,
                "admitted": row.admitted, "reason": row.reason, "payoff": row.payoff,
                "planned_completion": max(row.schedule) if row.schedule else None,
                "latency_ms": row.latency_ms}

    def _profile(self, spec: JobSpec) -> JobSpec:
        from ray_cluster.executor import profiled_spec
        from ray_cluster.runtime_types import RuntimeConfig

        out = profiled_spec(spec, RuntimeConfig(**dict(self.config.runtime)), steps=40,
                            allow_import=self.config.allow_import)
        log.info("profiled %s: %.4f s per mini-batch", spec.job_id, out.tau_s)
        return out

    def cancel(self, job_id: str) -> bool:
        """Stop a job at the next slot boundary (at once if the loop is between slots)."""
        with self._lock:
            rec = self.loop.state.records.get(job_id)
            if rec is None or job_id not in self.loop.state.active:
                return False
            self.journal.event(job_id, self._phase[1], "cancel_requested")
            if self._phase[0] != "run":
                self._apply_cancel(job_id, self._phase[1])
            else:
                self._cancels.append(job_id)
            return True

    def _apply_cancel(self, job_id: str, t: int) -> None:
        if job_id in self.loop.state.active:
            self._drop(job_id, CANCELLED)
            self.journal.event(job_id, t, "cancel")

    def status(self) -> dict[str, Any]:
        """The service's slot and every job: state, progress, plan."""
        with self._lock:
            st = self.loop.state
            jobs = []
            for job_id, rec in st.records.items():
                if rec.completion is not None:
                    state = "done"
                elif job_id in st.active:
                    state = "running" if job_id in self._slot_plan else "waiting"
                elif rec.admitted:
                    state = rec.reason or "stopped"
                else:
                    state = "rejected"
                alloc = self._slot_plan.get(job_id) if state == "running" else None
                jobs.append({
                    "job_id": job_id, "state": state, "arrival": rec.job.arrival,
                    "admitted": rec.admitted, "reason": rec.reason, "payoff": rec.payoff,
                    "work": rec.job.work, "done": rec.done,
                    "planned_completion": self.planned_end.get(job_id),
                    "completion": rec.completion, "utility": rec.utility,
                    "workers": alloc.n_workers if alloc else 0,
                    "ps": alloc.n_ps if alloc else 0,
                    "loss": self._slot_info.get(job_id, ("", ""))[1],
                })
            jobs += [{"job_id": s.job_id, "state": "queued", "arrival": s.arrival,
                      "admitted": False, "reason": "", "payoff": None, "work": 0, "done": 0.0,
                      "planned_completion": None, "completion": None, "utility": 0.0,
                      "workers": 0, "ps": 0, "loss": ""} for s in self._future]
            return {"slot": self._phase[1], "phase": self._phase[0], "policy": self.policy.name,
                    "slot_seconds": self.config.slot_seconds, "error": self.error,
                    "running": self._thread is not None and self._thread.is_alive(),
                    "jobs": jobs}

    def logs(self, job_id: str) -> list[str]:
        """The journal's lines about one job."""
        out = []
        for d in self.journal.decisions():
            if d.job_id == job_id:
                out.append(f"slot {d.slot}: {d.kind}: {'admitted' if d.admitted else 'rejected'}"
                           f" {d.reason} payoff={d.payoff} work={d.work} "
                           f"planned={sorted(d.schedule)} ({d.latency_ms:.1f} ms)")
        for t, _, amount, done, ckpt, info in self.journal.progress(job_id):
            out.append(f"slot {t}: +{amount:.3f} -> {done:.3f} worker-slots {info} {ckpt}")
        for _, slot, kind, info in self.journal.events(job_id):
            out.append(f"slot {slot}: {kind} {info}".rstrip())
        return out

    def idle(self) -> bool:
        """No job is active or waiting for its arrival slot."""
        with self._lock:
            return not self.loop.state.active and not self._future

    # -- running ---------------------------------------------------------------------------
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
        with self._lock:
            try:
                while not self._stop and st.t < end:
                    if until_idle and not st.active and not self._future:
                        break
                    t = st.t
                    self.loop.step()
                    self._after_slot(t)
            except _Stopped:
                pass
            except Exception as err:  # the service reports, never dies silently
                log.exception("service loop failed")
                self.error = f"{type(err).__name__}: {err}"
            finally:
                self._phase = ("stopped", st.t)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self) -> None:
        """Stop after the current slot (at once if waiting); the journal stays."""
        self._stop = True
        self._wake.set()

    def close(self) -> None:
        self.stop()
        self.join()
        self.inner_executor.close()
        self.journal.close()

    def result(self) -> RunResult:
        with self._lock:
            return self.loop.result()

    def _after_slot(self, t: int) -> None:
        st = self.loop.state
        report = self._last_report
        progress = {}
        if report is not None:
            for job_id, amount in report.progress.items():
                ckpt, info = self._slot_info.get(job_id, ("", ""))
                progress[job_id] = (amount, st.records[job_id].done, ckpt, info)
        events = [(j, "complete", "") for j in st.completed_last]
        if report is not None:
            events += [(j, "failed", why) for j, why in report.failed.items()]
            for job_id, why in report.failed.items():
                if why.startswith(FATAL) and job_id in st.active:
                    log.warning("slot %d: job %s failed for good: %s", t, job_id, why)
                    self._drop(job_id, FAILED)
        self.journal.slot_done(t, self._slot_started, self._slot_plan, progress, events)
        if self.config.replan and self.policy.commits_on_arrival:
            for job_id in list(st.active):
                end = self.planned_end.get(job_id)
                if end is not None and end < st.t:
                    replan(self, job_id, st.t)

    def _runtime_info(self, plan: SlotPlan) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        runtimes = getattr(self.inner_executor, "runtimes", {})
        for job_id in plan:
            rt = runtimes.get(job_id)
            if rt is None:
                continue
            ckpt = str(rt.store.path(rt.version)) if rt.version >= 0 else ""
            last = rt.history[-1] if rt.history else None
            loss = "" if last is None or last.train_loss is None else f"loss={last.train_loss:.4f}"
            if last is not None and last.eval_loss is not None:
                loss += f" eval={last.eval_loss:.4f}"
            out[job_id] = (ckpt, loss.strip())
        return out
