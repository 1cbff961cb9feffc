"""oasis-rp's ``observer``: the CPU of each decision of a batch, for the benchmarks.

Pinned here: the probe sees each job of a slot's batch exactly once, in the order decided
(densest first), with CPU seconds that add up to no more than the ``admit_held`` call that
made them; whole runs are the same with the probe set and unset (it times, it decides
nothing); and ``benchmarks/bench_oasis_rp.py``'s per-decision figures plus the boundary
work decided for no job add up to the CPU of every decision call (nothing lost, nothing
counted twice), each job's own figure never above its answer wait.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances
from test_oasis_rp import _server, _spec

from psched.core.model import Cluster, JobSpec, Pool
from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.policies import make_policy
from psched.policies.oasis_rp import OasisRpPolicy
from psched.policies.oasis_rp.observer import Observer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_oasis_rp

OPTIONS = [{}, {"price_source": "hindsight"}]


def _ids(v: dict[str, object]) -> str:
    return ",".join(f"{k}={v[k]}" for k in sorted(v)) or "defaults"


def _decisions(res: RunResult) -> tuple[object, ...]:
    return (res.allocations, [(j, r.admitted, r.promised, r.completion, r.reason)
                              for j, r in res.records.items()])


class _Probed:
    """Wraps oasis-rp: the probe's calls and the CPU seconds of each ``admit_held`` call."""

    def __init__(self, **options: Any) -> None:
        inner = make_policy("oasis-rp", **options)
        assert isinstance(inner, OasisRpPolicy)
        self.inner = inner
        self.calls: list[tuple[float, list[tuple[str, float]]]] = []
        self._now: list[tuple[str, float]] = []
        wrapper = self

        class Seen(Observer):
            def decided(self, job_id: str, cpu_s: float) -> None:
                wrapper._now.append((job_id, cpu_s))

        self.inner.observer = Seen()
        self.name = self.inner.name
        self.commits_on_arrival = self.inner.commits_on_arrival

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def admit_held(self, jobs: Any, view: Any) -> Any:
        self._now = []
        c0 = time.process_time()
        out = self.inner.admit_held(jobs, view)
        self.calls.append((time.process_time() - c0, self._now))
        return out


def _slot_rush() -> tuple[Cluster, list[JobSpec]]:
    """Two 1-GPU workers per slot; four 1-slot jobs worth 10, 20, 90, 80 arrive in slot 0."""
    cluster = Cluster(servers=(_server("w0", Pool.WORKER, 2), _server("p0", Pool.PS, 0)))
    specs = [_spec(f"j{i}", 0, 1, 1, Utility(kind="deadline", value=v, target=1.0))
             for i, v in enumerate([10.0, 20.0, 90.0, 80.0])]
    return cluster, specs


def test_the_probe_sees_each_job_of_a_batch_once_densest_first_within_the_call() -> None:
    cluster, specs = _slot_rush()
    pol = _Probed()
    simulate(specs, cluster, pol, 4)
    probed = [(call_s, seen) for call_s, seen in pol.calls if seen]
    assert len(probed) == 1
    call_s, seen = probed[0]
    assert [j for j, _ in seen] == ["j2", "j3", "j1", "j0"]
    assert all(s >= 0.0 for _, s in seen)
    assert sum(s for _, s in seen) <= call_s + 1e-9


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instance=instances())
def test_runs_are_the_same_with_the_probe_set_and_unset(options: dict[str, object],
                                                        instance: Instance) -> None:
    cluster, specs, horizon = instance
    plain = simulate(specs, cluster, make_policy("oasis-rp", **options), horizon)
    probed = _Probed(**options)
    again = simulate(specs, cluster, probed, horizon)
    assert _decisions(plain) == _decisions(again)
    for call_s, seen in probed.calls:
        assert sum(s for _, s in seen) <= call_s + 1e-9
        assert len({j for j, _ in seen}) == len(seen)  # once per job per call


@pytest.mark.parametrize("variant", ["oasis", "oasis-rp", "oasis-rp:price_source=hindsight"])
def test_the_bench_splits_decision_cpu_without_losing_or_doubling_any(variant: str) -> None:
    got = bench_oasis_rp.measure(variant, 30, 0)
    assert abs(got["conserved_ms"]) <= 1e-6 * max(1.0, got["calls_s"] * 1e3)
    assert got["arr_p50"] <= got["wait_p50"] + 1e-9
    assert got["arr_p99"] <= got["wait_p99"] + 1e-9
    assert got["broken"] == 0
