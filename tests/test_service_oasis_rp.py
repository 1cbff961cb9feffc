"""``oasis-rp`` in the scheduler service, on the simulated executor (no Ray, exact).

The service gives it price bounds as it gives ``oasis`` (a declared capability, not its
name); a denser arrival takes the room of an uncommitted job, whose plan moves and is
journaled as a ``revise`` row; a restarted service re-applies promises (made on admission or
later), plans and revisions, and then decides exactly as a service never interrupted; a job
that runs behind is re-planned and not forgotten.
"""

from __future__ import annotations

import dataclasses
import inspect
import random

import pytest
from test_journal import HISTORY, SLOT_S, _cluster, _drive, _outcome, _spec
from test_service_rules import FastExecutor

from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor
from psched.core.policy import takes_price_bounds
from psched.oasis.prices import fixed_params
from psched.policies import available_policies, policy_factory
from ray_cluster.service import SchedulerService, ServiceConfig

PRICED = [p for p in available_policies()
          if takes_price_bounds(policy_factory(p))]


def _config(policy: str = "oasis-rp", **kw) -> ServiceConfig:
    return ServiceConfig(**{"policy": policy, "slot_seconds": SLOT_S, "horizon": 80,
                            "history": HISTORY, **kw})


def test_oasis_and_oasis_rp_declare_that_they_take_price_bounds():
    assert {"oasis", "oasis-rp"} <= set(PRICED)
    assert "fifo" not in PRICED


@pytest.mark.parametrize("policy", PRICED)
def test_a_priced_policy_gets_its_bounds_from_prices_or_history_or_prices_online(policy):
    """Prices or history when given; without either, a policy that can price online
    (``oasis-rp``'s default) does, any other is refused."""
    fixed = _config(policy, history=(), prices=(50.0, 0.5, 20.0, 0.2)).make_policy()
    assert fixed.price_source == "fixed"  # type: ignore[attr-defined]
    assert _config(policy).make_policy().price_source == "history"  # type: ignore[attr-defined]
    if inspect.signature(type(fixed)).parameters["price_source"].default == "online":
        online = _config(policy, history=()).make_policy()
        assert online.price_source == "online"  # type: ignore[attr-defined]
        return
    with pytest.raises(InputError, match=f"{policy} needs price bounds"):
        _config(policy, history=()).make_policy()


def test_fixed_bounds_are_the_prices_oasis_rp_runs_with(tmp_path):
    svc = SchedulerService(tmp_path, config=_config(history=(), prices=(50.0, 0.5, 20.0, 0.2)),
                           cluster=_cluster(), executor=SimulatedExecutor())
    params = svc.policy.params  # type: ignore[attr-defined]
    assert params.to_dict() == fixed_params(50.0, 0.5, 20.0, 0.2).to_dict()
    # worth well above its priced cost: own-usage pricing (the default) charges a job that
    # fills most of this small cluster more than the zero-load floor (held on submission by
    # the batch lever, decided at the boundary of its slot)
    assert svc.submit(_spec(1, value=40.0))["held"]
    svc.run_for(1)
    assert svc.loop.state.records["j1"].admitted


def test_an_unpriced_policy_gets_no_price_options_and_an_unknown_one_is_one_line():
    assert _config("fifo", history=()).make_policy().name == "fifo"
    with pytest.raises(InputError, match="unknown policy 'nope'"):
        _config("nope").make_policy()


def _displaced(tmp_path, **kw) -> SchedulerService:
    """``j1`` (utility constant: it can wait, so it is admitted uncommitted, without a
    promise) fills the worker server from slot 0; ``j2`` (steep) arrives in slot 1, denser:
    it takes slots 1-2, promised at once, and ``j1``, searched again after it, moves after it.
    Each is held on submission and decided at the boundary of its slot (with the slot's other
    arrivals, densest first); the service is left at slot 2."""
    svc = SchedulerService(tmp_path, config=_config(**kw), cluster=_cluster(),
                           executor=SimulatedExecutor())
    assert svc.submit(_spec(1, n=2, work_s=0.08, kind="constant", value=5))["held"]
    svc.run_for(1)
    rec = svc.loop.state.records["j1"]
    assert rec.admitted and rec.promised is None
    assert svc.submit(_spec(2, n=2, work_s=0.04, value=20))["held"]
    svc.run_for(1)
    j2 = svc.loop.state.records["j2"]
    assert j2.admitted and j2.promised_at == 1
    return svc


