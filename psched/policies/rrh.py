"""RRH, the risk-reward heuristic (Irwin, Grit, Chase, HPDC 2004), as ``baselines.md`` specifies.

Every job asks for FIFO's fixed worker count ``r`` (drawn once per job, :class:`FifoPolicy`)
and its PS. Its *dominant share* ``s`` is the largest share of any resource (both pools' totals)
that ``r`` workers and their PS take; ``k = ceil(remaining / r)`` slots finish it, so its
dominant resource-time is ``s k``.

**Estimates** (a fluid model: the cluster serves one unit of every resource's total per slot).
Jobs are taken in rank order; a job starts once the resource-time of the jobs ranked before it
is served far enough for its own shares ``u`` to fit: start delay
``max(0, ceil(max_r (sum_before u_r k + u_r) - 1))``; its expected duration is
``t - a + delay + k`` and its expected utility ``f`` of that. (Per resource rather than by
dominant share alone: jobs bound by different resources overlap, and the cruder estimate
rejected most of the oasis-paper trace.)

**Admission**: admit a job iff its expected utility, at its rank (it starts "when the queue
ahead clears", the queue ahead being the admitted jobs of higher value density), minus the
utility the admitted jobs ranked below it would lose, each delayed by its dominant
resource-time ``s k`` slots, exceeds ``threshold`` (theta, default 0).

**Scheduling** at each event: rank admitted jobs by expected utility per unit of dominant
resource-time remaining, ``f(t - a + k) / (s k)`` (ties: earlier arrival); run them in that order
with their fixed counts, pausing (no containers this time) the ones that no longer fit.

Choices the specification leaves open, made to keep the rival strong:

* A running job's count is capped at ``ceil(remaining)`` (it finishes in the same slot).
* Lower-ranked jobs that fit still run when a higher one is paused (backfill).
* Placement round-robin from an empty cluster at each event (:class:`Builder`).

Complexity: O(J log J) per arrival, O(J (log J + S R)) per event, vectorised over the
admitted jobs (numpy), so the per-job Python work is one dictionary step.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from psched.core.model import EPS, RESOURCES, Alloc, Decision, Job, ceil_eps
from psched.core.policy import JobStatus, View, register_policy
from psched.policies.columns import JobColumns, utility_of
from psched.policies.counts import Builder
from psched.policies.fifo import FifoPolicy
from psched.policies.table import live, max_per_row

__all__ = ["REJECT_RISK", "RrhPolicy"]

#: Rejection reason: expected utility minus the loss it causes is at most the threshold.
REJECT_RISK = "risk_reward"
_KEY = 1 << 20  # packs (kind, workers, PS) into one int64 key (each below 2**20)


def _delay(ahead: np.ndarray, use: np.ndarray) -> int:
    """Slots until ``use`` fits once ``ahead`` resource-time is served (fluid, per resource)."""
    return max(0, math.ceil(float(np.max(ahead + use)) - 1 - 1e-9))


def _put(a: np.ndarray, at: int, x: Any) -> np.ndarray:
    """``np.insert(a, at, x, axis=0)`` without its generic machinery."""
    out = np.empty((a.shape[0] + 1, *a.shape[1:]), dtype=a.dtype)
    out[:at] = a[:at]
    out[at] = x
    out[at + 1:] = a[at:]
    return out


# columns of a _Ranking's matrix: row, slots k, density, -density, duration d, utility f,
# arrival, utility kind, value, decay, target; then u (R columns) and before (R columns)
_ROW, _K, _DENS, _NEG, _D, _F, _ARR, _UK, _VAL, _DEC, _TGT, _U = range(12)


class _Ranking:
    """One slot's ranking of the admitted jobs, with what an arrival's estimate reads of it.

    Per ranked job (one row of one matrix, so an admission is one row insertion): shares
    ``u``, slots ``k``, density, the resource-time of the jobs ranked before it (``before``: a
    sequential cumulative sum in rank order), its estimated duration ``d`` and utility ``f``
    at that duration, and its utility's parameters. The profiles do not change between the
    arrivals of a slot; an admitted arrival is inserted at its rank and only the jobs ranked
    after it get new sums, durations and utilities (the same float operations as recomputing
    them all: ``cumsum`` continues from the sum before the insertion point). O(J R) at the
    slot's first arrival, O((J - rank) R) per admission, O(J - rank) per estimate."""

    def __init__(self, t: int, cols: JobColumns, rows: np.ndarray, u: np.ndarray,
                 k: np.ndarray, dens: np.ndarray) -> None:
        self.t, self._r = t, u.shape[1]
        self._cols = cols  # its rows do not move while the ranking lives (one slot's arrivals)
        m = np.zeros((rows.size, _U + 2 * self._r))
        m[:, _ROW], m[:, _K], m[:, _DENS], m[:, _NEG] = rows, k, dens, -dens
        m[:, _ARR], m[:, _UK] = cols.arrival[rows], cols.kind[rows]
        m[:, _VAL], m[:, _DEC], m[:, _TGT] = cols.value[rows], cols.decay[rows], cols.target[rows]
        m[:, _U:_U + self._r] = u
        m[:, _U + self._r:] = np.cumsum(u * k[:, None], axis=0)
        self.m = m
        self._tail(0)

    @property
    def size(self) -> int:
        return int(self.m.shape[0])

    @property
    def before(self) -> np.ndarray:
        """Resource-time of the jobs ranked up to and including each one (J x R)."""
        return self.m[:, _U + self._r:]

    def position(self, dens_new: float) -> int:
        """Where a job of density ``dens_new`` ranks: after every job at least as dense."""
        return int(np.searchsorted(self.m[:, _NEG], -dens_new, side="right"))

    def excl(self, i: int) -> np.ndarray:
        """Resource-time of the jobs ranked before position ``i``."""
        return self.before[i - 1] if i > 0 else np.zeros(self._r)

    def utility(self, at: int, d: np.ndarray) -> np.ndarray:
        """Utilities of the jobs from position ``at`` on at durations ``d``."""
        m = self.m[at:]
        steps = self._cols.steps(m[:, _ROW].astype(np.int64)) if self._cols.has_steps else None
        return utility_of(m[:, _UK].astype(np.int64), m[:, _VAL], m[:, _DEC], m[:, _TGT], d,
                          steps)

    def late_loss(self, at: int, extra: float) -> float:
        """Utility the jobs from position ``at`` on lose if each finishes ``extra`` slots
        later, summed left to right (accumulate is sequential: the same floats as a loop)."""
        late = self.utility(at, self.m[at:, _D] + extra)
        return float(np.add.accumulate(self.m[at:, _F] - late)[-1])

    def _tail(self, at: int) -> None:
        """Recompute ``d`` and ``f`` of the jobs from position ``at`` on."""
        if at >= self.size:
            return
        before = self.before
        excl = (np.vstack([np.zeros((1, self._r)), before[:-1]]) if at == 0
                else before[at - 1:-1])
        m = self.m
        delay = np.maximum(0.0, np.ceil(max_per_row(excl + m[at:, _U:_U + self._r])
                                        - 1 - 1e-9))
        d = self.t - m[at:, _ARR] + delay + m[at:, _K]
        m[at:, _D] = d
        m[at:, _F] = self.utility(at, d)

    def insert(self, at: int, cols: JobColumns, row: int, u: np.ndarray, k: float,
               dens: float) -> None:
        """Rank a newly admitted job (row ``row`` of ``cols``) at position ``at``."""
        new = np.zeros(self.m.shape[1])
        new[[_ROW, _K, _DENS, _NEG, _ARR, _UK, _VAL, _DEC, _TGT]] = (
            row, k, dens, -dens, cols.arrival[row], cols.kind[row], cols.value[row],
            cols.decay[row], cols.target[row])
        new[_U:_U + self._r] = u
        m = self.m = _put(self.m, at, new)
        x = m[at:, _U:_U + self._r] * m[at:, _K][:, None]  # resource-time of each job
        if at:  # the prefix [:at] stays; the sum continues from it, one row after another
            m[at - 1:, _U + self._r:] = np.cumsum(
                np.vstack([m[at - 1, _U + self._r:][None], x]), axis=0)
        else:
            m[:, _U + self._r:] = np.cumsum(x, axis=0)
        self._tail(at)


