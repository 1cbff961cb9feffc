"""The journal and restarts from it (simulated executor: no Ray, exact and fast)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor, SlotReport
from psched.core.model import Alloc, Cluster, JobSpec, Pool, Resources, Server
from psched.core.utility import Utility
from ray_cluster.service import CANCELLED, DROPPED_BEHIND, SchedulerService, ServiceConfig
from ray_cluster.service.journal import (
    SYNC_ENV,
    Journal,
    alloc_from_json,
    alloc_to_json,
    spec_from_json,
    spec_to_json,
)

SLOT_S = 0.01


def _cluster(cpu: float = 2.0) -> Cluster:
    return Cluster(servers=(
        Server(server_id="m/w", pool=Pool.WORKER,
               capacity=Resources(cpu=cpu, memory_gb=8, bandwidth_gbps=10)),
        Server(server_id="m/ps", pool=Pool.PS,
               capacity=Resources(cpu=cpu, memory_gb=8, bandwidth_gbps=10)),
    ), slot_seconds=SLOT_S)


def _spec(i: int, *, n: int = 2, work_s: float = 0.04, value: float = 10.0,
          kind: str = "sigmoid") -> JobSpec:
    return JobSpec(job_id=f"j{i}", arrival=0, epochs=1, max_workers=n, minibatches=10,
                   tau_s=work_s / (10 * n), grad_mb=0.01, tau_includes_comm=True,
                   worker_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind=kind, value=value, decay=0.5, target=4),
                   workload="softmax")


HISTORY = tuple(_spec(i, work_s=0.01 * (1 + i % 4)) for i in range(8))


def _config(**kw) -> ServiceConfig:
    return ServiceConfig(slot_seconds=SLOT_S, horizon=80, history=HISTORY, **kw)


class SlowExecutor(SimulatedExecutor):
    """Reality behind the model: each worker does ``rate`` worker-slots per slot."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def apply(self, t, plan, jobs):
        return SlotReport(slot=t, progress={j: self.rate * a.n_workers
                                            for j, a in plan.items() if a.n_workers})


def _outcome(svc: SchedulerService) -> dict[str, tuple]:
    return {j: (r.admitted, r.reason, r.completion, round(r.done, 9), r.job.arrival)
            for j, r in svc.loop.state.records.items()}


def test_journal_round_trips_specs_and_schedules(tmp_path):
    spec = dataclasses.replace(_spec(1), hparams='{"dataset": "digits"}')
    assert spec_from_json(spec_to_json(spec)) == spec
    sched = {3: Alloc.of({0: 2}, {1: 1}), 4: Alloc.of({0: 1}, {1: 1})}
    assert alloc_from_json(alloc_to_json(sched)) == sched
    j = Journal(tmp_path / "j.db")
    assert j._rows("PRAGMA journal_mode")[0][0] == "wal"
    j.submit(spec)
    with pytest.raises(Exception, match="UNIQUE"):
        j.submit(spec)
    assert list(j.submissions()) == ["j1"]
    j.close()


@pytest.mark.parametrize(("level", "pragma"), [(None, 2), ("FULL", 2), ("normal", 1)])
def test_each_commit_is_synced_to_disk_unless_the_environment_says_normal(
        tmp_path, monkeypatch, level, pragma):
    """``synchronous=FULL`` by default (the test session itself runs with ``NORMAL``)."""
    if level is None:
        monkeypatch.delenv(SYNC_ENV, raising=False)
    else:
        monkeypatch.setenv(SYNC_ENV, level)
    j = Journal(tmp_path / "journal.db")
    try:
        assert j._rows("PRAGMA synchronous") == [(pragma,)]
        assert j._rows("PRAGMA journal_mode") == [("wal",)]
    finally:
        j.close()
    monkeypatch.setenv(SYNC_ENV, "OFF")
    with pytest.raises(InputError, match=f"^{SYNC_ENV}: must be one of FULL, NORMAL, got 'OFF'$"):
        Journal(tmp_path / "other.db")
    assert not (tmp_path / "other.db").exists()


