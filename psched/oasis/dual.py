"""The dual certificate: objective (19) at the final prices, an upper bound on the optimum.

Prices only rise, so the final prices ``p, q`` together with payoffs ``mu_i`` satisfying (20)
under them form a feasible dual solution of the LP relaxation of (14)-(18); by weak duality
its objective (19) bounds the offline optimum from above.

Three bounds are reported:

* ``dual_bound_final_prices`` (rigorous): ``mu_i`` is recomputed at the final prices as the
  exact best payoff over every schedule the job could have *alone* in the cluster (each
  server at full capacity) -- the schedule set ``L_i`` of (20) -- by the same exact search as
  the policy. It holds whatever the container sizes.
* ``dual_bound`` (rigorous, tighter): the same with all prices scaled by one factor
  ``theta in [0, 1]`` -- any non-negative prices with their exact payoffs are dual
  feasible -- minimised exactly over theta. With ``U/L`` as large as the paper's rules make
  it, the final prices on busy servers are near U and the price term dominates (19); scaling
  trades it against the payoffs.

The best-schedule recursion is a min-plus program, positively homogeneous in the slot costs:
with ``H_t`` the cheapest cost of completing by window slot ``t`` at the final prices
(:func:`~psched.oasis.fast.completion_costs`, one unpruned recursion per job) and ``u_t`` the
utility of completing there, the exact payoff at prices scaled by ``theta`` is
``mu(theta) = max(0, max_t u_t - theta H_t)``: convex and piecewise linear. So is
``D(theta) = sum_i mu_i(theta) + theta * price_mass``; its minimum over [0, 1] lies at 0, 1 or
a breakpoint of some ``mu_i``, found exactly by one sorted sweep of the slope changes.
* ``dual_bound_recorded`` (the paper's free certificate): ``mu_i`` as recorded at arrival.
  Valid when containers are small against servers (the paper's assumption): a schedule that
  did not fit at arrival is not covered by the recorded ``mu_i``.

All three add, for each job whose window ends before the horizon, its utility just past its
window (``oasis.md`` section 7), covering schedules the window excluded; a window that ends at
the horizon excludes no schedule (a job unfinished at the horizon earns 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from psched.core.model import Job
from psched.oasis.fast import completion_costs
from psched.oasis.ledger import Ledger

__all__ = ["Envelope", "dual_objective", "envelope_payoff", "payoff_envelope", "unscale"]


def unscale(x: float, log_scale: float) -> float:
    """``x * exp(log_scale)`` without overflow for finite results."""
    if x == 0.0:
        return 0.0
    v = math.log(abs(x)) + log_scale
    return math.copysign(math.exp(v) if v < 709.0 else math.inf, x)


@dataclass(frozen=True, kw_only=True)
class Envelope:
    """One job's payoff ``mu(theta) = max(0, max_t u_t - theta H_t)`` on ``theta in [0, 1]``.

    Only the lines of the upper envelope that are maximal somewhere in [0, 1], in order of
    ``theta``: ``u`` and ``cost`` strictly decreasing; the last may be the zero line.
    """

    u: np.ndarray  #: (m,) utility of each envelope line, cost units
    cost: np.ndarray  #: (m,) its completion cost ``H`` at the final prices (its -slope)
    breaks: np.ndarray  #: (m - 1,) theta in (0, 1) where line k takes over from line k - 1


def payoff_envelope(u: np.ndarray, cost: np.ndarray) -> Envelope:
    """The upper envelope of ``0`` and the lines ``u_t - theta cost_t`` (finite cost) on [0, 1].

    Lines are sorted by cost (descending) and those beaten by a cheaper line of no smaller
    utility are dropped; a stack then keeps the lines of the convex envelope (convex hull
    trick) and the result is cut at ``theta = 1``. Complexity O(Tw log Tw).
    """
    ok = np.isfinite(cost)
    uu = np.append(np.asarray(u, dtype=float)[ok], 0.0)
    hh = np.append(np.asarray(cost, dtype=float)[ok], 0.0)
    order = np.lexsort((-uu, -hh))  # cost descending, utility descending among equal cost
    uu, hh = uu[order], hh[order]
    later = np.append(np.maximum.accumulate(uu[::-1])[::-1][1:], -np.inf)
    keep = uu > later  # beaten at every theta >= 0 by a later line of no more cost
    uu, hh = uu[keep], hh[keep]
    first = np.append(True, hh[1:] < hh[:-1])  # equal cost: the first has the most utility
    uu, hh = uu[first], hh[first]
    su: list[float] = []
    sh: list[float] = []
    sx: list[float] = []
    for a, b in zip(uu.tolist(), hh.tolist(), strict=True):
        while su:
            x = (su[-1] - a) / (sh[-1] - b)  # where the new line overtakes the top one
            if sx and x <= sx[-1]:
                su.pop()
                sh.pop()
                sx.pop()
                continue
            break
        if su:
            sx.append(x)
        su.append(a)
        sh.append(b)
    m = 1 + int(np.searchsorted(np.array(sx), 1.0, side="left"))  # lines taking over < 1
    return Envelope(u=np.array(su[:m]), cost=np.array(sh[:m]), breaks=np.array(sx[: m - 1]))


def envelope_payoff(env: Envelope, theta: float) -> float:
    """``mu(theta)`` for ``theta in [0, 1]``: the best envelope line. Complexity O(m)."""
    return float(np.max(env.u - theta * env.cost))


def _exact_minimum(envs: Sequence[Envelope], price_mass: float) -> tuple[float, float, float]:
    """``(theta*, D(theta*), D(1))``: the exact minimiser of the convex piecewise-linear D.

    ``D'(theta) = price_mass - sum_i H_i(theta)`` with ``H_i`` the cost of job i's active
    line; it rises by ``H_{k-1} - H_k`` at each breakpoint. The minimum is at 0 if the slope
    starts non-negative, else at the first breakpoint where it turns non-negative, else at 1.
    Complexity O(B log B) for B breakpoints, plus O(total lines) per evaluation of D.
    """
    if not envs:
        return 0.0, 0.0, price_mass
    u = np.concatenate([e.u for e in envs])
    h = np.concatenate([e.cost for e in envs])
    sizes = np.array([e.u.size for e in envs])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))

    def objective(theta: float) -> float:
        return float(np.maximum.reduceat(u - theta * h, starts).sum()) + theta * price_mass

    slope0 = price_mass - float(h[starts].sum())
    theta = 0.0
    if slope0 < 0.0:
        x = np.concatenate([e.breaks for e in envs])
        rise = np.concatenate([e.cost[:-1] - e.cost[1:] for e in envs])
        order = np.argsort(x, kind="stable")
        slope = slope0 + np.cumsum(rise[order])
        turn = np.flatnonzero(slope >= 0.0)
        theta = float(x[order][turn[0]]) if turn.size else 1.0
    return theta, objective(theta), objective(1.0)


def dual_objective(ledger: Ledger, jobs: Sequence[tuple[Job, float]]) -> dict[str, float]:
    """Dual objective (19) for the jobs decided, with recorded payoffs in cost units.

    ``dual_bound`` is the exact minimum of ``D(theta)`` over ``theta in [0, 1]`` (prices
    ``theta p, theta q``, exact payoffs for them), ``dual_theta`` its minimiser; each
    ``D(theta)`` is a feasible dual, ``theta = 1`` is the paper's final prices.

    Complexity: one slot-cost table and one unpruned recursion per job
    (:func:`~psched.oasis.fast.completion_costs`), then O(B log B) over the B breakpoints;
    only each job's envelope lines are kept.
    """
    ls = ledger.log_scale
    price_mass = ledger.price_mass(0) + ledger.price_mass(1)
    # a window the horizon cut excludes nothing: no schedule completes past the horizon
    tail = sum(job.utility_at(job.window + 1) for job, _ in jobs
               if job.last_slot < ledger.horizon - 1)
    envs = []
    for job, _ in jobs:
        inp = ledger.inputs(job, relaxed=True)
        envs.append(payoff_envelope(inp.util, completion_costs(inp)))
    theta, best, at_one = _exact_minimum(envs, price_mass)
    mu_rec = sum(mu for _, mu in jobs)
    return {
        "dual_bound": unscale(best, ls) + tail,
        "dual_theta": theta,
        "dual_bound_final_prices": unscale(at_one, ls) + tail,
        "dual_bound_recorded": unscale(mu_rec + price_mass, ls) + tail,
        "dual_price_mass": unscale(price_mass, ls),
        "dual_tail_utility": tail,
    }