def test_a_displaced_plan_is_journaled_as_a_revision_and_run_as_a_resize(tmp_path):
    svc = _displaced(tmp_path)
    rows = [(r.kind, r.job_id, r.slot, r.promised) for r in svc.journal.decisions()]
    assert rows[:6] == [("hold", "j1", 0, None), ("deferred", "j1", 0, None),  # uncommitted
                        ("revise", "j1", 0, None),  # slot 0's idle capacity (work ahead)
                        ("hold", "j2", 1, None), ("deferred", "j2", 1, 3),  # promised at once
                        ("revise", "j1", 1, None)]  # j1 searched again after j2
    assert {r[:3] for r in rows[6:]} <= {("revise", "j1", 1)}  # the boundary's work ahead
    moved = svc.schedules["j1"]
    assert 1 not in moved and 2 not in moved  # no longer in slots 1-2: j2's
    assert svc.planned_end["j1"] == max(moved)  # the status shows the current plan
    svc.run_for(11)
    ran = {t for t, j, _h, role, _n in svc.loop.state.allocations if j == "j1" and
           role == "worker"}
    assert 0 in ran and not ran & {1, 2}  # paused, resumed as revised
    j1, j2 = (svc.loop.state.records[j] for j in ("j1", "j2"))
    assert j2.completion is not None and j2.completion <= j2.promised
    assert j1.completion is not None and j1.promised is None  # done before its commit point
    status = {j["job_id"]: j for j in svc.status()["jobs"]}
    assert status["j2"]["promised"] == j2.promised and status["j1"]["promised"] is None


def assert_promises_kept(svc: SchedulerService) -> None:
    """Every promise (made on admission or later) kept, and every admitted job of these
    light runs completed (an uncommitted one before its commit point)."""
    for job_id, rec in svc.loop.state.records.items():
        if rec.admitted:
            assert rec.completion is not None, job_id
        if rec.promised is not None:
            assert rec.completion <= rec.promised, job_id


def _rows(svc: SchedulerService) -> list[tuple]:
    return [(r.job_id, r.kind, r.slot, r.admitted, r.schedule, r.promised, r.payoff)
            for r in svc.journal.decisions()]


def _random_plan(seed: int) -> list[tuple[int, list]]:
    rng = random.Random(seed)
    return sorted(((rng.randrange(0, 8), [_spec(i, n=rng.randint(1, 3),
                                                 work_s=rng.choice([0.02, 0.04, 0.08]),
                                                 value=rng.uniform(1, 20),
                                                 kind=rng.choice(["sigmoid", "constant"]))])
                   for i in range(8)), key=lambda x: x[0])


@pytest.mark.parametrize("rate", [1.0, 0.7, 1.5])  # reality as planned, behind, ahead
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_restart_decides_as_the_uninterrupted_service(tmp_path_factory, seed, rate):
    """Killed after slot ``crash_at`` and restarted from its journal, the service journals the
    same decisions and revisions, runs the same plans and ends the same as one never
    interrupted; every promise and plan survives the restart."""
    plan = _random_plan(seed)
    crash_at = random.Random(seed).randrange(2, 7)
    end = 40  # at 0.7, a job behind whose promise is lost can finish near its window's end
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=_config(),
                           cluster=_cluster(), executor=FastExecutor(rate))
    _drive(ref, plan, crash_at)
    plans, promises = ref.policy.current_plans(), ref.policy.promises()  # type: ignore[attr-defined]
    usage = [u.copy() for u in ref.policy.ledger.usage]  # type: ignore[attr-defined]
    _drive(ref, [(s, b) for s, b in plan if s >= crash_at], end)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=_config(), cluster=_cluster(),
                             executor=FastExecutor(rate))
    _drive(first, plan, crash_at)
    first.journal.close()  # the process dies: nothing else is saved
    again = SchedulerService(work, executor=FastExecutor(rate))
    assert again.policy.current_plans() == plans  # type: ignore[attr-defined]
    assert again.policy.promises() == promises  # type: ignore[attr-defined]
    for a, b in zip(usage, again.policy.ledger.usage, strict=True):  # type: ignore[attr-defined]
        assert (a == b).all()  # prices rebuilt bit for bit (whole cores and GB)
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], end)
    assert _rows(again) == _rows(ref)
    assert _outcome(again) == _outcome(ref)
    assert sorted(again.loop.state.allocations) == sorted(ref.loop.state.allocations)
    assert again.policy.boundary_state() == ref.policy.boundary_state()  # type: ignore[attr-defined]
    if rate <= 1.0:
        for job_id, promise in promises.items():
            rec = ref.loop.state.records[job_id]
            if rec.completion is None:  # still running at the end: not due yet
                assert promise >= end
                continue
            assert rate < 1.0 or rec.completion <= promise