def _drive(svc: SchedulerService, plan: list[tuple[int, list[JobSpec]]], until: int) -> None:
    """Submit each batch when the service reaches its slot; run to slot ``until``."""
    for slot, specs in plan:
        if slot >= until:
            break
        if slot > svc.loop.state.t:
            svc.run_for(min(slot, until) - svc.loop.state.t)
        for s in specs:
            svc.submit(s)
    if svc.loop.state.t < until:
        svc.run_for(until - svc.loop.state.t)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(crash_at=st.integers(1, 14), seed=st.integers(0, 1000), rate=st.sampled_from([1.0, 0.6]))
def test_restart_from_journal_loses_and_duplicates_nothing(tmp_path_factory, crash_at, seed,
                                                           rate):
    """A service killed at any slot and restarted ends exactly as one never interrupted."""
    import random

    rng = random.Random(seed)
    plan = sorted(((rng.randrange(0, 10), [_spec(i, n=rng.randint(1, 3),
                                                  work_s=rng.choice([0.01, 0.03, 0.05]),
                                                  value=rng.uniform(1, 20))])
                   for i in range(7)), key=lambda x: x[0])
    end = 40
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=_config(), cluster=_cluster(),
                           executor=SlowExecutor(rate))
    _drive(ref, plan, end)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=_config(), cluster=_cluster(),
                             executor=SlowExecutor(rate))
    _drive(first, plan, crash_at)
    first.journal.close()  # the process dies: nothing else is saved
    again = SchedulerService(work, executor=SlowExecutor(rate))
    assert again.restored and again.loop.state.t == crash_at
    before = [s for slot, b in plan if slot < crash_at for s in b]
    if before:
        with pytest.raises(InputError, match="submitted before"):
            again.submit(before[0])
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], end)
    assert _outcome(again) == _outcome(ref)
    assert again.loop.state.allocations == ref.loop.state.allocations
    assert sorted(again.journal.submissions()) == sorted(ref.journal.submissions())
    # every admitted job completed or was dropped for being behind: none lost
    for rec in again.loop.state.records.values():
        if rec.admitted:
            assert rec.completion is not None or rec.reason == DROPPED_BEHIND


def test_a_job_behind_plan_is_replanned_and_keeps_its_arrival(tmp_path):
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(),
                           executor=SlowExecutor(0.5))
    svc.submit(_spec(1, n=2, work_s=0.04))
    svc.run_for(30)
    rec = svc.loop.state.records["j1"]
    kinds = [d.kind for d in svc.journal.decisions()]
    assert kinds[0] == "arrival" and "replan" in kinds
    assert rec.completion is not None and rec.job.arrival == 0
    assert rec.utility == pytest.approx(rec.job.utility_at(rec.completion + 1))
    replans = [d for d in svc.journal.decisions() if d.kind == "replan"]
    assert replans[0].work < rec.job.work  # only the remaining work was re-planned


def test_cancel_stops_a_job_and_survives_restart(tmp_path):
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(),
                           executor=SimulatedExecutor())
    svc.submit(_spec(1, n=1, work_s=0.08))
    svc.run_for(2)
    assert svc.cancel("j1")
    assert not svc.cancel("j1")  # already stopped
    svc.run_for(2)
    rec = svc.loop.state.records["j1"]
    assert rec.reason == CANCELLED and rec.completion is None
    svc.journal.close()
    again = SchedulerService(tmp_path, executor=SimulatedExecutor())
    assert again.loop.state.records["j1"].reason == CANCELLED
    assert not again.loop.state.active
    assert any("cancel" in line for line in again.logs("j1"))


def test_future_arrivals_wait_for_their_slot_and_survive_restart(tmp_path):
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(),
                           executor=SimulatedExecutor())
    out = svc.submit(dataclasses.replace(_spec(1), arrival=5), arrival=5)
    assert out == {"job_id": "j1", "arrival": 5, "decided": False}
    svc.run_for(3)
    svc.journal.close()
    again = SchedulerService(tmp_path, executor=SimulatedExecutor())
    again.run_for(10)
    rec = again.loop.state.records["j1"]
    assert rec.job.arrival == 5 and rec.admitted and rec.first_slot >= 5


