"""Exact fast paths of oasis-rp at trace scale: each gives the reference's answer.

The scalar path of
:class:`~psched.core.utility.Utility` against its numpy path, bit for bit; the container counts kept
per demand (:class:`~psched.policies.oasis_rp.admission.FitCounts`) against the counts computed
afresh;
the loop's reuse of a known job's resolution against :func:`~psched.core.model.resolve_job`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import clusters, job_specs, utilities

from psched.core.arrivals import TraceArrivals
from psched.core.loop import SchedulerLoop
from psched.core.model import (
    Cluster,
    Job,
    JobSpec,
    Resources,
    resolve_job,
    window_length,
    window_length_reference,
)
from psched.core.utility import Utility, make_utility
from psched.oasis.prices import _demands, log_utility, log_utility_one
from psched.policies import make_policy
from psched.policies.oasis_rp.admission import FitCounts, density

FAST = settings(max_examples=60, deadline=None)
FEW = settings(max_examples=12, deadline=None)


@settings(max_examples=200, deadline=None)
@given(u=utilities(max_target=3000), d=st.integers(-5, 6000))
def test_the_scalar_utility_is_the_numpy_utility_bit_for_bit(u: object, d: int) -> None:
    for x in (d, np.int64(d)):
        fast, ref = u(x), u.reference(x)  # type: ignore[attr-defined,operator]
        assert type(fast) is float and fast == ref  # same float, not only close
    assert u(np.array([d]))[0] == u.reference(d)  # type: ignore[operator,attr-defined]


def test_the_scalar_sigmoid_matches_where_the_c_library_exp_differs() -> None:
    """``math.exp`` and numpy's ``exp`` differ in the last bit on some arguments; the scalar
    path uses numpy's, so it stays equal on a sweep that holds such arguments."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        u = make_utility("sigmoid", rng.uniform(0, 1000), rng.uniform(0, 5), rng.uniform(0, 3000))
        for d in rng.integers(0, 5000, 20).tolist():
            assert u(d) == u.reference(d)


@FEW
@given(cluster=clusters(), specs=st.lists(job_specs(), min_size=1, max_size=6))
def test_density_with_kept_container_counts_is_density_afresh(
        cluster: Cluster, specs: list[JobSpec]) -> None:
    fits = FitCounts(cluster)
    jobs = [resolve_job(s, cluster.slot_seconds, 40) for s in specs]
    for job in jobs + jobs:  # the second pass reads the kept counts
        assert density(job, cluster, fits) == density(job, cluster)


@FEW
@given(cluster=clusters(), specs=st.lists(job_specs(), min_size=1, max_size=5))
def test_the_loop_hands_an_arrival_its_known_resolution_equal_to_a_fresh_one(
        cluster: Cluster, specs: list[JobSpec]) -> None:
    specs = [replace(s, job_id=f"j{i}") for i, s in enumerate(specs)]
    loop = SchedulerLoop(cluster=cluster, policy=make_policy("fifo"), horizon=30,
                         arrivals=TraceArrivals(specs), known_jobs=specs)
    for s in specs:
        assert loop.resolve(s) == resolve_job(s, cluster.slot_seconds, 30)
        assert loop.resolve(s) == resolve_job(s, cluster.slot_seconds, 30)  # taken once
    other = replace(specs[0], job_id="x")
    assert loop.resolve(other) == resolve_job(other, cluster.slot_seconds, 30)


@settings(max_examples=200, deadline=None)
@given(u=utilities(max_target=3000), d=st.integers(0, 6000))
def test_log_utility_of_one_duration_is_the_array_path_bit_for_bit(u: Utility, d: int) -> None:
    spec = JobSpec(job_id="j", arrival=0, epochs=1, max_workers=1, minibatches=1, tau_s=1.0,
                   grad_mb=1.0, worker_demand=Resources(gpu=1.0, bandwidth_gbps=1.0),
                   ps_demand=Resources(cpu=1.0, bandwidth_gbps=1.0), utility=u)
    job = Job(spec=spec, work=1, window=max(d, 1))
    one, ref = log_utility_one(job, d), float(log_utility(job, d))
    assert one == ref or (math.isnan(one) and math.isnan(ref))


@FEW
@given(cluster=clusters(), specs=st.lists(job_specs(), min_size=1, max_size=6))
def test_hindsight_prices_read_each_demand_once_and_equal_the_rowwise_arrays(
        cluster: Cluster, specs: list[JobSpec]) -> None:
    amounts = [s.worker_demand for s in specs] + [s.ps_demand for s in specs]
    assert np.array_equal(_demands(amounts), np.array([a.as_array() for a in amounts]))


@settings(max_examples=200, deadline=None)
@given(u=utilities(max_target=300), cap=st.integers(-1, 3000),
       decay=st.sampled_from([None, 0.0, 1e-9, 1e-3, 0.5, 40.0]))
def test_the_window_is_the_reference_window_for_any_utility_and_cap(
        u: Utility, cap: int, decay: float | None) -> None:
    if decay is not None:
        u = replace(u, decay=decay)
    spec = JobSpec(job_id="j", arrival=0, epochs=1, max_workers=1, minibatches=1, tau_s=1.0,
                   grad_mb=1.0, worker_demand=Resources(gpu=1.0, bandwidth_gbps=1.0),
                   ps_demand=Resources(cpu=1.0, bandwidth_gbps=1.0), utility=u)
    assert window_length(spec, 1, cap) == window_length_reference(spec, 1, cap)
