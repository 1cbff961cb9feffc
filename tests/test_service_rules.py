"""The live rules of the scheduler service, on the simulated executor (no Ray, exact).

Capacity freed by jobs that finish ahead of plan is reused (issue 17, defect 11): a
committing policy (``oasis``) re-decides the other active jobs into it and keeps a new
schedule only if it completes earlier (no promise broken); a re-planning policy sees the
completion as an event. A restart re-applies the releases and advances from the journal.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_journal import HISTORY, SLOT_S, _cluster, _drive, _outcome, _spec

from psched.core.executor import SimulatedExecutor, SlotReport
from ray_cluster.service import SchedulerService, ServiceConfig


class FastExecutor(SimulatedExecutor):
    """Reality ahead of the model: each worker does ``rate`` worker-slots per slot."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def apply(self, t, plan, jobs):
        return SlotReport(slot=t, progress={j: self.rate * a.n_workers
                                            for j, a in plan.items() if a.n_workers})


def _config(policy: str = "oasis", **kw) -> ServiceConfig:
    return ServiceConfig(policy=policy, slot_seconds=SLOT_S, horizon=80, history=HISTORY,
                         **kw)


def _first_slot(svc: SchedulerService, job_id: str) -> int | None:
    return svc.loop.state.records[job_id].first_slot


def _two_jobs_one_after_the_other(tmp_path, *, rate: float, **kw) -> SchedulerService:
    """``a`` fills the worker server for 4 slots, ``b`` (same size) is planned after it."""
    svc = SchedulerService(tmp_path, config=_config(**kw), cluster=_cluster(),
                           executor=FastExecutor(rate))
    a = svc.submit(_spec(1, n=2, work_s=0.08))
    b = svc.submit(_spec(2, n=2, work_s=0.08))
    assert a["admitted"] and b["admitted"]
    assert b["planned_completion"] > a["planned_completion"]  # b waits for a's servers
    return svc


def test_capacity_freed_by_an_early_finish_is_reused_by_a_waiting_job(tmp_path):
    svc = _two_jobs_one_after_the_other(tmp_path / "on", rate=3.0)
    promised = svc.planned_end["j2"]
    svc.run_for(12)
    off = _two_jobs_one_after_the_other(tmp_path / "off", rate=3.0, reuse_freed=False)
    off.run_for(12)
    a_done = svc.loop.state.records["j1"].completion
    assert a_done is not None and a_done < off.planned_end["j1"]  # a finished early
    assert _first_slot(svc, "j2") == a_done + 1  # b starts in the first freed slot
    assert _first_slot(off, "j2") > a_done + 1  # without the rule the freed slots idle
    b = svc.loop.state.records["j2"]
    assert b.completion is not None and b.completion <= promised
    kinds = [d.kind for d in svc.journal.decisions()]
    assert "release" in kinds and "advance" in kinds


def test_a_later_schedule_is_never_taken_the_old_one_is_kept(tmp_path):
    """An advance that would complete later (here: no earlier room) keeps the old plan."""
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(4.0),
                           executor=FastExecutor(2.0))
    svc.submit(_spec(1, n=1, work_s=0.08))
    svc.submit(_spec(2, n=3, work_s=0.12))
    ends = dict(svc.planned_end)
    svc.run_for(12)
    for job_id, end in ends.items():
        rec = svc.loop.state.records[job_id]
        assert rec.completion is not None and rec.completion <= end


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_admitted_job_keeps_its_promise_when_reality_runs_ahead(tmp_path, seed):
    rng = random.Random(seed)
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(3.0),
                           executor=FastExecutor(rng.choice([1.5, 2.0, 3.0])))
    promised: dict[str, int] = {}
    for slot in range(6):
        for i in range(rng.randint(0, 3)):
            out = svc.submit(_spec(10 * slot + i, n=rng.randint(1, 3),
                                   work_s=rng.choice([0.02, 0.04, 0.08]),
                                   value=rng.uniform(1, 20)))
            if out["admitted"]:
                promised[out["job_id"]] = out["planned_completion"]
        svc.run_for(1)
    svc.run_for(30)
    for job_id, end in promised.items():
        rec = svc.loop.state.records[job_id]
        assert rec.completion is not None and rec.completion <= end, job_id


@pytest.mark.parametrize("crash_at", [1, 2, 3, 5])
def test_a_restart_reapplies_releases_and_advances(tmp_path, crash_at):
    ref = _two_jobs_one_after_the_other(tmp_path / "ref", rate=3.0)
    ref.submit(_spec(3, n=1, work_s=0.04))
    ref.run_for(14)
    svc = _two_jobs_one_after_the_other(tmp_path / "crash", rate=3.0)
    svc.submit(_spec(3, n=1, work_s=0.04))
    svc.run_for(crash_at)
    usage = [u.copy() for u in svc.policy.ledger.usage]
    svc.journal.close()  # the process dies
    again = SchedulerService(tmp_path / "crash", executor=FastExecutor(3.0))
    for a, b in zip(usage, again.policy.ledger.usage, strict=True):
        assert (abs(a - b) < 1e-9).all()  # the same commitments after the releases
    assert again.schedules == svc.schedules and again.planned_end == svc.planned_end
    again.run_for(14 - crash_at)
    assert _outcome(again) == _outcome(ref)
    assert again.loop.state.allocations == ref.loop.state.allocations


