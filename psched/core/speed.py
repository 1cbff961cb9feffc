"""Each job's real speed, learnt from its measured progress against its plan.

A job's work is counted in worker-slots of its *profiled* speed: a job with ``n`` workers in
a slot is planned to do ``n`` worker-slots. Real machines differ (interference, stragglers,
restarts), so after every slot in which a job ran, the loop tells :class:`SpeedBook` how
many workers it had and how much work it did. The ratio ``r = progress / workers`` is that
slot's speed (1.0: as profiled). The book keeps per job:

* the **speed** ``s``: the mean of its slots' ratios, shrunk toward its workload's prior
  with the weight of ``k`` slots (``(k mu0 + sum r) / (k + m)`` after ``m`` slots):
  :data:`PRIOR_SLOTS` where other jobs of the workload were measured, :data:`PRIOR_WEAK`
  where the prior is only the profile's word;
* its **spread** ``sd``: the standard deviation of the slots' ratios about ``s``, with the
  prior's variance at the same weight; and the **standard error** of ``s``,
  ``sd / sqrt(k + m)``.

The **prior** of a job that has not run yet is its workload's (``JobSpec.workload``; every
simulated job shares ``""``): the mean of the speeds of that workload's jobs measured so far
and their spread (between jobs, plus the mean spread within). Before any job of a workload
has run the prior is 1.0 with no spread: the profile is believed.

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

__all__ = ["MIN_SPEED", "PRIOR_SLOTS", "PRIOR_WEAK", "Z_PROMISE", "SpeedBook",
           "SpeedEstimate"]

#: the slowest speed an estimate takes (a job that made no progress at all in its measured
#: slots is planned as 100x slower than profiled, not as one that never finishes)
MIN_SPEED = 0.01

#: weight of a workload's prior, in slots of measurement, once other jobs of it were measured
PRIOR_SLOTS = 2.0
#: its weight while nothing of the workload was measured (the prior is the profile's word)
PRIOR_WEAK = 0.5
#: one-sided normal quantile of a promise's slack (97.7%)
Z_PROMISE = 2.0


@dataclass(kw_only=True)
class SpeedEstimate:
    """One job's measured slots: the running sums the estimate is made of."""

    slots: int = 0  #: slots measured (slots in which it had workers)
    total: float = 0.0  #: sum of the slots' ratios progress / workers
    squares: float = 0.0  #: sum of their squares

    def observe(self, ratio: float) -> None:
        """One more slot with speed ``ratio``."""
        self.slots += 1
        self.total += ratio
        self.squares += ratio * ratio


