"""oasis-rp's ``repack_quantile`` lever: a re-pack only for an arrival dense enough
(:mod:`psched.policies.oasis_rp.guard`).

Property suite with the guard on (capacity and PS rules, every promise re-derived from the
allocation rows, nobody left held), the threshold against numpy's quantile, bad values
rejected, and the worked instance of BENCHMARKS section 11 ("Other mapping draws"):
ElasticFlow 195job, mapping seed 0, where the guard withholds a re-pack and loses nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances
from test_oasis_rp_levers import run_keeping_every_promise

from psched.core.horizon import trace_horizon
from psched.core.model import resolve_job
from psched.core.promises import broken_promises
from psched.core.simulator import simulate
from psched.policies import make_policy
from psched.policies.oasis_rp.admission import density, density_quantile
from psched.traces.clusters import default_cluster_for_trace
from psched.traces.detect import load_any

ROOT = Path(__file__).resolve().parent.parent
EF_195JOB = ROOT.parent / "shared" / "traces" / "elasticflow" / "augmented" / "195job.csv"
SETTINGS = settings(max_examples=8, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("q", [0.2, 0.6])
@SETTINGS
@given(instance=instances())
def test_every_promise_is_kept_and_every_rule_holds_with_the_repack_guard(
        q: float, instance: Instance) -> None:
    run_keeping_every_promise({"repack_quantile": q}, instance)


@SETTINGS
@given(instance=instances())
def test_the_guard_changes_a_run_only_by_withholding_re_packs(instance: Instance) -> None:
    cluster, specs, horizon = instance
    a = simulate(specs, cluster, make_policy("oasis-rp"), horizon, seed=1)  # default q = 0.1
    b = simulate(specs, cluster, make_policy("oasis-rp", repack_quantile=0.0), horizon, seed=1)
    assert b.report["repack_guarded"] == 0
    if a.report["repack_guarded"] == 0:
        assert a.allocations == b.allocations


@SETTINGS
@given(instance=instances())
def test_the_threshold_is_the_quantile_of_the_jobs_densities(instance: Instance) -> None:
    cluster, specs, horizon = instance
    jobs = [resolve_job(s, cluster.slot_seconds, horizon) for s in specs]
    dens = [density(j, cluster) for j in jobs]
    for q in (0.1, 0.5, 0.9):
        assert density_quantile(jobs, cluster, q) == pytest.approx(float(np.quantile(dens, q)))
    assert density_quantile(jobs, cluster, 0.0) == 0.0
    assert density_quantile([], cluster, 0.5) == 0.0


@pytest.mark.parametrize("q", [-0.1, 1.0, 2.0, float("nan")])
def test_a_quantile_outside_zero_to_one_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match="repack_quantile"):
        make_policy("oasis-rp", repack_quantile=q)


@pytest.mark.slow
@pytest.mark.skipif(not EF_195JOB.exists(), reason="needs ../shared/traces")
def test_the_guard_withholds_a_re_pack_on_195job_and_loses_nothing_by_it() -> None:
    """ElasticFlow 195job, mapping seed 0: the job worth 9.2 that asks for the whole cluster
    is among the trace's least dense tenth; the guard withholds a re-pack there, and the run
    with it earns at least as much as the run without (the queue holds that job until its
    window closes either way: it is never admitted)."""
    specs = load_any(str(EF_195JOB), slot_seconds=3600.0, seed=0)
    cluster = default_cluster_for_trace(specs, slot_seconds=3600.0)
    horizon = trace_horizon(specs, 3600.0, None)
    big = next(s.job_id for s in specs if s.job_id.startswith("35ebd32d"))
    runs = {q: simulate(specs, cluster, make_policy("oasis-rp", repack_quantile=q,
                                                    certificate=False), horizon)
            for q in (0.0, 0.1)}
    for res in runs.values():
        assert broken_promises(res) == []
        assert not res.records[big].admitted
    job = runs[0.0].records[big].job
    jobs = [resolve_job(s, 3600.0, horizon) for s in specs]
    assert job.max_workers == 32
    assert density(job, cluster) < density_quantile(jobs, cluster, 0.1)
    assert runs[0.0].report["repack_guarded"] == 0 < runs[0.1].report["repack_guarded"]
    total = {q: sum(r.utility for r in res.records.values()) for q, res in runs.items()}
    assert total[0.1] >= total[0.0]
