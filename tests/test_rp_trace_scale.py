"""oasis-rp at trace scale: exact speed-ups of the set-up and the own-usage search, each
checked against the reference it replaces (the clearing density job by job, the stable argsort
of the unit table).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from strategies import Instance, instances

from psched.core.loop import resolve_job
from psched.policies.oasis_rp.admission import clearing_density, clearing_density_reference
from psched.policies.oasis_rp.units import cheapest_units
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

RUNS = settings(max_examples=6, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("slots", [40, 300, 3000])
def test_clearing_density_equals_the_job_by_job_reference(seed: int, slots: int) -> None:
    specs, _ = oasis_paper_jobs(120, seed=seed, slots=min(slots, 300))
    cluster = oasis_paper_cluster(seed=seed)
    jobs = [resolve_job(s, cluster.slot_seconds, slots, None) for s in specs]
    for horizon in (1, slots // 10, slots):
        assert clearing_density(jobs, cluster, horizon) == clearing_density_reference(
            jobs, cluster, horizon)
    assert clearing_density([], cluster, slots) == 0.0


@RUNS
@given(instance=instances(max_jobs=8, max_horizon=14))
def test_clearing_density_equals_the_reference_on_random_instances(instance: Instance) -> None:
    cluster, specs, horizon = instance
    jobs = [resolve_job(s, cluster.slot_seconds, horizon, None) for s in specs]
    for h in (1, 2, horizon):
        assert clearing_density(jobs, cluster, h) == clearing_density_reference(jobs, cluster, h)


_COSTS = st.one_of(st.sampled_from([0.0, 1.0, 2.0, np.inf]),
                   st.floats(0.0, 5.0, allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(flat=arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 40)),
                   elements=_COSTS),
       limit=st.integers(1, 50))
def test_cheapest_units_are_the_stable_argsort_prefix(flat: np.ndarray, limit: int) -> None:
    want = np.argsort(flat, axis=1, kind="stable")[:, :limit]
    assert np.array_equal(cheapest_units(flat, limit), want)
