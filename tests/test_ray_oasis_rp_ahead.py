"""``oasis-rp`` on Ray: a job displaced by a denser one resumes mid-run as soon as the room is
free again, the revised plan is a resize at the boundary, and the job completes.

On the tests' Ray (the ``ray_session`` fixture of tests/conftest.py: two fake-GPU nodes, a
head for the PS), real actors
train the ``softmax`` workload, planned at their measured speed. ``patient`` (two workers, a
slowly decaying utility: it can wait, so it is admitted uncommitted, without a promise) takes
both GPUs from slot 0; ``urgent`` (two workers, steep) arrives in slot 1 and is decided at
that slot's boundary, denser: it takes the GPUs, and ``patient``, searched again after it, is
planned after it and suspended (checkpointed). The user then cancels ``urgent`` before slot 2:
its GPUs are in no plan. At slot 2's boundary the queue keeps ``patient``'s plan (it still
fits: no denser job took its room, :mod:`psched.policies.oasis_rp.queue`), and ``ahead``
(:mod:`psched.policies.oasis_rp.ahead`) hands it the idle GPUs, so its plan resumes in slot 2
instead of after ``urgent``'s (a ``revise`` row with two workers in slot 2, its tail trimmed),
run as a resize from its checkpoint. Spies on the queue's handling of uncommitted jobs and on
:func:`psched.policies.oasis_rp.ahead.grow` say what each did at which boundary; the
journal's revision and the slot's executed plan agree.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

from psched.core.model import Cluster, JobSpec, Pool, Resources, Server, resolve_job  # noqa: E402
from psched.core.utility import Utility  # noqa: E402
from psched.policies.oasis_rp import ahead as ahead_module  # noqa: E402
from psched.policies.oasis_rp import queue as queue_module  # noqa: E402
from ray_cluster.runtime import RuntimeConfig  # noqa: E402
from ray_cluster.runtime.executor import profile_seconds_per_batch, training_job  # noqa: E402
from ray_cluster.service import SchedulerService, ServiceConfig  # noqa: E402

SLOT_S = 1.5

#: jobs are planned at their measured speed (reality then runs behind: start-up)
PESSIMISM = 1.0


def _spec(job_id: str, *, slots: float, tau: float, workers: int, value: float,
          decay: float, target: float) -> JobSpec:
    """``workers`` workers (one GPU each) for about ``slots`` slots of training as planned."""
    return JobSpec(job_id=job_id, arrival=0, epochs=1, max_workers=workers,
                   minibatches=int(slots * SLOT_S / (PESSIMISM * tau)),
                   tau_s=PESSIMISM * tau, grad_mb=0.003, tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind="sigmoid", value=value, decay=decay, target=target),
                   workload="softmax", hparams='{"dataset": "digits"}')


@pytest.fixture(scope="module")
def tau(ray_session) -> float:
    """Seconds per mini-batch of the test workload on this machine, measured once."""
    probe = _spec("probe", slots=1, tau=0.01, workers=1, value=1, decay=1, target=1)
    return profile_seconds_per_batch(training_job(resolve_job(probe, SLOT_S, 10)),
                                     RuntimeConfig(), steps=20)


def _service(ray_session, tmp_path, patient: JobSpec, urgent: JobSpec) -> SchedulerService:
    gpu = Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10)
    servers = (Server(server_id="gpu0", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu1", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="head", pool=Pool.PS,
                      capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)))
    cluster = Cluster(servers=servers, slot_seconds=SLOT_S)
    node_of = {i: ray_session.node_ids[s.server_id] for i, s in enumerate(servers)}
    cfg = ServiceConfig(policy="oasis-rp", slot_seconds=SLOT_S, horizon=60,
                        history=(patient, urgent), runtime={"start_timeout_s": 30.0})
    return SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)


def test_a_displaced_job_resumes_mid_run_as_a_resize_once_the_room_is_free(
        ray_session, tmp_path, tau, monkeypatch):
    patient = _spec("patient", slots=2, tau=tau, workers=2, value=10, decay=0.2, target=40)
    urgent = _spec("urgent", slots=2, tau=tau, workers=2, value=40, decay=0.5, target=3)
    svc = _service(ray_session, tmp_path, patient, urgent)
    planned: list[tuple[int, str, int]] = []  # (slot, job, workers planned in that slot)
    real = queue_module._uncommitted

    def spy(st, job, old, left, t, rtol, searched):
        got = real(st, job, old, left, t, rtol, searched)
        plan = st.plans.get(job.job_id, {})
        planned.append((t, job.job_id, plan[t].n_workers if t in plan else 0))
        return got

    monkeypatch.setattr(queue_module, "_uncommitted", spy)
    grown: list[tuple[int, str, int, int]] = []  # (slot, job, workers before, after)
    real_grow = ahead_module.grow

    def grow_spy(st, job, old, t):
        new = real_grow(st, job, old, t)
        if new is not None:
            grown.append((t, job.job_id, old[t].n_workers if t in old else 0,
                          new[t].n_workers))
        return new

    monkeypatch.setattr(ahead_module, "grow", grow_spy)
    try:
        assert svc.submit(patient)["held"]  # decided at slot 0's boundary (batch)
        svc.run_for(1)
        first = svc.loop.state.records["patient"]
        assert first.admitted and first.promised is None  # uncommitted: it can wait
        assert svc.executor.runtimes["patient"].shards  # it trained in slot 0
        assert svc.submit(urgent)["held"]
        svc.run_for(1)
        assert svc.loop.state.records["urgent"].admitted
        assert not svc.executor.runtimes["patient"].shards  # suspended in slot 1
        assert svc.cancel("urgent")  # between slots: at once
        for _ in range(30):
            svc.run_for(1)
            if svc.idle():
                break
        slots = {t: plan for t, _s, _e, plan in svc.journal.slots()}
        revised = {(r.job_id, r.slot): r.schedule for r in svc.journal.decisions()
                   if r.kind == "revise"}
        status = {j["job_id"]: j for j in svc.status()["jobs"]}
    finally:
        svc.close()
    assert slots[0]["patient"].n_workers == 2 and "patient" not in slots[1]
    assert (1, "patient", 0) in planned  # searched after urgent: not in slot 1
    assert (2, "patient", 0) in planned  # its plan kept by the queue (it still fits)
    assert (2, "patient", 0, 2) in grown  # ahead: resumed in slot 2, not after urgent's plan
    assert revised[("patient", 2)][2].n_workers == 2  # journaled as a revision
    assert slots[2]["patient"].n_workers == 2  # and run: a resize at the boundary
    rec = svc.loop.state.records["patient"]
    assert status["patient"]["state"] == "done" and rec.done >= rec.job.work - 1e-6
    assert rec.completion is not None
    assert rec.promised is None or rec.promise_kept  # kept, or re-stated in time
    assert status["patient"]["promised"] == rec.promised
    assert svc.loop.state.records["urgent"].reason == "cancelled"
