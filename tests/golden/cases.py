"""The fixed inputs of the recorded outputs, and how one run becomes one CSV row.

A *run* is one policy (by name, with options) on one case (jobs, cluster, horizon) with one
loop seed. Its row holds readable totals (admitted, completed, utility, allocation rows,
decision events) and SHA-256 digests (16 hex digits) of every allocation row, every job record
(admitted, reason, completion, first slot, work done), the per-slot usage and the policy's
report (timings and solver gaps left out: they vary from run to run). Floats are written with
``repr``: a row equal to its record means the same run bit for bit.

A *greedy* row is one of the greedy fills of :mod:`psched.policies.greedy` on one random
:class:`~psched.policies.epoch.Epoch` (:func:`random_epoch`): the counts it chose.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from psched.core.horizon import trace_horizon
from psched.core.model import EPS, Cluster, JobSpec
from psched.core.simulator import simulate
from psched.policies import greedy, make_policy
from psched.policies.epoch import Epoch
from psched.traces import load_any
from psched.traces.clusters import default_cluster_for_trace
from psched.traces.synth import fig5_instance, oasis_paper_cluster, oasis_paper_jobs
from psched.traces.synth_philly import philly_jobs

__all__ = ["CASES", "GREEDY_COLUMNS", "GREEDY_EPOCHS", "RUNS", "RUN_COLUMNS", "Case",
           "greedy_rows", "random_epoch", "run_row"]

TRACES = Path(__file__).resolve().parents[2] / "traces"  # shipped with the repository

#: jobs, cluster, horizon
Case = tuple[list[JobSpec], Cluster, int]


def _paper(seed: int, n: int = 60, slots: int = 60) -> Case:
    specs, _ = oasis_paper_jobs(n, seed=seed, slots=slots)
    return specs, oasis_paper_cluster(seed=seed), slots


def _trace(specs: list[JobSpec], load: float = 0.8) -> Case:
    cluster = default_cluster_for_trace(specs, slot_seconds=3600.0, load=load)
    return specs, cluster, min(trace_horizon(specs, 3600.0), 400)


def _elasticflow(seed: int) -> Case:
    path = TRACES / "elasticflow" / "augmented" / "cluster10.csv"
    return _trace(load_any(path, slot_seconds=3600.0, seed=seed)[:150], load=2.0)


def _philly(seed: int, n: int = 400, rate: str = "40", load: float = 1.5) -> Case:
    specs, _ = philly_jobs(n, seed=seed, options={"rate": rate})
    return _trace(specs, load=load)


def _fig5(servers: int, seed: int) -> Case:
    """Containers large against the servers (a worker takes a quarter to half of one)."""
    specs, cluster = fig5_instance(servers, seed=seed, priority=(1.0, 100.0))
    return specs, cluster, 10


#: Case name -> its builder.
CASES: dict[str, Callable[[], Case]] = {
    "paper-s0": lambda: _paper(0),
    "paper-s1": lambda: _paper(1),
    "paper-s5-dense": lambda: _paper(5, n=120, slots=40),
    "paper24-s0": lambda: _paper(0, n=24, slots=30),
    "paper24-s3": lambda: _paper(3, n=24, slots=30),
    "paper24-s7": lambda: _paper(7, n=24, slots=30),
    "elasticflow-s0": lambda: _elasticflow(0),
    "elasticflow-s2": lambda: _elasticflow(2),
    "philly-s0": lambda: _philly(0),
    "philly-s3": lambda: _philly(3),
    # hundreds of jobs queued on a few servers: most cannot start at an event
    "philly-tight-s1": lambda: _philly(1, n=300, rate="60", load=6.0),
    "fig5-3-s11": lambda: _fig5(3, 11),
    "fig5-6-s12": lambda: _fig5(6, 12),
}

_RIVALS = ("fifo", "drf", "srtf", "rrh", "optimus", "greedy-fill", "greedy-gain")
_BROAD = ("paper-s0", "paper-s1", "paper-s5-dense", "elasticflow-s0", "elasticflow-s2",
          "philly-s0", "philly-s3", "philly-tight-s1", "fig5-3-s11", "fig5-6-s12")
#: solver time limits far above what these small models need: no run depends on the machine
_SLOW = {"time_limit_s": 60.0}

#: (label, policy, options, case): every recorded run; the label names the policy and options.
RUNS: list[tuple[str, str, dict[str, Any], str]] = [
    *[(name, name, {}, case) for name in _RIVALS for case in _BROAD],
    ("drf:shares=per_pool", "drf", {"shares": "per_pool"}, "philly-s0"),
    ("greedy-gain:counts=all,weight=utility", "greedy-gain",
     {"counts": "all", "weight": "utility"}, "philly-s0"),
    ("greedy-fill:counts=all,anti_starvation=True", "greedy-fill",
     {"counts": "all", "anti_starvation": True}, "philly-s0"),
    *[(name, name, _SLOW, case) for name in ("dorm", "elastic-mip")
      for case in ("paper24-s0", "paper24-s3", "paper24-s7")],
    *[("oasis", "oasis", {}, case) for case in _BROAD],
    *[("oasis-rp", "oasis-rp", {}, case) for case in
      ("paper-s0", "paper-s1", "paper24-s3", "elasticflow-s0", "philly-s0", "fig5-3-s11")],
]

RUN_COLUMNS = ("label", "case", "seed", "jobs", "admitted", "completed", "utility",
               "allocation_rows", "events", "allocations", "records", "usage", "report")

#: report keys left out of the digest: timings, and solver gaps (floating-point noise)
_UNSTABLE = re.compile(r"_ms(_|$)|_s$|_s_|gap")


def _digest(obj: object) -> str:
    data = obj if isinstance(obj, bytes) else repr(obj).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def run_row(label: str, policy: str, options: dict[str, Any], case: str) -> dict[str, str]:
    """The row of one run (its seed: a fixed function of the case name)."""
    specs, cluster, horizon = CASES[case]()
    seed = sum(map(ord, case)) % 7
    r = simulate(specs, cluster, make_policy(policy, **options), horizon, seed=seed)
    records = [(j, rec.admitted, rec.reason, rec.completion, rec.first_slot, rec.done)
               for j, rec in r.records.items()]
    report = {k: v for k, v in sorted(r.report.items()) if not _UNSTABLE.search(k)}
    return {"label": label, "case": case, "seed": str(seed), "jobs": str(len(specs)),
            "admitted": str(sum(1 for rec in r.records.values() if rec.admitted)),
            "completed": str(sum(1 for rec in r.records.values() if rec.completion is not None)),
            "utility": repr(float(sum(rec.utility for rec in r.records.values()))),
            "allocation_rows": str(len(r.allocations)), "events": str(len(r.decision_ms)),
            "allocations": _digest(r.allocations), "records": _digest(records),
            "usage": _digest(np.ascontiguousarray(r.usage).tobytes()),
            "report": _digest(report)}


def random_epoch(seed: int, n: int, running_share: float) -> Epoch:
    """An epoch of ``n`` jobs with random demands (3 resources), pow2 counts, a PS ratio, and
    running jobs that fit the pools."""
    rng = np.random.default_rng(seed)
    caps = [int(c) for c in rng.integers(1, 9, size=n)]
    allowed = tuple(np.array(sorted({1 << i for i in range(c.bit_length()) if 1 << i <= c}
                                    | {c}), dtype=np.int64) for c in caps)
    ratio = rng.choice([0.0, 0.25, 0.5, 1.0], size=n)
    ps = tuple(np.ceil(r * a - EPS).astype(np.int64) for r, a in zip(ratio, allowed,
                                                                     strict=True))
    wd = rng.integers(0, 4, size=(n, 3)).astype(float)
    sd = rng.integers(0, 3, size=(n, 3)).astype(float)
    cur = np.zeros(n, dtype=np.int64)
    wcap = rng.integers(0, 40, size=3).astype(float)
    pcap = rng.integers(0, 20, size=3).astype(float)
    for j in range(n):
        if rng.random() < running_share:
            cur[j] = allowed[j][rng.integers(0, allowed[j].size)]
    w_used, p_used = cur @ wd, np.array([ps[j][np.searchsorted(allowed[j], c)] if c else 0
                                         for j, c in enumerate(cur)]) @ sd
    remaining = rng.integers(1, 13, size=n).astype(float)
    return Epoch(ids=tuple(f"j{i}" for i in range(n)), allowed=allowed,
                 speed=tuple(a.astype(float) for a in allowed), ps=ps,
                 remaining=remaining, weight=rng.uniform(0.5, 2.0, size=n),
                 penalty=np.full(n, 0.01), current=cur, worker_demand=wd, ps_demand=sd,
                 worker_cap=np.maximum(wcap, w_used), ps_cap=np.maximum(pcap, p_used))


#: (seed, jobs, share of jobs running) of the recorded greedy epochs
GREEDY_EPOCHS: list[tuple[int, int, float]] = [
    (seed, n, share) for seed in range(12) for n, share in ((8, 0.0), (25, 0.3), (60, 0.6))]
GREEDY_COLUMNS = ("seed", "jobs", "running_share", "misses", "fill", "counts")
_FILLS = {"fifo_fill": greedy.fifo_fill, "marginal_gain": greedy.marginal_gain,
          "density_fill": greedy.density_fill}


def greedy_rows(seed: int, n: int, share: float) -> list[dict[str, str]]:
    """The counts each greedy fill chooses on one epoch, with a bulk drop of unstartable jobs
    after every single miss and after the default number of misses."""
    epoch = random_epoch(seed, n, share)
    out = []
    saved = greedy._MISSES
    try:
        for misses in (1, saved):
            greedy._MISSES = misses
            for name, fill in _FILLS.items():
                out.append({"seed": str(seed), "jobs": str(n), "running_share": repr(share),
                            "misses": "default" if misses == saved else str(misses),
                            "fill": name, "counts": " ".join(map(str, fill(epoch).tolist()))})
    finally:
        greedy._MISSES = saved
    return out
