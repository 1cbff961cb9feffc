"""The ``philly`` scenario: a synthetic trace with the published shape of Microsoft's Philly.

SYNTHETIC, not the real trace. The real Philly-derived trace used by Pollux and Sia
(``philly.csv``, 82,247 jobs, ``shared/traces/FORMATS.md``) cannot ship with the project;
this scenario draws a trace of the same scale and rough shape so that every policy can be
timed at trace scale, seeded and reproducible. The shape follows what Jeon et al. report for
Philly (ATC'19), taken here as APPROXIMATIONS (figures read off the paper's plots, not its
data; the trace this module writes states its own distributions in :class:`PhillyReport`):

* job sizes: most jobs use one GPU; sizes are powers of two with a thin tail up to 128 GPUs.
  Drawn here: 1 GPU 78%, 2 GPUs 8%, 4 GPUs 7.5%, 8 GPUs 4.5%, 16 GPUs 1.4%, 32 GPUs 0.45%,
  64 GPUs 0.1%, 128 GPUs 0.05% (:data:`GPU_COUNTS`, :data:`GPU_SHARES`);
* run times: heavy-tailed over minutes to weeks; most jobs are short (median in the tens of
  minutes), larger jobs run longer. Drawn here: log-normal with median
  ``15 min x GPUs^0.25`` and sigma 2.0 (1-GPU: p50 15 min, p90 3.2 h, p99 26 h), clipped to
  [1 min, 14 days] (:data:`MEDIAN_RUN_S`, :data:`RUN_SIGMA`, :data:`RUN_CLIP_S`);
* arrivals: about 32 jobs an hour on average (82k jobs over ~2,500 hours), diurnal
  (``1 + 0.5 sin(2 pi h / 24)``) and weekly (weekends at 60%), i.i.d. within that density;
  each job's submission second is uniform within its hour.

These rows (submission, run time, GPUs: what ``philly.csv`` states) then go through the same
mapping as the real trace, :func:`psched.traces.mapping.map_rows` with the default
:class:`~psched.traces.mapping.MappingOptions`: one GPU per worker, ``W = ceil(run x GPUs /
slot)``, max workers ``min(2 x GPUs, W)``, models drawn from the catalog, and the paper's type
mix (10% time-insensitive, 55% sensitive, 35% critical) for utilities. ``psched trace synth
--scenario philly --jobs 80000 --out philly.csv`` writes it as the native CSV.

References
----------
M. Jeon, S. Venkataraman, A. Phanishayee, J. Qian, W. Xiao, F. Yang, "Analysis of
Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from psched.core.errors import InputError
from psched.core.model import Cluster, JobSpec
from psched.traces.mapping import MappingOptions, TraceRow, map_rows

__all__ = [
    "DEFAULT_RATE_PER_HOUR",
    "GPU_COUNTS",
    "GPU_SHARES",
    "MEDIAN_RUN_S",
    "RUN_CLIP_S",
    "RUN_SIGMA",
    "PhillyReport",
    "philly_cluster",
    "philly_jobs",
    "philly_rows",
]

log = logging.getLogger(__name__)

#: GPUs a job may use (powers of two, as in Philly).
GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
#: Share of jobs of each size (sums to 1).
GPU_SHARES: tuple[float, ...] = (0.78, 0.08, 0.075, 0.045, 0.014, 0.0045, 0.001, 0.0005)
#: Median run time of a 1-GPU job, seconds; a g-GPU job's median is this x g^0.25.
MEDIAN_RUN_S = 900.0
#: Sigma of log(run time).
RUN_SIGMA = 2.0
#: Run times are clipped to this range, seconds (1 minute .. 14 days).
RUN_CLIP_S: tuple[float, float] = (60.0, 14 * 24 * 3600.0)
#: Mean submissions per hour (82,247 jobs over about 2,500 hours).
DEFAULT_RATE_PER_HOUR = 32.0
_WEEKEND = 0.6  # relative arrival density on Saturdays and Sundays
_CLUSTER_JOBS = 80_000  # the cluster of the scenario is sized for this many jobs


@dataclass(frozen=True, kw_only=True)
class PhillyReport:
    """What a ``philly`` draw produced (for ``params`` and the benchmark notes)."""

    n_jobs: int  #: jobs drawn
    rate_per_hour: float  #: mean submissions per hour asked for
    arrival_hours: int  #: submissions lie in hours 0..arrival_hours-1
    gpu_counts: Mapping[str, int]  #: jobs of each GPU count ("1", "2", ...)
    run_s_p50: float  #: run time percentiles, seconds
    run_s_p90: float
    run_s_p99: float
    run_s_max: float
    insensitive: int  #: jobs with a flat utility (decay 0)
    gpu_hours: float  #: sum of run time x GPUs, hours
    default_slots: int  #: the horizon a run of these jobs takes without ``--slots``

    def __str__(self) -> str:
        sizes = ", ".join(f"{k} GPU: {v}" for k, v in self.gpu_counts.items())
        return "\n".join([
            f"{self.n_jobs} jobs (synthetic, Philly-like), submissions over "
            f"{self.arrival_hours} hours at {self.rate_per_hour:g}/h",
            f"  sizes: {sizes}",
            f"  run time p50 {self.run_s_p50 / 60:.1f} min, p90 {self.run_s_p90 / 3600:.2f} h, "
            f"p99 {self.run_s_p99 / 3600:.1f} h, max {self.run_s_max / 86400:.1f} days",
            f"  time-insensitive {self.insensitive}; {self.gpu_hours:.0f} GPU-hours; "
            f"default horizon {self.default_slots} slots",
        ])

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict."""
        out = asdict(self)
        out["gpu_counts"] = dict(self.gpu_counts)
        return out


