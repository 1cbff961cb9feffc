"""The ``summary.json`` of a run: per-policy figures, provenance and warnings.

:func:`build_summary` adds to :func:`psched.results.metrics.summarize` the figures peers report in
wall-clock units (:func:`field_figures`), where the run came from (:func:`provenance`) and the
pitfalls a reader would otherwise miss (:func:`pitfalls`). The CLI, :func:`psched.compare`
and the service's ``run`` all build their summary here, so their numbers agree.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from psched.core.model import JobSpec, Pool
from psched.core.records import RunResult
from psched.results.metrics import summarize

__all__ = [
    "COLUMN_LEGEND",
    "PROVENANCE_KEYS",
    "build_summary",
    "field_figures",
    "pitfalls",
    "provenance",
]

#: Columns of the printed comparison table, and what each means (``--help``, README).
COLUMN_LEGEND: tuple[tuple[str, str], ...] = (
    ("utility", "total utility earned: sum of f(duration) over completed jobs"),
    ("admit", "jobs the policy admitted"),
    ("reject", "jobs rejected (by the policy, or because they cannot fit or arrive too late)"),
    ("done", "admitted jobs completed within the horizon"),
    ("unfin", "admitted jobs still unfinished at the horizon (they earn nothing)"),
    ("jct_mean", "mean job completion time of completed jobs, slots from arrival"),
    ("jct_h", "the same in hours (slots x slot length)"),
    ("jct_p99", "99th percentile of the completion time, slots"),
    ("late_mean", "mean of duration minus target over completed jobs with a target, slots"),
    ("queue", "mean slots from arrival to the first slot with workers (admitted jobs)"),
    ("makespan_h", "hours from the first arrival to the last completion"),
    ("dl_met", "share of deadline jobs completed by their deadline ('-': no deadlines)"),
    ("gpu_util", "GPU-slots used over GPU-slots available in the worker pool"),
    ("dec_p50_ms", "median decision time per decision event, ms"),
    ("dec_p99_ms", "99th percentile of the decision time, ms"),
    ("dual_bound", "OASiS-family: the dual objective, an upper bound on the offline optimum"),
    ("dual/util", "dual_bound / utility (the utility earned, counted alike for every policy): "
                  "an UPPER BOUND on OPT/ALG, not OPT/ALG itself (psched ratio measures that)"),
    ("promised", "jobs given a promised completion slot (OASiS family)"),
    ("kept", "promised jobs completed by their latest promise, each re-statement made no later "
             "than the slot it replaced"),
    ("restated", "jobs whose promise was re-stated (a new completion slot said)"),
    ("missed", "promised jobs whose promise was not kept (late, re-stated too late, or "
               "unfinished)"),
    ("wasted_ws", "worker-slots spent on jobs that never completed (unfinished, dropped, held)"),
    ("background_ws", "worker-slots run on capacity no plan used, for jobs their policy left "
                      "(past their window): counted apart"),
)

#: Keys of ``summary["provenance"]``.
PROVENANCE_KEYS: tuple[str, ...] = (
    "psched_version", "git_commit", "command", "seed", "started_utc", "python", "platform",
    "numpy", "scipy", "highspy", "ray", "pandas",
)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The commit of the psched source tree (``+dirty`` if modified), None outside git."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], check=True, capture_output=True,
                               text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def provenance(*, seed: int | None, command: Sequence[str] | str | None = None,
               started: _dt.datetime | None = None) -> dict[str, Any]:
    """Where a run came from: versions, commit, command line, seed and start time (UTC).

    ``command`` defaults to ``sys.argv``. Versions come from package metadata (nothing is
    imported); ``highspy``'s version is that of the HiGHS it bundles.
    """
    from psched import __version__

    if command is None:
        command = ["psched", *sys.argv[1:]]
    if not isinstance(command, str):
        command = shlex.join(str(c) for c in command)
    started = started or _dt.datetime.now(_dt.timezone.utc)
    out: dict[str, Any] = {
        "psched_version": __version__,
        "git_commit": _git_commit(),
        "command": command,
        "seed": seed,
        "started_utc": started.isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    for dist in ("numpy", "scipy", "highspy", "ray", "pandas"):
        out[dist] = _version(dist)
    return out


def field_figures(result: RunResult, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Completion and queueing times in hours, the makespan, the deadline-met fraction.

    * ``jct_mean_h``, ``jct_p50_h``, ``jct_p99_h``, ``queueing_mean_h`` -- the slot figures
      of :func:`~psched.results.metrics.summarize` times the slot length;
    * ``makespan_slots`` / ``makespan_h`` -- from the first arrival to the end of the last
      completion slot (None if no job completed);
    * ``deadline_jobs`` and ``deadline_met_fraction`` -- over jobs whose utility is of kind
      ``deadline``: the share completed within their target (None without such jobs).

    ``base``: the run's :func:`~psched.results.metrics.summarize` entry if already computed.
    O(jobs).
    """
    hours = result.cluster.slot_seconds / 3600.0
    if base is None:
        base = summarize(result)
    out: dict[str, Any] = {}
    for key in ("jct_mean", "jct_p50", "jct_p99", "queueing_mean"):
        v = base[key]
        out[f"{key}_h"] = None if v is None else v * hours
    recs = list(result.records.values())
    done = [r for r in recs if r.completion is not None]
    if done:
        first = min(r.job.arrival for r in recs)
        span = max(r.completion for r in done if r.completion is not None) + 1 - first
        out["makespan_slots"], out["makespan_h"] = span, span * hours
    else:
        out["makespan_slots"] = out["makespan_h"] = None
    dl = [r for r in recs if r.job.spec.utility.kind == "deadline"]
    met = sum(r.duration is not None and r.duration <= r.job.spec.utility.target for r in dl)
    out["deadline_jobs"] = len(dl)
    out["deadline_met_fraction"] = met / len(dl) if dl else None
    return out


