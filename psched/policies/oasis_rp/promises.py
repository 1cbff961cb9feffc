"""The promise rule of ``oasis-rp``: what an admitted job is promised, and when.

**What.** A job whose plan completes in slot ``c`` is promised the latest slot of its window
whose utility is at least ``1 - promise_rtol`` of ``f(c)`` (``promise_rtol = 0``: the same
utility, so a job whose utility is flat is promised the end of its window), while its plan
still aims at ``c``. The slack between plan and promise is what the re-pack
(:mod:`psched.policies.oasis_rp.repack`) uses; no revision ever moves a completion past its
promise.

**When: at the commit point.** A promise made at admission holds the job's room against every
denser job that arrives later, however long the job could still have waited (a burst then
finds the cluster promised to the jobs that came first). So an admitted job is *uncommitted*
while it can wait: its plan is searched again at every boundary with the held jobs, densest
first, with the work it has done kept (:mod:`psched.policies.oasis_rp.queue`), and a denser
job may take its room. It is promised at its **commit point**, the first boundary ``t`` at
which its current best plan (completion ``c``, promise ``P`` by the rule above) could no
longer keep ``P`` if the job got nothing in slot ``t``: ``t + ceil(left / N) > P``, with
``left`` its work left. A job with no such slack at admission is promised at once; one that
completes before its commit point never needs a promise. This is the zero-slack case of
delayed commitment (the scheduler must commit to a job at the latest when its remaining slack
runs out: Azar, Kalp-Shaltiel, Lucier, Menache, Naor, Yaniv, "Truthful online scheduling with
commitments", EC 2015). With ``commit_margin = m`` the promise is made ``m`` slots earlier, so
that it keeps ``m`` slots of slack for an executor that may lose a slot (a live service: an
actor's start-up, a slow node). An uncommitted job's bound for the revisions within one boundary
(``RunState.promise``) is its planned completion, so nothing moves it later before the next
boundary searches it again.

Complexity: O(window) per promise.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from psched.core.model import Alloc, Decision, Job, ceil_eps
from psched.oasis.dual import unscale
from psched.policies.oasis_rp.plans import Found
from psched.policies.oasis_rp.state import RunState

__all__ = ["REJECT_PAYOFF", "commit", "commit_due", "completion_utility",
           "latest_same_utility", "promise_for", "record_promise"]

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


def commit_due(job: Job, promise: int, left: int, t: int, margin: int = 0) -> bool:
    """Whether slot ``t`` is the commit point of ``job``, ``left`` worker-slots from done,
    for ``promise``: without work in slot ``t`` (and ``margin`` more slots) it could not
    complete by ``promise`` (``t + margin + ceil(left / N) > promise``). O(1)."""
    return t + margin + ceil_eps(left / job.max_workers) > promise


def promise_for(st: RunState, job: Job, found: Found, rtol: float, t: int) -> Decision:
    """Admit ``job`` in slot ``t`` on its placed schedule ``found``: promised at once if
    ``t`` is its commit point (:func:`commit_due`), else uncommitted (no promise; its bound
    within the boundary is the planned completion). Records it in ``st`` and returns the
    decision. O(window)."""
    assert found.completion is not None
    st.jobs[job.job_id] = job
    promise = _promise_if_due(st, job, found.completion, job.work, rtol, t)
    if promise is None:
        st.uncommitted.add(job.job_id)
        st.stats["admitted_uncommitted"] += 1
    return Decision(admitted=True, payoff=unscale(found.payoff, st.book.log_scale),
                    schedule=dict(found.schedule), promised=promise)


def commit(st: RunState, job: Job, plan: Mapping[int, Alloc], left: int, rtol: float,
           t: int) -> Decision | None:
    """An uncommitted ``job`` with ``plan`` (its usage in the book; ``left`` worker-slots
    from done) at the boundary of slot ``t``: promised now if ``t`` is its commit point (the
    decision returned: admitted, the promise, the plan; no payoff: the job's payoff is the one
    it was admitted with), else its bound within the boundary becomes the plan's completion
    and None is returned. O(window)."""
    promise = _promise_if_due(st, job, max(plan), left, rtol, t)
    if promise is None:
        return None
    st.uncommitted.discard(job.job_id)
    st.stats["committed_late"] += 1
    return Decision(admitted=True, schedule=dict(plan), promised=promise)


def _promise_if_due(st: RunState, job: Job, done: int, left: int, rtol: float,
                    t: int) -> int | None:
    """``job``'s promise for a plan completing in ``done`` (``left`` worker-slots from
    done), recorded and returned if ``t`` is its commit point; else None, its bound within
    the boundary set to ``done``. O(window)."""
    promise = latest_same_utility(job, done, rtol)
    if not commit_due(job, promise, left, t, st.commit_margin):
        st.promise[job.job_id] = done
        return None
    record_promise(st, job, promise)
    return promise


def record_promise(st: RunState, job: Job, promise: int) -> None:
    """``job`` is promised slot ``promise``: its bound from now on, and its utility there
    counted in ``promised_utility``. O(1)."""
    st.promise[job.job_id] = promise
    st.promised_utility += job.utility_at(promise - job.arrival + 1)
