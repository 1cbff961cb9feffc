"""Held jobs in the scheduler service (no Ray, exact): a held arrival is journaled
(a ``hold`` row), reported held by ``submit`` and ``status``, and its later decision at a slot
boundary is journaled (a ``deferred`` row with the slot); a restarted service holds it again
and then decides exactly as a service never interrupted, every promise kept.

Two policies hold: ``oasis-rp``, whose queue holds every job not admitted until its window
closes (it has ``restore_held``: the journal's decisions are re-applied; with online prices
its estimates are rebuilt from the replayed arrivals) and :class:`HoldOnce` below, a
test-only SRTF that holds every arrival through one boundary (no ``restore_held``: a
journaled decision is offered to it again and the journal wins).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from test_journal import _cluster, _drive, _outcome, _spec
from test_service_oasis_rp import _config, assert_promises_kept
from test_service_rules import FastExecutor

from psched.core import policy as base
from psched.core.model import Decision, Job
from psched.core.policy import View
from psched.core.records import HELD
from psched.policies.srtf import SrtfPolicy
from ray_cluster.service import SchedulerService

#: a service with neither prices nor history: ``oasis-rp`` prices online (its default), from
#: the jobs that have arrived
ONLINE = {"history": ()}
#: how a service prices: online, or from its history jobs
SOURCES = {"online": ONLINE, "history": {}}


class HoldOnce(SrtfPolicy):
    """SRTF that holds every arrival it would admit, and decides it at the first boundary
    after its arrival slot: admitted if at least ``need`` slots of its window are left,
    else rejected (``too_late``). Counts the offers it saw (internal state a restart
    rebuilds by offering again)."""

    name = "hold-once"

    def __init__(self, need: int = 30) -> None:
        super().__init__()
        self.need = need
        self.offers = 0

    def on_arrival(self, job: Job, view: View) -> Decision:
        got = super().on_arrival(job, view)
        if not got.admitted:
            return got
        return Decision(admitted=False, reason="held_once", hold=True)

    def admit_held(self, jobs: Sequence[Job], view: View) -> dict[str, Decision]:
        self.offers += len(jobs)
        out = {}
        for job in jobs:
            if view.t <= job.arrival:
                continue
            ok = job.last_slot - view.t + 1 >= self.need
            out[job.job_id] = Decision(admitted=ok, reason="" if ok else "too_late")
        return out


@pytest.fixture
def hold_once(monkeypatch):
    """``hold-once`` registered for this test only (never in the real registry)."""
    import psched.policies  # noqa: F401  (the built-ins registered first)
    monkeypatch.setitem(base.REGISTRY, HoldOnce.name, HoldOnce)
    return HoldOnce.name


def _plan(seed: int, jobs: int = 12) -> list[tuple[int, list]]:
    """A busy trace of ``jobs`` jobs arriving in slots 0-4 on the two-worker cluster."""
    rng = random.Random(seed)
    return sorted(((rng.randrange(0, 5), [_spec(i, n=rng.randint(1, 2),
                                                 work_s=rng.choice([0.04, 0.08, 0.16]),
                                                 value=rng.uniform(1, 60),
                                                 kind=rng.choice(["sigmoid", "constant"]))])
                   for i in range(jobs)), key=lambda x: x[0])


def _rows(svc: SchedulerService) -> list[tuple]:
    return [(r.job_id, r.kind, r.slot, r.admitted, r.reason, r.schedule, r.promised,
             r.payoff) for r in svc.journal.decisions()]


def test_a_held_arrival_is_journaled_and_reported_held(tmp_path):
    from psched.cli.jobs import format_status

    svc = SchedulerService(tmp_path, config=_config(**ONLINE),
                           cluster=_cluster(), executor=FastExecutor(1.0))
    plan = _plan(0)
    _drive(svc, [(s, b) for s, b in plan if s < 3], 3)
    replies = [svc.submit(spec) for s, b in plan if s == 3 for spec in b]
    held = [r for r in replies if r.get("held")]
    assert held, "seed 0 holds an arrival in slot 3"
    for r in held:
        rec = svc.loop.state.records[r["job_id"]]
        assert not r["decided"] and not r["admitted"] and r["reason"] == "payoff<=0"
        assert r["next_boundary"] == 3 and r["window_end"] == rec.job.last_slot
    ids = {r["job_id"] for r in held}
    rows = {r.job_id: r for r in svc.journal.decisions() if r.kind == "hold" and r.job_id in ids}
    assert ids == set(rows)
    assert all(r.slot == 3 and r.reason == "payoff<=0" for r in rows.values())
    status = {j["job_id"]: j for j in svc.status()["jobs"]}
    for r in held:
        assert status[r["job_id"]]["state"] == HELD
    line = next(x for x in format_status(svc.status()).splitlines()
                if x.startswith(held[0]["job_id"] + " "))
    assert line.split()[1] == HELD


@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize(("seed", "crash_at"), [
    (20, 5),   # three jobs held at the crash; each admitted after it (slots 5, 10, 16)
    (20, 12),  # two deferred admissions replayed from the journal, one job still held
    (6, 10),   # held jobs re-offered after the restart; j9 admitted in slot 29
    (6, 35),   # j2's window (last slot 34) closed at the crash: rejected on restore
])
def test_a_restart_holds_again_and_decides_as_the_uninterrupted_service(
        tmp_path_factory, seed, crash_at, source):
    """``oasis-rp`` (reality 1.5x the model, so plans move and held jobs get room), killed
    after slot ``crash_at`` and restarted from its journal: the same journal rows (holds
    and deferred decisions with their slots), the same plans run, the same outcome, every
    promise kept -- online too, where the restart rebuilds the estimates from the replayed
    arrivals."""
    plan, end = _plan(seed), 45
    cfg = _config(**SOURCES[source])
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=cfg, cluster=_cluster(),
                           executor=FastExecutor(1.5))
    _drive(ref, plan, crash_at)
    held = dict(ref.loop.state.held)
    _drive(ref, [(s, b) for s, b in plan if s >= crash_at], end)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=cfg, cluster=_cluster(), executor=FastExecutor(1.5))
    _drive(first, plan, crash_at)
    first.journal.close()  # the process dies
    again = SchedulerService(work, executor=FastExecutor(1.5))
    assert again.loop.state.held == {j: r for j, r in held.items()
                                     if again.loop.state.records[j].job.last_slot >= crash_at}
    for job_id in set(held) - set(again.loop.state.held):  # window closed: rejected now
        rec = again.loop.state.records[job_id]
        assert (rec.admitted, rec.reason, rec.decided) == (False, held[job_id], crash_at)
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], end)
    kinds = {r[1] for r in _rows(ref)}
    assert {"hold", "deferred"} <= kinds or crash_at == 35
    assert _rows(again) == _rows(ref)
    assert _outcome(again) == _outcome(ref)
    assert sorted(again.loop.state.allocations) == sorted(ref.loop.state.allocations)
    assert again.policy.promises() == ref.policy.promises()  # type: ignore[attr-defined]
    assert_promises_kept(again)
    assert not again.loop.state.held  # every held job decided by the end


def test_a_deferred_admission_is_journaled_with_its_slot_and_promise(tmp_path):
    svc = SchedulerService(tmp_path, config=_config(**ONLINE),
                           cluster=_cluster(), executor=FastExecutor(1.5))
    _drive(svc, _plan(20), 20)
    rows = [r for r in svc.journal.decisions() if r.kind == "deferred"]
    assert rows
    seen: set[str] = set()
    for r in rows:  # an admission, then for an uncommitted job possibly its promise
        rec = svc.loop.state.records[r.job_id]
        assert r.slot >= rec.job.arrival
        if r.admitted:
            if r.job_id not in seen:  # the admission: promised on it, or uncommitted
                assert rec.decided == r.slot and r.promised in (None, rec.promised)
                assert r.promised is None or rec.promised_at == r.slot
            else:  # the promise made later, at the commit point
                assert (r.promised, r.slot) == (rec.promised, rec.promised_at)
                assert rec.promised_at > rec.decided
            seen.add(r.job_id)
            assert r.schedule and min(r.schedule) >= r.slot
    assert any(r.promised is None for r in rows if r.admitted)  # admitted uncommitted
    later = next(r for r in rows if r.admitted  # an admission at a later boundary
                 and r.slot == svc.loop.state.records[r.job_id].decided
                 and r.slot > svc.loop.state.records[r.job_id].job.arrival)
    arrival = svc.loop.state.records[later.job_id].job.arrival
    decided = [line for line in svc.logs(later.job_id) if ": hold:" in line
               or ": deferred:" in line]  # its decisions (events such as its prior between)
    assert [line.split(", payoff")[0] for line in decided[:2]] == [
        f"slot {arrival}: hold: held (payoff<=0)", f"slot {later.slot}: deferred: admitted"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_policy_without_restore_held_is_offered_its_held_jobs_again(
        tmp_path_factory, hold_once, seed):
    """``hold-once`` holds every arrival one boundary; a restart (with jobs held at the
    crash) replays the journal by offering them again and ends as the uninterrupted run."""
    plan = _plan(seed, jobs=6)
    crash_at = random.Random(seed).randrange(1, 5)
    cfg = _config(hold_once, history=())
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=cfg, cluster=_cluster(),
                           executor=FastExecutor(1.0))
    _drive(ref, plan, 40)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=cfg, cluster=_cluster(), executor=FastExecutor(1.0))
    _drive(first, plan, crash_at)
    first.journal.close()
    again = SchedulerService(work, executor=FastExecutor(1.0))
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], 40)
    assert _rows(again) == _rows(ref)
    assert _outcome(again) == _outcome(ref)
    assert sorted(again.loop.state.allocations) == sorted(ref.loop.state.allocations)
    for job_id, rec in ref.loop.state.records.items():
        kinds = [(r.kind, r.slot) for r in ref.journal.decisions() if r.job_id == job_id]
        assert kinds == [("hold", rec.job.arrival), ("deferred", rec.job.arrival + 1)]
        assert rec.decided == rec.job.arrival + 1


def test_submit_says_held_and_when_it_is_decided(tmp_path):
    """``psched submit``'s line for a held job names the boundary and the window's end; the
    same reply (JSON over the actor) carries them as fields."""
    from psched.cli.jobs import submit_line

    svc = SchedulerService(tmp_path, config=_config(**ONLINE),
                           cluster=_cluster(), executor=FastExecutor(1.0))
    plan = _plan(0)
    _drive(svc, [(s, b) for s, b in plan if s < 3], 3)
    replies = {spec.job_id: svc.submit(spec) for s, b in plan if s == 3 for spec in b}
    job_id, out = next((j, r) for j, r in replies.items() if r.get("held"))
    last = svc.loop.state.records[job_id].job.last_slot
    assert submit_line(job_id, out) == (
        f"{job_id}: arrival slot 3: held: decided at the boundary of slot 3 or a later one; "
        f"if not admitted by slot {last}, rejected (payoff<=0)")
    on_arrival = SchedulerService(tmp_path / "oasis", config=_config("oasis"),
                                  cluster=_cluster(), executor=FastExecutor(1.0))
    spec = next(x for s, b in plan if s == 0 for x in b)
    out = on_arrival.submit(spec)  # oasis decides on arrival
    assert out["admitted"]
    assert ": admitted, planned completion slot" in submit_line(spec.job_id, out)
    assert submit_line("q", {"job_id": "q", "arrival": 9, "decided": False}) == (
        "q: queued: decided when slot 9 begins")
    row = next(j for j in svc.status()["jobs"] if j["job_id"] == job_id)
    assert (row["state"], row["reason"], row["window_end"]) == (HELD, "payoff<=0", last)


def test_serve_takes_policy_options_and_refuses_an_unknown_one_in_one_line(tmp_path, capsys):
    """``--policy-option promise_rtol=0.1`` reaches the policy the service makes; an option the
    policy does not take is refused in one line before Ray starts, nothing written."""
    from psched.cli.main import main
    from psched.core.errors import InputError
    from psched.policies.options import options_from_pairs

    opts = options_from_pairs(["oasis-rp"], ["promise_rtol=0.1", "repack_gap=1"])["oasis-rp"]
    assert opts == {"promise_rtol": 0.1, "repack_gap": 1.0}
    pol = _config(policy_options=opts).make_policy()
    assert (pol.promise_rtol, pol.repack_gap) == (0.1, 1.0)  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="expected NAME=VALUE"):
        options_from_pairs(["oasis-rp"], ["promise_rtol"])
    with pytest.raises(InputError, match="has no option 'defer'"):
        _config(policy_options={"defer": 1}).make_policy()
    with pytest.raises(InputError, match=r"repack_gap must be in \(0, 1\]"):
        _config(policy_options={"repack_gap": 0}).make_policy()
    assert main(["serve", "--policy", "oasis-rp", "--prices", "50,0.5,20,0.2",
                 "--policy-option", "nope=1", "--dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "no option 'nope': oasis-rp takes" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_a_service_with_a_held_job_is_not_idle_until_it_is_decided(tmp_path, hold_once):
    """``run until idle`` (``psched run``) does not stop while a job is held: the held job
    is decided at the next boundary, admitted and run to completion."""
    svc = SchedulerService(tmp_path, config=_config(hold_once, history=()),
                           cluster=_cluster(), executor=FastExecutor(1.0))
    out = svc.submit(_spec(1))
    assert out["held"] and not svc.loop.state.active and svc.loop.idle()
    assert not svc.idle()
    svc._run(until_idle=True)
    rec = svc.loop.state.records["j1"]
    assert rec.admitted and rec.decided == 1 and rec.completion is not None and svc.idle()


#: (service options, seed, crash slot, whether the crash slot's arrivals were submitted
#: before the crash, what the policy holds at the crash at least: the slot's undecided
#: arrivals, reservations)
LEVER_CRASHES = [
    ({}, 23, 2, False, ()),
    ({}, 23, 2, True, ("batch",)),  # arrivals held, undecided
    ({}, 0, 2, False, ("soft",)),  # reservations (in the book)
    ({}, 0, 2, True, ("batch", "soft")),
    (ONLINE, 23, 2, False, ()),
    (ONLINE, 23, 2, True, ("batch",)),
    (ONLINE, 0, 2, False, ("soft",)),
    (ONLINE, 0, 2, True, ("batch", "soft")),
]


@pytest.mark.parametrize("rate", [1.0, 0.7])  # reality as planned, behind
@pytest.mark.parametrize(("opts", "seed", "crash_at", "submitted", "pending"), LEVER_CRASHES)
def test_a_restart_keeps_the_batch_and_the_reservations_and_decides_as_uninterrupted(
        tmp_path_factory, opts, seed, crash_at, submitted, pending, rate):
    """``oasis-rp`` (priced from history or online), killed at slot ``crash_at`` (after that
    slot's arrivals were submitted, if ``submitted``: they are held in the batch, undecided)
    and restarted from its journal: the batch, the reservations (their plans, payoffs and
    usage in the book) and the online estimates come back as they were, and the
    restarted service journals the same rows, runs the same allocations and ends with the
    same outcomes, promises and certificate as the uninterrupted one; every promise kept (as
    planned; a promise after the last slot driven is not due yet)."""
    plan, end = _plan(seed), 45
    cfg = _config(**opts)
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=cfg, cluster=_cluster(),
                           executor=FastExecutor(rate))
    _drive(ref, plan, end)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=cfg, cluster=_cluster(), executor=FastExecutor(rate))
    _drive(first, plan, crash_at)
    rest = [(s, b) for s, b in plan if s >= crash_at]
    if submitted:
        for spec in (x for s, b in rest if s == crash_at for x in b):
            first.submit(spec)
        rest = [(s, b) for s, b in rest if s > crash_at]
    pol = first.policy
    state, plans = pol.boundary_state(), pol.current_plans()  # type: ignore[attr-defined]
    promises = pol.promises()  # type: ignore[attr-defined]
    usage = [u.copy() for u in pol.ledger.usage]  # type: ignore[attr-defined]
    assert set(pending) <= {k for k in ("batch", "soft") if state.get(k)}  # the case holds
    first.journal.close()  # the process dies
    again = SchedulerService(work, executor=FastExecutor(rate))
    pol = again.policy
    assert pol.boundary_state() == state  # type: ignore[attr-defined]
    assert pol.current_plans() == plans and pol.promises() == promises  # type: ignore[attr-defined]
    for a, b in zip(usage, pol.ledger.usage, strict=True):  # type: ignore[attr-defined]
        assert (a == b).all()  # reservations' usage back in the book, bit for bit
    _drive(again, rest, end)
    assert _rows(again) == _rows(ref)
    assert _outcome(again) == _outcome(ref)
    assert sorted(again.loop.state.allocations) == sorted(ref.loop.state.allocations)
    assert pol.promises() == ref.policy.promises()  # type: ignore[attr-defined]
    assert pol.boundary_state() == ref.policy.boundary_state()  # type: ignore[attr-defined]
    # the certificate counts the same jobs (a batch's in replay order: equal to rounding)
    assert pol.report()["dual_bound"] == pytest.approx(  # type: ignore[attr-defined]
        ref.policy.report()["dual_bound"], rel=1e-12)  # type: ignore[attr-defined]
    assert again.loop.state.held == ref.loop.state.held  # reservations starting after end
    if rate == 1.0:
        for rec in again.loop.state.records.values():
            if rec.promised is not None:  # completed by its promise, or not due yet
                assert (rec.promised >= end if rec.completion is None
                        else rec.completion <= rec.promised)
