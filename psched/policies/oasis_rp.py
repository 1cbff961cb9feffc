"""``oasis-rp``: OASiS admission with a promise, and plans that may be revised.

On arrival a job is priced and searched as in OASiS (:mod:`psched.policies.oasis`:
exponential prices, an exact best-schedule search) and admitted iff its payoff is positive;
by default each container pays for its own stretch of the price curve (``own_price``, below;
``own_price="off"`` is OASiS's price before the job's usage).
Admission **promises a completion slot** (``Decision.promised``, the ``promised`` column of
``jobs.csv``). Unlike OASiS, how an admitted job runs is only a plan: it may change at later
arrivals and at slot boundaries, but a plan is only ever replaced by one that still completes
the job's remaining work by its promise, so **no promise is ever broken** (in simulation;
on a real executor a job that runs behind is re-planned within its promise if it can be).
Safety is structural: every revision keeps each job's old plan as the fallback and is undone
as a whole unless every job involved has a new plan within its promise.

Levers (constructor options, each can be switched on its own):

repack : (a) when an arriving job finds no schedule, or only one whose utility is below
    ``1 - repack_gap`` of its best (``repack_gap=0.05``), take out the future plans of the
    admitted jobs that use slots of its window (at most ``repack_limit``, most slack first).
    First order: the newcomer takes its best schedule, then each job, tightest promise first,
    keeps its old plan if it still fits, else gets its best schedule within its promise.
    If some job finds none (``repack_second="all"``, default): every job is re-planned as its
    *cheapest* schedule that meets its promise (the exact search with a constant utility:
    prices steer it to idle slots), then the newcomer searches again (``"clash"``: only the
    jobs whose plan shares a slot and server with the newcomer's best move; ``"off"``: no
    second order). ``repack_searches`` caps the searches of one re-pack (default: none).
    Kept only if the newcomer is admitted and the planned utility of all jobs involved rises
    (with ``pull`` on, after pulling the moved jobs forward again); otherwise undone.
    The pulls are skipped, their searches counted as run, when no pull can make the gain
    positive (:mod:`psched.policies.rp_precheck`, ``repack_prechecked``: the same decisions).
latest_promise : (b) promise the latest slot of the window whose utility is at least
    ``1 - promise_rtol`` of the planned completion's (``promise_rtol=0.3``; 0 = the same
    utility: a job whose utility is flat is promised the end of its window), while the plan
    still aims early. This is the slack that re-packing uses.
pull : (c) after a re-pack, and at a slot boundary after reality departed from a plan,
    re-plan jobs to finish earlier where capacity allows (the exact search with the job's own
    utility before its planned completion; kept only when it completes strictly earlier);
    at most ``pull_limit`` jobs per boundary.
reprice : (e) prices follow the current plans (they fall when plans move away); off, they
    follow the high-water mark of planned usage (they never fall, as in OASiS).
plan_late, fill : experimental, off by default (measured, did not pay): plan a job as its
    cheapest schedule within its promise, and re-plan every job at each boundary to use
    idle capacity now.
floor_factor : multiplies the price floor L (>= 1; prices then charge sooner). Default 1.
price_span : caps ``ln(U_min / L)`` per pool by raising L (:mod:`psched.policies.rp_span`):
    prices charge sooner, alike on every trace. Default None (the hindsight L).
defer : (d) deferred admission. A job that finds no schedule with a positive payoff is held
    (``Decision.hold``) instead of rejected; at a later slot boundary, if plans moved since
    (a pull-forward, a re-pack, a job re-planned or gone), each held job whose window is still
    open is searched again from that slot (the exact search at the current prices, its
    utility still counted from its arrival) and admitted, with a promise, if its payoff is
    positive (at most ``defer_limit`` held jobs per boundary, in arrival order). A held job
    never admitted is rejected ``payoff<=0`` when its window closes or the run ends (the
    loop's semantics: :meth:`psched.simulator.SchedulerLoop.admit_held`).
own_price : (f) ``"off"`` (OASiS: each container pays the price before the job's usage),
    ``"integral"`` (each pays the mean price over its own stretch of the price curve) or
    ``"after"`` (the price after it): :mod:`psched.policies.rp_own`. Used for the admission
    searches (arrival, re-pack newcomer, deferred admission); the prices others see and the
    certificate are unchanged.
repack_late : (g) in the re-pack's second order, re-plan each moved job to complete as late
    as its promise allows (:mod:`psched.policies.rp_late`) instead of as its cheapest
    schedule (which, at flat prices, packs it early again): the earliest-deadline order.
    On by default (with ``ahead``, session 8: BENCHMARKS section 11, "Lever (m) ahead").
patience : (h) patient admission (:mod:`psched.policies.rp_patience`; 0 = off, default). An
    arriving job is held while its best schedule from ``patience_lead`` slots later is still
    admissible and earns at least ``1 - patience`` of its utility at arrival; at the first
    boundary where that fails it is decided as on arrival (re-pack included). Later
    arrivals are decided first meanwhile. Measured not to pay (BENCHMARKS section 11);
    a live service journals the patient jobs in :meth:`boundary_state`.
density_floor : (i) admission floor per unit of capacity (:mod:`psched.policies.rp_density`;
    default 0.5, 0 = off): an arrival whose best schedule (before any re-pack; with none, its
    utility at the fastest duration) earns less than ``density_floor`` times the clearing
    density of the price jobs (hindsight or history; none with fixed prices) per unit of its
    size is rejected (``density<floor``). No floor when those jobs all fit the horizon.
fast_search : the run-compressed exact search (:mod:`psched.policies.rp_search`, default);
    off, the reference composition it is tested against. The same decisions either way.
batch : decide the arrivals of a slot together, densest first (utility per unit of dominant
    cluster share over the job's work, :mod:`psched.policies.rp_batch`), instead of in the
    order they came: each is held on arrival and decided at the same slot's boundary
    (:meth:`admit_held`), before anything runs. On by default (a live service journals
    each arrival as a ``hold`` and its decision as ``deferred``; a restart keeps the
    slot's undecided arrivals: :meth:`boundary_state`).
soft : an arrival whose best schedule does not start in its arrival slot is held with that
    schedule as a reservation (in the book) and admitted, with its promise, at the boundary
    of the slot it starts in; until then a denser arrival that finds no room may move or
    take reservations (:mod:`psched.policies.rp_soft`). On by default (a live service
    journals the reservations in :meth:`boundary_state`; a restart puts them back).
ahead : at each slot boundary, hand the capacity of the slot that no plan uses to the
    admitted jobs (least slack first), each taking as many worker-slots from the end of its
    plan (:mod:`psched.policies.rp_ahead`): plans complete no later, the later slots they
    free are there for the next arrivals (SRTF's work-conserving move, within promises).
    ``ahead_held``: the same for reservations (``soft``), densest first: one that can start
    in the idle capacity now starts now and is admitted at this boundary with its promise.
    ``ahead`` is on by default (with ``repack_late``: the pair is at or above every rival on
    every row of BENCHMARKS section 10, ElasticFlow cluster04 included), ``ahead_held`` off
    (BENCHMARKS section 11, "Lever (m) ahead").
repack_quantile : try a re-pack only for an arrival whose density is at least this quantile
    of the price jobs' densities (:mod:`psched.policies.rp_guard`; default 0.1, 0 = every
    arrival). Session 9, measured on every row (BENCHMARKS section 11, "Other mapping
    draws"): 0.1 is at or above 0 on 29 of 33 cells, keeps every row above every rival.
steady : when reality departs from the plans (a real executor), re-plan jobs off their
    plans tightest promise first, keep a running job running as it runs (re-plan only the
    rest of its work, within its promise), and never stop or resize a running job to pull it
    earlier (:mod:`psched.policies.rp_steady`).
    Default on; with reality as planned it changes nothing.
effort : bounded effort at trace scale (:mod:`psched.policies.rp_effort`; None = off, the
    default): a re-pack or a bump moves at most ``effort_moves`` jobs (default 32, those
    clashing most with the newcomer's good slots), and runs only while a bank of searches
    (at most ``effort_bank``, full at the start), credited ``effort`` per arrival, holds its
    worst case (a live service journals the bank in :meth:`boundary_state`; a restart takes
    it back); counted in the report
    (``effort_trimmed``, ``effort_skipped``, ``effort_searches``).
effort_slots : a bank of slot-searches (:class:`psched.policies.rp_effort.SlotBank`;
    default 50, None = off): a re-pack or a bump runs with the jobs whose worst-case search
    span (to their promises) the bank holds, taken by clash; credited ``effort_slots`` per
    arrival, full at ``effort_slot_bank``; counted (``effort_slot_trimmed``,
    ``effort_slot_skipped``, ``effort_slot_spent``); journaled in :meth:`boundary_state`.
    ``effort_slots=50`` leaves every run of BENCHMARKS section 10 bit-equal (the 122 small
    cells, oasis-100..400 seeds 2-4 and ef-cluster04, ``benchmarks/rp_same_runs.py``) and
    bounds the re-packs of the 80,000-job run (128 s quiet, -3.1% utility against 100's 272 s;
    section 11, "Session 10: the slot bank's credit").
effort_waste : a bank of the searches of undone re-packs and bumps
    (:class:`psched.policies.rp_effort.WasteBank`; None = off, the default): a lever runs only
    while the bank holds its worst case; counted (``effort_waste_skipped``,
    ``effort_waste_spent``). Measured not to pay on its own (section 11, "Session 9").
repack_second_bank : a bank of second-order attempts (:mod:`psched.policies.rp_second`;
    None = off, the default): the second order of a re-pack runs only while the bank,
    credited ``repack_second_bank`` per arrival, held at most ``repack_second_cap``, holds
    one attempt; each second order whose re-pack is undone takes one out. Counted
    (``second_tried``, ``second_kept``, ``second_skipped``); journaled in
    :meth:`boundary_state`. Decision-changing where it binds (trace scale).

Prices: ``price_source`` ``"hindsight"`` (U, L from the whole trace), ``"history"`` or
``"fixed"`` (``u_worker``, ``l_worker``, ``u_ps``, ``l_ps``: the service's ``--prices``).
In the live service (:mod:`ray_cluster.service.revisions`) every changed plan is journaled
(:meth:`OasisRpPolicy.current_plans`, :meth:`OasisRpPolicy.boundary_state`) and a restart
re-applies promises, plans and revisions (:meth:`OasisRpPolicy.restore`,
:meth:`OasisRpPolicy.restore_plan`, :meth:`OasisRpPolicy.resume`).

The certificate (:func:`psched.oasis.dual.dual_objective`) is computed as for OASiS at the
final prices; weak duality holds for any non-negative prices, and every ``mu_i`` is recomputed
there by the exact search, so ``dual_bound`` bounds the offline optimum for this run too.
(The recorded payoffs are not dual feasible here: prices can fall. ``dual_bound_recorded`` is
therefore not reported.)
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from psched.model import Alloc, Cluster, Decision, Job, SlotPlan, ceil_eps
from psched.oasis.dual import dual_objective, unscale
from psched.policies.base import RunContext, View, register_policy
from psched.policies.rp_ahead import grow_now
from psched.policies.rp_batch import FitCounts, density, density_order
from psched.policies.rp_book import (
    Found,
    PlanLedger,
    latest_same_utility,
    raise_floor,
    search,
    work_of,
)
from psched.policies.rp_density import REJECT_DENSITY, clearing_density, job_size, pool_totals
from psched.policies.rp_effort import (
    BANK_SEARCHES,
    BANK_SLOTS,
    BANK_WASTE,
    Bank,
    Effort,
    SlotBank,
    WasteBank,
    clash_rank,
    repack_cost,
    search_span,
)
from psched.policies.rp_guard import density_quantile
from psched.policies.rp_late import search_latest
from psched.policies.rp_own import OWN_PRICES, search_own
from psched.policies.rp_patience import worth_waiting
from psched.policies.rp_precheck import gain_bound, pull_spans
from psched.policies.rp_search import Schedule
from psched.policies.rp_second import SECOND_CAP, SecondBank
from psched.policies.rp_soft import Reservation, Reservations
from psched.policies.rp_span import cap_span
from psched.policies.rp_steady import continue_now, keep_now, keeps_running, tightest_first
from psched.prices import PriceParams, fixed_params, params_from_jobs

__all__ = ["REJECT_PAYOFF", "OasisRpPolicy"]

#: Rejection reason, as for ``oasis``: no schedule with a positive payoff, even after re-packing.
REJECT_PAYOFF = "payoff<=0"

log = logging.getLogger(__name__)


@register_policy("oasis-rp")
class OasisRpPolicy:
    """OASiS with promises and revisable plans (levers: repack, latest_promise, pull, reprice,
    own_price, defer, repack_late)."""

    name = "oasis-rp"
    #: plans change after admission, so the loop and the service treat it as re-planning:
    #: ``plan`` says what runs in each slot (a revised plan is a resize at the next boundary),
    #: and decision time is per event slot (arrivals plus the boundary's revisions)
    commits_on_arrival = False
    #: prices with U and L: ``price_source`` may be ``"fixed"`` (``u_worker``, ``l_worker``,
    #: ``u_ps``, ``l_ps``) or ``"history"`` (a live service has no hindsight)
    takes_price_bounds = True

    def __init__(
        self,
        price_source: str = "hindsight",
        estimate_factor: float = 1.0,
        repack: bool = True,
        latest_promise: bool = True,
        pull: bool = True,
        reprice: bool = True,
        plan_late: bool = False,
        fill: bool = False,
        promise_rtol: float = 0.3,
        floor_factor: float = 1.0,
        repack_gap: float = 0.05,
        repack_second: str = "all",
        repack_searches: int | None = None,
        repack_limit: int = 64,
        pull_limit: int = 64,
        certificate: bool = True,
        steady: bool = True,
        u_worker: float | Mapping[str, float] | None = None,
        l_worker: float | None = None,
        u_ps: float | Mapping[str, float] | None = None,
        l_ps: float | None = None,
        defer: bool = False,
        defer_limit: int = 64,
        own_price: str = "integral",
        repack_late: bool = True,
        own_scope: str = "admission",
        fast_search: bool = True,
        patience: float = 0.0,
        patience_lead: int = 1,
        density_floor: float = 0.5,
        batch: bool = True,
        soft: bool = True,
        price_span: float | None = None,
        ahead: bool = True,
        ahead_held: bool = False,
        effort: float | None = None,
        effort_moves: int = 32,
        effort_bank: float = BANK_SEARCHES,
        repack_quantile: float = 0.1,
        effort_slots: float | None = 50.0,
        effort_slot_bank: float = BANK_SLOTS,
        effort_waste: float | None = None,
        effort_waste_bank: float = BANK_WASTE,
        repack_second_bank: float | None = None,
        repack_second_cap: float = SECOND_CAP,
    ) -> None:
        if price_source not in ("hindsight", "history", "fixed"):
            raise ValueError("price_source must be 'hindsight', 'history' or 'fixed', "
                             f"got {price_source!r}")
        self._fixed = (u_worker, l_worker, u_ps, l_ps)
        if price_source == "fixed" and None in self._fixed:
            raise ValueError("price_source='fixed' needs u_worker, l_worker, u_ps and l_ps")
        factor = float(estimate_factor)
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"estimate_factor must be positive, got {estimate_factor!r}")
        if repack_limit < 1 or pull_limit < 0:
            raise ValueError("repack_limit must be >= 1 and pull_limit >= 0")
        self.price_source = price_source
        self.estimate_factor = factor
        if not (floor_factor >= 1.0 and math.isfinite(floor_factor)):
            raise ValueError(f"floor_factor must be >= 1, got {floor_factor!r}")
        self.floor_factor = float(floor_factor)
        self.repack = bool(repack)
        self.latest_promise = bool(latest_promise)
        self.pull = bool(pull)
        self.reprice = bool(reprice)
        self.plan_late = bool(plan_late)
        self.fill = bool(fill)
        if not 0.0 <= promise_rtol < 1.0:
            raise ValueError(f"promise_rtol must be in [0, 1), got {promise_rtol!r}")
        self.promise_rtol = float(promise_rtol)
        self.repack_limit = int(repack_limit)
        if not 0.0 < repack_gap <= 1.0:
            raise ValueError(f"repack_gap must be in (0, 1], got {repack_gap!r}")
        self.repack_gap = float(repack_gap)
        if repack_second not in ("all", "clash", "off"):
            raise ValueError(f"repack_second must be all, clash or off, got {repack_second!r}")
        self.repack_second = repack_second
        if repack_searches is not None and repack_searches < 1:
            raise ValueError(f"repack_searches must be >= 1, got {repack_searches!r}")
        self.repack_searches = repack_searches
        self._budget: int | None = None
        self.pull_limit = int(pull_limit)
        self.certificate = bool(certificate)
        if defer_limit < 1:
            raise ValueError(f"defer_limit must be >= 1, got {defer_limit!r}")
        if own_price not in OWN_PRICES:
            raise ValueError(f"own_price must be one of {OWN_PRICES}, got {own_price!r}")
        self.defer = bool(defer)
        self.defer_limit = int(defer_limit)
        self.own_price = own_price
        self.repack_late = bool(repack_late)
        if own_scope not in ("admission", "all"):
            raise ValueError(f"own_scope must be admission or all, got {own_scope!r}")
        self.own_scope = own_scope
        self.fast_search = bool(fast_search)
        if not 0.0 <= patience < 1.0:
            raise ValueError(f"patience must be in [0, 1), got {patience!r}")
        if patience_lead < 1:
            raise ValueError(f"patience_lead must be >= 1, got {patience_lead!r}")
        self.patience = float(patience)
        if not (density_floor >= 0.0 and math.isfinite(density_floor)):
            raise ValueError(f"density_floor must be >= 0, got {density_floor!r}")
        self.density_floor = float(density_floor)
        self._rho = 0.0  # density_floor x the clearing density (0: no floor)
        #: the cluster at start and its pool capacities: sizes are measured against them
        self._cluster: Cluster | None = None  # the cluster now (servers may join)
        self._floor_cluster: Cluster | None = None
        self._totals: tuple[np.ndarray, np.ndarray] | None = None
        self.patience_lead = int(patience_lead)
        self.batch = bool(batch)
        self.soft = bool(soft)
        self.price_span = None if price_span is None else float(price_span)
        if self.price_span is not None and not (self.price_span > 0
                                                and math.isfinite(self.price_span)):
            raise ValueError(f"price_span must be positive, got {price_span!r}")
        self.steady = bool(steady)
        #: a benchmark's probe, or None (the default: nothing is timed): called as
        #: ``probe(job_id, cpu_s)`` after each decision of a batch with its own CPU seconds
        #: (:meth:`_admit_batch`; the ordering and the boundary's upkeep are not in them)
        self.decision_probe: Callable[[str, float], None] | None = None
        self.ahead = bool(ahead)
        self.ahead_held = bool(ahead_held)
        if not 0.0 <= repack_quantile < 1.0:
            raise ValueError(f"repack_quantile must be in [0, 1), got {repack_quantile!r}")
        self.repack_quantile = float(repack_quantile)
        self._repack_min = 0.0  # the density a re-pack's newcomer needs (repack_quantile)
        self.effort = None if effort is None else float(effort)
        self.effort_moves = int(effort_moves)
        self.effort_bank = float(effort_bank)
        if self.effort is not None:  # checks the three
            Effort(per_arrival=self.effort, moves=self.effort_moves, cap=self.effort_bank)
        self.effort_slots = None if effort_slots is None else float(effort_slots)
        self.effort_slot_bank = float(effort_slot_bank)
        if self.effort_slots is not None:  # checks the two
            SlotBank(per_arrival=self.effort_slots, cap=self.effort_slot_bank)
        self.effort_waste = None if effort_waste is None else float(effort_waste)
        self.effort_waste_bank = float(effort_waste_bank)
        if self.effort_waste is not None:  # checks the two
            WasteBank(per_arrival=self.effort_waste, cap=self.effort_waste_bank)
        self.repack_second_bank = (None if repack_second_bank is None
                                   else float(repack_second_bank))
        self.repack_second_cap = float(repack_second_cap)
        if self.repack_second_bank is not None:  # checks the two
            SecondBank(per_arrival=self.repack_second_bank, cap=self.repack_second_cap)
        self.params: PriceParams | None = None
        self.ledger: PlanLedger | None = None
        self._reset()

    def _reset(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._plans = _Plans()  # job -> {slot -> alloc}, slots >= now
        self._promise: dict[str, int] = {}
        self._patient: dict[str, float] = {}  # held patient job -> its utility at arrival
        self._decided: list[tuple[Job, float]] = []
        self._promised_utility = 0.0
        self._dirty = False
        self._freed = False  # plans moved since the held jobs were last searched
        self._batch: list[str] = []  # held on arrival this slot, decided by admit_held
        self._soft = Reservations()  # held jobs' plans, admitted when they start (soft)
        self._restored: dict[str, Job] = {}  # held jobs replayed from a journal, until resume
        self._ran: dict[str, Alloc] = {}  # jobs that ran in the last planned slot
        self._dens: dict[str, float] = {}  # density per job id, on the cluster now
        self._fits: FitCounts | None = None  # container counts per demand, on that cluster
        self._stats = {"repack_tried": 0, "repack_kept": 0, "repack_moved": 0,
                       "repack_admitted_utility": 0.0,
                       "deferred_admitted": 0, "deferred_searches": 0,
                       "pulled": 0, "filled": 0, "replanned_behind": 0, "promise_at_risk": 0,
                       "kept_running": 0, "patient_admitted": 0, "patient_searches": 0,
                       "soft_reserved": 0, "soft_bumps": 0,
                       "soft_dropped": 0, "ahead_jobs": 0, "ahead_moved": 0,
                       "repack_guarded": 0, "repack_prechecked": 0}
        self._boundary_ms: list[float] = []
        self._report: dict[str, Any] | None = None
        self._searches = 0  # exact searches run (the effort bank debits levers by them)
        self._slots = 0  # slots those searches spanned (the slot bank debits levers by them)
        self._slot_bank = None if self.effort_slots is None else SlotBank(
            per_arrival=self.effort_slots, cap=self.effort_slot_bank)
        self._waste = None if self.effort_waste is None else WasteBank(
            per_arrival=self.effort_waste, cap=self.effort_waste_bank)
        self._effort = None if self.effort is None else Effort(
            per_arrival=self.effort, moves=self.effort_moves, cap=self.effort_bank)
        self._second = None if self.repack_second_bank is None else SecondBank(
            per_arrival=self.repack_second_bank, cap=self.repack_second_cap)

    # -- set-up -------------------------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        if self.price_source == "fixed":
            self._start(ctx, fixed_params(*self._fixed))  # type: ignore[arg-type]
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
        self._repack_min = density_quantile(jobs, ctx.cluster, self.repack_quantile)

    def _start(self, ctx: RunContext, params: PriceParams) -> None:
        if self.estimate_factor != 1.0:
            params = params.scaled(self.estimate_factor)
        if self.floor_factor != 1.0:
            params = raise_floor(params, self.floor_factor)
        if self.price_span is not None:
            params = cap_span(params, self.price_span)
        self.params = params
        self._cluster = ctx.cluster
        self.ledger = PlanLedger(ctx.cluster, ctx.horizon, params, reprice=self.reprice,
                                 fast=self.fast_search)
        self._reset()

    def on_cluster_change(self, cluster: Cluster) -> None:
        """Servers joined: priced from zero usage from now on."""
        self._book().grow(cluster)
        self._cluster = cluster
        self._dens = {}
        self._report = None
        self._dirty = True
        self._freed = True

    # -- arrivals -----------------------------------------------------------------------------
    def on_arrival(self, job: Job, view: View) -> Decision:
        self._book()
        self._report = None
        if self.batch and view.t < job.last_slot:  # decided with the slot's others
            self._batch.append(job.job_id)
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0, hold=True)
        return self._arrive(job, view.t)

    def _arrive(self, job: Job, t: int) -> Decision:
        """Decide the arrival of ``job`` in slot ``t``: search, re-pack, promise."""
        for _, bank in self._banks():
            bank.credit()
        found = self._search_new(job, t)
        if self._rho > 0.0 and self._below_floor(job, found):
            self._decided.append((job, 0.0))
            return Decision(admitted=False, reason=REJECT_DENSITY, payoff=0.0, hold=self.defer)
        if self.patience > 0.0 and found.schedule:
            ref = self._utility(job, found.completion)
            if worth_waiting(self._search_new, job, t, ref, self.patience, self.patience_lead):
                self._patient[job.job_id] = ref
                self._decided.append((job, 0.0))
                return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0, hold=True)
        return self._admit_found(job, t, found)

    def _below_floor(self, job: Job, found: Found) -> bool:
        """Lever (i): ``job``'s best schedule ``found`` (or, with none, its utility at the
        fastest duration) earns less than the density floor times its size."""
        best = self._utility(job, found.completion) if found.schedule else job.utility_at(
            job.fastest)
        assert self._floor_cluster is not None  # set with the floor, in start
        return best < self._rho * job_size(job, self._floor_cluster, self._totals)

    def _admit_found(self, job: Job, t: int, found: Found, record: bool = True) -> Decision:
        """Decide ``job`` in slot ``t`` given its best schedule ``found`` from ``t``:
        re-pack if it is poor, place it and promise, or reject (``record``: add it to the
        jobs the certificate counts; a patient job was added when it was held)."""
        base = self._utility(job, found.completion)
        if self.repack and (not found.schedule or base < (1.0 - self.repack_gap)
                            * job.utility_at(job.fastest)):
            got = self._repack(job, t, base)
            if got.schedule:
                found = got
            elif found.schedule:
                self._place(job, found.schedule)
        elif found.schedule:
            self._place(job, found.schedule)
        if not found.schedule and self.soft:
            found = self._bump(job, t)
        if not found.schedule:
            if record:
                self._decided.append((job, 0.0))
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0,
                            hold=self.defer)
        if self.soft and min(found.schedule) > t:  # a reservation until it starts
            plan = self._plans.pop(job.job_id)
            self._soft[job.job_id] = Reservation(job=job, plan=plan, payoff=found.payoff,
                                                 density=self._density(job))
            self._stats["soft_reserved"] += 1
            return Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0, hold=True)
        if record:
            self._decided.append((job, found.payoff))
        return self._promise_for(job, found, t)

    def _bump(self, job: Job, t: int) -> Found:
        """Lever ``soft``: take the reservations of lower density in ``job``'s window out of
        its way, search again, then re-place them (densest first); kept, with ``job`` placed,
        only if the planned utility rises (a reservation that finds no room again is lost:
        its job is rejected at the next boundary). Else nothing changes."""
        if self._effort is not None and self._effort.short(2):
            return Found(payoff=0.0, schedule={})
        victims = self._soft.below(self._density(job), job.last_slot)
        if not victims:
            return Found(payoff=0.0, schedule={})
        if self._slot_bank is not None:
            victims = self._slot_victims(job, t, victims)
            if not victims:
                return Found(payoff=0.0, schedule={})
        if self._effort is not None:
            keep = set(self._effort.trim([r.job.job_id for r in victims],
                                         {r.job.job_id: r.plan for r in victims}, t,
                                         self._good_end(job, t)))
            victims = [r for r in victims if r.job.job_id in keep]
        return self._banked(len(victims) + 1,
                            lambda: self._bump_victims(job, t, victims))

    def _slot_victims(self, job: Job, t: int, victims: list[Reservation]) -> list[Reservation]:
        """Lever ``effort_slots`` for a bump: the ``victims`` the slot bank affords (each is
        searched once over its window from ``t``; the newcomer once more); the bank is
        debited what the bump then searches (:meth:`_banked`)."""
        assert self._slot_bank is not None
        cost = {r.job.job_id: float(r.job.last_slot - t + 1) for r in victims}
        ids = [r.job.job_id for r in victims]
        plans = {r.job.job_id: r.plan for r in victims}
        keep = set(self._slot_bank.afford(ids, cost, float(job.last_slot - t + 1),
                                          _Ranked(ids, plans, t, self._good_end(job, t))))
        return [r for r in victims if r.job.job_id in keep]

    def _banked(self, worst: int, lever: Callable[[], Found]) -> Found:
        """Run a re-pack or a bump (``lever``, its candidates chosen) under the effort banks
        that are on: skipped (an empty result, the skip counted) when the ``effort`` or the
        ``effort_waste`` bank does not hold its ``worst`` searches; afterwards ``effort`` is
        debited the searches it ran, ``effort_slots`` the slot-searches, and
        ``effort_waste`` the searches if it was undone (no schedule)."""
        if self._effort is not None and not self._effort.allows(worst):
            return Found(payoff=0.0, schedule={})
        if self._waste is not None and not self._waste.allows(worst):
            return Found(payoff=0.0, schedule={})
        searches, slots = self._searches, self._slots
        try:
            got = lever()
        finally:
            if self._effort is not None:
                self._effort.spend(self._searches - searches)
            if self._slot_bank is not None:
                self._slot_bank.spend(self._slots - slots)
        if self._waste is not None and not got.schedule:
            self._waste.waste(self._searches - searches)
        return got

    def _bump_victims(self, job: Job, t: int, victims: list[Reservation]) -> Found:
        """:meth:`_bump` with its ``victims`` chosen: the searches and the bookkeeping."""
        book = self._book()
        for r in victims:
            book.add(r.job, r.plan, sign=-1)
        got = self._search_new(job, t)
        if got.schedule:
            book.add(job, got.schedule)
            again = {}
            gain = self._utility(job, got.completion)
            for r in victims:
                new = self._search_new(r.job, t)
                if new.schedule:
                    book.add(r.job, new.schedule)
                    again[r.job.job_id] = new
                    gain += self._utility(r.job, new.completion)
                gain -= r.utility
            if gain > 0:
                touched = set(got.schedule)
                for r in victims:
                    touched.update(r.plan)
                    moved = again.get(r.job.job_id)
                    if moved is None:
                        del self._soft[r.job.job_id]
                        self._soft.dropped.append(r.job)
                    else:
                        self._soft[r.job.job_id] = replace(r, plan=moved.schedule,
                                                           payoff=moved.payoff)
                        touched.update(moved.schedule)
                book.raise_prices(touched)
                self._plans[job.job_id] = dict(got.schedule)
                self._stats["soft_bumps"] += 1
                self._stats["soft_dropped"] += len(victims) - len(again)
                self._freed = True
                return got
            book.add(job, got.schedule, sign=-1)
            for r in victims:
                if r.job.job_id in again:
                    book.add(r.job, again[r.job.job_id].schedule, sign=-1)
        for r in victims:
            book.add(r.job, r.plan)
        return Found(payoff=0.0, schedule={})

    def _soft_due(self, t: int) -> dict[str, Decision]:
        """Lever ``soft`` at the boundary of slot ``t``: admit, with a promise, each held job
        whose reservation starts now; reject each that lost its reservation."""
        out: dict[str, Decision] = {}
        for job in self._soft.dropped:
            self._decided.append((job, 0.0))
            out[job.job_id] = Decision(admitted=False, reason=REJECT_PAYOFF, payoff=0.0)
        self._soft.dropped = []
        for r in self._soft.due(t):
            self._plans[r.job.job_id] = r.plan  # its usage is in the book already
            self._decided.append((r.job, r.payoff))
            out[r.job.job_id] = self._promise_for(
                r.job, Found(payoff=r.payoff, schedule=r.plan), t)
        return out

    def _admit_patient(self, jobs: Sequence[Job], view: View) -> dict[str, Decision]:
        """Lever (h), patient admission: each held patient job admitted or rejected now
        unless it may still wait (:func:`psched.policies.rp_patience.worth_waiting`).
        O(held patient jobs) searches, two for each decided."""
        out: dict[str, Decision] = {}
        t = view.t
        for job in jobs:
            ref = self._patient.get(job.job_id)
            if ref is None:
                continue
            self._stats["patient_searches"] += 1
            if worth_waiting(self._search_new, job, t, ref, self.patience, self.patience_lead):
                continue
            del self._patient[job.job_id]
            self._report = None
            got = self._admit_found(job, t, self._search_new(job, t), record=False)
            if got.admitted:
                self._stats["patient_admitted"] += 1
                self._dirty = True
            out[job.job_id] = got
        return out

    def _search_new(self, job: Job, t: int) -> Found:
        """The best schedule of a job not yet admitted, from slot ``t``, priced as
        ``own_price`` says."""
        self._searches += 1
        self._slots += search_span(job, t, job.last_slot)
        if self.own_price == "off":
            return search(self._book(), job, start=t, work=job.work, deadline=job.last_slot)
        return search_own(self._book(), job, start=t, work=job.work, deadline=job.last_slot,
                          mode=self.own_price)

    def _search_kept(self, job: Job, t: int, work: int, deadline: int,
                     flat: bool = False) -> Found:
        """Re-plan an admitted job (re-pack, pull-forward): its best schedule by ``deadline``
        (no floor), with own-usage prices where ``own_scope="all"``."""
        self._searches += 1
        self._slots += search_span(job, t, deadline)
        if self.own_price != "off" and self.own_scope == "all" and not flat:
            return search_own(self._book(), job, start=t, work=work, deadline=deadline,
                              mode=self.own_price, floor=-math.inf)
        return search(self._book(), job, start=t, work=work, deadline=deadline, flat=flat,
                      floor=-math.inf)

    def _promise_for(self, job: Job, found: Found, t: int) -> Decision:
        """Admit ``job`` in slot ``t`` on its placed schedule ``found``: its promise and the
        decision."""
        book = self._book()
        done = found.completion
        assert done is not None
        promise = latest_same_utility(job, done, self.promise_rtol) if self.latest_promise else done
        if self.plan_late and promise > done:
            self._late(job, t, promise)
        self._jobs[job.job_id] = job
        self._promise[job.job_id] = promise
        self._promised_utility += job.utility_at(promise - job.arrival + 1)
        return Decision(admitted=True, payoff=unscale(found.payoff, book.log_scale),
                        schedule=dict(found.schedule), promised=promise)

    def admit_held(self, jobs: Sequence[Job], view: View) -> dict[str, Decision]:
        """Lever (d), deferred admission: search the held ``jobs`` again from slot ``view.t``
        if plans moved since they were last searched; admit (and place) each whose payoff is
        now positive. Jobs not in the answer stay held. O(defer_limit searches)."""
        out: dict[str, Decision] = {}
        if self.defer or self._patient:
            # jobs gone or behind since the last plan free or take room; once, before
            # anything is admitted here (the view does not hold jobs admitted now)
            self._reconcile(view)
        if self._patient:
            out = self._admit_patient(jobs, view)
            jobs = [j for j in jobs if j.job_id not in self._patient and j.job_id not in out]
        skip: set[str] = set()
        if self._batch:  # this slot's arrivals; those rejected are searched no more now
            skip.update(self._batch)
            out.update(self._admit_batch(jobs, view.t))
        if self.soft:
            if self.ahead_held:
                self._start_ahead(view.t)
            out.update(self._soft_due(view.t))
            skip.update(self._soft, out)
        jobs = [j for j in jobs if j.job_id not in skip]
        if not self.defer or not self._freed:
            return out
        self._freed = False
        self._report = None
        for job in jobs[: self.defer_limit]:
            self._stats["deferred_searches"] += 1
            found = self._search_new(job, view.t)
            if not found.schedule:
                continue
            self._place(job, found.schedule)
            self._stats["deferred_admitted"] += 1
            self._dirty = True
            out[job.job_id] = self._promise_for(job, found, view.t)
        return out

    def _admit_batch(self, jobs: Sequence[Job], t: int) -> dict[str, Decision]:
        """Lever ``batch``: decide the jobs held on arrival in slot ``t`` as arrivals, densest
        first (:func:`~psched.policies.rp_batch.density_order`). A job rejected stays held
        if ``defer`` is on, else is rejected now. O(arrival decisions)."""
        mine = set(self._batch)
        self._batch = []
        out: dict[str, Decision] = {}
        probe = self.decision_probe
        for job in density_order([j for j in jobs if j.job_id in mine], self._cluster_now(),
                                 self._density):
            if probe is None:
                got = self._arrive(job, t)
            else:
                c0 = time.process_time()
                got = self._arrive(job, t)
                probe(job.job_id, time.process_time() - c0)
            if got.admitted or not self.defer:  # with defer, a rejected job stays held
                out[job.job_id] = got
        return out

    def _density(self, job: Job) -> float:
        """:func:`~psched.policies.rp_batch.density` of ``job`` on the cluster now, computed
        once per job (the cache is cleared when servers join). O(S R) the first time."""
        got = self._dens.get(job.job_id)
        if got is None:
            cluster = self._cluster_now()
            if self._fits is None or self._fits.cluster is not cluster:
                self._fits = FitCounts(cluster)  # container counts per demand, kept
            got = self._dens[job.job_id] = density(job, cluster, self._fits)
        return got

    def _late(self, job: Job, t: int, promise: int) -> None:
        """Plan ``job`` as its cheapest schedule that meets ``promise`` (it was placed)."""
        book = self._book()
        old = self._plans[job.job_id]
        book.add(job, old, sign=-1)
        got = search(book, job, start=t, work=job.work, deadline=promise, flat=True,
                     floor=-math.inf)
        new = got.schedule or old
        self._freed = self._freed or new != old
        book.add(job, new)
        book.raise_prices(new)
        self._plans[job.job_id] = new

    def _fill_now(self, t: int) -> None:
        """Re-plan each job (tightest promise first) as its best schedule that completes no
        later than planned; kept if it completes earlier or does more work in slot ``t``."""
        book = self._book()
        order = sorted(self._plans, key=lambda j: (self._promise[j], j))
        for j in order[: self.pull_limit]:
            old = self._plans[j]
            done = max(old)
            jj = self._jobs[j]
            now = old[t].n_workers if t in old else 0
            if now >= jj.max_workers:
                continue
            book.add(jj, old, sign=-1)
            got = search(book, jj, start=t, work=work_of(old, t), deadline=done,
                         floor=-math.inf)
            new = got.schedule
            if new and (max(new) < done or (t in new and new[t].n_workers > now)):
                self._stats["filled"] += 1
                self._freed = True
                book.add(jj, new)
                book.raise_prices(new)
                self._plans[j] = new
            else:
                book.add(jj, old)

    def _work_ahead(self, t: int, view: View) -> None:
        """Lever ``ahead`` (:mod:`psched.policies.rp_ahead`): hand the capacity of slot ``t``
        that no plan uses to the admitted jobs, least slack first, each taking the worker-slots
        from the end of its plan (it completes no later). O(jobs (S R + plan entries))."""
        order = sorted((j for j in self._plans if j in view.active),
                       key=lambda j: (self._promise[j] - max(self._plans[j]), self._promise[j], j))
        for j in order:
            new = self._grow(self._jobs[j], self._plans[j], t)
            if new is not None:
                self._plans[j] = new

    def _start_ahead(self, t: int) -> None:
        """Lever ``ahead`` for reservations (``soft``): each reservation that starts later
        takes capacity of slot ``t`` that no plan uses (densest first), from the end of its
        plan; it then starts now, so it is admitted at this boundary with its promise
        (:meth:`_soft_due`). O(reservations (S R + plan entries))."""
        for r in sorted(self._soft.values(), key=lambda r: (-r.density, r.job.arrival,
                                                            r.job.job_id)):
            if r.start <= t:
                continue
            new = self._grow(r.job, r.plan, t)
            if new is not None:
                self._soft[r.job.job_id] = replace(r, plan=new)

    def _grow(self, job: Job, old: dict[int, Alloc], t: int) -> dict[int, Alloc] | None:
        """``job``'s plan ``old`` (in the book) grown into slot ``t`` from its end
        (:func:`~psched.policies.rp_ahead.grow_now`), the book updated; None if unchanged."""
        book = self._book()
        new = grow_now(book, job, old, t)
        if new is None:
            return None
        diff = {s for s in (*old, *new) if old.get(s) != new.get(s)}
        book.add(job, {s: old[s] for s in diff if s in old}, sign=-1)
        book.add(job, {s: new[s] for s in diff if s in new})
        book.raise_prices(diff)
        self._stats["ahead_jobs"] += 1
        self._stats["ahead_moved"] += new[t].n_workers - (old[t].n_workers if t in old else 0)
        self._freed = True
        self._report = None  # the counters (and the plans the certificate reads) changed
        return Schedule(new) if self.fast_search else new

    def _place(self, job: Job, schedule: dict[int, Alloc]) -> None:
        book = self._book()
        book.add(job, schedule)
        book.raise_prices(schedule)
        self._plans[job.job_id] = Schedule(schedule) if self.fast_search else dict(schedule)

    @staticmethod
    def _utility(job: Job, completion: int | None) -> float:
        """Utility of completing in slot ``completion`` (0 for None)."""
        return 0.0 if completion is None else job.utility_at(completion - job.arrival + 1)

    def _repack(self, job: Job, t: int, base: float) -> Found:
        """Lever (a): make room for ``job`` by re-planning admitted jobs within their promises.
        Returns the newcomer's schedule (placed) or an empty result (nothing changed)."""
        if self._repack_min > 0.0 and self._density(job) < self._repack_min:
            self._stats["repack_guarded"] += 1
            return Found(payoff=0.0, schedule={})
        if self._effort is not None and self._effort.short(repack_cost(1)):
            return Found(payoff=0.0, schedule={})
        end = job.last_slot
        cands = [j for j, p in self._plans.items() if min(p) <= end]
        if not cands:
            return Found(payoff=0.0, schedule={})
        cands.sort(key=lambda j: (-(self._promise[j] - max(self._plans[j])), j))
        cands = cands[: self.repack_limit]
        if self._slot_bank is not None:
            cost = {j: 3.0 * max(1, self._promise[j] - t + 1) for j in cands}
            cands = self._slot_bank.afford(
                cands, cost, 2.0 * (job.last_slot - t + 1),
                _Ranked(cands, self._plans, t, self._good_end(job, t)))
            if not cands:
                return Found(payoff=0.0, schedule={})
        if self._effort is not None:
            cands = self._effort.trim(cands, self._plans, t, self._good_end(job, t))
        return self._banked(repack_cost(len(cands)),
                            lambda: self._repack_cands(job, t, base, cands))

    def _good_end(self, job: Job, t: int) -> int:
        """Lever ``effort``: the last of ``job``'s good slots from ``t`` (its latest completion
        keeping ``1 - repack_gap`` of its utility at the fastest duration from ``t``)."""
        return latest_same_utility(job, min(t + job.fastest - 1, job.last_slot), self.repack_gap)

    def _repack_cands(self, job: Job, t: int, base: float, cands: list[str]) -> Found:
        """:meth:`_repack` with its candidates chosen (``cands``, in their order): the
        re-pack itself (the slot bank affords each candidate three searches over its span
        to its promise and the newcomer two over its window: :meth:`_repack`)."""
        book = self._book()
        self._stats["repack_tried"] += 1
        saved = {j: self._plans[j] for j in cands}
        self._budget = self.repack_searches
        for j in cands:
            book.add(self._jobs[j], saved[j], sign=-1)
            del self._plans[j]
        first = self._search_new(job, t)
        found = Found(payoff=0.0, schedule={})
        moved: list[str] | None = []
        second: SecondBank | None = None  # the bank, once a second order ran under it
        if first.schedule:  # else: no room even with every candidate gone
            # the newcomer's best first, then the candidates around it (old plan if it still
            # fits, else their best within the promise); failing that, the candidates first
            # (cheapest within their promises), then the newcomer
            book.add(job, first.schedule)
            moved = self._refit(cands, saved, t, keep_old=True)
            if moved is not None:
                found = first
            elif self.repack_second == "off" or (self._second is not None
                                                 and not self._second.runs()):
                book.add(job, first.schedule, sign=-1)
                self._unfit(cands)
            else:
                second = self._second
                book.add(job, first.schedule, sign=-1)
                self._unfit(cands)
                clash = cands
                if self.repack_second == "clash":
                    clash = _clashing(cands, saved, first.schedule)
                    for j in cands:
                        if j not in clash:
                            book.add(self._jobs[j], saved[j])
                            self._plans[j] = saved[j]
                moved = self._refit(clash, saved, t, keep_old=False)
                if moved is not None:
                    found = self._search_new(job, t)
                if not found.schedule:
                    self._unfit(cands)
                else:
                    book.add(job, found.schedule)
        if found.schedule:
            assert moved is not None
            self._plans[job.job_id] = found.schedule
            if self.pull and not self._pulls_vain(job, t, base, found, moved, saved):
                for j in moved:
                    self._pull_one(j, t)
            done = found.completion
            assert done is not None
            gain = job.utility_at(done - job.arrival + 1) - base + sum(
                self._jobs[j].utility_at(max(self._plans[j]) - self._jobs[j].arrival + 1)
                - self._jobs[j].utility_at(max(saved[j]) - self._jobs[j].arrival + 1)
                for j in moved)
            if gain > 0:
                if second is not None:
                    second.done(kept=True)
                self._stats["repack_kept"] += 1
                self._freed = True
                self._stats["repack_moved"] += len(moved)
                self._stats["repack_admitted_utility"] += job.utility_at(done - job.arrival + 1)
                touched = set(found.schedule)
                for j in moved:
                    touched.update(self._plans[j])
                book.raise_prices(touched)
                return Found(payoff=found.payoff, schedule=self._plans[job.job_id])
            book.add(job, self._plans.pop(job.job_id), sign=-1)
        # undo: every job back on its old plan (which fits: it did before)
        if second is not None:
            second.done(kept=False)
        self._unfit(cands)
        for j in cands:
            book.add(self._jobs[j], saved[j])
            self._plans[j] = saved[j]
        return Found(payoff=0.0, schedule={})

    def _pulls_vain(self, job: Job, t: int, base: float, found: Found, moved: list[str],
                    saved: dict[str, dict[int, Alloc]]) -> bool:
        """The exact test before a re-pack's pulls (:mod:`psched.policies.rp_precheck`):
        True if no pull can make the gain positive; their searches are then counted as run
        (the banks see the same debits) and the skip in ``repack_prechecked``. Off with
        ``defer`` (a pull's ``freed`` flag is read there)."""
        if self.defer:
            return False
        newcomer = self._utility(job, found.completion)
        if gain_bound(newcomer, base, moved, self._jobs, saved, t) > 0:
            return False
        searches, slots = pull_spans(moved, self._jobs, self._plans, t)
        self._searches += searches
        self._slots += slots
        self._stats["repack_prechecked"] += 1
        return True

    def _refit(self, cands: list[str], saved: dict[str, dict[int, Alloc]], t: int,
               keep_old: bool) -> list[str] | None:
        """Re-plan ``cands`` (taken out of the book), tightest promise first, within their
        promises: ``keep_old`` keeps an old plan that still fits and otherwise searches the
        job's best schedule; else each gets the cheapest schedule that meets its promise.
        Returns the jobs that got a new plan, or None at the first that finds none (those
        placed so far stay placed; :meth:`_unfit` takes them out)."""
        book = self._book()
        moved: list[str] = []
        for j in sorted(cands, key=lambda j: (self._promise[j], j)):
            jj = self._jobs[j]
            if keep_old and book.fits(jj, saved[j]):
                book.add(jj, saved[j])
                self._plans[j] = saved[j]
                continue
            if self._budget is not None:
                if self._budget <= 0:
                    return None
                self._budget -= 1
            if self.repack_late and not keep_old:
                self._searches += 1
                self._slots += search_span(jj, t, self._promise[j])
                got = search_latest(book, jj, start=t, work=work_of(saved[j]),
                                    deadline=self._promise[j])
            else:
                got = self._search_kept(jj, t, work_of(saved[j]), self._promise[j],
                                        flat=not keep_old)
            if not got.schedule:
                return None
            book.add(jj, got.schedule)
            self._plans[j] = got.schedule
            moved.append(j)
        return moved

    def _unfit(self, cands: list[str]) -> None:
        """Take the current plans of ``cands`` out of the book."""
        book = self._book()
        for j in cands:
            plan = self._plans.pop(j, None)
            if plan is not None:
                book.add(self._jobs[j], plan, sign=-1)

    # -- slot boundaries -----------------------------------------------------------------------
    def _pull_one(self, j: str, t: int, steady: bool = False) -> bool:
        """Lever (c): re-plan job ``j`` to complete strictly earlier if capacity allows
        (``steady``: and without stopping or resizing it if it runs)."""
        book = self._book()
        old = self._plans[j]
        done = max(old)
        if done <= t:
            return False
        jj = self._jobs[j]
        book.add(jj, old, sign=-1)
        got = self._search_kept(jj, t, work_of(old, t), done - 1)
        if got.schedule and (not steady or keeps_running(old, got.schedule, t, j in self._ran)):
            book.add(jj, got.schedule)
            self._plans[j] = got.schedule
            self._stats["pulled"] += 1
            self._freed = True
            return True
        book.add(jj, old)
        return False

    def _reconcile(self, view: View) -> None:
        """Follow reality: drop plans of jobs that left, re-plan jobs whose measured work left
        differs from their plan (a real executor), within the promise where possible."""
        book = self._book()
        t = view.t
        for j in [j for j in self._plans if j not in view.active]:
            gone = {s: a for s, a in self._plans[j].items() if s >= t}
            book.add(self._jobs[j], gone, sign=-1)
            self._freed = self._freed or bool(gone)
            del self._plans[j]
        todo = []
        for j, status in view.active.items():
            if j not in self._plans and j not in self._promise:
                continue
            left = max(0, ceil_eps(status.remaining))
            if left != self._plans.left.get(j, 0):  # the plan holds slots >= t only
                todo.append((j, left))
        if self.steady:
            rank = {j: i for i, j in enumerate(tightest_first([j for j, _ in todo],
                                                              self._promise))}
            todo.sort(key=lambda x: rank[x[0]])
        for j, left in todo:
            self._stats["replanned_behind"] += 1
            self._freed = True
            self._dirty = True
            if self.steady and self._steady_one(j, left, t):
                continue
            plan = self._plans.get(j) or {}  # none left: behind after its last planned slot
            jj = self._jobs[j]
            book.add(jj, plan, sign=-1)
            got = search(book, jj, start=t, work=left, deadline=self._promise[j], floor=-math.inf)
            if not got.schedule and left > 0:
                self._stats["promise_at_risk"] += 1
                got = search(book, jj, start=t, work=left, deadline=jj.last_slot,
                             floor=-math.inf)
            book.add(jj, got.schedule)
            book.raise_prices(got.schedule)
            if got.schedule:
                self._plans[j] = got.schedule
            else:  # none left in its window: planned again at the next boundary
                self._plans.pop(j, None)

    def _steady_one(self, j: str, left: int, t: int) -> bool:
        """The steady rule for job ``j`` off its plan (``left`` worker-slots left), if it ran
        in the last slot: planned in ``t``, it takes its best plan within its promise if that
        runs it in ``t``, else keeps its allocation in ``t`` with the rest re-planned; not
        planned in ``t``, it continues (:func:`continue_now`). True if that settled ``j``
        (else the literal re-plan follows)."""
        plan = self._plans.get(j)
        if j not in self._ran or left <= 0:
            return False
        if not plan or t not in plan:
            done = continue_now(self._book(), self._jobs, self._plans, self._promise, j,
                                self._ran[j], left, t, self._ran)
            self._stats["kept_running"] += done
            return done
        book, jj = self._book(), self._jobs[j]
        book.add(jj, plan, sign=-1)  # its best plan, if that keeps it running
        got = search(book, jj, start=t, work=left, deadline=self._promise[j], floor=-math.inf)
        if t in got.schedule:
            book.add(jj, got.schedule)
            book.raise_prices(got.schedule)
            self._plans[j] = got.schedule
            return True
        book.add(jj, plan)
        new = keep_now(book, jj, plan, left, t, self._promise[j])
        if new is None:
            return False
        self._stats["kept_running"] += 1
        self._plans[j] = new
        return True

    def plan(self, view: View) -> SlotPlan:
        c0 = time.process_time()
        t = view.t
        self._reconcile(view)
        if self.pull and self._dirty:
            self._dirty = False
            order = sorted(self._plans, key=lambda j: (self._promise[j], j))
            for j in order[: self.pull_limit]:
                if self._pull_one(j, t, steady=self.steady):
                    self._dirty = True
        if self.fill:
            self._fill_now(t)
        if self.ahead:
            self._work_ahead(t, view)
        out: dict[str, Alloc] = {}
        for j in list(self._plans):
            plan = self._plans[j]
            alloc = plan.pop(t, None)
            if alloc is not None:
                self._plans.left[j] -= alloc.n_workers
                if j in view.active:
                    out[j] = alloc
            if not plan:
                del self._plans[j]
        self._ran = dict(out)
        if view.event or self._boundary_ms:
            self._boundary_ms.append((time.process_time() - c0) * 1e3)
        return out

    # -- the live service: revisions journaled, restored after a restart ----------------------
    def current_plans(self) -> dict[str, dict[int, Alloc]]:
        """Every job's current plan (slot -> allocation, slots not yet run), a copy: a live
        service journals what changed (a revision) after each decision and boundary.
        O(plan entries)."""
        return {j: dict(p) for j, p in self._plans.items()}

    def boundary_state(self) -> dict[str, Any]:
        """What a restarted service needs besides the promises and plans (JSON): whether the
        next boundary pulls, the counters of :meth:`report`, the jobs that ran in the last
        slot, the held jobs (``batch``, ``soft``, ``patience``) and the effort banks
        (``effort``, ``effort_slots``, ``effort_waste``)."""
        ran = {j: [list(a.workers), list(a.ps)] for j, a in sorted(self._ran.items())}
        out = {"dirty": self._dirty, "freed": self._freed, "stats": dict(self._stats),
               "ran": ran}
        if self.batch:  # the slot's arrivals held, not decided yet
            out["batch"] = list(self._batch)
        if self.soft:  # reservations (their usage is in the book) and jobs that lost theirs
            out.update(self._soft.to_json())
        if self.patience > 0.0:  # held patient jobs and their utility at arrival
            out["patient"] = dict(self._patient)
        for key, bank in self._banks():  # each effort bank and its counters
            out[key] = {"bank": bank.bank, "counts": dict(bank.counts)}
        return out

    def _banks(self) -> list[tuple[str, Bank]]:
        """The effort banks this run has, by their :meth:`boundary_state` key."""
        named = (("effort", self._effort), ("effort_slots", self._slot_bank),
                 ("effort_waste", self._waste), ("repack_second_bank", self._second))
        return [(key, bank) for key, bank in named if bank is not None]

    def restore(self, job: Job, decision: Decision) -> None:
        """Re-apply an arrival decision made before (a restarted service replaying its
        journal): the promise ``decision.promised`` (the planned completion if the journal
        has none) and ``decision.schedule`` as the plan, whatever deciding again would give.
        Later revisions follow through :meth:`restore_plan`; :meth:`resume` ends the replay.
        O(schedule entries)."""
        book = self._book()
        self._report = None
        if not decision.admitted or not decision.schedule:
            self._decided.append((job, 0.0))
            if decision.hold:  # a batch or a reservation may hold it: see resume
                self._restored[job.job_id] = job
            return
        payoff = decision.payoff or 0.0
        self._decided.append(
            (job, math.exp(math.log(payoff) - book.log_scale) if payoff > 0 else 0.0))
        schedule = dict(decision.schedule)
        promise = decision.promised if decision.promised is not None else max(schedule)
        self._jobs[job.job_id] = job
        self._promise[job.job_id] = promise
        self._promised_utility += job.utility_at(promise - job.arrival + 1)
        self._place(job, schedule)

    def restore_held(self, job: Job, decision: Decision) -> None:
        """Re-apply a deferred decision made before at a slot boundary (lever (d); a
        restarted service replaying its journal): admitted, ``job`` (held since its arrival,
        restored by :meth:`restore` as a rejection) gets the promise and the plan of
        ``decision``, as :meth:`admit_held` gave them; a rejection changes nothing here.
        O(schedule entries)."""
        self._book()
        self._report = None
        if not decision.admitted or not decision.schedule:
            return
        schedule = dict(decision.schedule)
        promise = decision.promised if decision.promised is not None else max(schedule)
        self._jobs[job.job_id] = job
        self._promise[job.job_id] = promise
        self._promised_utility += job.utility_at(promise - job.arrival + 1)
        self._place(job, schedule)

    def restore_plan(self, job_id: str, t: int, schedule: Mapping[int, Alloc]) -> None:
        """Re-apply a revision made before: from slot ``t`` on, ``job_id`` (restored) runs
        ``schedule`` (empty: no plan left). O(plan entries)."""
        book = self._book()
        job = self._jobs[job_id]
        old = self._plans.get(job_id, {})
        book.add(job, {s: a for s, a in old.items() if s >= t}, sign=-1)
        book.add(job, schedule)
        book.raise_prices(schedule)
        new = {**{s: a for s, a in old.items() if s < t}, **schedule}
        if new:
            self._plans[job_id] = new
        else:
            self._plans.pop(job_id, None)

    def resume(self, t: int, state: Mapping[str, Any] | None = None) -> None:
        """End of a journal replay, the loop at slot ``t``: plans keep their slots from ``t``
        on (earlier ones ran; their usage stays in the book, as in an uninterrupted run) and
        ``state`` (the last :meth:`boundary_state` journaled) is taken back. With the plans
        of every revision re-applied, later decisions are those of an uninterrupted run
        (prices are rebuilt from the plans: bit-identical when every demand is a small
        binary fraction, such as whole cores and GB). O(plan entries)."""
        for j in list(self._plans):
            rest = {s: a for s, a in self._plans[j].items() if s >= t}
            if rest:
                self._plans[j] = rest
            else:
                del self._plans[j]
        if state:
            self._dirty = bool(state.get("dirty", self._dirty))
            self._freed = bool(state.get("freed", self._freed))
            self._stats.update(state.get("stats", {}))
            self._ran = {j: Alloc.of(dict(w), dict(p))
                         for j, (w, p) in state.get("ran", {}).items()}
            self._resume_held(state)
            for key, bank in self._banks():
                if key in state:
                    bank.bank = float(state[key]["bank"])
                    bank.counts.update(state[key]["counts"])
        self._restored = {}

    def _resume_held(self, state: Mapping[str, Any]) -> None:
        """The held jobs' part of :meth:`resume`: the slot's arrivals not decided yet
        (``batch``), the reservations with their usage back in the book and the jobs that
        lost theirs (``soft``). Those jobs are not decided yet: the certificate's entries
        the replay gave them go (they come back when they are decided, as in an
        uninterrupted run). With ``reprice`` off the prices follow the high-water mark of
        the plans replayed: a reservation's plan before it was moved or dropped is not in
        the journal, so a restart after such a bump may price lower than the uninterrupted
        run (the default re-prices: exact). O(reservation entries)."""
        self._batch = [j for j in state.get("batch", ()) if j in self._restored]
        self._patient = {j: float(ref) for j, ref in state.get("patient", {}).items()
                         if j in self._restored}  # held: their certificate entry stays
        self._soft = Reservations.from_json(state, self._restored)
        book = self._book()
        for r in list(self._soft.values()):
            plan = Schedule(r.plan) if self.fast_search else r.plan
            self._soft[r.job.job_id] = replace(r, plan=plan)
            book.add(r.job, plan)
            book.raise_prices(plan)
        pending = {*self._batch, *self._soft, *(job.job_id for job in self._soft.dropped)}
        if pending:
            self._decided = [(j, mu) for j, mu in self._decided if j.job_id not in pending]

    # -- results --------------------------------------------------------------------------------
    def promises(self) -> dict[str, int]:
        """The promised completion slot of every admitted job."""
        return dict(self._promise)

    def report(self) -> dict[str, Any]:
        if self._report is not None:
            return dict(self._report)
        if self.ledger is None or self.params is None:
            return {}
        out: dict[str, Any] = {}
        if self.certificate:
            out = dual_objective(self.ledger, self._decided)
            out.pop("dual_bound_recorded", None)
        out["promised_utility"] = self._promised_utility
        out["committed_utility"] = self._promised_utility
        if self.certificate:
            achieved = self._promised_utility
            out["certified_ratio"] = out["dual_bound"] / achieved if achieved > 0 else None
        out.update(self._stats)
        for _, bank in self._banks():
            out.update(bank.stats())
        ms = np.array(self._boundary_ms) if self._boundary_ms else np.zeros(1)
        out["boundary_ms_p50"] = float(np.percentile(ms, 50))
        out["boundary_ms_p99"] = float(np.percentile(ms, 99))
        out["levers"] = {"repack": self.repack, "latest_promise": self.latest_promise,
                         "pull": self.pull, "reprice": self.reprice,
                         "plan_late": self.plan_late, "fill": self.fill,
                         "defer": self.defer, "own_price": self.own_price,
                         "repack_late": self.repack_late, "steady": self.steady,
                         "patience": self.patience, "density_floor": self.density_floor,
                         "batch": self.batch, "soft": self.soft,
                         "price_span": self.price_span, "ahead": self.ahead,
                         "ahead_held": self.ahead_held, "effort": self.effort,
                         "repack_quantile": self.repack_quantile,
                         "effort_slots": self.effort_slots,
                         "effort_waste": self.effort_waste,
                         "repack_second_bank": self.repack_second_bank}
        out["alpha"] = self.params.alpha
        out["two_alpha"] = 2.0 * self.params.alpha
        out["estimate_factor"] = self.estimate_factor
        out.update(self.params.to_dict())
        self._report = out
        return dict(out)

    def _cluster_now(self) -> Cluster:
        if self._cluster is None:
            raise RuntimeError("OasisRpPolicy.start was not called")
        return self._cluster

    def _book(self) -> PlanLedger:
        if self.ledger is None:
            raise RuntimeError("OasisRpPolicy.start was not called")
        return self.ledger


