"""Each job's real speed, learnt from its measured progress against its plan.

A job's work is counted in worker-slots of its *profiled* speed: a job with ``n`` workers in
a slot is planned to do ``n`` worker-slots. Real machines differ (interference, stragglers,
restarts), so after every slot in which a job ran, the loop tells :class:`SpeedBook` how
many workers it had and how much work it did. The ratio ``r = progress / workers`` is that
slot's speed (1.0: as profiled). The book keeps per job:

* the **speed** ``s``: the mean of its slots' ratios, shrunk toward its workload's prior
  with the weight of ``k`` slots (``(k mu0 + sum r) / (k + m)`` after ``m`` slots): once two
  or more other jobs of the workload were measured, the per-slot variance within them over
  the variance between their speeds (jobs that differ and run steadily are known by their
  own slots at once; jobs alike in noisy slots lean on each other), within
  [:data:`PRIOR_LEAST`, :data:`PRIOR_MOST`]; :data:`PRIOR_SLOTS` after one, or where their
  speeds show no spread; :data:`PRIOR_WEAK` where the prior is only the profile's word;
* its **spread** ``sd``: the standard deviation of the slots' ratios about ``s``, with the
  prior's variance at the same weight; and the **standard error** of ``s``,
  ``sd / sqrt(k + m)``.

The **prior** of a job that has not run yet is its workload's (``JobSpec.workload``; every
simulated job shares ``""``): the mean of the speeds of that workload's jobs measured so far
and their spread (between jobs, plus the mean spread within). Before any job of a workload
has run the prior is 1.0 with no spread: the profile is believed.

**Start-up.** A slot in which a job starts, resumes or is resized loses part of it to
start-up. Against the job's steady speed (once measured; its first steady slot measures the
start slots before it) each such slot tells its workload's start-up cost
(:meth:`SpeedBook.startup`), and the share of the workload's worker-slots run in such slots
tells how often this loop's plans pay it: :meth:`SpeedBook.efficiency`, the fraction a job
is expected to keep, at which the next one is decided.

What the loop does with it: a policy sees every active job's work left in *planned*
worker-slots, ``(W - done) / s`` (:attr:`psched.core.policy.JobStatus.remaining`), so every
re-plan uses the speed just measured; promises get :meth:`SpeedBook.slack` on top, the slots
that cover the estimate's uncertainty over the work left. With reality as profiled every
ratio is exactly 1.0, so every speed is exactly 1.0, every spread 0 and every slack 0: the
runs are those of a loop without it, bit for bit.

References: the shrinkage is the normal-normal empirical-Bayes estimate (Efron & Morris,
JASA 1973); a wait-time estimate with a quantile margin is what batch schedulers report to
users (Tsafrir, Etsion & Feitelson, IEEE TPDS 2007).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["MIN_SPEED", "PRIOR_LEAST", "PRIOR_MOST", "PRIOR_SLOTS", "PRIOR_WEAK",
           "SPREAD_NOISE", "STARTS_KNOWN", "STARTUP_NOISE", "Z_PROMISE", "SpeedBook",
           "SpeedEstimate"]

#: the slowest speed an estimate takes (a job that made no progress at all in its measured
#: slots is planned as 100x slower than profiled, not as one that never finishes)
MIN_SPEED = 0.01

#: weight of a workload's prior, in slots of measurement, once one other job of it was
#: measured, or where its jobs' speeds show no spread to weigh it by
PRIOR_SLOTS = 2.0
#: bounds of the prior's weight where two or more other jobs tell the spread: their per-slot
#: variance over the variance between them (Efron & Morris's ratio), within these
PRIOR_LEAST, PRIOR_MOST = 0.05, 20.0
#: its weight while nothing of the workload was measured (the prior is the profile's word)
PRIOR_WEAK = 0.5
#: start slots of a workload measured against steady speeds before its start-up cost is
#: believed (and a job's start slots, less that cost, tell its speed)
STARTS_KNOWN = 3
#: a start-up cost below this fraction of a slot is rounding, not a cost (a start slot and a
#: steady one at the same speed can differ in the last bits)
STARTUP_NOISE = 1e-9
#: a spread of speeds below this fraction of their mean is rounding, not a spread (equal
#: speeds, squared and summed, differ in their last bits)
SPREAD_NOISE = 1e-6
#: one-sided normal quantile of a promise's slack (97.7%)
Z_PROMISE = 2.0


@dataclass(kw_only=True)
class SpeedEstimate:
    """One job's measured slots: the running sums the estimate is made of."""

    slots: int = 0  #: steady slots measured (it ran as it ran in the slot before)
    total: float = 0.0  #: sum of their ratios progress / workers
    squares: float = 0.0  #: sum of their squares
    starts: int = 0  #: slots measured in which it started, resumed or was resized
    start_total: float = 0.0  #: sum of their ratios
    start_squares: float = 0.0  #: sum of their squares
    first_start: float = 0.0  #: the ratio of its first slot (a start from nothing)

    def observe(self, ratio: float, steady: bool) -> None:
        """One more slot with speed ``ratio`` (``steady``: no start-up in it)."""
        if steady:
            self.slots += 1
            self.total += ratio
            self.squares += ratio * ratio
        else:
            if self.starts == 0:
                self.first_start = ratio
            self.starts += 1
            self.start_total += ratio
            self.start_squares += ratio * ratio


