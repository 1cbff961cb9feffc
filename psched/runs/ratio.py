"""The competitive-ratio study: online policies against the exact offline optimum.

Per instance (:func:`psched.traces.synth.fig5_instance`, the paper's Fig. 5 setting): every
registered policy's total utility (:func:`psched.core.simulator.simulate`), OASiS's dual
certificate and alpha (:meth:`psched.policies.oasis.OasisPolicy.report`), the offline optimum
(:func:`psched.offline.optimum.solve_offline`, the same windows OASiS searches, started from the
best
policy's schedule and guarded against every policy's utility: ``opt_status`` "suspect" when the
solver contradicts one) and the LP relaxation bounds (:func:`psched.offline.optimum.lp_bound`, per
server and pooled). ``OPT / OASiS`` is the empirical ratio the paper's
Fig. 5 reports (1.1-1.5); Theorem 4 bounds it by ``2 alpha``.

Certificates. ``certificate`` is OASiS's ``dual_bound`` as reported: a feasible dual objective
plus the window tail, ``f(window + 1)`` of every job whose window ends before the horizon (a
window the horizon cuts adds nothing: a job unfinished at the horizon earns 0), computed by
:mod:`psched.oasis.dual`. ``certificate_sharp`` rebuilds the same bound with the tail computed
independently by the offline module (:func:`psched.offline.formulation.window_tail`); the two are
equal
since the certificate became horizon-aware, and the column is kept as that cross-check
(``tests/test_ratio.py``). Before, the certificate added the tail of every window and
``certificate_sharp`` was the tighter of the two.

Sound comparisons: OPT is over each job's window. A schedule finishing past a window earns at
most ``f(window + 1)``, so the unrestricted optimum is at most ``opt + tail``
(:func:`psched.offline.formulation.window_tail`; 0 where every window reaches the horizon) and a
policy
that finishes a job after its window cannot beat ``opt + tail``.
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psched.core.model import Cluster, JobSpec, resolve_job
from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.offline.formulation import window_tail
from psched.offline.optimum import lp_bound, solve_offline
from psched.policies import available_policies, make_policy
from psched.traces.synth import fig5_instance

__all__ = [
    "PAPER_RATIO",
    "RatioRow",
    "compare_jobs",
    "instance_seed",
    "ratio_instance",
    "ratio_study",
    "read_csv",
    "summarise",
    "write_csv",
]

log = logging.getLogger(__name__)

#: The empirical ratio range OPT/OASiS the paper reports for Fig. 5.
PAPER_RATIO: tuple[float, float] = (1.1, 1.5)


@dataclass(frozen=True, kw_only=True)
class RatioRow:
    """Everything measured on one instance."""

    servers: int  #: servers n (ceil(n/2) worker + floor(n/2) PS)
    priority: tuple[float, float]  #: range of gamma1
    seed: int  #: seed of the instance generator
    jobs: int  #: jobs in the instance
    slots: int  #: horizon T
    utility: dict[str, float]  #: total utility per policy
    certificate: float  #: OASiS's dual bound (19), an upper bound on OPT
    certificate_recorded: float  #: the paper's free certificate (recorded payoffs)
    certificate_sharp: float  #: the certificate rebuilt with the offline module's tail (equal)
    alpha: float  #: Theorem 4's alpha with the U, L used
    log_u_over_l: float  #: max over pools and resources of ln(U/L)
    opt: float  #: offline optimum (best found; proven when opt_status == "optimal")
    opt_bound: float  #: the MILP's proven upper bound
    opt_status: str  #: "optimal" or "time_limit"
    opt_s: float  #: MILP solve time, seconds
    lp: float  #: LP relaxation bound
    lp_s: float  #: LP solve time, seconds
    tail: float  #: window tail: unrestricted optimum <= opt + tail
    factors: dict[float, float] = field(default_factory=dict)  #: OASiS utility per U factor
    lp_pooled: float = math.nan  #: pooled LP bound (each pool one server; scales to 400 jobs)

    @property
    def ratio(self) -> float:
        """Empirical ratio OPT / OASiS (inf when OASiS earned nothing)."""
        achieved = self.utility.get("oasis", 0.0)
        return self.opt / achieved if achieved > 0 else math.inf

    def to_row(self) -> dict[str, Any]:
        """A flat CSV row."""
        out: dict[str, Any] = {
            "servers": self.servers, "priority_lo": self.priority[0],
            "priority_hi": self.priority[1], "seed": self.seed, "jobs": self.jobs,
            "slots": self.slots}
        out.update({f"utility_{k}": v for k, v in self.utility.items()})
        out.update(certificate=self.certificate, certificate_recorded=self.certificate_recorded,
                   certificate_sharp=self.certificate_sharp,
                   alpha=self.alpha, two_alpha=2 * self.alpha, log_u_over_l=self.log_u_over_l,
                   opt=self.opt, opt_bound=self.opt_bound, opt_status=self.opt_status,
                   opt_s=self.opt_s, lp=self.lp, lp_s=self.lp_s, tail=self.tail,
                   ratio=self.ratio, lp_pooled=self.lp_pooled)
        out.update({f"oasis_x{f:g}": v for f, v in self.factors.items()})
        return out


def instance_seed(seed: int, servers: int, priority: tuple[float, float], index: int) -> int:
    """Generator seed of instance ``index`` of one (servers, priority) cell of a study."""
    key = [seed, servers, round(priority[0] * 1000), round(priority[1] * 1000), index]
    return int(np.random.SeedSequence(key).generate_state(1)[0])


def _total(res: RunResult) -> float:
    return float(sum(r.utility for r in res.records.values()))


def _log_span(report: dict[str, Any]) -> float:
    spans = []
    for pool in ("worker", "ps"):
        low = float(report[f"L_{pool}"])
        spans += [math.log(u / low) for u in report[f"U_{pool}"].values()
                  if u > 0 and math.isfinite(u)]
    return max(spans) if spans else math.nan


def ratio_instance(specs: Sequence[JobSpec], cluster: Cluster, horizon: int, *,
                   servers: int, priority: tuple[float, float], seed: int,
                   policies: Sequence[str] | None = None,
                   estimate_factors: Sequence[float] = (),
                   time_limit: float = 60.0) -> RatioRow:
    """Measure one instance: every policy, OASiS's certificate, OPT and the LP bound.

    Complexity: one simulation per policy (and per estimate factor), one MILP, one LP.
    """
    names = list(policies) if policies is not None else available_policies()
    if "oasis" not in names:
        names.append("oasis")
    utility: dict[str, float] = {}
    report: dict[str, Any] = {}
    best: RunResult | None = None
    for name in names:
        res = simulate(specs, cluster, make_policy(name), horizon)
        utility[name] = _total(res)
        best = res if best is None or utility[name] > _total(best) else best
        if name == "oasis":
            report = res.report
    factors = {}
    for f in estimate_factors:
        pol = make_policy("oasis", estimate_factor=float(f), certificate=False)
        factors[float(f)] = _total(simulate(specs, cluster, pol, horizon))
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
            if j.window > 0]
    tail = window_tail(jobs, horizon)
    # guard (psched.offline.milp): OPT and both LPs are at least every policy's utility less the
    # tail
    known = max(utility.values()) - tail
    opt = solve_offline(jobs, cluster, horizon, time_limit=time_limit, known=known,
                        incumbent=best.allocations if best is not None else None)
    lp = lp_bound(jobs, cluster, horizon, known=known)
    pooled = lp_bound(jobs, cluster, horizon, pooled=True, known=known)
    return RatioRow(
        servers=servers, priority=priority, seed=seed, jobs=len(specs), slots=horizon,
        utility=utility, certificate=float(report["dual_bound"]),
        certificate_recorded=float(report["dual_bound_recorded"]),
        certificate_sharp=float(report["dual_bound"]) - float(report["dual_tail_utility"])
        + tail,
        alpha=float(report["alpha"]), log_u_over_l=_log_span(report), opt=opt.objective,
        opt_bound=opt.bound, opt_status=opt.status, opt_s=opt.solve_s, lp=lp.bound,
        lp_s=lp.solve_s, tail=tail, factors=factors, lp_pooled=pooled.bound)


def ratio_study(n_instances: int, *, jobs: int = 10, slots: int = 10,
                servers: Sequence[int] = (3, 6, 9, 12),
                priorities: Sequence[tuple[float, float]] = ((1.0, 100.0),), seed: int = 0,
                policies: Sequence[str] | None = None,
                estimate_factors: Sequence[float] = (), time_limit: float = 60.0,
                progress: Callable[[RatioRow], None] | None = None) -> list[RatioRow]:
    """``n_instances`` Fig. 5 instances per (server count, priority range), each measured.

    Instances come from :func:`psched.traces.synth.fig5_instance` with
    :func:`instance_seed` seeds: the same arguments give the same rows.
    """
    rows = []
    for prio in priorities:
        for n in servers:
            for i in range(n_instances):
                s = instance_seed(seed, n, prio, i)
                specs, cluster = fig5_instance(n, seed=s, priority=prio, n_jobs=jobs,
                                               slots=slots)
                row = ratio_instance(specs, cluster, slots, servers=n, priority=prio, seed=s,
                                     policies=policies, estimate_factors=estimate_factors,
                                     time_limit=time_limit)
                log.info("ratio: n=%d prio=%s seed=%d OPT/OASiS=%.3f (MILP %.2fs)",
                         n, prio, s, row.ratio, row.opt_s)
                if progress is not None:
                    progress(row)
                rows.append(row)
    return rows


def _stats(x: np.ndarray) -> dict[str, float]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"n": 0, "median": math.nan, "p90": math.nan, "max": math.nan,
                "min": math.nan, "mean": math.nan}
    return {"n": int(x.size), "median": float(np.median(x)),
            "p90": float(np.percentile(x, 90)), "max": float(x.max()),
            "min": float(x.min()), "mean": float(x.mean())}


def summarise(rows: Sequence[RatioRow]) -> dict[str, Any]:
    """Distribution of OPT/OASiS, certificate tightness and solve times, overall and by n."""
    def block(rs: Sequence[RatioRow]) -> dict[str, Any]:
        opt = np.array([r.opt for r in rs])
        got = np.array([r.utility.get("oasis", 0.0) for r in rs])
        cert = np.array([r.certificate for r in rs])
        with np.errstate(divide="ignore", invalid="ignore"):
            return {
                "instances": len(rs),
                "proven_optimal": sum(r.opt_status == "optimal" for r in rs),
                "ratio": _stats(np.array([r.ratio for r in rs])),
                "bound_over_opt": _stats(cert / opt),
                "bound_over_achieved": _stats(cert / got),
                "sharp_over_opt": _stats(np.array([r.certificate_sharp for r in rs]) / opt),
                "sharp_over_achieved": _stats(
                    np.array([r.certificate_sharp for r in rs]) / got),
                "lp_over_opt": _stats(np.array([r.lp for r in rs]) / opt),
                "lp_pooled_over_opt": _stats(np.array([r.lp_pooled for r in rs]) / opt),
                "two_alpha": _stats(np.array([2 * r.alpha for r in rs])),
                "opt_s": _stats(np.array([r.opt_s for r in rs])),
                "policy_over_opt": {
                    p: _stats(np.array([r.utility.get(p, np.nan) for r in rs]) / opt)
                    for p in rs[0].utility} if rs else {},
            }
    out: dict[str, Any] = {"all": block(rows)}
    for n in sorted({r.servers for r in rows}):
        out[f"servers={n}"] = block([r for r in rows if r.servers == n])
    return out


def write_csv(rows: Sequence[RatioRow], path: str | Path) -> None:
    """One CSV row per instance (:meth:`RatioRow.to_row`), columns in first-seen order."""
    flat = [r.to_row() for r in rows]
    cols: list[str] = []
    for f in flat:
        cols += [k for k in f if k not in cols]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(flat)


def read_csv(path: str | Path) -> list[RatioRow]:
    """Rows written by :func:`write_csv`, back as :class:`RatioRow` (for re-plotting)."""
    out = []
    with open(path, newline="") as fh:
        for d in csv.DictReader(fh):
            out.append(RatioRow(
                servers=int(d["servers"]),
                priority=(float(d["priority_lo"]), float(d["priority_hi"])),
                seed=int(d["seed"]), jobs=int(d["jobs"]), slots=int(d["slots"]),
                utility={k[8:]: float(v) for k, v in d.items() if k.startswith("utility_")},
                certificate=float(d["certificate"]),
                certificate_recorded=float(d["certificate_recorded"]),
                certificate_sharp=float(d["certificate_sharp"]), alpha=float(d["alpha"]),
                log_u_over_l=float(d["log_u_over_l"]), opt=float(d["opt"]),
                opt_bound=float(d["opt_bound"]), opt_status=d["opt_status"],
                opt_s=float(d["opt_s"]), lp=float(d["lp"]), lp_s=float(d["lp_s"]),
                tail=float(d["tail"]), lp_pooled=float(d.get("lp_pooled") or math.nan),
                factors={float(k[7:]): float(v) for k, v in d.items()
                         if k.startswith("oasis_x")}))
    return out


def compare_jobs(specs: Sequence[JobSpec], cluster: Cluster, horizon: int,
                 time_limit: float = 60.0) -> list[dict[str, Any]]:
    """Job by job, what OASiS did and what the offline optimum does (a worked instance)."""
    res = simulate(specs, cluster, make_policy("oasis"), horizon)
    jobs = [j for j in (resolve_job(s, cluster.slot_seconds, horizon) for s in specs)
            if j.window > 0]
    opt = solve_offline(jobs, cluster, horizon, time_limit=time_limit,
                        known=_total(res) - window_tail(jobs, horizon), incumbent=res.allocations)
    out = []
    for rec in res.records.values():
        j, jid = rec.job, rec.job.job_id
        done = opt.completion.get(jid)
        out.append({
            "job": jid, "arrival": j.arrival, "work": j.work, "max_workers": j.max_workers,
            "gpu": j.spec.worker_demand.gpu, "fastest": j.fastest, "window": j.window,
            "f_fastest": j.utility_at(j.fastest),
            "oasis_admitted": rec.admitted, "oasis_payoff": rec.payoff,
            "oasis_done": rec.completion, "oasis_utility": rec.utility,
            "opt_done": done, "opt_utility": opt.utility.get(jid, 0.0),
        })
    return out
