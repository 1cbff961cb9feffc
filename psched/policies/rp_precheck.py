"""An exact necessary test before a re-pack's pull-forward: pulls that cannot save it.

A re-pack (lever (a) of ``oasis-rp``) that found the newcomer a schedule and re-planned the
moved jobs within their promises then pulls each moved job forward (lever (c): one exact
search per job, to complete strictly earlier) and is kept only if the planned utility
rises::

    gain = f_new(done) - base + sum_j [ f_j(c_j) - f_j(s_j) ]  > 0

(``done`` the newcomer's completion, ``base`` its utility without the re-pack, ``s_j`` job
``j``'s completion before the re-pack, ``c_j`` after the pull). A pull only moves ``j``'s own
plan, so ``c_j`` is at least ``j``'s earliest completion from slot ``t`` with its most
workers in every slot, ``lb_j = max(t, a_j) + ceil(W_j / N_j) - 1`` (``W_j`` its work left),
and utilities do not increase with completion: ``f_j(c_j) <= f_j(lb_j)``. Hence::

    gain <= f_new(done) - base + sum_j max(0, f_j(lb_j) - f_j(s_j))     (the bound)

When the bound is not positive the re-pack is undone whatever the pulls find, so they need
not run (floating-point sums are monotone, so the computed gain is at most the computed
bound). Their searches are still counted as run (:func:`pull_spans`: each pull searches
``j``'s window from ``t`` to one slot before its planned completion, which the pulls
before it do not change), so the effort banks are debited exactly as if they had run and
every later decision is the same. What does not follow: the ``pulled`` counter, and the
``freed`` flag a pull sets (read only by deferred admission: the test is off with ``defer``).

Measured on the 80,000-job Philly-like trace (first 11,816 arrivals): of 2,235 re-packs
undone after their pulls, the bound proves 2,036 (no kept re-pack has a bound <= 0); BENCHMARKS
section 11, "Session 10 (task 10c)".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from psched.model import Alloc, Job
from psched.policies.rp_book import work_of
from psched.policies.rp_effort import search_span

__all__ = ["gain_bound", "pull_spans"]


def _utility(job: Job, completion: int) -> float:
    return job.utility_at(completion - job.arrival + 1)


def gain_bound(newcomer_utility: float, base: float, moved: Sequence[str],
               jobs: Mapping[str, Job], saved: Mapping[str, Mapping[int, Alloc]],
               t: int) -> float:
    """The bound above: ``newcomer_utility - base`` plus, per job of ``moved`` (in that
    order, as the gain sums them), ``max(0, f_j(lb_j) - f_j(s_j))`` with ``s_j`` the last
    slot of ``saved[j]`` (its plan before the re-pack, slots ``>= t``). O(moved + plan
    entries)."""
    extra = []
    for j in moved:
        job, plan = jobs[j], saved[j]
        work = work_of(plan, t)
        lb = max(t, job.arrival) + math.ceil(work / job.max_workers) - 1
        extra.append(max(0.0, _utility(job, lb) - _utility(job, max(plan))))
    return newcomer_utility - base + sum(extra)


def pull_spans(moved: Sequence[str], jobs: Mapping[str, Job],
               plans: Mapping[str, Mapping[int, Alloc]], t: int) -> tuple[int, int]:
    """(searches, slot-searches) the pulls of ``moved`` would run from slot ``t``, as
    ``OasisRpPolicy._pull_one`` counts them: none for a plan that ends by ``t``, else one
    search over ``max(t, a_j) .. min(done_j - 1, last_j)``. O(moved + plan entries)."""
    searches = slots = 0
    for j in moved:
        done = max(plans[j])
        if done <= t:
            continue
        searches += 1
        slots += search_span(jobs[j], t, done - 1)
    return searches, slots