def test_oasis_without_price_bounds_is_one_line_error(tmp_path):
    with pytest.raises(InputError, match="--prices or --history"):
        SchedulerService(tmp_path, config=ServiceConfig(slot_seconds=SLOT_S),
                         cluster=_cluster(), executor=SimulatedExecutor())


# -- the cluster model of Ray nodes (plain node rows, no Ray needed) -------------------------
def _node(node_id: str, **res: float) -> dict:
    return {"NodeID": node_id, "Alive": True, "Resources": res}


def test_one_machine_is_split_into_a_worker_and_a_ps_server():
    from ray_cluster.runtime.cluster_model import cluster_from_nodes

    cluster, node_of = cluster_from_nodes(
        [_node("a" * 16, CPU=2.0, memory=8 * 2**30, psched_worker_cpu=2.0)], 30.0)
    (w, ps) = cluster.servers
    assert (w.pool, ps.pool) == (Pool.WORKER, Pool.PS)
    assert w.capacity.cpu == 2.0 and w.capacity.memory_gb == pytest.approx(4.0)
    assert ps.capacity.gpu == 0 and ps.capacity.memory_gb == pytest.approx(4.0)
    assert node_of == {0: "a" * 16, 1: "a" * 16}


def test_pools_by_custom_resources_and_lost_nodes_remapped():
    from ray_cluster.runtime.cluster_model import cluster_from_nodes, joined_nodes, remap_lost

    nodes = [_node("n0", CPU=8, GPU=0, **{"psched_pool:ps": 1, "psched_server:head": 1}),
             _node("n1", CPU=0, GPU=1, **{"psched_pool:worker": 1, "psched_server:g1": 1}),
             _node("n2", CPU=0, GPU=1, **{"psched_pool:worker": 1, "psched_server:g2": 1})]
    cluster, node_of = cluster_from_nodes(nodes, 10.0)
    assert [s.server_id for s in cluster.servers] == ["g1", "g2", "head"]
    assert [s.pool for s in cluster.servers] == [Pool.WORKER, Pool.WORKER, Pool.PS]
    assert cluster.servers[0].capacity.gpu == 1 and cluster.servers[2].capacity.gpu == 0
    moves = remap_lost(cluster, node_of, alive={"n0", "n2"})
    assert node_of[0] == "n2" and len(moves) == 1  # g1's worker server now on n2
    assert joined_nodes(node_of, [nodes[0], nodes[2], _node("n3")]) == ["n3"]
    with pytest.raises(ValueError, match="no worker server"):
        cluster_from_nodes([nodes[0]], 10.0)


def test_a_joining_node_replaces_a_lost_node_that_offered_the_same_pools():
    from ray_cluster.runtime.cluster_model import cluster_from_nodes, replacement

    nodes = [_node("n0", CPU=8, **{"psched_pool:ps": 1}),
             _node("n1", CPU=0, GPU=1, **{"psched_pool:worker": 1}),
             _node("n2", CPU=0, GPU=1, **{"psched_pool:worker": 1}),
             _node("n3", CPU=4)]  # split: a worker and a PS server
    cluster, home = cluster_from_nodes(nodes, 10.0)
    worker_node = _node("n9", GPU=1, **{"psched_pool:worker": 1})
    lost_n1 = [h for h, n in home.items() if n == "n1"]
    assert replacement(cluster, home, {"n0", "n2", "n3"}, worker_node) == lost_n1
    assert replacement(cluster, home, {"n0", "n1", "n2", "n3"}, worker_node) == []  # none lost
    lost_n3 = sorted(h for h, n in home.items() if n == "n3")
    assert replacement(cluster, home, {"n0", "n1", "n2"}, _node("n9", CPU=4)) == lost_n3
    # a lost split node is not replaced by a worker-only node, nor a worker node by a split one
    assert replacement(cluster, home, {"n0", "n1", "n2"}, worker_node) == []
    assert replacement(cluster, home, {"n0", "n2", "n3"}, _node("n9", CPU=4)) == []


