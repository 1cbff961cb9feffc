"""Identical servers as one where exact: the check, first-fit placement, and the optimum kept."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.aggregate import exact_aggregate, pack
from psched.core.model import resolve_job
from psched.offline.formulation import Formulation
from psched.offline.optimum import solve_offline
from psched.traces.synth import fig5_instance


def test_fig5_worker_pool_aggregates_and_a_non_divisible_one_does_not() -> None:
    cap = np.array([[4.0, 16.0, 64.0]] * 3)
    fig5 = [np.array([g, c, m]) for g in (1.0, 2.0) for c in (1.0, 4.0) for m in (2.0, 8.0)]
    assert exact_aggregate(cap, fig5)
    assert not exact_aggregate(cap, [np.array([2.0, 1.0, 1.0]), np.array([3.0, 1.0, 1.0])])
    assert exact_aggregate(cap, [np.array([1.0, 8.0, 1.0])])  # CPU binds alone: 8 | 16
    # one CPU-bound and one GPU-bound kind: no single resource decides
    assert not exact_aggregate(cap, [np.array([1.0, 8.0, 1.0]), np.array([2.0, 1.0, 1.0])])
    assert not exact_aggregate(np.array([[4.0, 16.0, 64.0], [8.0, 16.0, 64.0]]), fig5)
    assert not exact_aggregate(cap[:1], fig5)


@settings(max_examples=80, deadline=None)
@given(n_servers=st.integers(1, 5), base=st.sampled_from([1.0, 0.5, 2.0]),
       counts=st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.integers(0, 6)), min_size=1,
                       max_size=5))
def test_first_fit_places_whatever_fits_the_summed_capacity(
        n_servers: int, base: float, counts: list[tuple[int, int]]) -> None:
    cap = np.array([8.0 * base, 100.0])
    items = {i: (np.array([k * base, float(k)]), n) for i, (k, n) in enumerate(counts)}
    assert exact_aggregate(np.tile(cap, (2, 1)), [d for d, _ in items.values()])
    total = sum(d[0] * n for d, n in items.values())
    if total > n_servers * cap[0] + 1e-9:
        with pytest.raises(ValueError):
            pack(cap, n_servers, items)
        return
    placed = pack(cap, n_servers, items)
    use = sum(np.outer(v, items[k][0]) for k, v in placed.items())
    assert np.all(use <= cap + 1e-9)
    assert all(int(v.sum()) == items[k][1] for k, v in placed.items())


@pytest.mark.parametrize("seed", range(4))
def test_aggregated_model_has_the_per_server_optimum(seed: int) -> None:
    specs, cluster = fig5_instance(4 + 2 * (seed % 2), seed=seed, n_jobs=6, slots=6)
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, 6) for s in specs) if j.window > 0]
    agg = solve_offline(jobs, cluster, 6)
    per = solve_offline(jobs, cluster, 6, formulation=Formulation(aggregate=False))
    assert agg.status == per.status == "optimal"
    assert agg.n_vars < per.n_vars  # the worker pool was aggregated
    assert agg.objective == pytest.approx(per.objective, rel=1e-6)
