"""The promise rule of ``oasis-rp``: an admitted job is promised the latest completion slot
that keeps most of its planned utility.

A job admitted with a plan completing in slot ``c`` is promised the latest slot of its window
whose utility is at least ``1 - promise_rtol`` of ``f(c)`` (``promise_rtol = 0``: the same
utility, so a job whose utility is flat is promised the end of its window), while its plan
still aims at ``c``. The slack between plan and promise is what the re-pack
(:mod:`psched.policies.oasis_rp.repack`) uses; no revision ever moves a completion past its
promise.
"""

from __future__ import annotations

import numpy as np

from psched.core.model import Decision, Job
from psched.oasis.dual import unscale
from psched.policies.oasis_rp.plans import Found
from psched.policies.oasis_rp.state import RunState

__all__ = ["REJECT_PAYOFF", "completion_utility", "latest_same_utility", "promise_for"]

#: Rejection reason, as for ``oasis``: no schedule with a positive payoff, even after re-packing.
REJECT_PAYOFF = "payoff<=0"


def completion_utility(job: Job, completion: int | None) -> float:
    """Utility of ``job`` completing in slot ``completion`` (0 for None). O(1)."""
    return 0.0 if completion is None else job.utility_at(completion - job.arrival + 1)


def latest_same_utility(job: Job, completion: int, rtol: float = 0.0) -> int:
    """The latest slot of the job's window whose utility equals that of ``completion``, or
    is at least ``1 - rtol`` of it (utilities are non-increasing, so every slot between them
    keeps it too). O(window)."""
    d0 = completion - job.arrival + 1
    d = np.arange(d0, job.window + 1)
    if d.size == 0:
        return completion
    keep = np.asarray(job.spec.utility(d), dtype=float) >= (1.0 - rtol) * float(job.utility_at(d0))
    # utilities are non-increasing: the slots that keep the utility form a prefix
    k = d.size if keep.all() else int(np.argmin(keep))
    return completion + max(k, 1) - 1


def promise_for(st: RunState, job: Job, found: Found, rtol: float) -> Decision:
    """Admit ``job`` on its placed schedule ``found``: promise the latest slot within ``rtol``
    of its planned completion's utility (:func:`latest_same_utility`), record it in ``st``
    and return the decision. O(window)."""
    done = found.completion
    assert done is not None
    promise = latest_same_utility(job, done, rtol)
    st.jobs[job.job_id] = job
    st.promise[job.job_id] = promise
    st.promised_utility += job.utility_at(promise - job.arrival + 1)
    return Decision(admitted=True, payoff=unscale(found.payoff, st.book.log_scale),
                    schedule=dict(found.schedule), promised=promise)