def test_a_replacement_node_takes_over_the_lost_servers_without_growing_the_model(tmp_path):
    from ray_cluster.runtime.cluster_model import cluster_from_nodes

    nodes = [_node("n0", CPU=2.0, memory=8 * 2**30), _node("n1", CPU=2.0, memory=8 * 2**30)]
    cluster, node_of = cluster_from_nodes(nodes, SLOT_S)
    original = dict(node_of)
    svc = SchedulerService(tmp_path, config=_config(), cluster=cluster, node_of=node_of,
                           executor=SimulatedExecutor())
    svc.submit(_spec(1, n=2, work_s=0.08))
    svc.run_for(1)
    dead = {**nodes[1], "Alive": False}
    svc.nodes.apply([nodes[0], dead], svc.loop.state.t)
    assert set(node_of.values()) == {"n0"}  # n1's servers remapped onto n0
    svc.nodes.apply([nodes[0], dead, _node("n2", CPU=2.0, memory=8 * 2**30)],
                svc.loop.state.t)
    moved = {h: ("n2" if n == "n1" else n) for h, n in original.items()}
    assert node_of == moved and svc.cluster == cluster  # same capacity, new node
    svc.nodes.apply([nodes[0], dead, _node("n2", CPU=2.0, memory=8 * 2**30),
                      _node("n3", CPU=2.0, memory=8 * 2**30)], svc.loop.state.t)
    assert len(svc.cluster.servers) == 6 and node_of[4] == node_of[5] == "n3"  # growth
    svc.run_for(6)
    assert svc.loop.state.records["j1"].completion is not None
    grown = svc.cluster
    svc.journal.close()
    again = SchedulerService(tmp_path, node_of=dict(original), executor=SimulatedExecutor())
    assert again.cluster == grown and again.node_of == node_of  # rebuilt in journal order
    assert _outcome(again) == _outcome(svc)


class LookingExecutor(SimulatedExecutor):
    """Records, at every slot, what the service's lookahead says of the next slot."""

    def __init__(self) -> None:
        self.applied: dict[int, dict] = {}
        self.foreseen: dict[int, dict] = {}
        self.lookahead = None

    def set_lookahead(self, lookahead):  # the service gives it
        self.lookahead = lookahead

    def apply(self, t, plan, jobs):
        self.applied[t] = dict(plan)
        self.foreseen[t + 1] = dict(self.lookahead(t + 1) or {})
        return super().apply(t, plan, jobs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lookahead_foresees_the_next_slots_plan_of_a_committing_policy(tmp_path, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    ex = LookingExecutor()
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(), executor=ex)
    jobs = [(int(rng.integers(0, 4)), [_spec(10 + i, work_s=0.01 * int(rng.integers(1, 5)))])
            for i in range(5)]
    _drive(svc, sorted(jobs, key=lambda x: x[0]), until=30)
    svc.close()
    assert any(ex.applied.values()) and any(ex.foreseen.values())
    for t, plan in ex.applied.items():
        if t in ex.foreseen:  # jobs arriving in slot t are unknown one slot before
            arrived_late = {j for j in plan if svc.loop.state.records[j].job.arrival == t}
            assert {j: a for j, a in ex.foreseen[t].items() if j in plan} == \
                {j: a for j, a in plan.items() if j not in arrived_late}
            finished = {j for j, r in svc.loop.state.records.items()
                        if r.completion is not None and r.completion < t}
            assert set(ex.foreseen[t]) - set(plan) <= finished  # only jobs done early


class FailingExecutor(SimulatedExecutor):
    """Job ``j1`` raises in every segment from slot 1 on (the runtime's strikes ran out)."""

    def apply(self, t, plan, jobs):
        rep = super().apply(t, plan, jobs)
        if t >= 1 and "j1" in plan:
            return SlotReport(slot=t, progress={j: p for j, p in rep.progress.items()
                                                if j != "j1"},
                              failed={"j1": "fatal: ValueError: broken workload"})
        return rep


def test_a_job_failed_for_good_is_dropped_others_go_on_and_it_survives_restart(tmp_path):
    from ray_cluster.service import FAILED

    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(4.0),
                           executor=FailingExecutor())
    svc.submit(_spec(1, n=1, work_s=0.08))
    svc.submit(_spec(2, n=1, work_s=0.04))
    svc.run_for(8)
    recs = svc.loop.state.records
    assert recs["j1"].reason == FAILED and recs["j1"].completion is None
    assert "j1" not in svc.loop.state.active
    assert recs["j2"].completion is not None  # the other job was not disturbed
    svc.journal.close()
    again = SchedulerService(tmp_path, executor=SimulatedExecutor())
    assert again.loop.state.records["j1"].reason == FAILED
    assert "j1" not in again.loop.state.active
    assert any("broken workload" in line for line in again.logs("j1"))


