"""oasis-rp's online estimates (:mod:`psched.policies.oasis_rp.estimates`), held against the
hindsight figures they stand in for.

``OnlineBounds`` after observing jobs J must be exactly :func:`psched.oasis.prices.params_from_jobs`
over J (running maxima and minima of the same float terms), after every arrival, not only
after the last; ``LocalFloor`` is the clearing density of the recent arrivals
(:func:`~psched.policies.oasis_rp.admission.clearing_density_reference` over the jobs that
arrived within the span, against the span).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import clusters, job_specs

from psched.core.model import Cluster, Job, resolve_job
from psched.core.utility import Utility
from psched.oasis.prices import PriceParams, params_from_jobs
from psched.policies.oasis_rp.admission import clearing_density_reference
from psched.policies.oasis_rp.estimates import (
    LocalFloor,
    OnlineBounds,
    refresh_due,
)
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _same_bounds(got: PriceParams | None, want: PriceParams) -> None:
    """U, L and eta of both pools equal bit for bit."""
    assert got is not None
    for pool in range(2):
        assert np.array_equal(got.log_u[pool], want.log_u[pool]), pool
        assert got.log_l[pool] == want.log_l[pool], pool
        assert got.eta[pool] == want.eta[pool], pool


def _reference(jobs: list[Job], cluster: Cluster, horizon: int) -> PriceParams | None:
    try:
        return params_from_jobs(jobs, cluster, horizon)
    except ValueError:  # no reference job yet
        return None


def _assert_online_equals_hindsight_after_every_arrival(jobs: list[Job], cluster: Cluster,
                                                        horizon: int) -> None:
    bounds = OnlineBounds(cluster, horizon)
    for k, job in enumerate(jobs, start=1):
        before = bounds.params()
        changed = bounds.observe(job)
        want = _reference(jobs[:k], cluster, horizon)
        if want is None:
            assert bounds.params() is None
            continue
        _same_bounds(bounds.params(), want)
        if not changed:  # nothing moved: the same bounds as before the job
            assert before is not None
            _same_bounds(before, want)


@st.composite
def _job_sets(draw: st.DrawFn) -> tuple[list[Job], Cluster, int]:
    cluster = draw(clusters())
    horizon = draw(st.integers(1, 20))
    n = draw(st.integers(1, 8))
    specs = [draw(job_specs(job_id=f"j{i}", max_arrival=horizon - 1)) for i in range(n)]
    specs.sort(key=lambda s: s.arrival)
    return [resolve_job(s, cluster.slot_seconds, horizon) for s in specs], cluster, horizon


@SETTINGS
@given(case=_job_sets())
def test_online_bounds_equal_the_hindsight_bounds_of_the_jobs_arrived_so_far(
        case: tuple[list[Job], Cluster, int]) -> None:
    _assert_online_equals_hindsight_after_every_arrival(*case)


@pytest.mark.parametrize("seed", [0, 3])
def test_online_bounds_equal_the_hindsight_bounds_on_the_oasis_paper_trace(seed: int) -> None:
    cluster = oasis_paper_cluster(seed=seed)
    specs, _ = oasis_paper_jobs(120, seed=seed)
    jobs = [resolve_job(s, cluster.slot_seconds, 300) for s in sorted(specs,
                                                                      key=lambda s: s.arrival)]
    _assert_online_equals_hindsight_after_every_arrival(jobs, cluster, 300)


def test_a_job_that_earns_nothing_is_no_reference_job() -> None:
    cluster = oasis_paper_cluster(seed=0)
    spec = oasis_paper_jobs(1, seed=0)[0][0]
    worthless = resolve_job(spec.__class__(**{**spec.__dict__,
                                              "utility": Utility(kind="constant", value=0.0)}),
                            cluster.slot_seconds, 300)
    bounds = OnlineBounds(cluster, 300)
    assert bounds.observe(worthless) is False
    assert bounds.params() is None and bounds.jobs == []


def test_refresh_is_due_for_the_first_64_then_at_powers_of_two_and_multiples_of_256() -> None:
    due = [n for n in range(1, 1100) if refresh_due(n)]
    assert due == [*range(1, 65), 128, 256, 512, 768, 1024]


# ---------------------------------------------------------------- the local density floor

def _burst_jobs(cluster: Cluster, horizon: int, arrivals: list[int]) -> list[Job]:
    """One job per entry of ``arrivals`` (its slot), each a full-size sigmoid job of the
    oasis-paper scenario, values spread so that densities differ."""
    specs, _ = oasis_paper_jobs(len(arrivals), seed=11)
    out = []
    for i, (spec, a) in enumerate(zip(specs, arrivals, strict=True)):
        s = spec.__class__(**{**spec.__dict__, "job_id": f"b{i}", "arrival": a})
        out.append(resolve_job(s, cluster.slot_seconds, horizon))
    return out


def _recent_floor(jobs: list[Job], floor: LocalFloor, t: int, cluster: Cluster) -> float:
    """The reference: the clearing density of the jobs that arrived in ``t - span + 1 .. t``
    against ``span`` slots of the cluster."""
    recent = [j for j in jobs if t - floor.span < j.arrival <= t]
    return clearing_density_reference(recent, cluster, floor.span)


def test_the_floor_is_zero_while_recent_demand_fits_rises_in_a_burst_and_falls_after() -> None:
    cluster = oasis_paper_cluster(seed=0)
    horizon = 300
    quiet = [0, 5, 10]
    burst = [40] * 150
    jobs = _burst_jobs(cluster, horizon, quiet + burst)
    floor = LocalFloor(cluster)
    seen: dict[int, float] = {}
    arrived: list[Job] = []
    for t in range(horizon):
        for job in (j for j in jobs if j.arrival == t):
            floor.observe(job)
            arrived.append(job)
        seen[t] = floor.rho(t)
        assert seen[t] == _recent_floor(arrived, floor, t, cluster), t
    assert all(seen[t] == 0.0 for t in range(40)), "a few jobs fit the cluster: no floor"
    assert seen[40] > 0.0, "150 jobs in one slot are more than the span's capacity"
    after = 40 + floor.span
    assert after < horizon and seen[after] == 0.0, "the burst is past the span: no floor"
    last = max(n for n in range(1, len(jobs) + 1) if refresh_due(n))  # span last recomputed
    assert floor.span == max(1, int(np.median([j.window for j in jobs[:last]])))


@SETTINGS
@given(data=st.data())
def test_the_floor_is_the_clearing_density_of_the_recent_arrivals(data: st.DataObject) -> None:
    cluster = data.draw(clusters())
    horizon = data.draw(st.integers(1, 20))
    n = data.draw(st.integers(1, 12))
    specs = sorted((data.draw(job_specs(job_id=f"j{i}", max_arrival=horizon - 1))
                    for i in range(n)), key=lambda s: s.arrival)
    jobs = [resolve_job(s, cluster.slot_seconds, horizon) for s in specs]
    floor = LocalFloor(cluster)
    arrived: list[Job] = []
    for t in range(horizon):
        for job in (j for j in jobs if j.arrival == t):
            floor.observe(job)
            arrived.append(job)
        assert floor.rho(t) == _recent_floor(arrived, floor, t, cluster)
