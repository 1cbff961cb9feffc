"""The ``philly`` scenario: a synthetic trace with Philly's published shape, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from psched.cli.main import main
from psched.core.errors import InputError
from psched.traces.native import load_trace
from psched.traces.synth import SCENARIOS
from psched.traces.synth_philly import (
    GPU_COUNTS,
    GPU_SHARES,
    RUN_CLIP_S,
    philly_cluster,
    philly_jobs,
    philly_rows,
)

SEEDS = [0, 3]


def test_scenario_table_registers_philly() -> None:
    assert SCENARIOS["philly"] == (philly_jobs, philly_cluster)


@pytest.mark.parametrize("seed", SEEDS)
def test_same_seed_same_jobs_and_report_other_seed_differs(seed: int) -> None:
    a, ra = philly_jobs(500, seed=seed)
    b, rb = philly_jobs(500, seed=seed)
    assert a == b and ra == rb
    c, _ = philly_jobs(500, seed=seed + 1)
    assert c != a


@pytest.mark.parametrize("seed", SEEDS)
def test_shape_mostly_one_gpu_short_jobs_with_heavy_tail(seed: int) -> None:
    n = 20_000
    rows = philly_rows(n, seed=seed)
    gpus = np.array([r.workers for r in rows])
    run_s = np.array([r.duration_s for r in rows])
    assert set(np.unique(gpus)) <= set(GPU_COUNTS)
    for g, share in zip(GPU_COUNTS[:4], GPU_SHARES[:4], strict=True):
        assert abs(np.mean(gpus == g) - share) < 0.02
    assert np.mean(gpus == 1) > 0.7
    assert (gpus >= 16).any()
    assert RUN_CLIP_S[0] <= run_s.min() and run_s.max() <= RUN_CLIP_S[1]
    p50, p90, p99 = np.percentile(run_s[gpus == 1], [50, 90, 99])
    assert 600 <= p50 <= 1500  # tens of minutes
    assert 2 * 3600 <= p90 <= 6 * 3600  # hours
    assert p99 >= 12 * 3600  # a day-long tail
    submits = np.array([r.submit_s for r in rows])
    assert (np.diff(submits) >= 0).all()
    assert submits.max() < np.ceil(n / 32) * 3600


def test_jobs_map_like_the_real_trace_with_a_tenth_insensitive() -> None:
    specs, report = philly_jobs(2_000, seed=1)
    assert len(specs) == 2_000
    assert report.insensitive == 200
    assert sum(report.gpu_counts.values()) == 2_000
    assert all(s.epochs == 1 and s.tau_includes_comm for s in specs)
    assert all(s.worker_demand.gpu == 1.0 for s in specs)
    arrivals = [s.arrival for s in specs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0
    assert max(arrivals) < report.arrival_hours
    assert report.default_slots > max(arrivals)


def test_rate_option_sets_the_span_and_bad_options_are_named() -> None:
    _, report = philly_jobs(1_000, seed=0, options={"rate": "100"})
    assert report.arrival_hours == 10
    with pytest.raises(InputError, match="rate"):
        philly_jobs(10, seed=0, options={"rate": "-1"})
    with pytest.raises(InputError, match="unknown option"):
        philly_jobs(10, seed=0, options={"mix": "fig4"})
    with pytest.raises(InputError):
        philly_jobs(0, seed=0)


def test_cli_writes_the_native_csv_that_loads_back(tmp_path) -> None:
    out = tmp_path / "philly.csv"
    assert main(["trace", "synth", "--scenario", "philly", "--jobs", "300", "--seed", "2",
                 "--out", str(out)]) == 0
    specs, _ = philly_jobs(300, seed=2)
    assert load_trace(out) == specs


def test_simulate_scenario_philly_uses_the_trace_horizon_rule(monkeypatch) -> None:
    """The horizon of the trace rule, and the scenario's cluster of the run's seed (the real
    ``philly_cluster``, called once: it maps 80,000 jobs)."""
    from psched.runs.runner import SimulateRequest, prepare

    made = []

    def cluster_of(**kw):
        made.append((kw, philly_cluster(**kw)))
        return made[-1][1]

    monkeypatch.setitem(SCENARIOS, "philly", (philly_jobs, cluster_of))
    specs, cluster, horizon, params = prepare(SimulateRequest(scenario="philly", jobs=200,
                                                              seed=4))
    _, report = philly_jobs(200, seed=4)
    assert horizon == report.default_slots
    assert [(kw["seed"], c) for kw, c in made] == [(4, cluster)]
    assert params["scenario_report"]["n_jobs"] == 200
    assert len(specs) == 200
