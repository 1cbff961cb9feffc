"""OASiS as a policy: online primal-dual admission and irrevocable scheduling (paper Alg. 1).

On each arrival the policy prices the job's window at the current committed usage
(:mod:`psched.oasis.prices`), finds the best schedule exactly (:func:`psched.oasis.solve_fast`),
and admits the job iff its payoff ``mu = f(d) - priced cost`` is positive; the schedule is then
committed for good, the usage (hence the prices) updated. ``plan`` only reads the commitments.
At the end, :meth:`OasisPolicy.report` gives the dual certificate (19).

Options
-------
price_source : ``"hindsight"`` (U, L from the whole trace, ``RunContext.known_jobs``),
    ``"history"`` (from ``RunContext.history_jobs``) or ``"fixed"`` (explicit ``u_worker``,
    ``l_worker``, ``u_ps``, ``l_ps``).
estimate_factor : scales U with L fixed (the paper's Fig. 6); 1.0 = exact.
method : ``"fast"`` (default) or ``"literal"`` (the paper's DP; slow, for comparison).
certificate : compute the dual certificate in :meth:`OasisPolicy.report` (default True; it
    costs a few exact searches per job at the end of the run).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from psched.core.model import Alloc, Cluster, Decision, Job, SlotPlan
from psched.core.policy import RunContext, View, register_policy
from psched.oasis.dual import dual_objective, unscale
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import Ledger
from psched.oasis.literal import solve_literal
from psched.oasis.prices import PriceParams, fixed_params, params_from_jobs
from psched.oasis.schedule import placement_tables, schedule_allocs, slot_costs

__all__ = ["REJECT_PAYOFF", "OasisPolicy"]

#: Rejection reason: the best payoff is not positive (``Decision.payoff`` is then 0).
REJECT_PAYOFF = "payoff<=0"

log = logging.getLogger(__name__)

_SOLVERS = {"fast": solve_fast, "literal": solve_literal}
_SOURCES = ("hindsight", "history", "fixed")


@register_policy("oasis")
class OasisPolicy:
    """OASiS (Bao et al., INFOCOM 2018), exact best-schedule search, dual certificate."""

    name = "oasis"
    commits_on_arrival = True

    def __init__(
        self,
        price_source: str = "hindsight",
        estimate_factor: float = 1.0,
        u_worker: float | Mapping[str, float] | None = None,
        l_worker: float | None = None,
        u_ps: float | Mapping[str, float] | None = None,
        l_ps: float | None = None,
        method: str = "fast",
        certificate: bool = True,
    ) -> None:
        if price_source not in _SOURCES:
            raise ValueError(f"price_source must be one of {_SOURCES}, got {price_source!r}")
        if method not in _SOLVERS:
            raise ValueError(f"method must be one of {sorted(_SOLVERS)}, got {method!r}")
        factor = float(estimate_factor)
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"estimate_factor must be positive, got {estimate_factor!r}")
        if price_source == "fixed" and None in (u_worker, l_worker, u_ps, l_ps):
            raise ValueError("price_source='fixed' needs u_worker, l_worker, u_ps and l_ps")
        self.price_source = price_source
        self.estimate_factor = factor
        self._fixed = (u_worker, l_worker, u_ps, l_ps)
        self._solve = _SOLVERS[method]
        self.method = method
        self.certificate = bool(certificate)
        self.params: PriceParams | None = None
        self.ledger: Ledger | None = None
        self._schedules: dict[str, dict[int, Alloc]] = {}
        self._jobs: dict[str, Job] = {}  # jobs with commitments, for release
        #: per job, its arrival's decision: (job, recorded payoff in cost units); a later
        #: re-decision of its work left (a live service: the job ran behind) is the same job
        #: of the instance, not another dual term
        self._decided: dict[str, tuple[Job, float]] = {}
        #: per admitted job, its utility at the completion its latest commitment plans
        self._committed: dict[str, float] = {}
        self._report: dict[str, Any] | None = None

    def start(self, ctx: RunContext) -> None:
        if self.price_source == "fixed":
            u_w, l_w, u_p, l_p = self._fixed
            assert u_w is not None and u_p is not None and l_w is not None and l_p is not None
            params = fixed_params(u_w, float(l_w), u_p, float(l_p))
        else:
            jobs = ctx.known_jobs if self.price_source == "hindsight" else ctx.history_jobs
            if not jobs:
                raise ValueError(f"price_source={self.price_source!r} needs "
                                 f"{'known' if self.price_source == 'hindsight' else 'history'}"
                                 " jobs in the run context")
            try:
                params = params_from_jobs(jobs, ctx.cluster, ctx.horizon, self.price_source)
            except ValueError:
                if self.price_source != "hindsight":
                    raise
                # the whole trace has no job that could earn anything: flat unit prices
                log.warning("oasis: no job in the trace can earn utility; flat prices")
                params = fixed_params(1.0, 1.0, 1.0, 1.0)
        if self.estimate_factor != 1.0:
            params = params.scaled(self.estimate_factor)
        self.params = params
        self.ledger = Ledger(ctx.cluster, ctx.horizon, params)
        self._schedules = {}
        self._jobs = {}
        self._decided = {}
        self._committed = {}
        self._report = None

    def on_arrival(self, job: Job, view: View) -> Decision:
        ledger = self._ledger()
        self._report = None
        inp = ledger.inputs(job, start=view.t)
        if inp.n_slots == 0:
            self._decided.setdefault(job.job_id, (job, 0.0))
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0)
        tables = placement_tables(inp)
        if self._solve is solve_fast:
            best = solve_fast(inp, 0.0, costs=slot_costs(inp, tables))
        else:
            best = self._solve(inp, 0.0)
        if best.counts is None:
            self._decided.setdefault(job.job_id, (job, 0.0))
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0)
        schedule = schedule_allocs(inp, best.counts, tables)
        ledger.commit(job, schedule)
        self._schedules[job.job_id] = schedule
        self._jobs[job.job_id] = job
        self._decided.setdefault(job.job_id, (job, best.payoff))
        done = best.completion
        assert done is not None
        self._committed[job.job_id] = job.utility_at(inp.start + done - job.arrival + 1)
        return Decision(admitted=True, payoff=unscale(best.payoff, ledger.log_scale),
                        schedule=dict(schedule), promised=max(schedule))

    def on_cluster_change(self, cluster: Cluster) -> None:
        """Servers joined (``cluster`` extends the old one): they are priced from zero usage
        from now on; commitments and the price parameters U, L stay."""
        self._ledger().grow(cluster)
        self._report = None

    def restore(self, job: Job, decision: Decision) -> None:
        """Re-apply a decision this policy made before (a restarted service replaying its
        journal): commit ``decision.schedule`` as it was, whatever the current prices would
        choose now, and record its payoff for the dual certificate. The prices, commitments
        and certificate are then those of the original run, even if deciding again would
        differ (a solver time limit, another software version). O(schedule entries).
        """
        ledger = self._ledger()
        self._report = None
        payoff = decision.payoff or 0.0
        scaled = math.exp(math.log(payoff) - ledger.log_scale) if payoff > 0 else 0.0
        self._decided.setdefault(job.job_id, (job, scaled if decision.admitted else 0.0))
        if not decision.admitted or not decision.schedule:
            return
        schedule = dict(decision.schedule)
        ledger.commit(job, schedule)
        self._schedules[job.job_id] = schedule
        self._jobs[job.job_id] = job
        self._committed[job.job_id] = job.utility_at(max(schedule) - job.arrival + 1)

    def release(self, job_id: str, t: int) -> None:
        """Forget a job's commitments from slot ``t`` on: they leave the ledger's usage, so
        prices fall back (a live service: the job finished early, or it is re-decided into
        capacity others freed, or measured slower than its schedule and given more on idle
        capacity: :mod:`psched.core.keeping`). Not part of the paper's algorithm; with
        reality as planned the simulator never calls it. O(schedule entries)."""
        sched = self._schedules.get(job_id)
        job = self._jobs.get(job_id)
        if not sched or job is None:
            return
        future = {s: a for s, a in sched.items() if s >= t}
        if future:
            self._ledger().release(job, future)
            self._report = None
        for s in future:
            del sched[s]
        if not sched:
            del self._schedules[job_id]

    def plan(self, view: View) -> SlotPlan:
        out: dict[str, Alloc] = {}
        for job_id in view.active:
            sched = self._schedules.get(job_id)
            if sched is None:
                continue
            alloc = sched.pop(view.t, None)
            if alloc is not None:
                out[job_id] = alloc
            if not sched or max(sched) < view.t:
                del self._schedules[job_id]
        return out

    def price_bounds(self) -> dict[str, Any] | None:
        """U and L in force (:class:`~psched.core.policy.PricedPolicy`), None before
        :meth:`start`."""
        return None if self.params is None else self.params.bounds()

    def report(self) -> dict[str, Any]:
        if self._report is not None:
            return dict(self._report)
        if self.ledger is None or self.params is None:
            return {}
        out: dict[str, Any] = (dual_objective(self.ledger, list(self._decided.values()))
                               if self.certificate else {})
        achieved = sum(self._committed.values())
        out["committed_utility"] = achieved
        if self.certificate:
            out["certified_ratio"] = out["dual_bound"] / achieved if achieved > 0 else None
        out["alpha"] = self.params.alpha
        out["two_alpha"] = 2.0 * self.params.alpha
        out["estimate_factor"] = self.estimate_factor
        out["method"] = self.method
        out.update(self.params.to_dict())
        self._report = out
        return dict(out)

    def _ledger(self) -> Ledger:
        if self.ledger is None:
            raise RuntimeError("OasisPolicy.start was not called")
        return self.ledger
