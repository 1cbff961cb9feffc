"""The scheduler service when reality departs from its plan: re-plans, nodes, restarts.

:class:`ray_cluster.service.SchedulerService` runs the live loop (submit, cancel, status, the
slot loop); this module holds what re-decides, reshapes or rebuilds its state, as functions of
the service:

* :class:`RecordingPolicy` -- the service's policy proxy: it remembers each decision (the
  committed schedule) and, on restart, re-applies the journaled one;
* :func:`replan` -- a job behind its plan is re-decided;
* :func:`refresh_nodes` -- before each slot, lost Ray nodes are remapped, and joined ones
  replace lost ones (:func:`rehome`) or grow the model (:func:`grow`);
* :func:`regrow` and :func:`replay` -- a restart rebuilds the cluster, the policy and the loop
  state from the journal.

Reality differs from the plan. Handled for policies that commit on arrival:

* *behind plan*: a job still unfinished after the last slot of its committed schedule is
  re-decided for its remaining work ``ceil(W - done)`` at the current prices, from the current
  slot, its utility still counted from its original arrival (``Ledger.inputs(start=)``). Its
  new schedule is committed on top (its old commitments are in the past); a rejection drops
  it (reason ``dropped_behind``). A re-plan is journaled like an arrival;
* *lost node*: the servers of a dead node are pointed at a live node of the same pool
  (:func:`ray_cluster.cluster_model.remap_lost`); the job's actors restart there (a dead PS
  shard rolls the job back to its last checkpoint), and any lost progress is caught by the
  behind-plan rule.

Prices then no longer follow the paper's assumptions exactly: a re-plan adds usage beyond what
the arrival committed, and a cancelled job's commitments keep prices higher than its actual use
(conservative: later jobs pay more, never less). The dual certificate of
:meth:`~psched.policies.oasis.OasisPolicy.report` then covers the decisions made, counting a
re-planned job once per decision, and is indicative only.

A node that joins while a lost node's servers are remapped replaces that node when it offers
the same pools (:func:`ray_cluster.cluster_model.replacement`): the lost node's servers move
onto it for good (:func:`rehome`, journaled) and the model keeps its capacity, which never
dropped the lost node's -- a replacement is not growth. Other nodes that join (placed mode)
are turned into servers by the rules of
:mod:`ray_cluster.cluster_model` and appended to the model at the next slot boundary: the
policy's ledger grows (``on_cluster_change``; new servers start at zero usage, U and L stay),
the placement maps them to their nodes, and the growth is journaled, so a restart rebuilds the
same cluster. Jobs already decided keep their schedules; later decisions use the new servers.

Restart. A new service on an existing journal re-creates the policy from the journaled
configuration and replays every journaled decision through it in order. A policy with a
``restore`` method (OASiS) re-applies each journaled decision as it was -- the same
commitments, prices and certificate, even where deciding again would differ; any other policy
decides again (they are deterministic; a mismatch is logged and the journal wins). Then the
finished slots (executed plans, progress, completions, cancellations); running jobs resume from
their latest checkpoints. Slots are counted in service time: slot ``t`` (the first not
journaled) begins when the restarted service starts.

Complexity: :func:`replay` is O(journal size) plus one policy decision per journaled decision;
:func:`replan` is one policy decision.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any

from psched.executor import FATAL
from psched.model import Cluster, Decision, Job, SlotPlan
from psched.policies.base import Policy, RunContext, View
from ray_cluster.journal import DecisionRow
from ray_cluster.service_config import CANCELLED, DROPPED_BEHIND, FAILED, cluster_from_dict

if TYPE_CHECKING:
    from ray_cluster.service import SchedulerService

__all__ = ["RecordingPolicy", "apply_nodes", "grow", "refresh_nodes", "regrow", "rehome",
           "replan", "replay"]

#: the service's own logger: its lines keep one name (``service_actor`` sets its level)
log = logging.getLogger("ray_cluster.service")


class RecordingPolicy:
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


def replan(svc: SchedulerService, job_id: str, t: int, *, journal: bool = True,
           work: int | None = None) -> bool:
    """Re-decide a job behind its plan for its remaining work (module docstring)."""
    st = svc.loop.state
    rec = st.records[job_id]
    left = work if work is not None else max(1, math.ceil(rec.job.work - rec.done - 1e-9))
    residual = Job(spec=rec.job.spec, work=left, window=rec.job.window)
    view = View(t=t, cluster=svc.cluster, horizon=svc.config.horizon, active={})
    t0 = time.perf_counter()
    svc.policy.last = None
    dec = svc.policy.on_arrival(residual, view)
    ms = (time.perf_counter() - t0) * 1e3
    st.decision_ms.append(ms)
    schedule = dict(dec.schedule) if dec.admitted and dec.schedule else {}
    if schedule:
        svc.planned_end[job_id] = max(schedule)
        svc.schedules[job_id] = {**svc.schedules.get(job_id, {}), **schedule}
    else:
        svc._drop(job_id, DROPPED_BEHIND)
    if journal:
        svc.journal.decide(DecisionRow(
            job_id=job_id, kind="replan", slot=t, admitted=dec.admitted,
            reason=dec.reason, payoff=dec.payoff, work=left, schedule=schedule,
            latency_ms=ms))
    log.info("slot %d: job %s behind plan (%.2f of %d): re-plan %s", t, job_id, rec.done,
             rec.job.work, "admitted" if dec.admitted else "rejected, dropped")
    return dec.admitted


def refresh_nodes(svc: SchedulerService, t: int) -> None:
    """Lost and joined Ray nodes (placed mode on Ray: a ``node_of`` map and an executor
    that places actors; another executor's nodes are not Ray's)."""
    if svc.node_of is None or not hasattr(svc.inner_executor, "placer"):
        return
    try:
        import ray

        nodes = ray.nodes()
    except Exception:
        return
    apply_nodes(svc, nodes, t)


def apply_nodes(svc: SchedulerService, nodes: list[dict[str, Any]], t: int) -> None:
    """Bring the model and placement up to date with Ray's node list (``ray.nodes()``):
    remap servers of dead nodes, let joined nodes replace lost ones or grow the model."""
    from ray_cluster.cluster_model import joined_nodes, remap_lost, replacement

    assert svc.node_of is not None
    alive = {n["NodeID"] for n in nodes if n.get("Alive")}
    for line in remap_lost(svc.cluster, svc.node_of, alive):
        svc.journal.event("", t, "node_lost", line)
    new = set(joined_nodes(svc.node_of, nodes)) - svc._joined
    fresh = []
    for node in sorted((n for n in nodes if n["NodeID"] in new), key=lambda n: n["NodeID"]):
        taken = replacement(svc.cluster, svc.home, alive, node)
        if taken:
            rehome(svc, taken, str(node["NodeID"]), t)
        else:
            fresh.append(node)
    svc._joined.update(new)
    if fresh:
        grow(svc, fresh, t)


def rehome(svc: SchedulerService, servers: list[int], node_id: str, t: int) -> None:
    """A joining node replaces a lost one: ``servers`` (all of the lost node's) move onto it
    for good; the model's capacity is unchanged (it never dropped the lost node's). Journaled,
    so a restart places them there too."""
    assert svc.node_of is not None
    moved = {h: node_id for h in servers}
    svc.node_of.update(moved)  # in place: the executor's placer reads this mapping
    svc.home.update(moved)
    svc.journal.event("", t, "servers_rehomed",
                      json.dumps({"node_of": {str(h): n for h, n in moved.items()}}))
    log.info("slot %d: node %s replaces a lost node: %s", t, node_id[:8],
             ", ".join(svc.cluster.servers[h].server_id for h in servers))


def grow(svc: SchedulerService, nodes: list[dict[str, Any]], t: int) -> None:
    """Nodes joined: append their servers to the model, the policy and the placement
    (before slot ``t``'s plan is applied; the plan was made without them, so they are
    used from the next decision on). Journaled, so a restart rebuilds the same cluster."""
    from ray_cluster.cluster_model import servers_of_nodes

    assert svc.node_of is not None
    pairs = servers_of_nodes(nodes, taken=[s.server_id for s in svc.cluster.servers])
    cluster = dataclasses.replace(
        svc.cluster, servers=svc.cluster.servers + tuple(s for s, _ in pairs))
    base = len(svc.cluster.servers)
    added = {base + i: node for i, (_, node) in enumerate(pairs)}
    svc._joined.update(str(n["NodeID"]) for n in nodes)
    try:
        _set_cluster(svc, cluster, at=t)
    except ValueError as err:
        for n in nodes:
            svc.journal.event("", t, "node_joined", f"{n['NodeID']} unused: {err}")
        log.warning("nodes joined but stay unused: %s", err)
        return
    svc.node_of.update(added)  # in place: the executor's placer reads this mapping
    svc.home.update(added)
    svc.journal.event("", t, "cluster_grown", json.dumps(
        {"cluster": cluster.to_dict(), "node_of": {str(k): v for k, v in added.items()}}))
    log.info("slot %d: %s joined the model", t,
             ", ".join(f"{s.server_id} ({s.pool.value})" for s, _ in pairs))


def _set_cluster(svc: SchedulerService, cluster: Cluster, at: int | None = None) -> None:
    svc.loop.set_cluster(cluster, at)  # the policy first: raises if it cannot grow
    svc.cluster = cluster
    if hasattr(svc.inner_executor, "cluster"):
        svc.inner_executor.cluster = cluster


def regrow(svc: SchedulerService) -> None:
    """Restart: the cluster and placement as the journaled growths and replacements left
    them (in journal order)."""
    for _, t, kind, info in svc.journal.events():
        if kind not in ("cluster_grown", "servers_rehomed"):
            continue
        d = json.loads(info)
        if kind == "cluster_grown":
            _set_cluster(svc, cluster_from_dict(d["cluster"]), at=t)
        if svc.node_of is not None:
            placed = {int(k): v for k, v in d["node_of"].items()}
            svc.node_of.update(placed)
            svc.home.update(placed)


def replay(svc: SchedulerService) -> None:
    """Rebuild the policy and the loop state from the journal (module docstring)."""
    st = svc.loop.state
    subs = svc.journal.submissions()
    for d in svc.journal.decisions():
        spec = subs[d.job_id]
        svc.policy.forced = d  # re-applied as journaled where the policy can restore
        if d.kind == "arrival":
            row = svc._decide(spec, d.slot, kind="arrival", t0=time.perf_counter(),
                              journal=False)
            if row.admitted != d.admitted or row.schedule != d.schedule:
                log.warning("replay of %s differs from the journal; the journal wins",
                            d.job_id)
                _force(svc, d)
        else:
            ok = replan(svc, d.job_id, d.slot, journal=False, work=d.work)
            if ok != d.admitted:
                log.warning("replay of the re-plan of %s differs; the journal wins",
                            d.job_id)
                _force(svc, d)
        svc.policy.forced = None  # not consumed when the loop screened the job out
    for spec_id, spec in subs.items():
        if spec_id not in st.records:
            svc._future.append(spec)
    for t, _, _, plan in svc.journal.slots():
        jobs = {j: st.records[j].job for j in plan}
        svc.loop.record(t, plan, jobs)
        st.t = t + 1
        st.slots_run += 1
    for _t, job_id, _, done, _, _ in svc.journal.progress():
        st.records[job_id].done = done
    reported = getattr(svc.inner_executor, "reported", None)
    for job_id, slot, kind, info in svc.journal.events():
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


def _force(svc: SchedulerService, d: DecisionRow) -> None:
    st = svc.loop.state
    rec = st.records[d.job_id]
    rec.admitted, rec.reason = d.admitted, d.reason
    if d.admitted and d.job_id not in st.active and rec.completion is None:
        st.active.append(d.job_id)
    if not d.admitted and d.job_id in st.active:
        st.active.remove(d.job_id)
    if d.schedule:
        svc.planned_end[d.job_id] = max(d.schedule)
        svc.schedules[d.job_id] = {**svc.schedules.get(d.job_id, {}), **d.schedule}
