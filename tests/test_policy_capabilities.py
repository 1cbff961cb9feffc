"""A policy's optional capabilities (``psched.core.policy``): checked once when the loop is
built, used through ``loop.caps``; the minimal policy of ``docs/library.md`` runs as shown."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc, Cluster, Decision, Job
from psched.core.policy import (
    CAPABILITIES,
    Capabilities,
    View,
    capabilities,
    takes_price_bounds,
)
from psched.core.records import REJECT_PAST_HORIZON
from psched.policies import available_policies, make_policy, policy_factory
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

DOC = Path(__file__).resolve().parents[1] / "docs" / "library.md"


def _doc_policy_block() -> str:
    text = DOC.read_text()
    section = text[text.index("## Writing a policy"):]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "docs/library.md has no example policy"
    return blocks[-1]


def _run_doc_block() -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(_doc_policy_block(), str(DOC), "exec"), scope)
    return scope


def test_the_documented_minimal_policy_runs_with_no_optional_capability() -> None:
    scope = _run_doc_block()
    result = scope["result"]
    assert capabilities(scope["FirstComeAllFit"]()) == Capabilities()
    assert sum(r.utility for r in result.records.values()) > 0.0
    assert all(r.admitted or r.reason == REJECT_PAST_HORIZON for r in result.records.values())
    assert result.allocations  # it ran jobs, within capacity (the loop's checker is on)


class _Full:
    """The documented policy plus every optional capability, each recording its calls."""

    def __init__(self) -> None:
        base = _run_doc_block()["FirstComeAllFit"]
        self.inner = base()
        self.name, self.commits_on_arrival = "full", False
        self.calls: list[str] = []
        self.plans: dict[str, dict[int, Alloc]] = {}

    def start(self, ctx: Any) -> None:
        self.inner.start(ctx)

    def on_arrival(self, job: Job, view: View) -> Decision:
        self.calls.append("on_arrival")
        return Decision(admitted=False, hold=True, reason="later")

    def admit_held(self, jobs: Sequence[Job], view: View) -> Mapping[str, Decision]:
        self.calls.append("admit_held")
        return {j.job_id: Decision(admitted=True) for j in jobs}

    def plan(self, view: View) -> dict[str, Alloc]:
        return dict(self.inner.plan(view))

    def report(self) -> dict[str, Any]:
        return {}

    def on_cluster_change(self, cluster: Cluster) -> None:
        self.calls.append("on_cluster_change")
        self.inner.start(type("Ctx", (), {"cluster": cluster})())

    def release(self, job_id: str, t: int) -> None:
        self.calls.append("release")

    def restore(self, job: Job, decision: Decision) -> None:
        self.calls.append("restore")

    def restore_held(self, job: Job, decision: Decision) -> None:
        self.calls.append("restore_held")

    def current_plans(self) -> dict[str, dict[int, Alloc]]:
        return dict(self.plans)

    def boundary_state(self) -> dict[str, Any]:
        return {}

    def restore_plan(self, job_id: str, t: int, schedule: Mapping[int, Alloc]) -> None:
        self.calls.append("restore_plan")

    def resume(self, t: int, state: Mapping[str, Any] | None = None) -> None:
        self.calls.append("resume")

    def price_bounds(self) -> dict[str, Any] | None:
        return None


def _loop(policy: Any, jobs: int = 12, horizon: int = 60) -> SchedulerLoop:
    specs, _ = oasis_paper_jobs(jobs, seed=3)
    return SchedulerLoop(cluster=oasis_paper_cluster(seed=3), policy=policy, horizon=horizon,
                         arrivals=TraceArrivals(specs))


def _grown(cluster: Cluster) -> Cluster:
    extra = dataclasses.replace(cluster.servers[0], server_id="joined")
    return dataclasses.replace(cluster, servers=(*cluster.servers, extra))


def test_a_policy_offering_every_capability_is_used_through_them() -> None:
    pol = _Full()
    loop = _loop(pol)
    assert loop.caps.offered() == tuple(CAPABILITIES)
    res = loop.run()
    assert "admit_held" in pol.calls  # held on arrival, admitted by admit_held
    assert any(r.admitted for r in res.records.values())
    grown = _grown(loop.cluster)
    loop.set_cluster(grown)
    assert "on_cluster_change" in pol.calls
    assert loop.release("any", loop.state.t) and "release" in pol.calls


def test_a_policy_without_cluster_changes_cannot_take_new_servers() -> None:
    loop = _loop(_run_doc_block()["FirstComeAllFit"]())
    grown = _grown(loop.cluster)
    with pytest.raises(ValueError, match="cannot take new servers"):
        loop.set_cluster(grown)
    assert not loop.release("any", 0)


def test_a_capability_offered_in_part_fails_when_the_loop_is_built() -> None:
    pol = _Full()
    pol.resume = None  # type: ignore[assignment,method-assign]  # RevisesPlans, less one method
    with pytest.raises(TypeError, match=r"'full' offers RevisesPlans in part.*not resume"):
        _loop(pol)


def test_a_capability_method_with_other_parameters_fails_when_the_loop_is_built() -> None:
    pol = _Full()
    pol.release = lambda job: None  # type: ignore[assignment,method-assign]
    with pytest.raises(TypeError, match=r"'full': release.*ReleasesJobs.release"):
        _loop(pol)


def test_an_object_that_is_no_policy_is_refused_naming_what_it_lacks() -> None:
    class NoPlan:
        name, commits_on_arrival = "half", True

        def start(self, ctx: Any) -> None: ...

        def on_arrival(self, job: Job, view: View) -> Decision:
            return Decision(admitted=False)

        def report(self) -> dict[str, Any]:
            return {}

    with pytest.raises(TypeError, match="'half' is not a Policy: it lacks plan"):
        _loop(NoPlan())


#: what each registered policy offers
EXPECTED = {
    "oasis": {"cluster_changes", "releases", "restores", "priced"},
    "oasis-rp": {"holds", "cluster_changes", "restores", "restores_held", "revises", "priced"},
}


@pytest.mark.parametrize("name", available_policies())
def test_every_registered_policy_passes_the_capability_check(name: str) -> None:
    offered = set(capabilities(make_policy(name)).offered())
    assert offered == EXPECTED.get(name, {"cluster_changes"})
    assert takes_price_bounds(policy_factory(name)) == ("priced" in offered)
