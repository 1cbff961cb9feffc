"""The scheduler service: psched's one loop run live, journaled, restartable.

:class:`SchedulerService` owns a policy (OASiS by default), a wall slot clock, the executor
(:class:`ray_cluster.executor.RayExecutor`: real training) and the journal
(:class:`ray_cluster.journal.Journal`), and runs :class:`psched.simulator.SchedulerLoop` in a
thread. :func:`service_actor` wraps it in a detached, named Ray actor (``psched serve``).

Decisions. A job submitted while the loop waits for slot ``t`` arrives in slot ``t``; one
submitted while slot ``t`` runs arrives in ``t + 1``. It is decided at once (the loop's lock is
free whenever the loop waits for the clock or the executor trains) and journaled with its
decision in one transaction. A job submitted with an explicit future arrival (``psched run``)
is journaled at once and decided when its slot begins.

Reality differs from the plan. Three cases, handled for policies that commit on arrival:

* *behind plan*: a job still unfinished after the last slot of its committed schedule is
  re-decided for its remaining work ``ceil(W - done)`` at the current prices, from the current
  slot, its utility still counted from its original arrival (``Ledger.inputs(start=)``). Its
  new schedule is committed on top (its old commitments are in the past); a rejection drops
  it (reason ``dropped_behind``). A re-plan is journaled like an arrival;
* *lost node*: the servers of a dead node are pointed at a live node of the same pool
  (:func:`ray_cluster.cluster_model.remap_lost`); the job's actors restart there (a dead PS
  shard rolls the job back to its last checkpoint), and any lost progress is caught by the
  behind-plan rule;
* *cancel*: the job stops at the next slot boundary and is released; its future commitments
  stay in the ledger;
* *a job whose workload raises every time* (:data:`ray_cluster.runtime.MAX_STRIKES`) is
  dropped (reason ``failed``) and released; its future commitments stay, as for a cancel.

Nodes that join (placed mode) are turned into servers by the rules of
:mod:`ray_cluster.cluster_model` and appended to the model at the next slot boundary: the
policy's ledger grows (``on_cluster_change``; new servers start at zero usage, U and L stay),
the placement maps them to their nodes, and the growth is journaled, so a restart rebuilds the
same cluster. Jobs already decided keep their schedules; later decisions use the new servers.

Prices then no longer follow the paper's assumptions exactly: a re-plan adds usage beyond what
the arrival committed, and a cancelled job's commitments keep prices higher than its actual use
(conservative: later jobs pay more, never less). The dual certificate of
:meth:`~psched.policies.oasis.OasisPolicy.report` then covers the decisions made, counting a
re-planned job once per decision, and is indicative only.

U and L come from the configuration (``prices``) or from history jobs (``history``, with the
estimate factor); both are journaled, so a restart prices exactly as before.

Restart. A new service on an existing journal re-creates the policy from the journaled
configuration and replays every journaled decision through it in order. A policy with a
``restore`` method (OASiS) re-applies each journaled decision as it was -- the same
commitments, prices and certificate, even where deciding again would differ; any other policy
decides again (they are deterministic; a mismatch is logged and the journal wins). Then the
finished slots (executed plans, progress, completions, cancellations); running jobs resume from
their latest checkpoints. Slots are counted in service time: slot ``t`` (the first not
journaled) begins when the restarted service starts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from psched.errors import InputError
from psched.executor import FATAL, Executor, SlotReport
from psched.model import (
    RESOURCES,
    Cluster,
    Decision,
    Job,
    JobSpec,
    Pool,
    Resources,
    Server,
    SlotPlan,
)
from psched.policies import make_policy
from psched.policies.base import Policy, RunContext, View
from psched.simulator import LoopState, QueueArrivals, RunResult, SchedulerLoop, WallClock
from ray_cluster.journal import DecisionRow, Journal, spec_from_json, spec_to_json

__all__ = ["CANCELLED", "DROPPED_BEHIND", "FAILED", "SERVICE_NAME", "SERVICE_NAMESPACE",
           "SchedulerService", "ServiceConfig", "cluster_from_dict", "run_trace",
           "service_actor"]

log = logging.getLogger(__name__)

SERVICE_NAME = "psched-scheduler"  #: name of the detached service actor
SERVICE_NAMESPACE = "psched"  #: its Ray namespace
DROPPED_BEHIND = "dropped_behind"  #: reason of a job dropped when its re-plan is rejected
CANCELLED = "cancelled"  #: reason of a cancelled job
FAILED = "failed"  #: reason of a job whose training raises every time (released, not retried)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """How the service schedules; journaled on first start, read back on restart."""

    policy: str = "oasis"  #: policy name (psched.policies)
    policy_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)  #: its options
    slot_seconds: float = 30.0  #: wall length of a slot
    horizon: int = 500  #: slots the service runs at most
    prices: tuple[float, float, float, float] | None = None  #: OASiS U_w, L_w, U_ps, L_ps
    history: tuple[JobSpec, ...] = ()  #: reference jobs for OASiS's U and L when no prices
    estimate_factor: float = 1.0  #: OASiS: scales U with L fixed
    runtime: Mapping[str, Any] = dataclasses.field(default_factory=dict)  #: RuntimeConfig
    allow_import: bool = False  #: user workloads by import path
    replan: bool = True  #: re-decide jobs behind plan (policies committing on arrival)
    max_window: int | None = None  #: cap on a job's window (slots)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["history"] = [spec_to_json(s) for s in self.history]
        d["policy_options"] = dict(self.policy_options)
        d["runtime"] = dict(self.runtime)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ServiceConfig:
        d = dict(d)
        d["history"] = tuple(spec_from_json(s) for s in d["history"])
        d["prices"] = tuple(d["prices"]) if d["prices"] is not None else None
        return cls(**d)

    def make_policy(self) -> Policy:
        opts = dict(self.policy_options)
        if self.policy == "oasis":
            if self.prices is not None:
                u_w, l_w, u_p, l_p = self.prices
                opts.update(price_source="fixed", u_worker=u_w, l_worker=l_w, u_ps=u_p,
                            l_ps=l_p)
            elif self.history:
                opts.update(price_source="history")
            else:
                raise InputError("oasis needs price bounds: give --prices or --history",
                                 field="prices")
            opts.setdefault("estimate_factor", self.estimate_factor)
        return make_policy(self.policy, **opts)


def cluster_from_dict(d: Mapping[str, Any]) -> Cluster:
    """The inverse of :meth:`psched.model.Cluster.to_dict`."""
    return Cluster(servers=tuple(Server(server_id=s["id"], pool=Pool(s["pool"]),
                                        capacity=Resources(**s["capacity"]))
                                 for s in d["servers"]), slot_seconds=float(d["slot_seconds"]))


class _Stopped(Exception):
    """The service was asked to stop while waiting for the clock."""


class _Recording:
    """A policy proxy that remembers the last decision (its committed schedule)."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.commits_on_arrival = inner.commits_on_arrival
        self.last: Decision | None = None
        #: the journaled decision the next arrival re-applies (restart), if the policy can
        self.forced: DecisionRow | None = None

    def start(self, ctx: RunContext) -> None:
        self.inner.start(ctx)

    def on_arrival(self, job: Job, view: View) -> Decision:
        forced, self.forced = self.forced, None
        restore = getattr(self.inner, "restore", None)
        if forced is not None and restore is not None:  # a journal replay: re-apply it
            self.last = Decision(admitted=forced.admitted, reason=forced.reason,
                                 payoff=forced.payoff, schedule=forced.schedule or None)
            restore(job, self.last)
        else:
            self.last = self.inner.on_arrival(job, view)
        return self.last

    def plan(self, view: View) -> SlotPlan:
        return self.inner.plan(view)

    def on_cluster_change(self, cluster: Cluster) -> None:
        hook = getattr(self.inner, "on_cluster_change", None)
        if hook is None:
            raise ValueError(f"policy {self.name!r} cannot take new servers while it runs")
        hook(cluster)

    def report(self) -> dict[str, Any]:
        return self.inner.report()


