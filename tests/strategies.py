"""Hypothesis strategies for random clusters, job specs and whole instances.

Shared by every test module: ``from strategies import clusters, job_specs, instances``.
Instances are small (2-6 servers, 1-8 jobs, horizons <= 20) so that every policy, exact ones
included, runs them in milliseconds. Demands are sometimes fractional (float noise in the
capacity checks) and sometimes too large for any server (the loop's ``cannot_fit``).
"""

from __future__ import annotations

from hypothesis import strategies as st

from psched.core.model import Cluster, JobSpec, Pool, Resources, Server
from psched.core.utility import UTILITY_KINDS, Utility

__all__ = [
    "Instance",
    "SlotRows",
    "allocations_by_slot",
    "clusters",
    "instances",
    "job_specs",
    "utilities",
]

#: Slot length of every generated cluster, seconds.
SLOT_SECONDS = 3600.0

#: (cluster, job specs, horizon)
Instance = tuple[Cluster, list[JobSpec], int]


def _amount(lo: int, hi: int) -> st.SearchStrategy[float]:
    """An integer amount, or now and then a half-integer one."""
    return st.one_of(st.integers(lo, hi).map(float),
                     st.integers(2 * lo, 2 * hi).map(lambda x: x / 2.0))


@st.composite
def _server_capacity(draw: st.DrawFn, pool: Pool) -> Resources:
    return Resources(
        gpu=draw(_amount(1, 8)) if pool == Pool.WORKER else 0.0,
        cpu=draw(_amount(2, 32)),
        memory_gb=draw(_amount(4, 64)),
        storage_gb=draw(_amount(10, 100)),
        bandwidth_gbps=draw(_amount(5, 50)),
    )


@st.composite
def clusters(draw: st.DrawFn, min_servers: int = 2, max_servers: int = 6) -> Cluster:
    """A cluster of ``min_servers..max_servers`` servers, at least one in each pool."""
    n = draw(st.integers(max(2, min_servers), max_servers))
    n_workers = draw(st.integers(1, n - 1))
    servers = []
    for i in range(n):
        pool = Pool.WORKER if i < n_workers else Pool.PS
        servers.append(Server(server_id=f"{pool.value[0]}{i:02d}", pool=pool,
                              capacity=draw(_server_capacity(pool))))
    return Cluster(servers=tuple(servers), slot_seconds=SLOT_SECONDS)


@st.composite
def utilities(draw: st.DrawFn, max_target: int = 20) -> Utility:
    """Any utility kind, with the paper's ranges scaled to short horizons."""
    kind = draw(st.sampled_from(UTILITY_KINDS))
    value = draw(st.floats(1.0, 100.0))
    decay = draw(st.sampled_from([0.0, 0.05, 0.5, 1.0, 5.0])) if kind != "deadline" else 0.0
    target = float(draw(st.integers(1, max_target)))
    return Utility(kind=kind, value=value, decay=decay, target=target)


@st.composite
def job_specs(draw: st.DrawFn, job_id: str = "j0", max_arrival: int = 19,
              max_workers: int = 6, max_slots_at_n: int = 4) -> JobSpec:
    """One job: N <= ``max_workers``, about ``1..max_slots_at_n`` slots of work at full speed.

    The work is set through tau: ``E M (tau + 2e/b) = x * slot_seconds`` per worker for a drawn
    ``x``, so ``W = ceil(N x)``; half the jobs count communication inside tau.
    """
    epochs = draw(st.integers(1, 3))
    minibatches = draw(st.integers(1, 4))
    n = draw(st.integers(1, max_workers))
    per_worker_slots = draw(st.floats(0.2, float(max_slots_at_n)))
    b = draw(st.sampled_from([0.0, 0.5, 1.0, 2.5, 5.0]))
    big_b = b + draw(st.sampled_from([0.0, 0.5, 2.0, 10.0]))
    if big_b == 0.0:
        big_b = 1.0
    includes_comm = b == 0.0 or draw(st.booleans())
    grad_mb = draw(st.sampled_from([1.0, 30.0, 100.0]))
    total_s = per_worker_slots * SLOT_SECONDS / (epochs * minibatches)
    comm = 0.0 if includes_comm else 2.0 * grad_mb * 8.0 / (b * 1000.0)
    tau = max(total_s - comm, 1e-3)
    worker = Resources(gpu=draw(_amount(0, 3)), cpu=draw(_amount(1, 8)),
                       memory_gb=draw(_amount(1, 16)), storage_gb=draw(_amount(0, 5)),
                       bandwidth_gbps=b)
    ps = Resources(cpu=draw(_amount(1, 8)), memory_gb=draw(_amount(1, 16)),
                   storage_gb=draw(_amount(0, 5)), bandwidth_gbps=big_b)
    return JobSpec(job_id=job_id, arrival=draw(st.integers(0, max_arrival)), epochs=epochs,
                   max_workers=n, minibatches=minibatches, tau_s=tau, grad_mb=grad_mb,
                   worker_demand=worker, ps_demand=ps, utility=draw(utilities()),
                   tau_includes_comm=includes_comm)


@st.composite
def instances(draw: st.DrawFn, max_jobs: int = 8, max_horizon: int = 20) -> Instance:
    """A cluster, ``1..max_jobs`` jobs arriving in slots ``0..horizon`` (the last one too late)."""
    cluster = draw(clusters())
    horizon = draw(st.integers(1, max_horizon))
    n_jobs = draw(st.integers(1, max_jobs))
    specs = [draw(job_specs(job_id=f"j{i}", max_arrival=horizon)) for i in range(n_jobs)]
    return cluster, specs, horizon


#: One slot's executed allocation: job id -> ({worker server: count}, {PS server: count}).
SlotRows = dict[str, tuple[dict[int, int], dict[int, int]]]


def allocations_by_slot(rows: list[tuple[int, str, int, str, int]]) -> dict[int, SlotRows]:
    """Regroup ``RunResult.allocations`` rows by slot and job (a test-side re-derivation)."""
    out: dict[int, SlotRows] = {}
    for t, job_id, server, role, count in rows:
        workers, ps = out.setdefault(t, {}).setdefault(job_id, ({}, {}))
        target = workers if role == "worker" else ps
        target[server] = target.get(server, 0) + count
    return out
