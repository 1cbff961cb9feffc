"""A held job in the live service on Ray: journaled as held, held again after a restart,
admitted at the next boundary, trained by real actors to completion.

On the session's Ray (tests/conftest.py), the test-only policy ``hold-once``
(:class:`test_service_held.HoldOnce`: SRTF that holds every arrival through one boundary)
runs in a :class:`~ray_cluster.service.SchedulerService` placing on the head node.
"""

from __future__ import annotations

import sqlite3

import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")

from test_service_held import HoldOnce  # noqa: E402

from psched.core import policy as base  # noqa: E402
from psched.core.model import Cluster, JobSpec, Pool, Resources, Server, resolve_job  # noqa: E402
from psched.core.records import HELD  # noqa: E402
from psched.core.utility import Utility  # noqa: E402
from ray_cluster.runtime import RuntimeConfig  # noqa: E402
from ray_cluster.runtime.executor import profile_seconds_per_batch, training_job  # noqa: E402
from ray_cluster.service import SchedulerService, ServiceConfig  # noqa: E402

SLOT_S = 1.5


@pytest.fixture
def held_policy(monkeypatch) -> str:
    """``hold-once`` registered for this test only."""
    import psched.policies  # noqa: F401  (the built-ins registered first)
    monkeypatch.setitem(base.REGISTRY, HoldOnce.name, HoldOnce)
    return HoldOnce.name


def _spec(job_id: str, *, m: int, tau_s: float) -> JobSpec:
    return JobSpec(job_id=job_id, arrival=0, epochs=1, max_workers=1, minibatches=m,
                   tau_s=tau_s, grad_mb=0.003, tau_includes_comm=True,
                   worker_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind="sigmoid", value=10, decay=0.3, target=8),
                   workload="softmax", hparams='{"dataset": "digits"}')


def test_a_held_job_survives_a_restart_and_trains_to_completion_on_ray(
        ray_session, tmp_path, held_policy):
    tau = profile_seconds_per_batch(training_job(resolve_job(_spec("probe", m=10, tau_s=0.01),
                                                             SLOT_S, 10)),
                                    RuntimeConfig(), steps=20)
    cluster = Cluster(servers=(
        Server(server_id="m/w", pool=Pool.WORKER,
               capacity=Resources(cpu=2, memory_gb=16, bandwidth_gbps=10)),
        Server(server_id="m/ps", pool=Pool.PS,
               capacity=Resources(cpu=2, memory_gb=16, bandwidth_gbps=10))),
        slot_seconds=SLOT_S)
    head = ray_session.node_ids["head"]
    node_of = {0: head, 1: head}
    cfg = ServiceConfig(policy=held_policy, slot_seconds=SLOT_S, horizon=60,
                        runtime={"start_timeout_s": 30.0})
    svc = SchedulerService(tmp_path, config=cfg, cluster=cluster, node_of=node_of)
    try:
        out = svc.submit(_spec("h", m=max(1, int(2 * SLOT_S / tau)), tau_s=tau))
        assert out["held"] and out["next_boundary"] == 0
        svc.run_for(1)  # boundary 0: still held (hold-once decides after its arrival slot)
        assert svc.status()["jobs"][0]["state"] == HELD
    finally:
        svc.close()  # the service goes down with the job held
    svc = SchedulerService(tmp_path, node_of=node_of)
    try:
        assert svc.loop.state.held == {"h": "held_once"} and not svc.idle()
        for _ in range(30):
            svc.run_for(1)
            if svc.idle():
                break
        status = {j["job_id"]: j for j in svc.status()["jobs"]}
    finally:
        svc.close()
    with sqlite3.connect(tmp_path / "journal.db") as con:
        rows = con.execute("SELECT kind, slot, admitted FROM decisions WHERE job_id = 'h' "
                           "AND kind IN ('hold', 'deferred') ORDER BY seq").fetchall()
        done = con.execute("SELECT COUNT(*) FROM events WHERE job_id = 'h' AND "
                           "kind = 'complete'").fetchone()[0]
    assert rows == [("hold", 0, 0), ("deferred", 1, 1)]
    rec = svc.loop.state.records["h"]
    assert status["h"]["state"] == "done" and rec.done >= rec.job.work - 1e-6 and done == 1
