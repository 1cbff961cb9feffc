"""The rows of a policy's ``jobs.csv``: one per job, its spec and its outcome. Shared by the
output writer (:mod:`psched.results.output`) and the report's in-memory reader
(:mod:`psched.results.report_data`), below both."""

from __future__ import annotations

from typing import Any

from psched.core.eta import Eta
from psched.core.model import RESOURCES
from psched.core.records import RunResult
from psched.core.utility import format_steps

__all__ = ["JOBS_COLUMNS", "job_rows"]

JOBS_COLUMNS: tuple[str, ...] = (
    "job_id", "arrival", "work", "max_workers", "ps_ratio",
    *(f"worker_{r}" for r in RESOURCES), *(f"ps_{r}" for r in RESOURCES),
    "utility_kind", "value", "decay", "target", "utility_steps",
    "admitted", "reason", "completion", "duration", "utility", "promised", "promised_at",
    "decided", "restated", "speed", "speed_sd", "background", "eta_start", "eta_finish",
    "waits",
)


def job_rows(result: RunResult) -> list[list[Any]]:
    """The rows of ``jobs.csv`` (:data:`JOBS_COLUMNS`). ``restated``: each re-statement of
    the promise as ``slot:old>new``, ``;``-separated; ``speed``, ``speed_sd``: the measured
    speed against the model and its spread; ``background``: worker-slots run on capacity no
    plan used; ``eta_start``, ``eta_finish``, ``waits``: for a job unfinished when the run
    ended, when it was expected to start and finish under the plans then and why it waited
    (:mod:`psched.core.eta`), empty otherwise."""
    rows = []
    for rec in result.records.values():
        spec = rec.job.spec
        u = spec.utility
        rows.append([
            spec.job_id, spec.arrival, rec.job.work, spec.max_workers, repr(spec.ps_ratio),
            *(spec.worker_demand.to_dict()[r] for r in RESOURCES),
            *(spec.ps_demand.to_dict()[r] for r in RESOURCES),
            u.kind, u.value, u.decay, u.target, format_steps(u.steps),
            int(rec.admitted), rec.reason,
            "" if rec.completion is None else rec.completion,
            "" if rec.duration is None else rec.duration,
            repr(rec.utility),
            "" if rec.promised is None else rec.promised,
            "" if rec.promised_at is None else rec.promised_at,
            "" if rec.decided is None else rec.decided,
            ";".join(f"{at}:{old}>{new}" for at, old, new in rec.restated),
            repr(rec.speed), repr(rec.speed_sd), repr(rec.background),
            *_eta_cells(result.etas.get(spec.job_id)),
        ])
    return rows


def _eta_cells(e: Eta | None) -> list[Any]:
    if e is None:
        return ["", "", ""]
    return ["" if e.start is None else e.start, "" if e.finish is None else e.finish, e.waits]