@pytest.mark.parametrize("crash_at", [1, 2, 3])
def test_a_revision_made_after_a_restart_is_the_uninterrupted_ones(tmp_path, crash_at):
    """The re-pack of ``_repacked`` happens after the restart (``crash_at`` 1) or before
    it (2, 3: the moved plan is restored): either way the same plans run."""
    ref = _displaced(tmp_path / "ref")
    ref.run_for(11)
    svc = SchedulerService(tmp_path / "crash", config=_config(), cluster=_cluster(),
                           executor=SimulatedExecutor())
    svc.submit(_spec(1, n=2, work_s=0.08, kind="constant", value=5))
    svc.run_for(1)
    if crash_at == 1:
        svc.journal.close()
        svc = SchedulerService(tmp_path / "crash", executor=SimulatedExecutor())
    svc.submit(_spec(2, n=2, work_s=0.04, value=20))
    svc.run_for(crash_at - 1)
    if crash_at > 1:
        svc.journal.close()
        svc = SchedulerService(tmp_path / "crash", executor=SimulatedExecutor())
    svc.run_for(13 - crash_at)
    assert ("revise", "j1", 1) in [(r.kind, r.job_id, r.slot) for r in svc.journal.decisions()]
    assert _rows(svc) == _rows(ref)
    assert sorted(svc.loop.state.allocations) == sorted(ref.loop.state.allocations)
    assert _outcome(svc) == _outcome(ref)


def test_a_job_behind_after_its_last_planned_slot_is_planned_again(tmp_path):
    """Reality at 0.6 of the model: each job's plan runs out before its work does; it is
    re-planned at the next boundary (a revision), never left active without a plan."""
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(3.0),
                           executor=FastExecutor(0.6))
    for i in range(3):
        assert svc.submit(_spec(i, n=2, work_s=0.04, kind="constant", value=5))["held"]
    svc.run_for(40)
    for i in range(3):
        rec = svc.loop.state.records[f"j{i}"]
        assert rec.admitted
        assert rec.completion is not None, f"j{i} never ran again"
    revised = {r.job_id for r in svc.journal.decisions() if r.kind == "revise"}
    assert revised == {"j0", "j1", "j2"}


def test_a_job_that_cannot_finish_in_its_window_is_never_dropped_and_a_restart_keeps_it(
        tmp_path):
    """Reality at 0.1 of the model: the steep job cannot finish in its window (admitted
    uncommitted, it never reaches its commit point: no promise is made, so none is broken);
    it runs past its window on idle capacity (counted apart) and completes; a restart
    mid-way keeps it and its measured speed."""
    cfg = _config(horizon=200)
    svc = SchedulerService(tmp_path, config=cfg, cluster=_cluster(), executor=FastExecutor(0.1))
    assert svc.submit(_spec(1, n=2, work_s=0.08, value=10))["held"]
    svc.run_for(1)
    rec = svc.loop.state.records["j1"]
    assert rec.admitted and rec.decided == 0
    svc.run_for(rec.job.last_slot + 2)
    assert rec.completion is None and "j1" in svc.loop.state.active  # past its window, kept
    assert rec.promised is None or all(at <= old for at, old, _ in rec.restated)
    assert rec.speed < 0.5  # learnt: far below its profile
    assert "dropped_behind" not in [e[2] for e in svc.journal.events("j1")]
    svc.journal.close()
    again = SchedulerService(tmp_path, executor=FastExecutor(0.1))
    back = again.loop.state.records["j1"]
    assert "j1" in again.loop.state.active and back.restated == rec.restated
    assert back.promised == rec.promised and back.speed == rec.speed
    for _ in range(40 * rec.job.work):
        if again.idle():
            break
        again.run_for(1)
    assert back.completion is not None and back.background > 0


