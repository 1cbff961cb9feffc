"""The ``oasis-rp`` policy: the round of arrivals and boundaries over one
:class:`~psched.policies.oasis_rp.state.RunState`; each mechanism is its own module (the
package docstring)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from psched.core.model import Alloc, Cluster, Decision, Job, SlotPlan, ceil_eps
from psched.core.policy import RunContext, View, register_policy
from psched.oasis.dual import dual_objective
from psched.oasis.prices import PriceParams, fixed_params, params_from_jobs
from psched.policies.oasis_rp import restore as journal
from psched.policies.oasis_rp.admission import (
    REJECT_DENSITY,
    clearing_density,
    job_size,
    pool_totals,
)
from psched.policies.oasis_rp.ahead import work_ahead
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.estimates import LocalFloor, OnlineBounds
from psched.policies.oasis_rp.observer import Observer
from psched.policies.oasis_rp.plans import Found
from psched.policies.oasis_rp.promises import REJECT_PAYOFF, completion_utility, promise_for
from psched.policies.oasis_rp.queue import queue_boundary, take_uncommitted
from psched.policies.oasis_rp.repack import pull_one, repack
from psched.policies.oasis_rp.reservations import Reservation
from psched.policies.oasis_rp.state import RunState
from psched.policies.oasis_rp.steady import reconcile

__all__ = ["PRICE_KEYS", "PRICE_SOURCES", "PULL_LIMIT", "OasisRpPolicy"]

#: most jobs pulled forward per boundary, tightest promise first
PULL_LIMIT = 64
#: the keys of ``prices`` (``price_source="fixed"``): U and L of each pool
PRICE_KEYS = ("u_worker", "l_worker", "u_ps", "l_ps")
#: where U, L and the density floor come from
PRICE_SOURCES = ("online", "history", "hindsight", "fixed")

log = logging.getLogger(__name__)


@register_policy("oasis-rp")
class OasisRpPolicy:
    """OASiS admission, a promise at the commit point, and plans revised within promises.

    Parameters
    ----------
    price_source : ``"online"`` (the default: U, L and the density floor estimated from the
        jobs that have arrived,
        :mod:`~psched.policies.oasis_rp.estimates`), ``"history"`` (from the run context's
        history jobs), ``"hindsight"`` (from the whole trace, jobs not yet arrived included:
        an oracle, for comparison) or ``"fixed"``.
    estimate_factor : multiplies U and L's estimates (> 0).
    prices : for ``"fixed"``: a mapping with the keys of :data:`PRICE_KEYS` (each U a number
        or a mapping by resource; each L a number), the service's ``--prices``.
    certificate : compute the dual certificate in :meth:`report`.
    density_floor : hold, rather than admit, a job that earns less than this times the
        clearing density per unit of its size (0: no floor;
        :mod:`~psched.policies.oasis_rp.admission`; online, the recent arrivals' clearing
        density, :class:`~psched.policies.oasis_rp.estimates.LocalFloor`).
    promise_rtol : promise the latest slot within this relative utility of the planned
        completion's (in [0, 1); :mod:`~psched.policies.oasis_rp.promises`).
    repack_gap : re-pack for an arrival whose best schedule earns less than ``1 - gap`` of
        its utility at the fastest duration (in (0, 1]; :mod:`~psched.policies.oasis_rp.repack`).
    commit_margin : slots of slack a promise keeps when it is made at the commit point
        (:mod:`~psched.policies.oasis_rp.promises`): 0, the last boundary that can keep it,
        for an executor that does what is planned (simulation); the live service uses 1.

    A job that is not admitted on arrival is held and searched again at every boundary
    while its window is open, and an admitted job is uncommitted, searched again with them,
    until its commit point (:mod:`~psched.policies.oasis_rp.queue`,
    :mod:`~psched.policies.oasis_rp.promises`).
    """

    name = "oasis-rp"
    #: plans change after admission, so the loop and the service treat it as re-planning:
    #: ``plan`` says what runs in each slot (a revised plan is a resize at the next boundary),
    #: and decision time is per event slot (arrivals plus the boundary's revisions)
    commits_on_arrival = False

    def __init__(
        self,
        price_source: str = "online",
        estimate_factor: float = 1.0,
        prices: Mapping[str, float | Mapping[str, float]] | None = None,
        certificate: bool = True,
        density_floor: float = 0.5,
        promise_rtol: float = 0.3,
        repack_gap: float = 0.05,
        commit_margin: int = 0,
    ) -> None:
        if price_source not in PRICE_SOURCES:
            raise ValueError(f"price_source must be one of {', '.join(PRICE_SOURCES)}, "
                             f"got {price_source!r}")
        if prices is not None and set(prices) != set(PRICE_KEYS):
            raise ValueError(f"prices must have the keys {', '.join(PRICE_KEYS)}, "
                             f"got {sorted(prices)!r}")
        if price_source == "fixed" and prices is None:
            raise ValueError(f"price_source='fixed' needs prices ({', '.join(PRICE_KEYS)})")
        factor = float(estimate_factor)
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"estimate_factor must be positive, got {estimate_factor!r}")
        if not (density_floor >= 0.0 and math.isfinite(density_floor)):
            raise ValueError(f"density_floor must be >= 0, got {density_floor!r}")
        if not 0.0 <= promise_rtol < 1.0:
            raise ValueError(f"promise_rtol must be in [0, 1), got {promise_rtol!r}")
        if not 0.0 < repack_gap <= 1.0:
            raise ValueError(f"repack_gap must be in (0, 1], got {repack_gap!r}")
        if isinstance(commit_margin, bool) or not isinstance(commit_margin, int) \
                or commit_margin < 0:
            raise ValueError(f"commit_margin must be an integer >= 0, got {commit_margin!r}")
        self.price_source = price_source
        self.estimate_factor = factor
        self.prices = None if prices is None else dict(prices)
        self.certificate = bool(certificate)
        self.density_floor = float(density_floor)
        self.promise_rtol = float(promise_rtol)
        self.repack_gap = float(repack_gap)
        self.commit_margin = commit_margin
        #: a test's or benchmark's :class:`~psched.policies.oasis_rp.observer.Observer`, or
        #: None (the default: nothing is timed or told)
        self.observer: Observer | None = None
        self.params: PriceParams | None = None
        self.ledger: PlanLedger | None = None
        self._st: RunState | None = None
        self._rho = 0.0  # density_floor x the clearing density (0: no floor)
        self._floor_cluster: Cluster | None = None  # sizes are measured against it
        self._totals: tuple[np.ndarray, np.ndarray] | None = None
        self._sizes: dict[str, float] = {}  # job_size per job id, on _floor_cluster
        #: online estimates (``price_source="online"``), None otherwise
        self._bounds: OnlineBounds | None = None
        self._local: LocalFloor | None = None
        self._boundary_ms: list[float] = []
        self._report: dict[str, Any] | None = None

    # -- set-up -------------------------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        self._bounds = self._local = None
        self._sizes = {}
        if self.price_source == "online":  # flat until the first arrival is observed
            self._start(ctx, fixed_params(1.0, 1.0, 1.0, 1.0))
            self._bounds = OnlineBounds(ctx.cluster, ctx.horizon)
            if self.density_floor > 0.0:
                self._floor_cluster, self._totals = ctx.cluster, pool_totals(ctx.cluster)
                self._local = LocalFloor(ctx.cluster)
            return
        if self.price_source == "fixed":
            assert self.prices is not None
            self._start(ctx, fixed_params(*(self.prices[k] for k in PRICE_KEYS)))  # type: ignore[arg-type]
            return
        jobs = ctx.known_jobs if self.price_source == "hindsight" else ctx.history_jobs
        if not jobs:
            raise ValueError(f"price_source={self.price_source!r} needs jobs in the run context")
        try:
            params = params_from_jobs(jobs, ctx.cluster, ctx.horizon, self.price_source)
        except ValueError:
            if self.price_source != "hindsight":
                raise
            log.warning("oasis-rp: no job in the trace can earn utility; flat prices")
            params = fixed_params(1.0, 1.0, 1.0, 1.0)
        self._start(ctx, params)
        if self.density_floor > 0.0:
            self._floor_cluster, self._totals = ctx.cluster, pool_totals(ctx.cluster)
            self._rho = self.density_floor * clearing_density(jobs, ctx.cluster, ctx.horizon)

    def _start(self, ctx: RunContext, params: PriceParams) -> None:
        if self.estimate_factor != 1.0:
            params = params.scaled(self.estimate_factor)
        self.params = params
        self.ledger = PlanLedger(ctx.cluster, ctx.horizon, params)
        self._st = RunState(book=self.ledger, cluster=ctx.cluster,
                            commit_margin=self.commit_margin)
        self._boundary_ms = []
        self._report = None

    def _state(self) -> RunState:
        if self._st is None:
            raise RuntimeError("OasisRpPolicy.start was not called")
        self._report = None  # the state may change: the report is computed again
        return self._st

    def on_cluster_change(self, cluster: Cluster) -> None:
        """Servers joined: priced from zero usage from now on."""
        st = self._state()
        st.book.grow(cluster)
        st.cluster, st.dens = cluster, {}
        st.dirty = True
        if self._bounds is not None:
            self._bounds.grow(cluster)
            self._set_params(st)

    def _observe(self, st: RunState, job: Job) -> None:
        """Online estimates: take the arrival ``job`` in (nothing with other price sources)."""
        if self._bounds is not None and self._bounds.observe(job):
            self._set_params(st)
        if self._local is not None:
            self._local.observe(job)

    def _set_params(self, st: RunState) -> None:
        """The book prices with the online bounds from now on (scaled by
        ``estimate_factor``)."""
        assert self._bounds is not None
        params = self._bounds.params()
        if params is None:
            return
        if self.estimate_factor != 1.0:
            params = params.scaled(self.estimate_factor)
        self.params = st.book.params = params

    # -- arrivals -----------------------------------------------------------------------------
    def on_arrival(self, job: Job, view: View) -> Decision:
        st = self._state()
        self._observe(st, job)
        st.decided[job.job_id] = (job, 0.0)
        if view.t < job.last_slot:  # decided with the slot's others, densest first
            st.batch.append(job.job_id)
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0, hold=True)
        return self._arrive(st, job, view.t)

    def _arrive(self, st: RunState, job: Job, t: int) -> Decision:
        """Decide the arrival of ``job`` in slot ``t``: the floor, the search, a re-pack if
        its best is poor, then a reservation or a promise; a job that finds nothing is held."""
        found = st.search_new(job, t)
        if self._below_floor(job, found, t):
            return Decision(admitted=False, reason=REJECT_DENSITY, payoff=0.0, hold=True)
        base = completion_utility(job, found.completion)
        if not found.schedule or base < (1.0 - self.repack_gap) * job.utility_at(job.fastest):
            got = repack(st, job, t, base)
            if got.schedule:
                found = got
            elif found.schedule:
                st.place(job, found.schedule)
        elif found.schedule:
            st.place(job, found.schedule)
        if not found.schedule:
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0, hold=True)
        if min(found.schedule) > t:  # a reservation until it starts
            plan = st.plans.pop(job.job_id)
            st.soft[job.job_id] = Reservation(job=job, plan=plan, payoff=found.payoff,
                                              density=st.density(job))
            st.stats["soft_reserved"] += 1
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0, hold=True)
        st.decided[job.job_id] = (job, found.payoff)
        return promise_for(st, job, found, self.promise_rtol, t)

    def _below_floor(self, job: Job, found: Found, t: int) -> bool:
        """``job``'s best schedule ``found`` from slot ``t`` (or, with none, its utility at
        the fastest duration) earns less than the density floor times its size. Changes
        nothing but the memo of job sizes."""
        rho = (self.density_floor * self._local.rho(t) if self._local is not None
               else self._rho)
        if rho <= 0.0:
            return False
        best = (completion_utility(job, found.completion) if found.schedule
                else job.utility_at(job.fastest))
        assert self._floor_cluster is not None  # set with the floor, in start
        size = self._sizes.get(job.job_id)
        if size is None:
            size = self._sizes[job.job_id] = job_size(job, self._floor_cluster, self._totals)
        return best < rho * size

    def admit_held(self, jobs: Sequence[Job], view: View) -> dict[str, Decision]:
        """Decide the held ``jobs`` at the boundary of slot ``view.t``: the queue
        (:func:`~psched.policies.oasis_rp.queue.queue_boundary`), this slot's arrivals among
        them, densest first. Jobs not in the answer stay held. O(arrivals +
        :data:`~psched.policies.oasis_rp.queue.QUEUE_LIMIT`) decisions."""
        st = self._state()
        t = view.t
        left = {j: ceil_eps(view.active[j].remaining) for j in st.uncommitted
                if j in view.active}
        st.overdue &= set(view.active)  # completed (or dropped by the owner): gone
        uncommitted = take_uncommitted(st, left, t)  # searched again in the queue
        reconcile(st, view)  # jobs gone or behind since the last plan free or take room
        seen = self.observer

        def arrive(job: Job) -> Decision:
            if seen is None:
                return self._arrive(st, job, t)
            c0 = time.process_time()
            got = self._arrive(st, job, t)
            seen.decided(job.job_id, time.process_time() - c0)
            return got

        return queue_boundary(st, jobs, t, arrive=arrive,
                              below_floor=lambda job, found: self._below_floor(job, found, t),
                              rtol=self.promise_rtol, left=left, uncommitted=uncommitted,
                              probe=None if seen is None
                              else lambda j, what: seen.queued(t, j, what))

    # -- slot boundaries -----------------------------------------------------------------------
    def plan(self, view: View) -> SlotPlan:
        """The boundary of slot ``view.t``: follow reality, pull jobs forward if plans
        changed, hand idle capacity ahead, then run the plans' slot ``view.t``."""
        c0 = time.process_time()
        st = self._state()
        t = view.t
        reconcile(st, view)
        if st.dirty:
            st.dirty = False
            for j in sorted(st.plans, key=lambda j: (st.promise[j], j))[:PULL_LIMIT]:
                if pull_one(st, j, t, steady=True):
                    st.dirty = True
        work_ahead(st, t, view)
        out: dict[str, Alloc] = {}
        for j in list(st.plans):
            plan = st.plans[j]
            alloc = plan.pop(t, None)
            if alloc is not None:
                st.plans.left[j] -= alloc.n_workers
                if j in view.active:
                    out[j] = alloc
            if not plan:
                del st.plans[j]
        st.ran = dict(out)
        if view.event or self._boundary_ms:
            self._boundary_ms.append((time.process_time() - c0) * 1e3)
        return out

    # -- the live service: revisions journaled, restored after a restart ----------------------
    def current_plans(self) -> dict[str, dict[int, Alloc]]:
        """Every job's current plan (slot -> allocation, slots not yet run), a copy: a live
        service journals what changed (a revision) after each decision and boundary.
        O(plan entries)."""
        return {} if self._st is None else {j: dict(p) for j, p in self._st.plans.items()}

    def boundary_state(self) -> dict[str, Any]:
        """:func:`psched.policies.oasis_rp.restore.boundary_state` of this run (JSON)."""
        return journal.boundary_state(self._state())

    def restore(self, job: Job, decision: Decision) -> None:
        """Re-apply an arrival decision made before (a restarted service replaying its
        journal; :func:`psched.policies.oasis_rp.restore.restore`)."""
        st = self._state()
        self._observe(st, job)
        journal.restore(st, job, decision)

    def restore_held(self, job: Job, decision: Decision) -> None:
        """Re-apply a deferred decision made before at a slot boundary
        (:func:`psched.policies.oasis_rp.restore.restore_held`)."""
        journal.restore_held(self._state(), job, decision)

    def restore_plan(self, job_id: str, t: int, schedule: Mapping[int, Alloc]) -> None:
        """Re-apply a revision made before: from slot ``t`` on, ``job_id`` runs ``schedule``
        (:func:`psched.policies.oasis_rp.restore.restore_plan`)."""
        journal.restore_plan(self._state(), job_id, t, schedule)

    def resume(self, t: int, state: Mapping[str, Any] | None = None) -> None:
        """End of a journal replay at slot ``t``, ``state`` the last boundary state
        (:func:`psched.policies.oasis_rp.restore.resume`)."""
        journal.resume(self._state(), t, state)

    # -- results --------------------------------------------------------------------------------
    def promises(self) -> dict[str, int]:
        """The promised completion slot of every promised job (an uncommitted one has none
        yet)."""
        if self._st is None:
            return {}
        st = self._st
        return {j: p for j, p in st.promise.items() if j not in st.uncommitted}

    def price_bounds(self) -> dict[str, Any] | None:
        """U and L in force (:class:`~psched.core.policy.PricedPolicy`), None before
        :meth:`start`."""
        return None if self.params is None else self.params.bounds()

    def report(self) -> dict[str, Any]:
        if self._report is not None:
            return dict(self._report)
        st = self._st
        if st is None or self.params is None:
            return {}
        out: dict[str, Any] = {}
        if self.certificate:
            out = dual_objective(st.book, list(st.decided.values()))
            out.pop("dual_bound_recorded", None)
        out["promised_utility"] = st.promised_utility
        out["committed_utility"] = st.promised_utility
        if self.certificate:
            achieved = st.promised_utility
            out["certified_ratio"] = out["dual_bound"] / achieved if achieved > 0 else None
        out.update(st.stats)
        ms = np.array(self._boundary_ms) if self._boundary_ms else np.zeros(1)
        out["boundary_ms_p50"] = float(np.percentile(ms, 50))
        out["boundary_ms_p99"] = float(np.percentile(ms, 99))
        out["levers"] = {"price_source": self.price_source,
                         "estimate_factor": self.estimate_factor, "prices": self.prices,
                         "certificate": self.certificate, "density_floor": self.density_floor,
                         "promise_rtol": self.promise_rtol, "repack_gap": self.repack_gap,
                         "commit_margin": self.commit_margin}
        out["alpha"] = self.params.alpha
        out["two_alpha"] = 2.0 * self.params.alpha
        out["estimate_factor"] = self.estimate_factor
        out.update(self.params.to_dict())
        self._report = out
        return dict(out)
