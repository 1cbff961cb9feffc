"""Alibaba PAI GPU trace 2020 (github.com/alibaba/clusterdata, cluster-trace-gpu-v2020).

Two headerless CSV files (``pai_job_table``, ``pai_task_table``; the group-tag table is not
needed) -- the one public trace with explicit parameter-server and worker roles:

* job table ``job_name,inst_id,user,status,start_time,end_time``: a job's submission
  (``start_time``, seconds) and status (Terminated -> completed, Failed -> failed, Running /
  Waiting -> unfinished);
* task table ``job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
  plan_gpu,gpu_type``: one row per role. ``plan_cpu`` is percent of a core (600 = 6 vCPU),
  ``plan_mem`` GB, ``plan_gpu`` percent of a GPU (50 = half); an empty plan cell is 0 (the
  published files leave CPU-only cells empty).

Roles: ``ps`` rows give the PS count (sum of ``inst_num``) and one PS's demand; worker rows
are ``worker`` / ``chief`` when present, else every other role holding a GPU (``tensorflow``,
``PyTorchWorker``, ...); ``evaluator`` and GPU-less roles are ignored. Workers = sum of their
``inst_num``; one worker's demand = the largest per-instance plan among them; run time = the
longest ``end_time - start_time`` among them. A job with no task rows, or no worker role, is
skipped and counted; task rows of jobs absent from the job table are counted and ignored.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from psched.core.errors import InputError
from psched.core.model import Resources
from psched.traces.mapping import TraceRow
from psched.traces.rows import Fields, read_csv

__all__ = ["JOB_COLUMNS", "TASK_COLUMNS", "alibaba_files", "read_alibaba"]

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
_JOB_STATUS = {"terminated": "completed", "failed": "failed", "running": "unfinished",
               "waiting": "unfinished"}
_TASK_STATUS = {"terminated", "failed", "running", "waiting"}
log = logging.getLogger(__name__)
_WORKER_ROLES = {"worker", "chief"}
_IGNORED_ROLES = {"evaluator"}


@dataclass(frozen=True, kw_only=True)
class _Task:
    role: str  #: task_name, lower case
    count: int  #: inst_num
    seconds: float | None  #: end - start, None if it did not finish
    demand: Resources  #: one instance's plan


def alibaba_files(paths: Sequence[str | os.PathLike[str]]) -> tuple[Path, Path]:
    """The (job table, task table) among ``paths`` (files, or folders: their ``*.csv``).

    By name (``job_table`` / ``task_table``), then by layout (6 or 10 fields in the first row).

    Raises :class:`InputError` when either table cannot be found.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(q for q in p.iterdir() if q.is_file() and q.suffix == ".csv"
                        ) if p.is_dir() else [p]
    job = [f for f in files if "job_table" in f.name]
    task = [f for f in files if "task_table" in f.name]
    for f in files:
        if f in job or f in task:
            continue
        width = _width(f)
        (job if width == len(JOB_COLUMNS) else task if width == len(TASK_COLUMNS) else []
         ).append(f)
    where = ", ".join(map(str, paths))
    if len(job) != 1 or len(task) != 1:
        raise InputError(f"need exactly one pai_job_table and one pai_task_table file, found "
                         f"{len(job)} and {len(task)}", path=where, field="trace")
    return job[0], task[0]


def _width(path: Path) -> int:
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
    except OSError:
        return 0
    return first.count(",") + 1 if first.strip() else 0


def read_alibaba(paths: Sequence[str | os.PathLike[str]]) -> list[TraceRow]:
    """One :class:`TraceRow` per job of the job table, in file order. O(jobs + tasks)."""
    job_path, task_path = alibaba_files(paths)
    tasks: dict[str, list[_Task]] = defaultdict(list)
    for f in read_csv(task_path, TASK_COLUMNS, names=TASK_COLUMNS):
        tasks[f.text("job_name")].append(_task(f))
    rows = []
    for f in read_csv(job_path, JOB_COLUMNS, names=JOB_COLUMNS):
        rows.append(_job(f, tasks.pop(f.text("job_name"), [])))
    if tasks:
        log.warning("%s: %d task rows of %d jobs absent from the job table were ignored",
                    task_path, sum(len(v) for v in tasks.values()), len(tasks))
    return rows


def _task(f: Fields) -> _Task:
    status = f.text("status").lower()
    if status not in _TASK_STATUS:
        raise f.bad("status", "must be Terminated, Failed, Running or Waiting")

    def plan(field: str) -> float:
        return f.number(field, most=1e7) if f.cells[field].strip() else 0.0

    seconds = None
    if f.cells["end_time"].strip() and f.cells["start_time"].strip():
        start, end = f.number("start_time"), f.number("end_time")
        if end < start:
            raise f.bad("end_time", f"ends before it starts ({start:g})")
        seconds = end - start
    return _Task(role=f.text("task_name").lower(), count=f.integer("inst_num"),
                 seconds=seconds,
                 demand=Resources(gpu=plan("plan_gpu") / 100, cpu=plan("plan_cpu") / 100,
                                  memory_gb=plan("plan_mem")))


def _job(f: Fields, tasks: list[_Task]) -> TraceRow:
    status = f.text("status").lower()
    if status not in _JOB_STATUS:
        raise f.bad("status", "must be Terminated, Failed, Running or Waiting")
    base = {"job_id": f.text("job_name"), "line": f.line, "path": f.path,
            "submit_s": f.number("start_time"), "status": _JOB_STATUS[status]}
    if _JOB_STATUS[status] == "unfinished":
        return TraceRow(**base, duration_s=0.0, workers=0)  # type: ignore[arg-type]
    ps = [t for t in tasks if t.role == "ps"]
    workers = [t for t in tasks if t.role in _WORKER_ROLES] or [
        t for t in tasks if t.role != "ps" and t.role not in _IGNORED_ROLES and t.demand.gpu > 0]
    if not workers:
        skip = "no tasks" if not tasks else "no worker role"
        return TraceRow(**base, duration_s=0.0, workers=0, skip=skip)  # type: ignore[arg-type]
    ran = [t.seconds for t in workers if t.seconds is not None]
    if not ran:
        return TraceRow(**base, duration_s=0.0, workers=0,  # type: ignore[arg-type]
                        skip="workers never finished")
    return TraceRow(
        **base, duration_s=max(ran), workers=sum(t.count for t in workers),  # type: ignore[arg-type]
        worker_demand=_largest(workers), ps=sum(t.count for t in ps),
        ps_demand=_largest(ps) if ps else None,
    )


def _largest(tasks: list[_Task]) -> Resources:
    return Resources(**{r: max(getattr(t.demand, r) for t in tasks)
                        for r in ("gpu", "cpu", "memory_gb")})
