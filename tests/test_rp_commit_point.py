"""``oasis-rp``'s late commitment (:mod:`psched.policies.oasis_rp.promises`): an admitted job is
uncommitted until its commit point, and promised there.

After every boundary's decisions (the policy's ``admit_held``), each job still uncommitted and
planned is checked to be before its commit point: without work in this slot (and
``commit_margin`` more) it could still complete by the promise its plan would get
(``t + margin + ceil(left / N) <= P``). Every promise made at a later boundary is checked
against the loop's records (made at that boundary, after the admission, kept by the executed
schedule); and the rule itself against the arithmetic it states.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import Instance, instances
from test_oasis_rp import check_promises
from test_policy_properties import check_schedule

from psched.core.model import Decision, Job
from psched.core.policy import View
from psched.core.simulator import simulate
from psched.policies.oasis_rp import OasisRpPolicy
from psched.policies.oasis_rp.promises import commit_due, latest_same_utility
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class _Checked(OasisRpPolicy):
    """``oasis-rp`` that checks, after each boundary's decisions, that every uncommitted job
    with a plan is before its commit point, and records the deferred promises it made."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.late: dict[str, tuple[int, int]] = {}  # job -> (slot promised at, promise)
        self.checked = 0

    def admit_held(self, jobs: Sequence[Job], view: View) -> dict[str, Decision]:
        was = set(self._st.uncommitted) if self._st is not None else set()
        out = super().admit_held(jobs, view)
        st = self._st
        assert st is not None
        t = view.t
        for j, d in out.items():
            if j in was and d.promised is not None:
                self.late[j] = (t, d.promised)
        for j in st.uncommitted:
            plan = st.plans.get(j)
            if not plan or j not in view.active:
                continue
            job = st.jobs[j]
            left = math.ceil(view.active[j].remaining - 1e-9)
            promise = latest_same_utility(job, max(plan), self.promise_rtol)
            assert not commit_due(job, promise, left, t, self.commit_margin), (t, j)
            assert max(plan) <= st.promise[j]  # within its bound (a pull may move it earlier)
            self.checked += 1
        return out


def _run(specs: list, cluster: Any, horizon: int, **options: Any) -> tuple[Any, _Checked]:
    pol = _Checked(**options)
    return simulate(specs, cluster, pol, horizon, seed=1), pol


@pytest.mark.parametrize("margin", [0, 1])
@SETTINGS
@given(instance=instances())
def test_an_uncommitted_job_is_always_before_its_commit_point(margin: int,
                                                              instance: Instance) -> None:
    cluster, specs, horizon = instance
    res, pol = _run(specs, cluster, horizon, commit_margin=margin)
    check_schedule(res, cluster, horizon)
    check_promises(res)
    for j, (at, promise) in pol.late.items():
        rec = res.records[j]
        assert (rec.promised_at, rec.promised) == (at, promise)
        assert rec.decided is not None and rec.decided < at


@pytest.mark.parametrize("seed", [0, 1])
def test_on_a_loaded_oasis_paper_trace_promises_are_made_late_and_kept(seed: int) -> None:
    """Jobs that can wait are admitted uncommitted, some are promised at a later boundary,
    and every promise, early or late, is kept."""
    specs, _ = oasis_paper_jobs(120, seed=seed, slots=60)
    res, pol = _run(specs, oasis_paper_cluster(seed=seed), 60)
    check_promises(res)
    assert pol.checked > 0 and pol.late  # the rule acted on this trace
    assert res.report["admitted_uncommitted"] > 0
    assert res.report["committed_late"] == len(pol.late)
    late = [r for r in res.records.values()
            if r.promised_at is not None and r.decided is not None
            and r.promised_at > r.decided]
    assert len(late) == len(pol.late)


@given(left=st.integers(1, 50), n=st.integers(1, 8), t=st.integers(0, 40),
       promise=st.integers(0, 60), margin=st.integers(0, 3))
def test_the_commit_point_is_the_last_slot_that_can_still_keep_the_promise(
        left: int, n: int, t: int, promise: int, margin: int) -> None:
    """Not due at ``t`` iff starting at ``t + margin + 1`` at full size still completes by
    the promise."""
    from test_oasis_rp import _spec

    from psched.core.model import resolve_job
    from psched.core.utility import Utility

    job = resolve_job(_spec("j", 0, n, 1, Utility(kind="constant", value=1.0)), 3600.0, 100)
    finish_if_idle = t + margin + 1 + math.ceil(left / n) - 1
    assert commit_due(job, promise, left, t, margin) == (finish_if_idle > promise)
