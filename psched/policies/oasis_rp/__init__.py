"""``oasis-rp``: OASiS admission, a promise made when the job can no longer wait, and plans
that may be revised.

On arrival a job is priced and searched as in OASiS (:mod:`psched.policies.oasis`: exponential
prices, an exact best-schedule search), each container paying the mean price over its own
stretch of the price curve, and admitted iff its payoff is positive. An admitted job is
**promised a completion slot** (``Decision.promised``, the ``promised`` column of
``jobs.csv``) at its **commit point**: at once if it cannot wait, else at the last boundary
from which it can still keep that promise (``promised_at``); until then it is *uncommitted*,
searched again at every boundary with the held jobs, densest first, so a denser job that
arrives later may take its room (and one that completes first needs no promise). How a
promised job runs is only a plan: it may change at later arrivals and at slot boundaries, but
a plan is only ever replaced by one that still completes the job's remaining work by its
promise, so **no promise is ever broken** (in simulation; on a real executor a job that runs
behind is re-planned within its promise if it can be, and the live service keeps one slot of
slack, ``commit_margin``). Every revision keeps each job's old plan as the fallback and is
undone as a whole unless every job involved has a new plan within its promise.

The mechanisms, one module each:

* :mod:`~psched.policies.oasis_rp.admission` -- the arrivals of a slot decided together,
  densest first; the density floor (``density_floor``).
* :mod:`~psched.policies.oasis_rp.own` -- the admission searches at own-usage prices.
* :mod:`~psched.policies.oasis_rp.promises` -- the promise: the latest slot within
  ``promise_rtol`` of the planned completion's utility, made at the commit point
  (``commit_margin``).
* :mod:`~psched.policies.oasis_rp.repack` -- the re-pack (``repack_gap``) and the pull-forward.
* :mod:`~psched.policies.oasis_rp.queue`, :mod:`~psched.policies.oasis_rp.reservations` --
  a job not admitted on arrival is held and searched again at each boundary, densest first,
  while its window is open, and so is an uncommitted one for the work it has left; one whose
  best plan starts later holds it as a reservation, admitted when it starts, and a denser job
  may take its room.
* :mod:`~psched.policies.oasis_rp.ahead` -- idle capacity handed to admitted jobs at each
  boundary, the uncommitted ones left without a plan included.
* :mod:`~psched.policies.oasis_rp.steady` -- the boundary re-plan when reality departs from
  the plans.
* :mod:`~psched.policies.oasis_rp.restore` -- a live service's journal state and restart.
* :mod:`~psched.policies.oasis_rp.estimates` -- the online estimates of U, L and the density
  floor from the arrivals so far (the default).

Beneath them: :mod:`~psched.policies.oasis_rp.book` (the plan ledger),
:mod:`~psched.policies.oasis_rp.search`, :mod:`~psched.policies.oasis_rp.latest`,
:mod:`~psched.policies.oasis_rp.units`, :mod:`~psched.policies.oasis_rp.dp` and
:mod:`~psched.policies.oasis_rp.kernels` (the exact searches, each held against a reference
composition in the tests), :mod:`~psched.policies.oasis_rp.plans` (plans as data) and
:mod:`~psched.policies.oasis_rp.state` (one run's state).

Prices: ``price_source`` ``"online"`` (the default: from the arrivals so far), ``"history"`` (a
history trace), ``"fixed"`` (``prices``: the service's ``--prices``) or ``"hindsight"`` (U, L
from the whole trace, jobs not yet arrived included: an oracle). The certificate
(:func:`psched.oasis.dual.dual_objective`) is computed as for OASiS at the final prices; weak
duality holds for any non-negative prices, and every ``mu_i`` is recomputed there by the exact
search, so ``dual_bound`` bounds the offline optimum for this run too. (The recorded payoffs
are not dual feasible here: prices can fall. ``dual_bound_recorded`` is therefore not
reported.)
"""

from psched.policies.oasis_rp.policy import OasisRpPolicy
from psched.policies.oasis_rp.promises import REJECT_PAYOFF

__all__ = ["REJECT_PAYOFF", "OasisRpPolicy"]
