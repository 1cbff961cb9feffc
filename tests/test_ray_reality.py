"""A job that really trains at half the speed its profile says, in the live service on Ray.

On the tests' Ray (``ray_session``: two fake-GPU nodes, a head for the PS) real actors train
the ``softmax`` workload. The job's ``tau_s`` is half the seconds per mini-batch measured
here, so it really trains at (at most) half its profiled speed, slower still while the
machine's cores are shared. The service must learn that speed from the progress it
measures, keep the job's promise or re-state it before its slot (never miss it silently),
complete the job, and rebuild the same estimate from its journal after a restart.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

from psched.core.model import Cluster, JobSpec, Pool, Resources, Server, resolve_job  # noqa: E402
from psched.core.utility import Utility  # noqa: E402
from ray_cluster.runtime import RuntimeConfig  # noqa: E402
from ray_cluster.runtime.executor import profile_seconds_per_batch, training_job  # noqa: E402
from ray_cluster.service import SchedulerService, ServiceConfig  # noqa: E402

SLOT_S = 1.0


def _spec(job_id: str, *, slots: float, tau: float) -> JobSpec:
    """Two workers (one GPU each) for about ``slots`` slots of training as profiled; steep:
    it cannot wait, so every policy promises it at once."""
    return JobSpec(job_id=job_id, arrival=0, epochs=1, max_workers=2,
                   minibatches=int(slots * SLOT_S / tau), tau_s=tau, grad_mb=0.003,
                   tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind="sigmoid", value=20, decay=0.3, target=6),
                   workload="softmax", hparams='{"dataset": "digits"}')


@pytest.fixture(scope="module")
def tau(ray_session) -> float:
    """Seconds per mini-batch of the test workload on this machine, measured once."""
    probe = _spec("probe", slots=1, tau=0.01)
    return profile_seconds_per_batch(training_job(resolve_job(probe, SLOT_S, 10)),
                                     RuntimeConfig(), steps=20)


def _cluster(ray_session) -> tuple[Cluster, dict[int, str]]:
    gpu = Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10)
    servers = (Server(server_id="gpu0", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu1", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="head", pool=Pool.PS,
                      capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)))
    node_of = {i: ray_session.node_ids[s.server_id] for i, s in enumerate(servers)}
    return Cluster(servers=servers, slot_seconds=SLOT_S), node_of


def _real_speed(svc: SchedulerService, job_id: str) -> float:
    """The job's mean speed against its profile in the slots it ran as it ran before (no
    start, resume or resize) and did not finish in, from the journal."""
    slots = {t: plan for t, _s, _e, plan in svc.journal.slots()}
    done = {t: amount for t, j, amount, _d, _c, _i in svc.journal.progress(job_id)}
    end = svc.loop.state.records[job_id].completion
    ratios = [done.get(t, 0.0) / plan[job_id].n_workers for t, plan in slots.items()
              if job_id in plan and plan[job_id].n_workers and t != end
              and slots.get(t - 1, {}).get(job_id) == plan[job_id]]
    assert ratios, "no steady slot was measured"
    return sum(ratios) / len(ratios)


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
def test_a_job_at_half_its_profiled_speed_keeps_or_restates_its_promise_and_is_learnt(
        ray_session, tmp_path, tau, policy):
    cluster, node_of = _cluster(ray_session)
    slow = _spec("slow", slots=2, tau=tau / 2)  # claims twice the speed it has
    cfg = ServiceConfig(policy=policy, slot_seconds=SLOT_S, horizon=80, history=(slow,),
                        runtime={"start_timeout_s": 30.0})
    svc = SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)
    try:
        svc.submit(slow)
        for _ in range(70):
            svc.run_for(1)
            if svc.idle():
                break
        rec = svc.loop.state.records["slow"]
        status = {j["job_id"]: j for j in svc.status()["jobs"]}["slow"]
        real = _real_speed(svc, "slow")
        events = [kind for _j, _t, kind, _i in svc.journal.events("slow")]
    finally:
        svc.close()
    assert rec.admitted and rec.completion is not None and not rec.reason  # never dropped
    # kept, or re-stated in time (oasis promises on admission; oasis-rp at the job's commit
    # point, and not at all if it completes before)
    assert rec.promise_kept or (policy == "oasis-rp" and rec.promised is None)
    assert all(at <= old < new for at, old, new in rec.restated)
    assert events.count("restated") == len(rec.restated)
    assert real < 0.75  # it really ran far below its profile
    assert abs(rec.speed - real) <= 0.25 * real  # the estimate found it
    assert status["speed"] == rec.speed and status["promised"] == rec.promised
    again = SchedulerService(tmp_path, node_of=node_of)  # a restart: rebuilt from the journal
    try:
        back = again.loop.state.records["slow"]
        assert again.loop.speeds.speed("slow") == svc.loop.speeds.speed("slow")
        assert (back.promised, back.restated) == (rec.promised, rec.restated)
    finally:
        again.close()