def test_restart_reapplies_journaled_oasis_decisions_without_deciding_again(tmp_path,
                                                                              monkeypatch):
    import numpy as np

    from psched.policies.oasis import OasisPolicy

    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(),
                           executor=SlowExecutor(0.6))  # behind plan: re-plans are journaled
    _drive(svc, [(0, [_spec(i) for i in range(4)]), (2, [_spec(i) for i in range(4, 9)])],
           until=6)
    first = svc.policy
    assert any(d.kind == "replan" for d in svc.journal.decisions())
    usage = [u.copy() for u in first.ledger.usage]
    report = first.report()
    outcome = _outcome(svc)
    svc.journal.close()  # a crash: nothing else is saved

    def refuse(self, job, view):
        raise AssertionError("a restart must not decide again")

    monkeypatch.setattr(OasisPolicy, "on_arrival", refuse)
    again = SchedulerService(tmp_path, executor=SlowExecutor(0.6))
    restored = again.policy
    for a, b in zip(usage, restored.ledger.usage, strict=True):
        np.testing.assert_array_equal(a, b)
    assert restored.report() == report  # prices, payoffs and the certificate
    assert _outcome(again) == outcome
    again.close()


def test_nodes_that_join_grow_the_model_and_a_restart_rebuilds_it(tmp_path):
    import numpy as np


    node_of = {0: "n0", 1: "n0"}
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(1.0), node_of=node_of,
                           executor=SimulatedExecutor())  # room for one 1-CPU worker
    svc.submit(_spec(1, n=1, work_s=0.08))
    svc.run_for(1)
    joined = {"NodeID": "n1", "Alive": True,  # no pool mark: a worker and a PS server
              "Resources": {"CPU": 4.0, "memory": 8.0 * 2**30}}
    svc.nodes.grow([joined], svc.loop.state.t)
    assert [s.server_id for s in svc.cluster.servers] == ["m/w", "m/ps", "n1/w", "n1/ps"]
    assert node_of[2] == node_of[3] == "n1"  # the placement's mapping, updated in place
    svc.submit(_spec(2, n=3, work_s=0.06))
    svc.run_for(8)
    recs = svc.loop.state.records
    assert recs["j2"].admitted and recs["j2"].completion is not None
    assert {h for _, j, h, _, _ in svc.loop.state.allocations if j == "j2"} == {2, 3}
    usage = [u.copy() for u in svc.policy.ledger.usage]
    svc.journal.close()
    again = SchedulerService(tmp_path, node_of={0: "n0", 1: "n0"}, executor=SimulatedExecutor())
    assert again.cluster == svc.cluster and again.node_of == node_of
    for a, b in zip(usage, again.policy.ledger.usage, strict=True):
        np.testing.assert_array_equal(a, b)
    assert _outcome(again) == _outcome(svc)