@register_policy("rrh")
class RrhPolicy(FifoPolicy):
    """Risk-reward admission, value-density scheduling, fixed counts.

    Every admitted job's numbers live in :class:`~psched.policies.columns.JobColumns`, so an
    arrival's estimate and an event's ranking are a few numpy passes over the admitted jobs
    (the same float operations, in the same order, as evaluating them one by one).
    """

    name = "rrh"

    def __init__(self, threshold: float = 0.0, **fifo: Any) -> None:
        super().__init__(**fifo)
        self.threshold = threshold  #: theta: admit iff expected net gain > theta
        self._cols = JobColumns(len(RESOURCES))  #: admitted, not known to be finished
        self._jobs: dict[str, Job] = {}
        self._rejected = 0
        # the ranking of one slot's arrivals: (t, rows, shares, k, density), rank order; the
        # admitted jobs' profiles do not change between the arrivals of a slot
        self._slot: _Ranking | None = None
        self._seen: dict[str, JobStatus] = {}  # status object each job's left was set from
        self._moved: set[str] = set()  # jobs whose left plan() changed since the last replan

    def reset(self) -> None:
        super().reset()
        self._cols, self._jobs, self._rejected = JobColumns(len(RESOURCES)), {}, 0
        self._slot = None
        self._seen, self._moved = {}, set()

    def _use(self, job: Job, n: int) -> np.ndarray:
        """Shares of every resource (both pools' totals) that ``n`` workers and their PS take."""
        use = n * job.spec.worker_demand.as_array() + job.ps_needed(n) * \
            job.spec.ps_demand.as_array()
        tot = self.capacity.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(tot > 0, use / tot, 0.0)

    def _profile(self, job: Job, left: float, t: int) -> tuple[np.ndarray, int, float]:
        """(resource shares, slots left at the fixed count, value density now)."""
        r = max(1, self.request(job))
        k = max(1, ceil_eps(left / r))
        u = self._use(job, min(r, max(1, ceil_eps(left))))
        density = job.utility_at(t - job.arrival + k) / max(float(u.max()) * k, 1e-12)
        return u, k, density

    def _profiles(self, rows: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_profile` of many admitted jobs at once: shares (J x R), k (J,), density."""
        c = self._cols
        r = np.maximum(1, c.request[rows])
        left = c.left[rows]
        k = np.maximum(1.0, np.ceil(left / r - EPS))
        n = np.minimum(r, np.maximum(1.0, np.ceil(left - EPS)))
        ps = np.ceil(c.ratio[rows] * n - EPS)  # n >= 1: Job.ps_needed
        use = n[:, None] * c.worker[rows] + ps[:, None] * c.ps[rows]
        tot = self.capacity.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(tot > 0, use / tot, 0.0)
        umax = max_per_row(u) if u.shape[1] else np.zeros(rows.size)
        f = c.utility(rows, t - c.arrival[rows] + k)
        return u, k, f / np.maximum(umax * k, 1e-12)

    def _ranked(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Admitted rows by value density (ties: earlier arrival) with their profiles."""
        rows = self._cols.rows()
        u, k, dens = self._profiles(rows, t)
        order = np.lexsort((rows, -dens))
        return rows[order], u[order], k[order], dens[order]

    def on_arrival(self, job: Job, view: View) -> Decision:
        decision = super().on_arrival(job, view)
        if not decision.admitted:
            return decision
        t = view.t
        u_new, k_new, dens_new = self._profile(job, job.work, t)
        if self._slot is None or self._slot.t != t:
            self._slot = _Ranking(t, self._cols, *self._ranked(t))
        rank = self._slot
        at = rank.position(dens_new)  # the jobs ranked below it: positions at..
        loss = 0.0
        if at < rank.size:
            ahead = rank.excl(at)
            loss = rank.late_loss(at, float(u_new.max()) * k_new)
        else:
            ahead = rank.before[-1] if rank.size else np.zeros_like(u_new)
        gain = job.utility_at(t - job.arrival + _delay(ahead, u_new) + k_new)
        if gain - loss <= self.threshold:
            self._rejected += 1
            return Decision(admitted=False, reason=REJECT_RISK, payoff=gain - loss)
        row = self._cols.add(job, request=self.request(job), left=float(job.work),
                             demand=self.facts.kind(job))
        self._jobs[job.job_id] = job
        rank.insert(at, self._cols, row, u_new, float(k_new), dens_new)  # after ties: last
        return Decision(admitted=True, payoff=gain - loss)

    def replan(self, view: View) -> dict[str, Alloc]:
        self._slot = None
        self._sync(view)
        c = self._cols
        build = Builder(self.capacity, self.pools, self.facts)
        rows, _, _, _ = self._ranked(view.t)
        n = np.minimum(c.request[rows], np.ceil(c.left[rows] - EPS)).astype(np.int64)
        ps = np.where(n > 0, np.ceil(c.ratio[rows] * n - EPS), 0).astype(np.int64)
        # a (first-worker kind, workers, PS) request that did not fit never fits later in this
        # plan (free capacity only shrinks): the rows asking for it are skipped in bulk
        key = (c.demand[rows] * _KEY + n) * _KEY + ps
        dead: set[int] = set()
        n_l, ps_l, key_l, rows_l = n.tolist(), ps.tolist(), key.tolist(), rows.tolist()
        for p in live(np.flatnonzero(n > 0), key, dead):
            job = self._jobs[str(c.ids[rows_l[p]])]
            if not build.add(job, n_l[p], ps_l[p]):  # all or nothing: paused if it fails
                dead.add(key_l[p])
        return build.allocs()

    def _sync(self, view: View) -> None:
        """Forget finished jobs; set every active job's work left from its status (only the
        jobs whose status object changed, or whose estimate :meth:`plan` moved)."""
        c = self._cols
        for j in c.row.keys() - view.active.keys():
            c.drop(j)
            del self._jobs[j]
            self._seen.pop(j, None)
        keys, vals = list(view.active), list(view.active.values())
        olds = list(map(self._seen.get, keys))
        same = np.fromiter(map(operator.is_, olds, vals), dtype=bool, count=len(keys))
        for i in np.flatnonzero(~same).tolist():
            j = keys[i]
            if j in c:
                c.left[c.row[j]] = vals[i].remaining
                self._seen[j] = vals[i]
        for j in self._moved:
            st = view.active.get(j)
            if st is not None and j in c:
                c.left[c.row[j]] = st.remaining
        self._moved = set()

    def plan(self, view: View) -> dict[str, Alloc]:
        self._slot = None
        out = super().plan(view)
        c = self._cols
        for j, a in out.items():
            if j in c:
                i = c.row[j]
                c.left[i] = max(0.0, c.left[i] - a.n_workers)
                self._moved.add(j)
        return out

    def report(self) -> dict[str, Any]:
        return {**super().report(), "rrh_rejected": self._rejected}