def test_a_replanning_policy_starts_the_next_job_in_the_slot_after_a_completion(tmp_path):
    svc = SchedulerService(tmp_path, config=_config("fifo"), cluster=_cluster(),
                           executor=FastExecutor(3.0))
    svc.submit(_spec(1, n=2, work_s=0.08))
    svc.submit(_spec(2, n=2, work_s=0.08))
    svc.run_for(8)
    a, b = (svc.loop.state.records[j] for j in ("j1", "j2"))
    assert a.completion is not None and b.first_slot is not None
    assert b.first_slot <= a.completion + 1


def test_a_job_submitted_while_a_slot_runs_is_planned_by_a_replanning_policy(tmp_path):
    """Decided during slot t (arrival t + 1), it is the next slot's event: FIFO plans it."""

    class SubmitDuring(SimulatedExecutor):
        svc: SchedulerService | None = None

        def apply(self, t, plan, jobs):
            if t == 1 and self.svc is not None:
                assert self.svc.submit(_spec(9, n=1, work_s=0.02))["arrival"] == 2
            return super().apply(t, plan, jobs)

    ex = SubmitDuring()
    svc = SchedulerService(tmp_path, config=_config("fifo"), cluster=_cluster(), executor=ex)
    ex.svc = svc
    svc.run_for(4)
    assert _first_slot(svc, "j9") == 2


def test_booked_jobs_are_journaled_when_decided(tmp_path):
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(),
                           executor=SimulatedExecutor())
    svc.submit(dataclasses.replace(_spec(1), arrival=3), arrival=3)
    svc.run_for(5)
    rows = [d for d in svc.journal.decisions() if d.job_id == "j1"]
    assert [(d.kind, d.slot) for d in rows] == [("arrival", 3)]
    assert rows[0].schedule == svc.schedules["j1"]


def test_a_lost_node_is_journaled_and_the_executor_gives_up_the_actors_there(tmp_path):
    """The node check before each slot: the servers of a dead node move to a live one, the
    loss is journaled once, and the executor is told which servers were lost."""

    class PlacingExecutor(SimulatedExecutor):
        def places_on_nodes(self) -> bool:  # a placing executor (placed mode)
            return True

        def __init__(self) -> None:
            self.lost: list[set[int]] = []

        def servers_lost(self, servers: set[int]) -> None:
            self.lost.append(set(servers))

    from ray_cluster.runtime.cluster_model import cluster_from_nodes

    def node(name: str, alive: bool = True) -> dict:
        return {"NodeID": name, "Alive": alive,
                "Resources": {"CPU": 2.0, "memory": 8.0 * 2**30}}

    rows = [node("n0"), node("n1")]
    cluster, node_of = cluster_from_nodes(rows, SLOT_S)
    ex = PlacingExecutor()
    seen: list[list[dict]] = [rows]
    svc = SchedulerService(tmp_path, config=_config(), cluster=cluster, node_of=node_of,
                           executor=ex)
    svc.nodes._list_nodes = lambda: seen[-1]
    svc.submit(_spec(1, n=1, work_s=0.04))
    svc.run_for(1)
    on_n1 = {h for h, n in node_of.items() if n == "n1"}
    seen.append([node("n0"), node("n1", alive=False)])
    svc.run_for(2)
    assert ex.lost == [on_n1]  # told once, with the servers that were there
    assert set(node_of.values()) == {"n0"}
    lines = [e for e in svc.journal.events() if e[2] == "node_lost"]
    assert len(lines) == len(on_n1)
    svc.run_for(8)
    assert svc.loop.state.records["j1"].completion is not None


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(crash_at=st.integers(1, 12), seed=st.integers(0, 1000),
       rate=st.sampled_from([1.5, 2.0, 3.0]))
def test_restart_while_reality_runs_ahead_loses_and_duplicates_nothing(tmp_path_factory,
                                                                        crash_at, seed, rate):
    """With releases and advances in the journal, a service killed at any slot and restarted
    ends exactly as one never interrupted, and every promise holds."""
    rng = random.Random(seed)
    plan = sorted(((rng.randrange(0, 8), [_spec(i, n=rng.randint(1, 3),
                                                  work_s=rng.choice([0.02, 0.04, 0.08]),
                                                  value=rng.uniform(1, 20))])
                   for i in range(6)), key=lambda x: x[0])
    end = 30
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=_config(), cluster=_cluster(),
                           executor=FastExecutor(rate))
    promised: dict[str, int] = {}
    ref.loop.on_decision.append(lambda adm: promised.setdefault(adm.job_id, max(adm.schedule))
                                if adm.schedule else None)
    _drive(ref, plan, end)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=_config(), cluster=_cluster(),
                             executor=FastExecutor(rate))
    _drive(first, plan, crash_at)
    first.journal.close()  # the process dies: nothing else is saved
    again = SchedulerService(work, executor=FastExecutor(rate))
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], end)
    assert _outcome(again) == _outcome(ref)
    assert again.loop.state.allocations == ref.loop.state.allocations
    for job_id, slot in promised.items():
        rec = ref.loop.state.records[job_id]
        assert rec.completion is not None and rec.completion <= slot
