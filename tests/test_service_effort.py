"""``oasis-rp`` with bounded effort (``effort``) in the scheduler service (no Ray, exact): the
search bank and its counters are journaled with the policy's boundary state, so a restarted
service takes the bank back as it was at the crash instead of starting it full, and then
decides exactly as the uninterrupted service.

The cases are chosen (small banks on the busy trace of test_service_held.py) so that the bank
is below its cap at the crash and skips a lever after it: a restart that started it full
would decide otherwise (checked, below, by refilling it by hand).
"""

from __future__ import annotations

import pytest
from test_journal import _cluster, _drive, _outcome
from test_service_held import _plan, _rows
from test_service_oasis_rp import _config
from test_service_rules import FastExecutor

from ray_cluster.service import SchedulerService

#: (trace seed, effort_bank, crash slot): the bank is below its cap at the crash and a lever
#: is skipped for want of it after the crash; in the first two a full bank after the restart
#: changes the decisions (the control below)
CASES = [(3, 5.0, 4), (6, 8.0, 2), (0, 2.0, 4)]
END = 45


def _cfg(bank: float):
    # the cases were found with every re-pack tried (repack_quantile 0, the default before
    # session 9's 0.1): with the guard some of their re-packs are withheld and the bank binds
    # elsewhere
    return _config(policy_options={"effort": 1.0, "effort_bank": bank, "repack_quantile": 0.0})


def _crashed(work, plan, bank: float, crash_at: int) -> dict:
    """Drive a service to ``crash_at`` and let it die; the bank state at the crash."""
    first = SchedulerService(work, config=_cfg(bank), cluster=_cluster(),
                             executor=FastExecutor(1.0))
    _drive(first, plan, crash_at)
    state = first.policy.boundary_state()  # type: ignore[attr-defined]
    first.journal.close()  # the process dies: nothing else is saved
    return state


def restart_matches_uninterrupted(tmp_path_factory, cfg, seed: int, crash_at: int,
                                  key: str) -> tuple[dict, dict, dict]:
    """Drive a service with ``cfg`` over trace ``seed`` uninterrupted, and another killed at
    ``crash_at`` and restarted from its journal; assert the restart takes back the policy's
    boundary state (its bank under ``key`` included) and journals, runs and ends as the
    uninterrupted one. Returns the bank's state at the crash and at the end, and the
    uninterrupted run's report (shared with tests/test_service_slot_bank.py)."""
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
        k: v for k, v in report.items() if k.startswith("effort")}  # every bank's counters
    return at_crash, final[key], report


@pytest.mark.parametrize(("seed", "bank", "crash_at"), CASES)
def test_a_restart_takes_back_the_search_bank_and_decides_as_the_uninterrupted_service(
        tmp_path_factory, seed, bank, crash_at):
    at_crash, _, report = restart_matches_uninterrupted(tmp_path_factory, _cfg(bank), seed,
                                                        crash_at, "effort")
    assert at_crash["bank"] < bank  # a full bank would be wrong
    assert report["effort_skipped"] > at_crash["counts"]["effort_skipped"]  # binds later


@pytest.mark.parametrize(("seed", "bank", "crash_at"), CASES[:2])
def test_a_restart_with_a_full_bank_would_decide_otherwise(tmp_path_factory, seed, bank,
                                                          crash_at):
    """The control: the same crash, restarted with the bank refilled to its cap (what a
    restart did before the bank was journaled), journals other decisions than the
    uninterrupted service; so the equality above rests on the journaled bank."""
    plan = _plan(seed)
    rest = [(s, b) for s, b in plan if s >= crash_at]
    ref = SchedulerService(tmp_path_factory.mktemp("ref"), config=_cfg(bank),
                           cluster=_cluster(), executor=FastExecutor(1.0))
    _drive(ref, plan, END)
    work = tmp_path_factory.mktemp("crash")
    _crashed(work, plan, bank, crash_at)
    again = SchedulerService(work, executor=FastExecutor(1.0))
    again.policy._effort.bank = bank  # type: ignore[attr-defined]
    _drive(again, rest, END)
    assert _rows(again) != _rows(ref)
    assert _outcome(again) != _outcome(ref)


def test_the_bank_is_in_the_boundary_state_only_with_effort_on(tmp_path):
    svc = SchedulerService(tmp_path / "off", config=_config(), cluster=_cluster(),
                           executor=FastExecutor(1.0))
    assert "effort" not in svc.policy.boundary_state()  # type: ignore[attr-defined]
    on = SchedulerService(tmp_path / "on", config=_cfg(7.0), cluster=_cluster(),
                          executor=FastExecutor(1.0))
    assert on.policy.boundary_state()["effort"] == {  # type: ignore[attr-defined]
        "bank": 7.0, "counts": {"effort_trimmed": 0, "effort_skipped": 0,
                                "effort_searches": 0}}
