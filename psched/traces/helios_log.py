"""Helios job-log excerpts with inter-arrival times (SenseTime Helios, HeliosData).

Columns ``u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status``: a job
id, its user, GPUs, CPUs and nodes, ``interval`` = seconds since the previous row's
submission (the first row's: since the start of the excerpt), ``run_time`` = run time in
seconds, ``wall_time`` (checked to be a number, not used), and ``new_status``: Pass ->
completed, Killed -> killed, Failed -> failed. A job's submission is the running sum of the
intervals, in file order. CPU-only jobs (``gpu_num`` 0) are skipped and counted (``no GPU``).
One worker per GPU. Mapping: :mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os

from psched.traces.mapping import TraceRow
from psched.traces.rows import MAX_SECONDS, read_csv

__all__ = ["HELIOS_LOG_COLUMNS", "read_helios_log"]

HELIOS_LOG_COLUMNS = ("u_id", "user", "gpu_num", "cpu_num", "node_num", "interval", "run_time",
                      "wall_time", "new_status")
_STATUS = {"pass": "completed", "killed": "killed", "failed": "failed"}


def read_helios_log(path: str | os.PathLike[str]) -> list[TraceRow]:
    """Rows of a Helios log excerpt, in file order; :class:`InputError` on bad input. O(rows)."""
    rows = []
    clock = 0.0
    for f in read_csv(path, HELIOS_LOG_COLUMNS):
        status = f.text("new_status").lower()
        if status not in _STATUS:
            raise f.bad("new_status", "must be Pass, Killed or Failed")
        f.text("user")
        f.integer("cpu_num")
        f.integer("node_num")
        f.number("wall_time")
        clock += f.number("interval")
        if clock > MAX_SECONDS:
            raise f.bad("interval", f"submissions add up past {MAX_SECONDS:g} s")
        rows.append(TraceRow(
            job_id=f.text("u_id"), line=f.line, path=f.path, submit_s=clock,
            duration_s=f.number("run_time"), workers=f.integer("gpu_num"),
            status=_STATUS[status],
        ))
    return rows
