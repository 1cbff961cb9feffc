"""OASiS (Bao et al., INFOCOM 2018): prices, the best-schedule search and its references.

* :mod:`psched.oasis.ledger` -- committed usage per server, resource and slot, and the
  priced inputs of one arriving job;
* :mod:`psched.oasis.schedule` -- slot costs by greedy placement (Theorem 1), schedules;
* :mod:`psched.oasis.literal` -- the paper's dynamic program, literally (reference);
* :mod:`psched.oasis.fast` -- the fast exact search used by the policy;
* :mod:`psched.oasis.brute` -- exhaustive enumeration, for tests on tiny instances;
* :mod:`psched.oasis.dual` -- the dual certificate (19).

The policy itself is :mod:`psched.policies.oasis`.
"""

from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, Ledger
from psched.oasis.literal import solve_literal
from psched.oasis.schedule import Best, schedule_allocs, schedule_cost

__all__ = [
    "Best",
    "JobInputs",
    "Ledger",
    "schedule_allocs",
    "schedule_cost",
    "solve_fast",
    "solve_literal",
]
