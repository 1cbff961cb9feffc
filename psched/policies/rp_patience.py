"""Patient admission: the ``patience`` lever of ``oasis-rp``.

OASiS decides a job the moment it arrives, at the prices of that moment. In a loaded
cluster the prices of the slots ahead are still near the floor ``L`` when an early job
arrives (nothing has been planned there yet), so a job that would gain nothing by running
early -- a time-insensitive job, or one whose utility decays slowly -- is admitted at once
and its plan takes capacity that a later, urgent and more valuable job then cannot find
(the worked Fig. 5 instances of ``BENCHMARKS.md`` section 11: the optimum rejects such jobs
or runs them in what is left). Its promise then fixes that capacity for good.

With ``patience = rtol > 0`` an arriving job is **held** (``Decision.hold``) while waiting
costs it little: at slot ``t`` it is held if its best schedule searched from slot
``t + lead`` (prices and capacity of the plans as they stand, utility counted from its
arrival) is still admissible (payoff > 0) and earns at least ``1 - rtol`` of the utility of
its best schedule at arrival. At every slot boundary the test is made again; the first time
it fails the job is searched from the boundary's slot and admitted (with a promise, as at
arrival, re-packing included) if its payoff is positive, else rejected (``payoff<=0``).
Jobs arriving meanwhile are decided first, so they take the capacity before the patient job.

A patient job's promise is made when it is admitted and kept as every promise is; its
utility still counts from its arrival. The test is :func:`worth_waiting`.
"""

from __future__ import annotations

from collections.abc import Callable

from psched.model import Job
from psched.policies.rp_book import Found

__all__ = ["worth_waiting"]


def worth_waiting(search_from: Callable[[Job, int], Found], job: Job, t: int,
                  reference: float, rtol: float, lead: int = 1) -> bool:
    """Whether ``job`` (not admitted) may wait at slot ``t``.

    Parameters
    ----------
    search_from : callable
        ``search_from(job, s)``: the job's best admission schedule from slot ``s`` at the
        current prices (the policy's own admission search).
    job : Job
        The job.
    t : int
        The current slot.
    reference : float
        The utility of its best schedule at arrival.
    rtol : float
        Utility it may lose by waiting, relative to ``reference`` (in ``(0, 1)``).
    lead : int
        Slots waited before the search that must still succeed (>= 1).

    Returns
    -------
    bool
        True if a schedule from ``t + lead`` exists with payoff > 0 and utility at least
        ``(1 - rtol) * reference``. Complexity: one search over the job's window.
    """
    start = t + lead
    if start > job.last_slot or reference <= 0.0:
        return False
    later = search_from(job, start)
    if not later.schedule or later.payoff <= 0.0:
        return False
    done = later.completion
    assert done is not None
    return job.utility_at(done - job.arrival + 1) >= (1.0 - rtol) * reference
