"""Instances for the OASiS tests: tiny clusters, jobs and priced ledgers built by hand.

``from oasis_cases import priced_inputs, make_job, make_cluster``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from psched.core.model import Cluster, Job, JobSpec, Pool, Resources, Server
from psched.core.utility import Utility
from psched.oasis.ledger import JobInputs, Ledger
from psched.oasis.prices import PriceParams, fixed_params

__all__ = ["make_cluster", "make_job", "priced_inputs", "random_ledger"]


def make_cluster(workers: list[tuple[float, float, float, float]],
                 ps: list[tuple[float, float, float]]) -> Cluster:
    """Worker servers (gpu, cpu, memory, bandwidth) and PS servers (cpu, memory, bandwidth)."""
    servers = [Server(server_id=f"w{i}", pool=Pool.WORKER,
                      capacity=Resources(gpu=g, cpu=c, memory_gb=m, bandwidth_gbps=b))
               for i, (g, c, m, b) in enumerate(workers)]
    servers += [Server(server_id=f"p{i}", pool=Pool.PS,
                       capacity=Resources(cpu=c, memory_gb=m, bandwidth_gbps=b))
                for i, (c, m, b) in enumerate(ps)]
    return Cluster(servers=tuple(servers))


def make_job(*, work: int, window: int, max_workers: int, arrival: int = 0,
             worker: tuple[float, float, float, float] = (1, 1, 1, 1),
             ps: tuple[float, float, float] = (1, 1, 1),
             utility: Utility | None = None, job_id: str = "j") -> Job:
    """A resolved job built directly (work and window given, not derived)."""
    g, c, m, b = worker
    pc, pm, pb = ps
    spec = JobSpec(
        job_id=job_id, arrival=arrival, epochs=1, max_workers=max_workers, minibatches=1,
        tau_s=1.0, grad_mb=1.0,
        worker_demand=Resources(gpu=g, cpu=c, memory_gb=m, bandwidth_gbps=b),
        ps_demand=Resources(cpu=pc, memory_gb=pm, bandwidth_gbps=pb),
        utility=utility or Utility(kind="sigmoid", value=10.0, decay=0.5, target=3.0),
    )
    return Job(spec=spec, work=work, window=window)


def random_ledger(draw: st.DrawFn, cluster: Cluster, horizon: int,
                  params: PriceParams) -> Ledger:
    """A ledger with random committed usage; runs of slots repeat the previous slot."""
    ledger = Ledger(cluster, horizon, params)
    levels = (0.0, 0.0, 0.25, 0.5, 0.75, 1.0)
    for pool in (0, 1):
        cap = ledger.capacity[pool]
        for t in range(horizon):
            if t > 0 and draw(st.booleans()):
                ledger.usage[pool][t] = ledger.usage[pool][t - 1]
                continue
            frac = np.array(draw(st.lists(st.sampled_from(levels), min_size=cap.shape[0],
                                          max_size=cap.shape[0])))
            ledger.usage[pool][t] = frac[:, None] * cap
    return ledger


utilities = st.one_of(
    st.builds(lambda v, d, t: Utility(kind="sigmoid", value=v, decay=d, target=t),
              st.floats(0.5, 50), st.sampled_from([0.0, 0.3, 1.0, 5.0]), st.integers(1, 6)),
    st.builds(lambda v, t: Utility(kind="deadline", value=v, target=t),
              st.floats(0.5, 50), st.integers(1, 6)),
    st.builds(lambda v, d, t: Utility(kind="linear", value=v, decay=d, target=t),
              st.floats(0.5, 50), st.floats(0.5, 10), st.integers(1, 6)),
)


@st.composite
def priced_inputs(draw: st.DrawFn, *, servers: int, ps_servers: int, max_workers: int,
                  max_work: int, slots: int) -> JobInputs:
    """Random priced inputs of one job over a random ledger."""
    n_w = draw(st.integers(1, servers))
    n_p = draw(st.integers(1, ps_servers))
    workers = [(float(draw(st.integers(1, 4))), float(draw(st.integers(2, 8))),
                float(draw(st.integers(2, 8))), 10.0) for _ in range(n_w)]
    ps = [(float(draw(st.integers(2, 8))), float(draw(st.integers(2, 8))), 10.0)
          for _ in range(n_p)]
    cluster = make_cluster(workers, ps)
    n = draw(st.integers(1, max_workers))
    window = draw(st.integers(1, slots))
    work = draw(st.integers(1, min(max_work, max(1, n * window // 2))))
    big_b = draw(st.sampled_from([1.0, 2.0, 3.0, 5.0]))
    small_b = big_b * draw(st.sampled_from([0.2, 0.34, 0.5, 1.0]))
    job = make_job(work=work, window=window, max_workers=n,
                   worker=(float(draw(st.integers(0, 2))), float(draw(st.integers(1, 3))),
                           float(draw(st.integers(1, 3))), small_b),
                   ps=(float(draw(st.integers(1, 3))), float(draw(st.integers(1, 3))), big_b),
                   utility=draw(utilities))
    # prices on the scale of the job's utility, so that payoffs straddle zero
    value = job.spec.utility.value
    u = value * draw(st.sampled_from([0.5, 2.0, 10.0, 100.0]))
    lo = value * draw(st.sampled_from([0.001, 0.05, 0.3])) / work
    params = fixed_params(u, lo, u * draw(st.sampled_from([0.5, 1.0, 2.0])), lo)
    ledger = random_ledger(draw, cluster, window, params)
    return ledger.inputs(job)
