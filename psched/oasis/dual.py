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
  feasible -- minimised over theta. With ``U/L`` as large as the paper's rules make it, the
  final prices on busy servers are near U and the price term dominates (19); scaling trades
  it against the payoffs.
* ``dual_bound_recorded`` (the paper's free certificate): ``mu_i`` as recorded at arrival.
  Valid when containers are small against servers (the paper's assumption): a schedule that
  did not fit at arrival is not covered by the recorded ``mu_i``.

All three add, for each job whose window ends before the horizon, its utility just past its
window (``oasis.md`` section 7), covering schedules the window excluded; a window that ends at
the horizon excludes no schedule (a job unfinished at the horizon earns 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from psched.model import Job
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import Ledger
from psched.oasis.schedule import slot_costs

__all__ = ["dual_objective", "unscale"]


def unscale(x: float, log_scale: float) -> float:
    """``x * exp(log_scale)`` without overflow for finite results."""
    if x == 0.0:
        return 0.0
    v = math.log(abs(x)) + log_scale
    return math.copysign(math.exp(v) if v < 709.0 else math.inf, x)


def _theta_search(evaluate: Callable[[float], float], steps: int) -> tuple[float, float]:
    """Least ``evaluate(theta)`` over theta in [0, 1]: golden section on ``log theta``.

    ``D(theta)`` is convex in theta, hence unimodal in ``log theta``; every evaluated point is
    a valid bound whatever the search finds, so the minimum seen is returned.
    """
    seen = {1.0: evaluate(1.0), 0.0: evaluate(0.0)}
    lo, hi = math.log(1e-9), 0.0
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = evaluate(math.exp(a)), evaluate(math.exp(b))
    seen[math.exp(a)], seen[math.exp(b)] = fa, fb
    for _ in range(steps):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = evaluate(math.exp(a))
            seen[math.exp(a)] = fa
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = evaluate(math.exp(b))
            seen[math.exp(b)] = fb
    theta = min(seen, key=lambda k: seen[k])
    return theta, seen[theta]


def dual_objective(ledger: Ledger, jobs: Sequence[tuple[Job, float]],
                   theta_steps: int = 6) -> dict[str, float]:
    """Dual objective (19) for the jobs decided, with recorded payoffs in cost units.

    ``dual_bound`` is the least of ``D(theta)`` over a golden-section search of
    ``theta in [0, 1]`` (prices ``theta p, theta q``, payoffs recomputed exactly for them); each
    ``D(theta)`` is a feasible dual, ``theta = 1`` is the paper's final prices.
    ``theta_steps = 0`` evaluates only ``theta`` in {0, 1} and two interior points.

    Complexity: one slot-cost table per job and ``theta_steps + 4`` exact searches per job.
    """
    ls = ledger.log_scale
    price_mass = ledger.price_mass(0) + ledger.price_mass(1)
    # a window the horizon cut excludes nothing: no schedule completes past the horizon
    tail = sum(job.utility_at(job.window + 1) for job, _ in jobs
               if job.last_slot < ledger.horizon - 1)
    tables = []
    for job, _ in jobs:
        inp = ledger.inputs(job, relaxed=True)
        tables.append((inp, slot_costs(inp)))

    def payoffs(theta: float) -> float:
        total = 0.0
        for inp, c in tables:
            scaled = np.where(np.isfinite(c), theta * np.where(np.isfinite(c), c, 0.0), np.inf)
            total += solve_fast(inp, floor=0.0, costs=scaled).payoff
        return total

    def objective(theta: float) -> float:
        return payoffs(theta) + theta * price_mass

    theta, best = _theta_search(objective, theta_steps)
    mu_final = payoffs(1.0)
    mu_rec = sum(mu for _, mu in jobs)
    return {
        "dual_bound": unscale(best, ls) + tail,
        "dual_theta": theta,
        "dual_bound_final_prices": unscale(mu_final + price_mass, ls) + tail,
        "dual_bound_recorded": unscale(mu_rec + price_mass, ls) + tail,
        "dual_price_mass": unscale(price_mass, ls),
        "dual_tail_utility": tail,
    }
