"""The fast rival policies decide exactly what their old implementations decided.

``tests/legacy_policies`` holds the policies as they were before issue 18. Each case replays
one trace through both, under the same loop, and compares every allocation row (slot, job,
server, role, count), every admission decision and every completion slot, and the policies'
reports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from legacy_policies import LEGACY, make_legacy

from psched.core.horizon import trace_horizon
from psched.core.model import Cluster, JobSpec
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.traces import load_any
from psched.traces.clusters import default_cluster_for_trace
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs
from psched.traces.synth_philly import philly_jobs

TRACES = Path(__file__).resolve().parents[1] / "traces"  # shipped with the repository
EF_AUG = TRACES / "elasticflow" / "augmented" / "cluster10.csv"
TIRESIAS = TRACES / "tiresias" / "tiresias_60_job.csv"

Case = tuple[list[JobSpec], Cluster, int]


def _paper(seed: int, n: int = 60, slots: int = 60) -> Case:
    specs, _ = oasis_paper_jobs(n, seed=seed, slots=slots)
    return specs, oasis_paper_cluster(seed=seed), slots


def _trace(specs: list[JobSpec], load: float = 0.8) -> Case:
    cluster = default_cluster_for_trace(specs, slot_seconds=3600.0, load=load)
    return specs, cluster, min(trace_horizon(specs, 3600.0), 400)


def _elasticflow(seed: int) -> Case:
    specs = load_any(EF_AUG, slot_seconds=3600.0, seed=seed)[:150]
    return _trace(specs, load=2.0)


def _philly(seed: int) -> Case:
    specs, _ = philly_jobs(400, seed=seed, options={"rate": "40"})
    return _trace(specs, load=1.5)


def _philly_tight(seed: int) -> Case:
    """Hundreds of jobs queued on a few servers: most jobs cannot start at an event (the fast
    rivals skip them in bulk)."""
    specs, _ = philly_jobs(300, seed=seed, options={"rate": "60"})
    return _trace(specs, load=6.0)


def _tiresias(seed: int) -> Case:
    return _trace(load_any(TIRESIAS, slot_seconds=600.0, seed=seed), load=1.0)


CASES: dict[str, Callable[[], Case]] = {
    "paper-s0": lambda: _paper(0),
    "paper-s1": lambda: _paper(1),
    "paper-s5-dense": lambda: _paper(5, n=120, slots=40),
    "elasticflow-s0": lambda: _elasticflow(0),
    "elasticflow-s2": lambda: _elasticflow(2),
    "philly-s0": lambda: _philly(0),
    "philly-s3": lambda: _philly(3),
    "philly-tight-s1": lambda: _philly_tight(1),
}


def _outcome(name: str, policy: object, case: Case, seed: int) -> tuple[object, ...]:
    specs, cluster, horizon = case
    r = simulate(specs, cluster, policy, horizon, seed=seed)  # type: ignore[arg-type]
    records = [(j, rec.admitted, rec.reason, rec.completion, rec.first_slot, rec.done)
               for j, rec in r.records.items()]
    return r.allocations, records, r.report


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(LEGACY))
def test_every_allocation_equals_the_old_implementation(name: str, case: str) -> None:
    data = CASES[case]()
    seed = sum(map(ord, case)) % 7
    new_alloc, new_rec, new_rep = _outcome(name, make_policy(name), data, seed)
    old_alloc, old_rec, old_rep = _outcome(name, make_legacy(name), data, seed)
    assert new_rec == old_rec
    assert new_alloc == old_alloc
    assert new_rep == old_rep


@pytest.mark.parametrize("name", ["drf", "greedy-gain", "greedy-fill"])
def test_options_replay_identically(name: str) -> None:
    opts = {"drf": {"shares": "per_pool"},
            "greedy-gain": {"counts": "all", "weight": "utility"},
            "greedy-fill": {"counts": "all", "anti_starvation": True}}[name]
    data = CASES["philly-s0"]()
    assert _outcome(name, make_policy(name, **opts), data, 1) == _outcome(
        name, make_legacy(name, **opts), data, 1)


@pytest.mark.parametrize("case", ["paper-s1", "philly-s3"])
@pytest.mark.parametrize("name", ["fifo", "drf", "rrh"])
def test_new_loop_and_policy_replay_the_old_loop_and_policy(name: str, case: str) -> None:
    """The whole run, old loop + old policy against new loop + new policy: the same schedule,
    records, usage totals and decision events."""
    from legacy_policies.simulator import simulate as old_simulate

    specs, cluster, horizon = CASES[case]()
    new = simulate(specs, cluster, make_policy(name), horizon, seed=2)
    old = old_simulate(specs, cluster, make_legacy(name), horizon, seed=2)
    assert new.allocations == old.allocations
    assert [(j, r.admitted, r.reason, r.completion, r.first_slot, r.done)
            for j, r in new.records.items()] == [
        (j, r.admitted, r.reason, r.completion, r.first_slot, r.done)
        for j, r in old.records.items()]
    assert (new.usage == old.usage).all()
    assert len(new.decision_ms) == len(old.decision_ms)
    assert new.report == old.report