class SpeedBook:
    """Every job's speed estimate and every workload's prior (module docstring). O(1) per
    observation and per query; the priors are kept as running sums too."""

    def __init__(self) -> None:
        self._jobs: dict[str, SpeedEstimate] = {}
        self._workload_of: dict[str, str] = {}
        #: per workload: (jobs, sum of speeds, sum of squared speeds, sum of variances)
        self._pool: dict[str, list[float]] = {}
        #: workloads with a slot measured at a speed other than exactly 1.0
        self._inexact: set[str] = set()
        #: per workload: (start slots measured, sum of the fractions of them lost)
        self._starts: dict[str, list[float]] = {}

    # -- learning ------------------------------------------------------------------------------
    def observe(self, job_id: str, workload: str, workers: int, progress: float) -> None:
        """Job ``job_id`` (of ``workload``) had ``workers`` workers in a slot and did
        ``progress`` worker-slots of work."""
        if workers <= 0:
            return
        est = self._jobs.get(job_id)
        if est is None:
            est = self._jobs[job_id] = SpeedEstimate()
            self._workload_of[job_id] = workload
        else:
            self._unpool(job_id)
        ratio = progress / workers
        est.observe(ratio)
        if ratio != 1.0:
            self._inexact.add(workload)
        self._add_pool(job_id)

    def observe_start(self, job_id: str, workload: str, workers: int,
                      progress: float) -> None:
        """A slot in which the job started, resumed or was resized: the fraction of it lost
        to start-up, against its speed estimate, joins its workload's start-up cost."""
        if workers <= 0:
            return
        lost = min(1.0, max(0.0, 1.0 - progress / (workers * self.speed(job_id, workload))))
        got = self._starts.setdefault(workload, [0.0, 0.0])
        got[0] += 1.0
        got[1] += lost
        if lost != 0.0:
            self._inexact.add(workload)

    def startup(self, workload: str) -> float:
        """The mean fraction of a slot ``workload``'s jobs lose when they start, resume or
        are resized (0 before any is measured)."""
        got = self._starts.get(workload)
        return 0.0 if not got or got[1] == 0.0 else got[1] / got[0]

    def exact(self, workload: str) -> bool:
        """True while every slot measured of ``workload`` ran at exactly its profiled speed
        (every estimate of it is then exactly 1.0, with no spread)."""
        return workload not in self._inexact

    def measured(self, job_id: str) -> bool:
        """True once the job ran a slot that was measured."""
        est = self._jobs.get(job_id)
        return est is not None and est.slots > 0

    def forget(self, job_id: str) -> None:
        """A job that never ran is gone (its estimate never counted); a measured one stays in
        its workload's prior."""
        if job_id in self._jobs and self._jobs[job_id].slots == 0:
            del self._jobs[job_id]

    def _weight(self, workload: str, exclude: str | None = None) -> float:
        """The prior's weight for a job of ``workload`` (``exclude``: that job)."""
        others = self._pool.get(workload, (0.0,))[0]
        if exclude is not None and self.measured(exclude):
            others -= 1.0
        return PRIOR_SLOTS if others >= 0.5 else PRIOR_WEAK

    def _stats(self, job_id: str) -> tuple[float, float, float]:
        """Speed, per-slot spread and the estimate's weight in slots (prior included)."""
        est = self._jobs[job_id]
        workload = self._workload_of[job_id]
        mu0, sd0 = self.prior(workload, exclude=job_id)
        k = self._weight(workload, exclude=job_id)
        n = k + est.slots
        s = max(MIN_SPEED, (k * mu0 + est.total) / n)
        # sum (r - s)^2 = squares - 2 s total + m s^2, plus the prior's weight
        dev = est.squares - 2.0 * s * est.total + est.slots * s * s
        var = max(0.0, (k * (sd0 * sd0 + (mu0 - s) ** 2) + dev) / n)
        return s, math.sqrt(var), n

    def _known(self, job_id: str, workload: str) -> tuple[float, float, float]:
        if job_id in self._jobs:
            return self._stats(job_id)
        s, sd = self.prior(workload)
        return s, sd, self._weight(workload)

    def _add_pool(self, job_id: str, sign: float = 1.0) -> None:
        est = self._jobs[job_id]
        m = est.slots
        s = est.total / m
        var = max(0.0, est.squares / m - s * s)
        pool = self._pool.setdefault(self._workload_of[job_id], [0.0, 0.0, 0.0, 0.0])
        pool[0] += sign
        pool[1] += sign * s
        pool[2] += sign * s * s
        pool[3] += sign * var

    def _unpool(self, job_id: str) -> None:
        self._add_pool(job_id, -1.0)

    # -- what the loop reads ---------------------------------------------------------------------
    def prior(self, workload: str, exclude: str | None = None) -> tuple[float, float]:
        """The speed and spread a job of ``workload`` is believed to have before it runs:
        the mean and spread of that workload's measured jobs (``exclude``: one of them
        left out, a job's own prior); ``(1.0, 0.0)`` before any."""
        pool = list(self._pool.get(workload, (0.0, 0.0, 0.0, 0.0)))
        if exclude is not None and self._jobs.get(exclude) is not None \
                and self._jobs[exclude].slots > 0:
            est = self._jobs[exclude]
            s = est.total / est.slots
            pool[0] -= 1.0
            pool[1] -= s
            pool[2] -= s * s
            pool[3] -= max(0.0, est.squares / est.slots - s * s)
        k = pool[0]
        if k < 0.5:
            return 1.0, 0.0
        mean = max(MIN_SPEED, pool[1] / k)
        between = max(0.0, pool[2] / k - mean * mean)
        within = max(0.0, pool[3] / k)
        if mean == 1.0 and between == 0.0 and within == 0.0:
            return 1.0, 0.0
        return mean, math.sqrt(between + within)

    def speed(self, job_id: str, workload: str = "") -> float:
        """The job's speed estimate (its workload's prior before it ran)."""
        return self._known(job_id, workload)[0]

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
        over those slots, ``s exp(-Z rel)`` (never below :data:`MIN_SPEED`)."""
        s = self._known(job_id, workload)[0]
        rel = self._relative(job_id, workload, slots)
        return max(MIN_SPEED, s * math.exp(-Z_PROMISE * rel))

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
        """The book as plain data (a live service journals it)."""
        return {"jobs": {j: [self._workload_of[j], e.slots, e.total, e.squares]
                         for j, e in self._jobs.items()},
                "starts": {w: list(v) for w, v in self._starts.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpeedBook:
        """The book :meth:`to_json` wrote."""
        book = cls()
        book._starts = {str(w): [float(a), float(b)] for w, (a, b) in data["starts"].items()}
        book._inexact = {w for w, (_, b) in book._starts.items() if b != 0.0}
        for j, (workload, slots, total, squares) in data["jobs"].items():
            book._jobs[j] = SpeedEstimate(slots=int(slots), total=float(total),
                                          squares=float(squares))
            book._workload_of[j] = str(workload)
            if int(slots) > 0:
                book._add_pool(j)
                if float(total) != int(slots) or float(squares) != int(slots):
                    book._inexact.add(str(workload))
        return book