class _LockedExecutor:
    """Releases the service lock while the inner executor runs a slot."""

    def __init__(self, svc: SchedulerService, inner: Executor) -> None:
        self.svc, self.inner = svc, inner

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        svc = self.svc
        svc._refresh_nodes(t)
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
            from ray_cluster.runtime import RuntimeConfig

            rcfg = RuntimeConfig(**{"checkpoint_dir": str(self.workdir / "ckpt"),
                                    **dict(config.runtime)})
            executor = RayExecutor(cluster, rcfg, slot_seconds=config.slot_seconds,
                                   node_of=node_of, allow_import=config.allow_import,
                                   lookahead=self.lookahead)
        elif getattr(executor, "lookahead", False) is None:
            executor.lookahead = self.lookahead  # type: ignore[attr-defined]
        self.inner_executor = executor
        self.policy = _Recording(config.make_policy())
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
        self.error: str | None = None
        self.loop = SchedulerLoop(
            cluster=cluster, policy=self.policy, horizon=config.horizon,
            arrivals=self.arrivals, executor=_LockedExecutor(self, executor), clock=self,
            history_jobs=config.history, max_window=config.max_window,
            state=LoopState(usage=np.zeros((2, len(RESOURCES)))))
        if self.restored:
            self._regrow()
            self._replay()
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

    def _replan(self, job_id: str, t: int, *, journal: bool = True,
                work: int | None = None) -> bool:
        """Re-decide a job behind its plan for its remaining work (module docstring)."""
        st = self.loop.state
        rec = st.records[job_id]
        left = work if work is not None else max(1, math.ceil(rec.job.work - rec.done - 1e-9))
        residual = Job(spec=rec.job.spec, work=left, window=rec.job.window)
        view = View(t=t, cluster=self.cluster, horizon=self.config.horizon, active={})
        t0 = time.perf_counter()
        self.policy.last = None
        dec = self.policy.on_arrival(residual, view)
        ms = (time.perf_counter() - t0) * 1e3
        st.decision_ms.append(ms)
        schedule = dict(dec.schedule) if dec.admitted and dec.schedule else {}
        if schedule:
            self.planned_end[job_id] = max(schedule)
            self.schedules[job_id] = {**self.schedules.get(job_id, {}), **schedule}
        else:
            self._drop(job_id, DROPPED_BEHIND)
        if journal:
            self.journal.decide(DecisionRow(
                job_id=job_id, kind="replan", slot=t, admitted=dec.admitted,
                reason=dec.reason, payoff=dec.payoff, work=left, schedule=schedule,
                latency_ms=ms))
        log.info("slot %d: job %s behind plan (%.2f of %d): re-plan %s", t, job_id, rec.done,
                 rec.job.work, "admitted" if dec.admitted else "rejected, dropped")
        return dec.admitted

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
        from ray_cluster.runtime import RuntimeConfig

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
                    self._replan(job_id, st.t)

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

    def _refresh_nodes(self, t: int) -> None:
        """Lost and joined Ray nodes (placed mode on Ray: a ``node_of`` map and an executor
        that places actors; another executor's nodes are not Ray's)."""
        if self.node_of is None or not hasattr(self.inner_executor, "placer"):
            return
        try:
            import ray

            from ray_cluster.cluster_model import joined_nodes, remap_lost

            nodes = ray.nodes()
        except Exception:
            return
        alive = {n["NodeID"] for n in nodes if n.get("Alive")}
        for line in remap_lost(self.cluster, self.node_of, alive):
            self.journal.event("", t, "node_lost", line)
        new = set(joined_nodes(self.node_of, nodes)) - self._joined
        if new:
            self._grow([n for n in nodes if n["NodeID"] in new], t)

    def _grow(self, nodes: list[dict[str, Any]], t: int) -> None:
        """Nodes joined: append their servers to the model, the policy and the placement
        (before slot ``t``'s plan is applied; the plan was made without them, so they are
        used from the next decision on). Journaled, so a restart rebuilds the same cluster."""
        from ray_cluster.cluster_model import servers_of_nodes

        assert self.node_of is not None
        pairs = servers_of_nodes(nodes, taken=[s.server_id for s in self.cluster.servers])
        cluster = dataclasses.replace(
            self.cluster, servers=self.cluster.servers + tuple(s for s, _ in pairs))
        base = len(self.cluster.servers)
        added = {base + i: node for i, (_, node) in enumerate(pairs)}
        self._joined.update(str(n["NodeID"]) for n in nodes)
        try:
            self._set_cluster(cluster)
        except ValueError as err:
            for n in nodes:
                self.journal.event("", t, "node_joined", f"{n['NodeID']} unused: {err}")
            log.warning("nodes joined but stay unused: %s", err)
            return
        self.node_of.update(added)  # in place: the executor's placer reads this mapping
        self.journal.event("", t, "cluster_grown", json.dumps(
            {"cluster": cluster.to_dict(), "node_of": {str(k): v for k, v in added.items()}}))
        log.info("slot %d: %s joined the model", t,
                 ", ".join(f"{s.server_id} ({s.pool.value})" for s, _ in pairs))

    def _set_cluster(self, cluster: Cluster) -> None:
        self.loop.set_cluster(cluster)  # the policy first: raises if it cannot grow
        self.cluster = cluster
        if hasattr(self.inner_executor, "cluster"):
            self.inner_executor.cluster = cluster

    def _regrow(self) -> None:
        """Restart: the cluster as the last journaled growth left it."""
        grown = [info for _, _, kind, info in self.journal.events() if kind == "cluster_grown"]
        for info in grown:
            d = json.loads(info)
            self._set_cluster(cluster_from_dict(d["cluster"]))
            if self.node_of is not None:
                self.node_of.update({int(k): v for k, v in d["node_of"].items()})

    # -- restart ---------------------------------------------------------------------------
    def _replay(self) -> None:
        """Rebuild the policy and the loop state from the journal (module docstring)."""
        st = self.loop.state
        subs = self.journal.submissions()
        for d in self.journal.decisions():
            spec = subs[d.job_id]
            self.policy.forced = d  # re-applied as journaled where the policy can restore
            if d.kind == "arrival":
                row = self._decide(spec, d.slot, kind="arrival", t0=time.perf_counter(),
                                   journal=False)
                if row.admitted != d.admitted or row.schedule != d.schedule:
                    log.warning("replay of %s differs from the journal; the journal wins",
                                d.job_id)
                    self._force(d)
            else:
                ok = self._replan(d.job_id, d.slot, journal=False, work=d.work)
                if ok != d.admitted:
                    log.warning("replay of the re-plan of %s differs; the journal wins",
                                d.job_id)
                    self._force(d)
            self.policy.forced = None  # not consumed when the loop screened the job out
        for spec_id, spec in subs.items():
            if spec_id not in st.records:
                self._future.append(spec)
        for t, _, _, plan in self.journal.slots():
            jobs = {j: st.records[j].job for j in plan}
            self.loop.record(t, plan, jobs)
            st.t = t + 1
            st.slots_run += 1
        for _t, job_id, _, done, _, _ in self.journal.progress():
            st.records[job_id].done = done
        reported = getattr(self.inner_executor, "reported", None)
        for job_id, slot, kind, info in self.journal.events():
            rec = st.records.get(job_id)
            if rec is None:
                continue
            fatal = kind == "failed" and info.startswith(FATAL)
            if kind == "complete":
                rec.completion = slot
            if (kind in ("complete", "cancel") or fatal) and job_id in st.active:
                st.active.remove(job_id)
            if kind == "cancel":
                rec.reason = CANCELLED
            if fatal:
                rec.reason = FAILED
        if reported is not None:
            for job_id in st.active:
                reported[job_id] = st.records[job_id].done
        log.info("restored from the journal: slot %d, %d jobs, %d active", st.t,
                 len(st.records), len(st.active))

    def _force(self, d: DecisionRow) -> None:
        st = self.loop.state
        rec = st.records[d.job_id]
        rec.admitted, rec.reason = d.admitted, d.reason
        if d.admitted and d.job_id not in st.active and rec.completion is None:
            st.active.append(d.job_id)
        if not d.admitted and d.job_id in st.active:
            st.active.remove(d.job_id)
        if d.schedule:
            self.planned_end[d.job_id] = max(d.schedule)
            self.schedules[d.job_id] = {**self.schedules.get(d.job_id, {}), **d.schedule}


