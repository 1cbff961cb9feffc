"""``oasis-rp`` with patient admission (``patience``, off by default) in the scheduler service
(no Ray, exact): the held patient jobs and their utility at arrival are journaled with the
policy's boundary state, so a restarted service keeps waiting for them as the uninterrupted
one does (before, a restart forgot them: each stayed held until its window closed) and
decides exactly as it.

The cases hold patient jobs at the crash and admit some after it; a restart that forgot them
decides otherwise (the control, below, forgets them by hand).
"""

from __future__ import annotations

import pytest
from test_journal import _cluster, _drive, _outcome
from test_service_held import _plan, _rows
from test_service_oasis_rp import _config
from test_service_rules import FastExecutor

from ray_cluster.service import SchedulerService

#: (trace seed, crash slot)
CASES = [(0, 4), (1, 3), (2, 2)]
END = 45
PATIENT = {"patience": 0.3}


def _ref(tmp_path_factory, plan) -> SchedulerService:
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=_config(policy_options=PATIENT),
                           cluster=_cluster(), executor=FastExecutor(1.0))
    _drive(ref, plan, END)
    return ref


def _restarted(tmp_path_factory, plan, crash_at: int) -> tuple[SchedulerService, dict]:
    """A service killed at ``crash_at`` and restarted from its journal; the boundary state
    at the crash."""
    work = tmp_path_factory.mktemp("crash")
    first = SchedulerService(work, config=_config(policy_options=PATIENT), cluster=_cluster(),
                             executor=FastExecutor(1.0))
    _drive(first, plan, crash_at)
    state = first.policy.boundary_state()  # type: ignore[attr-defined]
    first.journal.close()  # the process dies
    return SchedulerService(work, executor=FastExecutor(1.0)), state


@pytest.mark.parametrize(("seed", "crash_at"), CASES)
def test_a_restart_keeps_the_patient_jobs_and_decides_as_the_uninterrupted_service(
        tmp_path_factory, seed, crash_at):
    plan = _plan(seed)
    ref = _ref(tmp_path_factory, plan)
    again, state = _restarted(tmp_path_factory, plan, crash_at)
    assert state["patient"]  # jobs held patiently at the crash
    assert again.policy.boundary_state() == state  # type: ignore[attr-defined]
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], END)
    assert _rows(again) == _rows(ref)
    assert _outcome(again) == _outcome(ref)
    assert sorted(again.loop.state.allocations) == sorted(ref.loop.state.allocations)
    assert again.policy.boundary_state() == ref.policy.boundary_state()  # type: ignore[attr-defined]
    assert again.policy.report()["dual_bound"] == pytest.approx(  # type: ignore[attr-defined]
        ref.policy.report()["dual_bound"], rel=1e-12)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("seed", "crash_at"), CASES)
def test_a_restart_that_forgot_the_patient_jobs_would_decide_otherwise(
        tmp_path_factory, seed, crash_at):
    plan = _plan(seed)
    ref = _ref(tmp_path_factory, plan)
    again, _state = _restarted(tmp_path_factory, plan, crash_at)
    again.policy._patient = {}  # type: ignore[attr-defined]
    _drive(again, [(s, b) for s, b in plan if s >= crash_at], END)
    assert _outcome(again) != _outcome(ref)