class SpeedBook:
    """Every job's speed estimate and every workload's prior and start-up cost (module
    docstring). O(1) per observation and per query, but for the first query of a workload's
    prior after an observation (O(jobs of the workload))."""

    def __init__(self) -> None:
        self._jobs: dict[str, SpeedEstimate] = {}
        self._workload_of: dict[str, str] = {}
        #: workloads with a slot measured at a speed other than exactly 1.0
        self._inexact: set[str] = set()
        #: per workload: (start slots measured on jobs with a steady speed, sum of the
        #: fractions of them lost to start-up)
        self._starts: dict[str, list[float]] = {}
        #: per workload: its jobs, and the prior's sums when they are up to date
        self._members: dict[str, list[str]] = {}
        self._pool: dict[str, tuple[float, float, float, float]] = {}
        #: per workload: (start slots, sum of their ratios, of their squares) over its jobs,
        #: when up to date
        self._start_pool: dict[str, tuple[float, float, float]] = {}
        #: per workload: (worker-slots run, those of them in slots that started, resumed or
        #: resized a job)
        self._runs: dict[str, list[float]] = {}

    # -- learning ------------------------------------------------------------------------------
    def observe(self, job_id: str, workload: str, workers: int, progress: float) -> None:
        """A steady slot: job ``job_id`` (of ``workload``) had ``workers`` workers, as in the
        slot before, and did ``progress`` worker-slots of work. The job's first steady slot
        also measures, against it, the start-up cost of the start slots it ran before: a job
        that starts and then runs on tells its workload's cost after its second slot."""
        est = self._jobs.get(job_id)
        if workers > 0 and est is not None and est.slots == 0 and est.starts > 0 \
                and progress > 0.0:
            self._lost(workload, est.starts,
                       est.start_total / (est.starts * (progress / workers)))
        self._observe(job_id, workload, workers, progress, steady=True)

    def observe_start(self, job_id: str, workload: str, workers: int,
                      progress: float) -> None:
        """A slot in which the job started, resumed or was resized. Against its steady speed
        (once it has one) it measures its workload's start-up cost; without one, its speed
        is its start slots' mean less that cost."""
        if workers > 0 and job_id in self._jobs and self._jobs[job_id].slots > 0:
            steady = self._jobs[job_id]
            self._lost(workload, 1,
                       (progress / workers) * steady.slots / max(steady.total, 1e-12))
        self._observe(job_id, workload, workers, progress, steady=False)

    def _lost(self, workload: str, starts: int, kept: float) -> None:
        """``starts`` start slots of ``workload`` that each kept ``kept`` of a steady slot's
        work (so lost ``1 - kept`` of the slot, clipped to [0, 1])."""
        got = self._starts.setdefault(workload, [0.0, 0.0])
        got[0] += starts
        got[1] += starts * min(1.0, max(0.0, 1.0 - kept))

    def _observe(self, job_id: str, workload: str, workers: int, progress: float, *,
                 steady: bool) -> None:
        if workers <= 0:
            return
        est = self._jobs.get(job_id)
        if est is None:
            est = self._jobs[job_id] = SpeedEstimate()
            self._workload_of[job_id] = workload
            self._members.setdefault(workload, []).append(job_id)
        ratio = progress / workers
        est.observe(ratio, steady)
        runs = self._runs.setdefault(workload, [0.0, 0.0])
        runs[0] += workers
        if not steady:
            runs[1] += workers
        if ratio != 1.0:
            self._inexact.add(workload)
        self._pool.pop(workload, None)
        self._start_pool.pop(workload, None)

    def startup(self, workload: str) -> float:
        """The mean fraction of a slot ``workload``'s jobs lose when they start, resume or
        are resized (0 before any is measured)."""
        got = self._starts.get(workload)
        if not got or got[0] <= 0.0:
            return 0.0
        cost = got[1] / got[0]
        return 0.0 if cost < STARTUP_NOISE else cost

    def _keep(self, workload: str) -> float:
        """The fraction of a start slot's work ``workload``'s jobs keep from start-up (at
        least 0.05): what divides a start slot's ratio back into a speed."""
        return max(0.05, 1.0 - self.startup(workload))

    def efficiency(self, workload: str) -> float:
        """The fraction of its worker-slots a job of ``workload`` is expected to keep from
        start-up: ``1 - c f``, ``c`` its :meth:`startup` cost and ``f`` the fraction of the
        worker-slots its jobs ran so far that were in slots that started, resumed or resized
        them (how often this loop's plans restart its jobs); 1.0 before any cost is
        measured."""
        c = self.startup(workload)
        runs = self._runs.get(workload)
        if c == 0.0 or not runs or runs[0] <= 0.0:
            return 1.0
        return max(MIN_SPEED, 1.0 - c * runs[1] / runs[0])

    def exact(self, workload: str) -> bool:
        """True while every slot measured of ``workload`` ran at exactly its profiled speed
        (every estimate of it is then exactly 1.0, with no spread)."""
        return workload not in self._inexact

    def seen(self, workload: str) -> bool:
        """True once a slot a job of ``workload`` ran in was measured."""
        return workload in self._members

    def ran(self, job_id: str) -> bool:
        """True once a slot the job ran in was measured."""
        return job_id in self._jobs

    def measured(self, job_id: str) -> bool:
        """True once the job's own slots tell its speed."""
        return self._own(job_id) is not None

    def _own(self, job_id: str) -> tuple[int, float, float] | None:
        """The job's own slots as speed samples: (count, sum, sum of squares) of its steady
        ones, or else of its start slots with the workload's start-up cost taken out, once
        that cost is known (:data:`STARTS_KNOWN`); before that, its start slots after its
        first one as they ran (a resize's start-up is then taken for speed); None if they tell
        nothing yet."""
        est = self._jobs.get(job_id)
        if est is None:
            return None
        if est.slots > 0:
            return est.slots, est.total, est.squares
        known = self._starts.get(self._workload_of[job_id], (0.0, 0.0))[0] >= STARTS_KNOWN
        if est.starts > 0 and known:
            keep = self._keep(self._workload_of[job_id])
            return est.starts, est.start_total / keep, est.start_squares / (keep * keep)
        if est.starts > 1:  # start-up unknown: its resizes after its first start, as they ran
            first = est.first_start
            return (est.starts - 1, est.start_total - first,
                    est.start_squares - first * first)
        return None

    def _sums(self, workload: str) -> tuple[float, float, float, float]:
        """(jobs, sum of speeds, sum of squared speeds, sum of variances) over the
        workload's measured jobs."""
        got = self._pool.get(workload)
        if got is None:
            k = tot = sq = var = 0.0
            for j in self._members.get(workload, ()):
                own = self._own(j)
                if own is not None:
                    m, total, squares = own
                    mean = total / m
                    k, tot, sq = k + 1.0, tot + mean, sq + mean * mean
                    var += max(0.0, squares / m - mean * mean)
            got = self._pool[workload] = (k, tot, sq, var)
        return got

    # -- what the loop reads ---------------------------------------------------------------------
    def prior(self, workload: str, exclude: str | None = None) -> tuple[float, float]:
        """The speed and spread a job of ``workload`` is believed to have before it runs:
        the mean and spread of that workload's measured jobs (``exclude``: one of them
        left out, a job's own prior); ``(1.0, 0.0)`` before any, and while every slot of
        the workload ran as profiled (O(1) then)."""
        if workload not in self._inexact:
            return 1.0, 0.0
        k, mean, between, within = self._pooled(workload, exclude)
        if k < 0.5 or (mean == 1.0 and between == 0.0 and within == 0.0):
            return 1.0, 0.0
        return mean, math.sqrt(between + within)

    def _pooled(self, workload: str, exclude: str | None) -> tuple[float, float, float, float]:
        """Over the workload's measured jobs but ``exclude``: (how many, the mean of their
        speeds, the variance between those speeds, the mean per-slot variance within
        them); the last three 1.0, 0.0, 0.0 if there are none."""
        pool = list(self._sums(workload))
        own = None if exclude is None else self._own(exclude)
        if own is not None:
            m, total, squares = own
            mean = total / m
            pool[0] -= 1.0
            pool[1] -= mean
            pool[2] -= mean * mean
            pool[3] -= max(0.0, squares / m - mean * mean)
        k = pool[0]
        if k < 0.5:
            return 0.0, 1.0, 0.0, 0.0
        mean = max(MIN_SPEED, pool[1] / k)
        return k, mean, max(0.0, pool[2] / k - mean * mean), max(0.0, pool[3] / k)

    def _weight(self, workload: str, exclude: str | None = None) -> float:
        """The prior's weight, in slots, for a job of ``workload`` (``exclude``: that job):
        :data:`PRIOR_WEAK` before another job of it was measured; once two or more were,
        the empirical-Bayes weight, their per-slot variance over the variance between
        them (jobs much alike, or noisy slots: the prior weighs much; jobs that differ,
        each measured cleanly: a job's own slots tell its speed), within
        [:data:`PRIOR_LEAST`, :data:`PRIOR_MOST`]; else :data:`PRIOR_SLOTS`."""
        k, mean, between, within = self._pooled(workload, exclude)
        if k < 0.5:
            return PRIOR_WEAK
        if k < 1.5 or between <= (SPREAD_NOISE * mean) ** 2:
            return PRIOR_SLOTS
        return min(PRIOR_MOST, max(PRIOR_LEAST, within / between))

    def _stats(self, job_id: str) -> tuple[float, float, float]:
        """Speed, per-slot spread and the estimate's weight in slots (prior included)."""
        workload = self._workload_of[job_id]
        mu0, sd0 = self.prior(workload, exclude=job_id)
        k = self._weight(workload, exclude=job_id)
        m, total, squares = self._own(job_id) or (0, 0.0, 0.0)
        n = k + m
        s = max(MIN_SPEED, (k * mu0 + total) / n)
        # sum (r - s)^2 = squares - 2 s total + m s^2, plus the prior's weight
        dev = squares - 2.0 * s * total + m * s * s
        var = max(0.0, (k * (sd0 * sd0 + (mu0 - s) ** 2) + dev) / n)
        return s, math.sqrt(var), n

    def _known(self, job_id: str, workload: str) -> tuple[float, float, float]:
        """Speed, spread and weight of a job (its workload's prior before it ran); exactly
        (1.0, 0.0) while its workload ran as profiled, at no cost."""
        if job_id in self._jobs:
            workload = self._workload_of[job_id]
        if workload not in self._inexact:
            return 1.0, 0.0, PRIOR_WEAK
        if job_id in self._jobs:
            return self._stats(job_id)
        s, sd = self.prior(workload)
        return s, sd, self._weight(workload)

    def speed(self, job_id: str, workload: str = "") -> float:
        """The job's speed estimate (its workload's prior before it ran)."""
        return self._known(job_id, workload)[0]

    def guarded(self, job_id: str, workload: str = "") -> float:
        """The speed a reservation made for the job may assume: its estimate, but no more
        than its own slots allow, their mean plus :data:`Z_PROMISE` standard errors (the
        prior may make a plan hopeful, not a reservation of the work it has left: a job
        whose steady slots all ran at one speed is reserved at that speed, one with noisy
        slots at its estimate unless they reject it); the estimate while its own slots tell
        nothing, or where the bound lies within :data:`SPREAD_NOISE` of it."""
        s = self.speed(job_id, workload)
        if job_id not in self._jobs or self._workload_of[job_id] not in self._inexact:
            return s  # nothing of its own measured, or every slot as profiled
        own = self._own(job_id)
        if own is None:
            return s
        m, total, squares = own
        mean = total / m
        var = squares / m - mean * mean
        se = 0.0 if var <= (SPREAD_NOISE * mean) ** 2 else math.sqrt(var / m)
        bound = max(MIN_SPEED, mean + Z_PROMISE * se)
        return bound if bound < s * (1.0 - SPREAD_NOISE) else s

    def spread(self, job_id: str, workload: str = "") -> float:
        """The standard deviation of the job's per-slot speed (the prior's before it ran)."""
        return self._known(job_id, workload)[1]

    def slack(self, job_id: str, workload: str, slots: float) -> int:
        """Slots a promise needs on top of a plan that takes ``slots`` slots to go, so that a
        job as uncertain as this one still completes by it at :data:`Z_PROMISE` standard
        deviations: the estimate's own error (it persists over the slots) and the per-slot
        spread (it averages out over them). 0 when nothing is uncertain. O(1)."""
        rel = self._relative(job_id, workload, slots)
        return 0 if rel == 0.0 else math.ceil(Z_PROMISE * rel * slots - 1e-9)

    def cautious(self, job_id: str, workload: str, slots: float) -> float:
        """A speed the job keeps over ``slots`` slots at :data:`Z_PROMISE` standard
        deviations: its estimate shrunk by the estimate's error and the spread averaged
        over those slots, ``s exp(-Z rel)`` (never below :data:`MIN_SPEED`), and no more
        than its start slots showed while they are all that was measured
        (:meth:`start_bound`)."""
        s = self._known(job_id, workload)[0]
        rel = self._relative(job_id, workload, slots)
        out = max(MIN_SPEED, s * math.exp(-Z_PROMISE * rel))
        bound = self.start_bound(job_id, workload)
        return out if bound is None else min(out, bound)

    def start_bound(self, job_id: str, workload: str = "") -> float | None:
        """The most speed the start slots measured allow while nothing tells the job's speed
        apart from start-up: a start slot's ratio is the speed less the start-up cost, so
        their mean (over the measured cost's keep, once a cost is measured) bounds a speed
        that is otherwise unseen. The job's own start slots while its own speed is unmeasured
        (:meth:`measured`); for a job that has not run, its workload's start slots while no
        job of it is measured (its prior is then the profile's word), at a promise's
        confidence as a prior is: their mean ``m`` less their spread ``sd``,
        ``m exp(-Z sd / m)`` (:data:`Z_PROMISE`; the spread tells how far an unseen job's own
        speed may lie from the others'). None where the workload ran as profiled, or the
        job's speed or prior is measured."""
        est = self._jobs.get(job_id)
        if est is not None:
            workload = self._workload_of[job_id]
        if workload not in self._inexact:
            return None
        if est is not None:
            if self._own(job_id) is not None:
                return None
            # unmeasured, so it ran no steady slot: every slot it ran was a start
            mean = est.start_total / est.starts
        else:
            if self._sums(workload)[0] > 0.5:
                return None
            got = self._start_pool.get(workload)
            if got is None:
                jobs = [self._jobs[j] for j in self._members.get(workload, ())]
                got = self._start_pool[workload] = (float(sum(e.starts for e in jobs)),
                                                    sum(e.start_total for e in jobs),
                                                    sum(e.start_squares for e in jobs))
            count, total, squares = got
            if count <= 0.0:
                return None
            mean = total / count
            var = squares / count - mean * mean
            if mean > 0.0 and var > (SPREAD_NOISE * mean) ** 2:
                mean *= math.exp(-Z_PROMISE * math.sqrt(var) / mean)
        return max(MIN_SPEED, mean / self._keep(workload))

    def _relative(self, job_id: str, workload: str, slots: float) -> float:
        """The relative uncertainty of the mean speed over ``slots`` slots: the estimate's
        standard error (the whole spread between the workload's jobs for a job not measured
        yet) and the per-slot spread averaged over them."""
        s, sd, n = self._known(job_id, workload)
        if sd <= 0.0 or slots <= 0.0:
            return 0.0
        se2 = sd * sd if not self.measured(job_id) else sd * sd / n  # its own speed unseen
        return math.sqrt(se2 + sd * sd / max(1.0, slots)) / s

    # -- a live service's journal ----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The book as plain data."""
        return {"jobs": {j: [self._workload_of[j], e.slots, e.total, e.squares, e.starts,
                             e.start_total, e.start_squares, e.first_start]
                         for j, e in self._jobs.items()},
                "starts": {w: list(v) for w, v in self._starts.items()},
                "runs": {w: list(v) for w, v in self._runs.items()},
                "inexact": sorted(self._inexact)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpeedBook:
        """The book :meth:`to_json` wrote."""
        book = cls()
        book._starts = {str(w): [float(a), float(b)] for w, (a, b) in data["starts"].items()}
        book._inexact = {str(w) for w in data["inexact"]}
        book._runs = {str(w): [float(a), float(b)] for w, (a, b) in data.get("runs", {}).items()}
        for j, (workload, slots, total, squares, starts, s_total, s_sq, first) in \
                data["jobs"].items():
            book._jobs[j] = SpeedEstimate(slots=int(slots), total=float(total),
                                          squares=float(squares), starts=int(starts),
                                          start_total=float(s_total),
                                          start_squares=float(s_sq),
                                          first_start=float(first))
            book._workload_of[j] = str(workload)
            book._members.setdefault(str(workload), []).append(j)
        return book