def _clashing(cands: list[str], saved: dict[str, dict[int, Alloc]],
              schedule: dict[int, Alloc]) -> list[str]:
    """The jobs of ``cands`` whose saved plan shares a (slot, server) with ``schedule``."""
    used = {(t, h) for t, a in schedule.items() for h, _ in (*a.workers, *a.ps)}
    return [j for j in cands
            if any((t, h) in used for t, a in saved[j].items() for h, _ in (*a.workers, *a.ps))]


class _Ranked(Sequence[str]):
    """:func:`~psched.policies.rp_effort.clash_rank` of ``jobs``, computed only when read
    (the slot bank reads it only when it must trim)."""

    def __init__(self, jobs: list[str], plans: Mapping[str, Mapping[int, Alloc]], t0: int,
                 t1: int) -> None:
        self._args = (jobs, plans, t0, t1)
        self._got: list[str] | None = None

    def _rank(self) -> list[str]:
        if self._got is None:
            self._got = clash_rank(*self._args)
        return self._got

    def __getitem__(self, i: Any) -> Any:
        return self._rank()[i]

    def __len__(self) -> int:
        return len(self._rank())

    def __iter__(self) -> Any:
        return iter(self._rank())


class _Plans(dict[str, dict[int, Alloc]]):
    """Plans by job, with each plan's worker-slots kept alongside (``left``)."""

    def __init__(self) -> None:
        super().__init__()
        self.left: dict[str, int] = {}

    def __setitem__(self, key: str, value: dict[int, Alloc]) -> None:
        super().__setitem__(key, value)
        self.left[key] = work_of(value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.left.pop(key, None)

    def pop(self, key: str, *default: Any) -> Any:
        self.left.pop(key, None)
        return super().pop(key, *default)