def test_the_status_table_shows_each_promise(tmp_path):
    from psched.cli.jobs import format_status

    svc = _displaced(tmp_path)
    table = format_status(svc.status())
    header = table.splitlines()[1]
    col = header.index(" prom") + len(" prom")
    for job_id in ("j1", "j2"):
        row = next(line for line in table.splitlines() if line.startswith(f"{job_id} "))
        promised = svc.loop.state.records[job_id].promised
        assert row[col - 5:col].strip() == ("" if promised is None else str(promised))


def test_a_journal_written_before_promises_were_journaled_still_opens(tmp_path):
    import sqlite3

    from ray_cluster.service.journal import Journal

    db = tmp_path / "journal.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE decisions (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT "
                    "NOT NULL, kind TEXT NOT NULL, slot INTEGER NOT NULL, admitted INTEGER NOT "
                    "NULL, reason TEXT NOT NULL, payoff REAL, work INTEGER NOT NULL, schedule "
                    "TEXT NOT NULL, latency_ms REAL NOT NULL, decided REAL NOT NULL)")
        con.execute("INSERT INTO decisions (job_id, kind, slot, admitted, reason, payoff, work, "
                    "schedule, latency_ms, decided) VALUES ('j1', 'arrival', 0, 1, '', 1.0, 4, "
                    "'{}', 0.1, 0.0)")
    rows = list(Journal(db).decisions())
    assert [(r.job_id, r.promised) for r in rows] == [("j1", None)]
    assert Journal(db).policy_state() is None


class _DiesInSlot(SimulatedExecutor):
    """The process dies while slot ``at`` trains: that slot is never journaled as done."""

    def __init__(self, at: int) -> None:
        self.at = at

    def apply(self, t, plan, jobs):
        if t == self.at:
            raise RuntimeError("killed mid-slot")
        return super().apply(t, plan, jobs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_crash_in_the_middle_of_a_slot_reruns_it_and_keeps_every_promise(tmp_path, seed):
    """The revisions of a slot's boundary are journaled before it trains; a restart reruns
    the slot from them (its plans include it) and every promise holds."""
    plan = _random_plan(seed)
    at = random.Random(seed).randrange(2, 6)
    svc = SchedulerService(tmp_path, config=_config(), cluster=_cluster(),
                           executor=_DiesInSlot(at))
    _drive(svc, [(s, b) for s, b in plan if s <= at], at + 1)
    assert svc.error == "RuntimeError: killed mid-slot" and svc.loop.state.t == at
    svc.journal.close()
    again = SchedulerService(tmp_path, executor=SimulatedExecutor())
    assert again.loop.state.t == at
    _drive(again, [(s, b) for s, b in plan if s > at], 40)
    assert_promises_kept(again)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_real_valued_demands_a_restart_keeps_every_promise(tmp_path_factory, seed):
    """A bandwidth of 0.3 Gb/s is no binary fraction: the restored prices agree with the
    uninterrupted run's only to rounding, so a near-tie may break otherwise later; every
    promise and plan made before the restart is kept, and every job admitted after it keeps
    its own."""
    plan = [(s, [dataclasses.replace(j, worker_demand=dataclasses.replace(
                 j.worker_demand, bandwidth_gbps=0.3)) for j in b]) for s, b in _random_plan(seed)]
    crash_at = random.Random(seed).randrange(2, 7)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=_config(), cluster=_cluster(),
                             executor=SimulatedExecutor())
    _drive(first, plan, crash_at)
    plans, promises = first.policy.current_plans(), first.policy.promises()  # type: ignore[attr-defined]
    first.journal.close()
    again = SchedulerService(work, executor=SimulatedExecutor())
    assert again.policy.current_plans() == plans  # type: ignore[attr-defined]
    assert again.policy.promises() == promises  # type: ignore[attr-defined]
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], 40)
    assert_promises_kept(again)


@pytest.mark.parametrize(("policy", "says"), [("nope", "unknown policy 'nope'"),
                                              ("oasis", "oasis needs price bounds")])
def test_serve_refuses_a_policy_it_cannot_make_in_one_line_before_ray_starts(
        tmp_path, capsys, policy, says):
    from psched.cli.main import main

    assert main(["serve", "--policy", policy, "--dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()  # nothing started, nothing written

