"""``oasis-rp`` in the live service on Ray: a plan revised mid-run is a resize, and the promise
holds.

On the tests' Ray (the ``ray_session`` fixture of tests/conftest.py: two fake-GPU nodes, a
head for the PS), real actors
train the ``softmax`` workload. ``patient`` (a slowly decaying utility: it can wait, so it is
admitted uncommitted, without a promise) takes both GPUs from slot 0; ``urgent`` (steep)
arrives in slot 1, denser, and takes them (promised at once); ``patient``, searched again
after it, moves after it. The runtime suspends ``patient`` at the next boundary (a resize to
no workers, checkpointed) and resumes it from its checkpoint when its revised plan says; it
completes, by its promise if it reached its commit point first, as the service's own records
(journal, status) say. The jobs are planned at their measured speed; reality runs behind
(start-up), and neither job is suspended over and over.
"""

from __future__ import annotations

import itertools
import sqlite3

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

from psched.core.model import Cluster, JobSpec, Pool, Resources, Server, resolve_job  # noqa: E402
from psched.core.utility import Utility  # noqa: E402
from ray_cluster.runtime import RuntimeConfig  # noqa: E402
from ray_cluster.runtime.executor import profile_seconds_per_batch, training_job  # noqa: E402
from ray_cluster.service import SchedulerService, ServiceConfig  # noqa: E402

SLOT_S = 1.0


#: jobs are planned at their measured speed (1.0: no margin). Reality then runs behind the
#: plans (each start and resume costs about a slot of actor start-up on a loaded 2-core
#: machine), and oasis-rp's steady boundary re-plan (psched/policies/oasis_rp/steady.py) keeps the
#: running job running instead of swapping the two jobs at every boundary. Under the literal
#: re-plan (steady off) this test fails at 1.0: the jobs alternated every 2-3 slots, urgent
#: never completed in 36 slots and patient completed in slot 36, past its promise (34); with
#: the steady rule patient completed in slots 16-17 (3 runs, load 10-30). The margin left is
#: patient's promise (its slowly decaying utility), not a slowed-down plan.
PESSIMISM = 1.0


def _spec(job_id: str, *, slots: float, tau: float, value: float, decay: float,
          target: float) -> JobSpec:
    """Two workers (one GPU each) for about ``slots`` slots of training as planned."""
    return JobSpec(job_id=job_id, arrival=0, epochs=1, max_workers=2,
                   minibatches=int(slots * SLOT_S / (PESSIMISM * tau)),
                   tau_s=PESSIMISM * tau, grad_mb=0.003,
                   tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind="sigmoid", value=value, decay=decay, target=target),
                   workload="softmax", hparams='{"dataset": "digits"}')


@pytest.fixture(scope="module")
def tau(ray_session) -> float:
    """Seconds per mini-batch of the test workload on this machine, measured once."""
    probe = _spec("probe", slots=1, tau=0.01, value=1, decay=1, target=1)
    return profile_seconds_per_batch(training_job(resolve_job(probe, SLOT_S, 10)),
                                     RuntimeConfig(), steps=20)


def test_a_plan_revised_mid_run_is_a_resize_and_the_job_completes_by_its_promise(
        ray_session, tmp_path, tau):
    gpu = Resources(gpu=1, cpu=4, memory_gb=16, bandwidth_gbps=10)
    servers = (Server(server_id="gpu0", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="gpu1", pool=Pool.WORKER, capacity=gpu),
               Server(server_id="head", pool=Pool.PS,
                      capacity=Resources(cpu=8, memory_gb=32, bandwidth_gbps=10)))
    cluster = Cluster(servers=servers, slot_seconds=SLOT_S)
    node_of = {i: ray_session.node_ids[s.server_id] for i, s in enumerate(servers)}
    patient = _spec("patient", slots=3, tau=tau, value=10, decay=0.2, target=40)
    urgent = _spec("urgent", slots=2, tau=tau, value=20, decay=0.5, target=3)
    # each arrival is held on submission and decided at its slot's boundary: urgent takes
    # patient's room at the boundary of slot 1, before slot 1 runs
    cfg = ServiceConfig(policy="oasis-rp", slot_seconds=SLOT_S, horizon=60,
                        history=(patient, urgent), runtime={"start_timeout_s": 30.0})
    svc = SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)
    try:
        assert svc.submit(patient)["held"]
        svc.run_for(1)
        first = svc.loop.state.records["patient"]
        assert first.admitted and first.promised is None  # uncommitted: it can wait
        assert svc.executor.runtimes["patient"].shards  # it trained in slot 0
        second = svc.submit(urgent)
        assert second["held"] and second["arrival"] == 1
        svc.run_for(1)
        assert svc.loop.state.records["urgent"].admitted
        revised = [r for r in svc.journal.decisions() if r.kind == "revise" and r.slot == 1]
        assert revised and {r.job_id for r in revised} == {"patient"}
        assert 1 not in revised[-1].schedule  # moved out of the slot the newcomer needs
        assert not svc.executor.runtimes["patient"].shards  # suspended at the boundary
        for _ in range(90):  # idle long before on an unloaded machine
            if svc.idle():
                break
            svc.run_for(1)
        status = {j["job_id"]: j for j in svc.status()["jobs"]}
        ran = [sorted(plan) for _t, _s, _e, plan in svc.journal.slots()]
        workers = [plan["patient"].n_workers if "patient" in plan else 0
                   for _t, _s, _e, plan in svc.journal.slots()]
    finally:
        svc.close()
    with sqlite3.connect(tmp_path / "journal.db") as con:
        promised = dict(con.execute(
            "SELECT job_id, promised FROM decisions WHERE kind = 'deferred'").fetchall())
    rec = svc.loop.state.records["patient"]
    # the last deferred row: the policy's promise, or none; stated with the slack the speed
    # estimate's uncertainty needs, and re-stated in time where reality ran further behind
    assert (promised["patient"] is None) == (rec.promised is None)
    assert rec.promised is None or promised["patient"] <= rec.first_promise
    assert status["patient"]["promised"] == rec.promised
    assert status["patient"]["state"] == "done" and rec.done >= rec.job.work - 1e-6
    assert rec.completion is not None
    assert rec.promised is None or rec.promise_kept
    assert workers[0] == 2 and workers[1] == 0 and max(workers[2:]) == 2  # paused, resumed
    assert svc.loop.state.records["urgent"].completion is not None
    switches = sum(a != b for a, b in itertools.pairwise(ran) if a and b)
    assert switches <= 6  # the plan switches twice (urgent in, and back); literal: 14 times