def service_actor() -> Any:
    """The Ray actor class wrapping :class:`SchedulerService` (imports Ray)."""
    import ray

    @ray.remote(num_cpus=0, max_concurrency=32, max_restarts=-1)
    class ServiceActor:
        """A detached, named service; Ray restarts it from its journal after a crash."""

        def __init__(self, workdir: str, config: dict[str, Any] | None,
                     cluster: dict[str, Any] | None, node_of: dict[str, str] | None) -> None:
            logging.basicConfig(level=logging.WARNING)
            log.setLevel(logging.INFO)
            nodes = None if node_of is None else {int(k): v for k, v in node_of.items()}
            cl = cluster_from_dict(cluster) if cluster is not None else None
            if cl is None:
                from ray_cluster.cluster_model import cluster_from_nodes

                cfg = ServiceConfig.from_json(config) if config else ServiceConfig()
                cl, nodes = cluster_from_nodes(ray.nodes(), cfg.slot_seconds)
            journal = Journal(Path(workdir) / "journal.db")
            meta_nodes = journal.meta().get("node_of")
            journal.close()
            if meta_nodes:
                nodes = {int(k): v for k, v in meta_nodes.items()}
            self.svc = SchedulerService(
                workdir, config=ServiceConfig.from_json(config) if config else None,
                cluster=cl, node_of=nodes)
            self.svc.start()

        def submit(self, spec_json: str, arrival: int | None = None) -> dict[str, Any]:
            try:
                return self.svc.submit(spec_from_json(spec_json), arrival=arrival)
            except InputError as err:
                return {"error": str(err)}

        def status(self) -> dict[str, Any]:
            return self.svc.status()

        def cancel(self, job_id: str) -> bool:
            return self.svc.cancel(job_id)

        def logs(self, job_id: str) -> list[str]:
            return self.svc.logs(job_id)

        def ping(self) -> bool:
            return True

        def stop(self) -> None:
            self.svc.close()

    return ServiceActor



def run_trace(specs: list[JobSpec], workdir: str | Path, *, config: ServiceConfig,
              cluster: Cluster, node_of: dict[int, str] | None = None,
              executor: Executor | None = None, timeout_s: float | None = None) -> RunResult:
    """Run a whole trace through a fresh service: each job submitted for its arrival slot.

    Returns what really ran (the loop's :class:`~psched.simulator.RunResult`), the same
    record :func:`psched.simulator.simulate` returns for a simulated run.
    """
    svc = SchedulerService(workdir, config=config, cluster=cluster, node_of=node_of,
                           executor=executor)
    try:
        for spec in sorted(specs, key=lambda s: s.arrival):
            svc.submit(spec, arrival=spec.arrival)
        svc.start(until_idle=True)
        svc.join(timeout_s)
        if svc.error:
            raise RuntimeError(f"the service failed: {svc.error}")
        return svc.result()
    finally:
        svc.close()
