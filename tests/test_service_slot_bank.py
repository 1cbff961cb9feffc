"""``oasis-rp``'s slot bank (``effort_slots``) in the scheduler service (no Ray, exact): the
bank and its counters are journaled with the policy's boundary state (``effort_slots``), so a
restarted service takes it back as it was at the crash instead of starting it full and then
decides exactly as the uninterrupted service.

The cases (a small slot bank on the busy trace of test_service_held.py: its cap,
:data:`psched.policies.oasis_rp.effort.BANK_SLOTS`, lowered for the test) have the bank below
its cap at the crash and trimming or skipping a lever after it.
"""

from __future__ import annotations

import pytest
from test_journal import _cluster, _drive, _outcome
from test_service_held import _plan, _rows
from test_service_oasis_rp import _config
from test_service_rules import FastExecutor

from psched.policies.oasis_rp import effort
from ray_cluster.service import SchedulerService

#: (trace seed, the bank's cap, crash slot): under the online price source seed 6 is the busy
#: trace that spends the bank by slot 3 and acts again after slot 4
CASES = [(6, 300.0, 3), (6, 300.0, 4)]
END = 45


def _cfg():
    return _config(policy_options={"effort_slots": 1.0})


def _acted(counts: dict) -> int:
    return counts["effort_slot_trimmed"] + counts["effort_slot_skipped"]


def restart_matches_uninterrupted(tmp_path_factory, cfg, seed: int, crash_at: int,
                                  key: str) -> tuple[dict, dict, dict]:
    """Drive a service with ``cfg`` over trace ``seed`` uninterrupted, and another killed at
    ``crash_at`` and restarted from its journal; assert the restart takes back the policy's
    boundary state (its bank under ``key`` included) and journals, runs and ends as the
    uninterrupted one. Returns the bank's state at the crash and at the end, and the
    uninterrupted run's report."""
    plan = _plan(seed)
    rest = [(s, b) for s, b in plan if s >= crash_at]
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=cfg,
                           cluster=_cluster(), executor=FastExecutor(1.0))
    _drive(ref, plan, crash_at)
    at_crash = ref.policy.boundary_state()[key]  # type: ignore[attr-defined]
    _drive(ref, rest, END)
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=cfg, cluster=_cluster(), executor=FastExecutor(1.0))
    _drive(first, plan, crash_at)
    state = first.policy.boundary_state()  # type: ignore[attr-defined]
    first.journal.close()  # the process dies: nothing else is saved
    assert state[key] == at_crash
    again = SchedulerService(work, executor=FastExecutor(1.0))
    assert again.policy.boundary_state() == state  # type: ignore[attr-defined]
    _drive(again, rest, END)
    assert _rows(again) == _rows(ref)
    assert _outcome(again) == _outcome(ref)
    assert sorted(again.loop.state.allocations) == sorted(ref.loop.state.allocations)
    final = ref.policy.boundary_state()  # type: ignore[attr-defined]
    assert again.policy.boundary_state() == final  # type: ignore[attr-defined]
    report = ref.policy.report()  # type: ignore[attr-defined]
    restarted = again.policy.report()  # type: ignore[attr-defined]
    assert {k: v for k, v in restarted.items() if k.startswith("effort")} == {
        k: v for k, v in report.items() if k.startswith("effort")}  # the bank's counters
    return at_crash, final[key], report


@pytest.mark.parametrize(("seed", "bank", "crash_at"), CASES)
def test_a_restart_takes_back_the_slot_bank_and_decides_as_the_uninterrupted_service(
        tmp_path_factory, monkeypatch, seed, bank, crash_at):
    monkeypatch.setattr(effort, "BANK_SLOTS", bank)
    at_crash, final, _ = restart_matches_uninterrupted(tmp_path_factory, _cfg(), seed,
                                                       crash_at, "effort_slots")
    assert at_crash["bank"] < bank  # a full bank would be wrong
    assert _acted(final["counts"]) > _acted(at_crash["counts"])  # and it binds later


def test_the_bank_is_in_the_boundary_state_only_when_it_is_on(tmp_path, monkeypatch):
    default = SchedulerService(tmp_path / "default", config=_config(), cluster=_cluster(),
                               executor=FastExecutor(1.0))
    state = default.policy.boundary_state()  # type: ignore[attr-defined]
    assert state["effort_slots"]["bank"] == effort.BANK_SLOTS  # on by default, full
    off = SchedulerService(tmp_path / "off", config=_config(policy_options={
        "effort_slots": None}), cluster=_cluster(), executor=FastExecutor(1.0))
    assert "effort_slots" not in off.policy.boundary_state()  # type: ignore[attr-defined]
    monkeypatch.setattr(effort, "BANK_SLOTS", 9.0)
    on = SchedulerService(tmp_path / "on", config=_cfg(), cluster=_cluster(),
                          executor=FastExecutor(1.0))
    assert on.policy.boundary_state()["effort_slots"] == {  # type: ignore[attr-defined]
        "bank": 9.0, "counts": {"effort_slot_trimmed": 0, "effort_slot_skipped": 0,
                                "effort_slot_spent": 0}}
