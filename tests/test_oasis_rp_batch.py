"""oasis-rp's density order and reservations: the arrivals of one slot decided together,
densest first; reservations that become promises only when they start.

Pinned here: the worked instances they were built for (a slot brings more deadline jobs than
fit: the most valuable win, not the first in the trace; a reservation of low value gives way
to a denser job that arrives before it starts), that a reservation is admitted at the
boundary of its first slot, the density order itself (packing-aware shares, stable ties), and
the usual property suite -- every rule, every promise re-derived from the allocation rows,
the certificate against the exact optimum, same seed same run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import Instance, instances
from test_oasis_certificate import (
    assert_rp_certificate_bounds_the_optimum,
    tiny_instance,
)
from test_oasis_rp import _server, _spec
from test_oasis_rp_levers import run_keeping_every_promise

from psched.core.model import Cluster, Job, Pool, Resources, Server, resolve_job
from psched.core.promises import broken_promises
from psched.core.records import HELD
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.policies import make_policy
from psched.policies.oasis_rp.admission import containers_that_fit, density, density_order

OPTIONS = [{}, {"price_source": "hindsight"}, {"commit_margin": 1}]
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _ids(v: dict[str, object]) -> str:
    return ",".join(f"{k}={v[k]}" for k in sorted(v))


def _two_at_a_time() -> Cluster:
    """One worker server with 2 GPUs (two 1-GPU workers per slot) and a PS server."""
    return Cluster(servers=(_server("w0", Pool.WORKER, 2), _server("p0", Pool.PS, 0)))


def _slot_rush(values: list[float]) -> list:
    """One 1-worker, 1-slot job per value, all arriving in slot 0, worth only in slot 0."""
    return [_spec(f"j{i}", 0, 1, 1, Utility(kind="deadline", value=v, target=1.0))
            for i, v in enumerate(values)]


def test_the_most_valuable_arrivals_of_a_rushed_slot_win() -> None:
    """Four jobs worth 10, 20, 90, 80 arrive in slot 0 and two fit: in trace order the first
    two would be admitted (30); decided together, densest first, the 90 and the 80 (170)."""
    specs = _slot_rush([10.0, 20.0, 90.0, 80.0])
    res = simulate(specs, _two_at_a_time(), make_policy("oasis-rp"), 4)
    admitted = sorted(j for j, r in res.records.items() if r.admitted)
    assert admitted == ["j2", "j3"]
    assert sum(r.utility for r in res.records.values()) == 170.0
    assert broken_promises(res) == []
    for r in res.records.values():  # the others are held until their window closes
        assert r.decided == (0 if r.admitted else r.job.last_slot + 1) and r.reason != HELD
        assert r.admitted or r.reason == "payoff<=0"


def test_containers_that_fit_count_whole_containers_per_server() -> None:
    """Two 20 Gbps PS fit a 50 Gbps server, not 2.5; a resource not demanded does not bind."""
    ps = Server(server_id="p", pool=Pool.PS,
                capacity=Resources(cpu=36, memory_gb=60, bandwidth_gbps=50))
    cluster = Cluster(servers=(_server("w", Pool.WORKER, 8), ps, dataclasses.replace(ps,
                                                                                   server_id="q")))
    demand = Resources(cpu=4, memory_gb=8, bandwidth_gbps=20).as_array()
    assert containers_that_fit(cluster, Pool.PS, demand) == 4
    gpu_only = np.zeros_like(demand)
    gpu_only[0] = 1.0
    assert containers_that_fit(cluster, Pool.WORKER, gpu_only) == 8


def test_density_is_utility_per_dominant_share_over_the_work_and_ties_keep_order() -> None:
    cluster = _two_at_a_time()
    specs = [_spec("a", 0, 1, 2, Utility(kind="constant", value=10.0)),   # 2 worker-slots
             _spec("b", 0, 1, 1, Utility(kind="constant", value=10.0)),   # 1: twice as dense
             _spec("c", 0, 1, 2, Utility(kind="constant", value=10.0))]   # ties with a
    jobs = [resolve_job(s, 3600.0, 10) for s in specs]
    # one worker is 1/2 of the worker pool (2 GPUs); its PS 1/6 of the PS pool (25 / 4 Gbps)
    assert density(jobs[0], cluster) == pytest.approx(10.0 / (2 * 0.5))
    assert [j.job_id for j in density_order(jobs, cluster)] == ["b", "a", "c"]


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
@SETTINGS
@given(instance=instances())
def test_every_promise_is_kept_and_every_rule_holds_with_the_batch(
        options: dict[str, object], instance: Instance) -> None:
    result = run_keeping_every_promise(options, instance)
    for rec in result.records.values():
        if rec.admitted:  # admitted when it starts at the latest: nothing ran before
            assert rec.first_slot is not None and rec.decided <= rec.first_slot


@pytest.mark.parametrize("options", OPTIONS[:2], ids=_ids)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inst=tiny_instance())
def test_certificate_bounds_the_exact_optimum_with_the_batch(
        options: dict[str, object], inst: tuple[list[Job], Cluster]) -> None:
    jobs, cluster = inst
    assert_rp_certificate_bounds_the_optimum(jobs, cluster, options)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=instances())
def test_same_seed_same_run_with_the_batch(instance: Instance) -> None:
    cluster, specs, horizon = instance
    runs = [simulate(specs, cluster, make_policy("oasis-rp"), horizon, seed=2)
            for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations
    assert [(r.admitted, r.promised, r.decided) for r in runs[0].records.values()] == [
        (r.admitted, r.promised, r.decided) for r in runs[1].records.values()]


def _reserved_then_dense(dense: bool) -> list:
    """Slot 0: ``busy`` takes both GPUs in slots 0-1; ``low`` (worth 10, needs both GPUs for
    one slot by slot 2) can only be planned in slot 2. Slot 1 (if ``dense``): ``dense`` (worth
    60, the same shape, by slot 2) needs slot 2 too."""
    specs = [_spec("busy", 0, 2, 2, Utility(kind="deadline", value=50.0, target=2.0)),
             _spec("low", 0, 2, 1, Utility(kind="deadline", value=10.0, target=3.0))]
    if dense:
        specs.append(_spec("dense", 1, 2, 1, Utility(kind="deadline", value=60.0, target=2.0)))
    return specs


def test_a_reservation_of_low_value_gives_way_to_a_denser_arrival() -> None:
    """``low`` only holds a reservation for slot 2 (promised on arrival, it would keep
    ``dense`` out: 60); at the boundary of slot 1 the queue takes ``dense`` first (denser)
    and it takes slot 2; ``low``, searched again, finds no room and is held until its window
    closes, then rejected (110). Every promise made is kept."""
    res = simulate(_reserved_then_dense(True), _two_at_a_time(), make_policy("oasis-rp"), 5)
    recs = res.records
    assert broken_promises(res) == []
    assert recs["busy"].admitted and recs["busy"].decided == 0
    # dense's own plan starts in slot 2: a reservation too, admitted then
    assert (recs["dense"].admitted, recs["dense"].decided, recs["dense"].promised) == (
        True, 2, 2)
    assert (recs["low"].admitted, recs["low"].reason, recs["low"].decided) == (
        False, "payoff<=0", recs["low"].job.last_slot + 1)
    assert res.report["soft_reserved"] == 2  # low on arrival, dense on arrival
    assert res.report["queue_searches"] >= 1
    assert sum(r.utility for r in recs.values()) == 110.0


def test_a_reservation_is_admitted_at_the_boundary_of_its_first_slot() -> None:
    res = simulate(_reserved_then_dense(False), _two_at_a_time(), make_policy("oasis-rp"), 5)
    low = res.records["low"]
    assert (low.admitted, low.decided, low.first_slot, low.promised, low.completion) == (
        True, 2, 2, 2, 2)
    assert res.report["soft_reserved"] == 1
    assert broken_promises(res) == []