def _schedule_key(result: RunResult) -> tuple[Any, ...]:
    return (tuple(result.allocations),
            tuple((j, r.admitted) for j, r in result.records.items()))


def pitfalls(specs: Sequence[JobSpec], results: Mapping[str, RunResult],
             slot_seconds: float) -> list[str]:
    """Results that are easy to misread, one sentence each (empty if none).

    * several policies executed exactly the same schedule (on a one-server cluster most
      policies have no choice to make);
    * most jobs arrive in slot 0 or fit in one slot: the slot is too long for the trace.
    """
    out: list[str] = []
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, res in results.items():
        groups.setdefault(_schedule_key(res), []).append(name)
    cluster = next(iter(results.values())).cluster if results else None
    one = cluster is not None and cluster.indices(Pool.WORKER).size == 1
    for names in groups.values():
        if len(names) > 1:
            out.append(f"policies {', '.join(names)} executed exactly the same schedule"
                       + ("; the cluster has one worker server, so they had no choice to make"
                          if one else ""))
    n = len(specs)
    if n >= 10:
        at0 = sum(s.arrival == 0 for s in specs)
        if at0 >= 0.5 * n:
            out.append(f"{at0} of {n} jobs arrive in slot 0 with {slot_seconds:g}-s slots: "
                       "the slot is too long for this trace's arrivals (try --slot-seconds)")
        short = sum(s.work(slot_seconds) <= s.max_workers for s in specs)
        if short >= 0.5 * n:
            out.append(f"{short} of {n} jobs finish within one {slot_seconds:g}-s slot at full "
                       "size: the slot is too long to tell schedules apart (try "
                       "--slot-seconds)")
    return out


def build_summary(params: Mapping[str, Any], results: Mapping[str, RunResult], *,
                  specs: Sequence[JobSpec] = (),
                  prov: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"params", "provenance", "warnings", "policies"}``: what ``summary.json`` holds."""
    policies = {}
    for name, res in results.items():
        entry = summarize(res)
        entry.update(field_figures(res, entry))
        policies[name] = entry
    slot_s = params.get("slot_seconds")
    if slot_s is None and results:
        slot_s = next(iter(results.values())).cluster.slot_seconds
    return {
        "params": dict(params),
        "provenance": dict(prov) if prov is not None else provenance(seed=params.get("seed")),
        "warnings": pitfalls(specs, results, float(slot_s or 3600.0)),
        "policies": policies,
    }