def philly_rows(n_jobs: int, *, seed: int,
                rate_per_hour: float = DEFAULT_RATE_PER_HOUR) -> list[TraceRow]:
    """Draw ``n_jobs`` Philly-like trace rows (submission s, run time s, GPUs), in time order.

    Parameters
    ----------
    n_jobs : int
        Number of jobs.
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same rows.
    rate_per_hour : float
        Mean submissions per hour; the submissions span ``ceil(n_jobs / rate)`` hours.

    Returns
    -------
    list of TraceRow
        Ids ``P00000``... in submission order, ``path="<synth philly>"``, ``line`` = index + 1.

    Notes
    -----
    O(n log n) (the sort of submission times).
    """
    _check_n(n_jobs)
    if not (math.isfinite(rate_per_hour) and rate_per_hour > 0):
        raise InputError(f"must be a positive number, got {rate_per_hour!r}",
                         path="--scenario-opt", field="rate")
    rng = np.random.default_rng(seed)
    gpus, run_s = _sizes_and_runs(rng, n_jobs)
    hours = max(1, math.ceil(n_jobs / rate_per_hour - 1e-9))
    h = np.arange(hours)
    density = (1.0 + 0.5 * np.sin(2.0 * np.pi * h / 24.0)) * np.where(
        (h // 24) % 7 >= 5, _WEEKEND, 1.0)
    hour = rng.choice(hours, size=n_jobs, p=density / density.sum())
    submit_s = np.sort(hour * 3600.0 + rng.uniform(0.0, 3600.0, n_jobs))
    width = max(5, len(str(n_jobs - 1)))
    return [TraceRow(job_id=f"P{i:0{width}d}", line=i + 1, path="<synth philly>",
                     submit_s=float(submit_s[i]), duration_s=float(run_s[i]),
                     workers=int(gpus[i]))
            for i in range(n_jobs)]


def philly_jobs(n_jobs: int, *, seed: int, slots: int | None = None,
                slot_seconds: float = 3600.0, options: Mapping[str, str] | None = None
                ) -> tuple[list[JobSpec], PhillyReport]:
    """Jobs of the ``philly`` scenario: :func:`philly_rows` mapped like the real trace.

    Parameters
    ----------
    n_jobs : int
        Number of jobs (Philly: about 80,000).
    seed : int
        Seed of the rows and of the mapping's draws.
    slots : int, optional
        Not used to place jobs (a trace has no horizon; submissions follow ``rate``); accepted
        so that every scenario takes the same arguments. ``report.default_slots`` is the
        horizon a run takes without ``--slots``.
    slot_seconds : float
        Slot length, seconds.
    options : mapping, optional
        ``--scenario-opt``: ``rate=R`` (mean submissions per hour, default 32).

    Returns
    -------
    (list of JobSpec, PhillyReport)

    Raises
    ------
    InputError
        Bad ``n_jobs``, ``slot_seconds`` or option.
    """
    from psched.core.horizon import trace_horizon

    del slots
    rate = _parse_options(options)
    rows = philly_rows(n_jobs, seed=seed, rate_per_hour=rate)
    specs, _ = map_rows(rows, MappingOptions(slot_seconds=slot_seconds, seed=seed))
    gpus = np.array([r.workers for r in rows])
    run_s = np.array([r.duration_s for r in rows])
    q = np.percentile(run_s, [50, 90, 99])
    report = PhillyReport(
        n_jobs=n_jobs, rate_per_hour=rate,
        arrival_hours=max(1, math.ceil(n_jobs / rate - 1e-9)),
        gpu_counts={str(g): int(np.sum(gpus == g)) for g in GPU_COUNTS},
        run_s_p50=float(q[0]), run_s_p90=float(q[1]), run_s_p99=float(q[2]),
        run_s_max=float(run_s.max()),
        insensitive=sum(s.utility.decay == 0.0 for s in specs),
        gpu_hours=float(np.sum(gpus * run_s) / 3600.0),
        default_slots=trace_horizon(specs, slot_seconds),
    )
    log.debug("philly: %d jobs, %.0f GPU-hours", n_jobs, report.gpu_hours)
    return specs, report


def philly_cluster(*, seed: int, slot_seconds: float = 3600.0) -> Cluster:
    """The scenario's cluster: the default cluster (``oasis.md`` section 7) of the 80,000-job
    ``philly`` trace of this seed at load 0.8.

    A run of fewer jobs without ``--cluster`` from a trace file gets a cluster sized for
    those jobs instead (``psched simulate --trace``); this one is for ``--scenario philly``
    and ``trace synth --cluster-out``. O(80,000) draws (a few seconds).
    """
    from psched.traces.clusters import default_cluster_for_trace

    specs, _ = philly_jobs(_CLUSTER_JOBS, seed=seed, slot_seconds=slot_seconds)
    return default_cluster_for_trace(specs, slot_seconds=slot_seconds)


def _sizes_and_runs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    gpus = np.asarray(GPU_COUNTS)[rng.choice(len(GPU_COUNTS), size=n, p=np.asarray(GPU_SHARES))]
    median = MEDIAN_RUN_S * gpus.astype(float) ** 0.25
    run_s = np.clip(median * np.exp(RUN_SIGMA * rng.standard_normal(n)), *RUN_CLIP_S)
    return gpus, np.round(run_s)


def _check_n(n_jobs: int) -> None:
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise InputError(f"must be an integer >= 1, got {n_jobs!r}", field="jobs")


def _parse_options(options: Mapping[str, str] | None) -> float:
    rate = DEFAULT_RATE_PER_HOUR
    for key, raw in (options or {}).items():
        if key != "rate":
            raise InputError(f"unknown option {key!r} (known: rate)", path="--scenario-opt",
                             field=key)
        try:
            rate = float(raw)
        except ValueError:
            rate = math.nan
        if not (math.isfinite(rate) and rate > 0):
            raise InputError(f"must be a positive number of jobs per hour, got {raw!r}",
                             path="--scenario-opt", field="rate")
    return rate
