"""The dual certificate: objective (19) at the final prices, an upper bound on the optimum.

Prices only rise, so the final prices ``p, q`` together with payoffs ``mu_i`` satisfying (20)
under them form a feasible dual solution of the LP relaxation of (14)-(18); by weak duality
its objective (19) bounds the offline optimum from above.

Two bounds are reported:

* ``dual_bound`` (rigorous): ``mu_i`` is recomputed at the final prices as the exact best
  payoff over every schedule the job could have *alone* in the cluster (each server at full
  capacity) -- the schedule set ``L_i`` of (20) -- by the same exact search as the policy.
  It holds whatever the container sizes.
* ``dual_bound_recorded`` (the paper's free certificate): ``mu_i`` as recorded at arrival.
  Valid when containers are small against servers (the paper's assumption): a schedule that
  did not fit at arrival is not covered by the recorded ``mu_i``.

Both add, for each job, its utility just past its window (``oasis.md`` section 7), covering
schedules the window excluded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from psched.model import Job
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import Ledger

__all__ = ["dual_objective", "unscale"]


def unscale(x: float, log_scale: float) -> float:
    """``x * exp(log_scale)`` without overflow for finite results."""
    if x == 0.0:
        return 0.0
    v = math.log(abs(x)) + log_scale
    return math.copysign(math.exp(v) if v < 709.0 else math.inf, x)


def dual_objective(ledger: Ledger, jobs: Sequence[tuple[Job, float]]) -> dict[str, float]:
    """Dual objective (19) for the jobs decided, with recorded payoffs in cost units.

    Complexity: one exact search per job (relaxed capacities), O(n_jobs) of them.
    """
    ls = ledger.log_scale
    price_mass = ledger.price_mass(0) + ledger.price_mass(1)
    tail = sum(job.utility_at(job.window + 1) for job, _ in jobs)
    mu_star = 0.0
    for job, _ in jobs:
        mu_star += solve_fast(ledger.inputs(job, relaxed=True), floor=0.0).payoff
    mu_rec = sum(mu for _, mu in jobs)
    return {
        "dual_bound": unscale(mu_star + price_mass, ls) + tail,
        "dual_bound_recorded": unscale(mu_rec + price_mass, ls) + tail,
        "dual_payoffs": unscale(mu_star, ls),
        "dual_price_mass": unscale(price_mass, ls),
        "dual_tail_utility": tail,
    }
