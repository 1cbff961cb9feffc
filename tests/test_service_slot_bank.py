"""``oasis-rp``'s slot bank (``effort_slots``) and waste bank (``effort_waste``) in the
scheduler service (no Ray, exact): each bank and its counters are journaled with the policy's
boundary state (``effort_slots`` / ``effort_waste``), so a restarted service takes it back as
it was at the crash instead of starting it full and then decides exactly as the uninterrupted
service -- as ``effort``'s search bank (tests/test_service_effort.py).

The cases (a small slot bank on the busy trace of test_service_held.py) have the bank below
its cap at the crash and trimming or skipping a lever after it.
"""

from __future__ import annotations

import pytest
from test_journal import _cluster
from test_service_effort import restart_matches_uninterrupted
from test_service_oasis_rp import _config
from test_service_rules import FastExecutor

from ray_cluster.service import SchedulerService

#: (trace seed, effort_slot_bank, crash slot)
CASES = [(0, 300.0, 4), (6, 300.0, 4)]


def _cfg(bank: float):
    return _config(policy_options={"effort_slots": 1.0, "effort_slot_bank": bank})


def _acted(counts: dict) -> int:
    return counts["effort_slot_trimmed"] + counts["effort_slot_skipped"]


@pytest.mark.parametrize(("seed", "bank", "crash_at"), CASES)
def test_a_restart_takes_back_the_slot_bank_and_decides_as_the_uninterrupted_service(
        tmp_path_factory, seed, bank, crash_at):
    at_crash, final, _ = restart_matches_uninterrupted(tmp_path_factory, _cfg(bank), seed,
                                                       crash_at, "effort_slots")
    assert at_crash["bank"] < bank  # a full bank would be wrong
    assert _acted(final["counts"]) > _acted(at_crash["counts"])  # and it binds later


def test_each_bank_is_in_the_boundary_state_only_when_its_lever_is_on(tmp_path):
    default = SchedulerService(tmp_path / "default", config=_config(), cluster=_cluster(),
                               executor=FastExecutor(1.0))
    state = default.policy.boundary_state()  # type: ignore[attr-defined]
    assert "effort_slots" in state and "effort_waste" not in state  # effort_slots 100
    off = SchedulerService(tmp_path / "off", config=_config(policy_options={
        "effort_slots": None}), cluster=_cluster(), executor=FastExecutor(1.0))
    state = off.policy.boundary_state()  # type: ignore[attr-defined]
    assert "effort_slots" not in state and "effort_waste" not in state
    on = SchedulerService(tmp_path / "on", config=_config(policy_options={
        "effort_slots": 2.0, "effort_slot_bank": 9.0, "effort_waste": 1.0,
        "effort_waste_bank": 7.0}), cluster=_cluster(), executor=FastExecutor(1.0))
    state = on.policy.boundary_state()  # type: ignore[attr-defined]
    assert state["effort_slots"]["bank"] == 9.0 and state["effort_waste"]["bank"] == 7.0
