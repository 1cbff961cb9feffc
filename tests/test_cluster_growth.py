"""Servers that join while the loop runs: every policy takes them, capacities still hold,
OASiS's ledger keeps its commitments, and the service journals the growth for a restart."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from psched.core.arrivals import QueueArrivals, TraceArrivals
from psched.core.executor import SimulatedExecutor
from psched.core.loop import SchedulerLoop
from psched.core.model import RESOURCES, Cluster, JobSpec, Pool, Resources, Server
from psched.core.utility import Utility
from psched.policies import available_policies, make_policy
from psched.results.metrics import summarize

GPU = Resources(gpu=2, cpu=16, memory_gb=64, bandwidth_gbps=10)
PS = Resources(cpu=16, memory_gb=64, bandwidth_gbps=10)


def _cluster(n_worker: int) -> Cluster:
    servers = [Server(server_id="p0", pool=Pool.PS, capacity=PS)]
    servers += [Server(server_id=f"w{i}", pool=Pool.WORKER, capacity=GPU) for i in range(n_worker)]
    return Cluster(servers=tuple(servers), slot_seconds=3600)


def _spec(i: int, arrival: int, rng: np.random.Generator) -> JobSpec:
    n = int(rng.integers(1, 4))
    f = int(rng.integers(1, 4))
    return JobSpec(job_id=f"j{i}", arrival=arrival, epochs=1, max_workers=n, minibatches=1,
                   tau_s=f * 3600.0, grad_mb=0.0, tau_includes_comm=True,
                   worker_demand=Resources(gpu=1, cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=2),
                   utility=Utility(kind="sigmoid", value=float(rng.uniform(1, 20)), decay=0.5,
                                   target=float(rng.integers(2, 6))))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("policy", available_policies())
def test_every_policy_takes_servers_that_join_and_respects_their_capacity(policy, seed):
    rng = np.random.default_rng(seed)
    specs = [_spec(i, int(rng.integers(0, 8)), rng) for i in range(14)]
    small, big = _cluster(1), _cluster(3)
    loop = SchedulerLoop(cluster=small, policy=make_policy(policy), horizon=30,
                         arrivals=TraceArrivals(specs), executor=SimulatedExecutor(),
                         known_jobs=specs, seed=seed)
    for _ in range(4):
        loop.step()
    before = {(t, h) for t, _, h, _, _ in loop.state.allocations}
    assert all(h < len(small.servers) for _, h in before)
    loop.set_cluster(big)  # two GPU servers join
    for _ in range(26):
        loop.step()  # the loop checks every plan against the grown cluster's capacities
    used = {h for t, _, h, role, _ in loop.state.allocations if t >= 4 and role == "worker"}
    assert used & {2, 3}, f"{policy} never used the servers that joined"
    per_slot: dict[tuple[int, int], float] = {}
    for t, _job, h, role, n in loop.state.allocations:  # re-check, independently
        if role == "worker":
            per_slot[(t, h)] = per_slot.get((t, h), 0.0) + n
    assert all(v <= big.servers[h].capacity.gpu for (_, h), v in per_slot.items())
    # utilisation counts the joined servers from slot 4 on only: never above 1
    res = loop.result()
    gpu = RESOURCES.index("gpu")
    assert res.capacity_slots is not None
    assert res.capacity_slots[0][gpu] == pytest.approx(2 * (1 * 4 + 3 * 26))
    assert 0 < summarize(res)["utilization"]["worker"]["gpu"] <= 1 + 1e-9


def test_a_cluster_that_does_not_extend_the_old_one_is_refused():
    loop = SchedulerLoop(cluster=_cluster(2), policy=make_policy("fifo"), horizon=5,
                         arrivals=QueueArrivals())
    reordered = dataclasses.replace(_cluster(3), servers=tuple(reversed(_cluster(3).servers)))
    with pytest.raises(ValueError, match="old servers first"):
        loop.set_cluster(reordered)


def test_oasis_ledger_growth_keeps_commitments_and_prices_new_servers_from_zero():
    from psched.oasis.ledger import Ledger
    from psched.oasis.prices import fixed_params

    rng = np.random.default_rng(3)
    specs = [_spec(i, 0, rng) for i in range(3)]
    pol = make_policy("oasis")
    loop = SchedulerLoop(cluster=_cluster(1), policy=pol, horizon=12, arrivals=QueueArrivals(),
                         known_jobs=specs)
    loop.admit(0, specs)
    old = [u.copy() for u in pol.ledger.usage]
    old_prices = pol.ledger.scaled_prices(0, 0, 12)
    loop.set_cluster(_cluster(3))
    ledger: Ledger = pol.ledger
    np.testing.assert_array_equal(ledger.usage[0][:, :1], old[0])
    np.testing.assert_array_equal(ledger.usage[1], old[1])
    assert not ledger.usage[0][:, 1:].any()
    fresh = Ledger(_cluster(3), 12, fixed_params(1.0, 1.0, 1.0, 1.0))
    assert ledger.usage[0].shape == fresh.usage[0].shape
    prices = ledger.scaled_prices(0, 0, 12)
    np.testing.assert_array_equal(prices[:, :1], old_prices)
    assert (prices[:, 1:] <= prices[:, :1] + 1e-12).all()  # idle servers are the cheapest


def test_capacity_over_slots_follows_each_cluster_from_its_slot():
    from psched.core.records import capacity_slots

    small, big = _cluster(1), _cluster(3)
    one = capacity_slots([(0, small)], 10)
    np.testing.assert_allclose(one, capacity_slots([(0, small), (10, big)], 10))  # past the end
    grown = capacity_slots([(0, small), (4, big)], 10)
    np.testing.assert_allclose(grown[0], GPU.as_array() * (1 * 4 + 3 * 6))
    np.testing.assert_allclose(grown[1], PS.as_array() * 10)  # the PS pool did not change
