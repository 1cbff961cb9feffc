"""SenseTime Helios 2020 ``cluster_log.csv`` (github.com/S-Lab-System-Group/HeliosData).

Columns ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
duration,queue``; times like ``2020-06-09 18:41:01`` (read as UTC), ``duration`` = run time in
seconds. ``state`` COMPLETED maps to completed, CANCELLED to killed, FAILED / TIMEOUT /
NODE_FAIL to failed. CPU-only jobs (``gpu_num`` 0) are skipped and counted (``no GPU``).
One worker per GPU, demand as the default worker. Mapping: :mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os

from psched.traces.mapping import TraceRow
from psched.traces.rows import read_csv

__all__ = ["HELIOS_COLUMNS", "read_helios"]

HELIOS_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                  "submit_time", "start_time", "end_time", "duration", "queue")
_STATES = {"COMPLETED": "completed", "CANCELLED": "killed", "FAILED": "failed",
           "TIMEOUT": "failed", "NODE_FAIL": "failed"}


def read_helios(path: str | os.PathLike[str]) -> list[TraceRow]:
    """Rows of a Helios ``cluster_log.csv``, in file order; :class:`InputError` on bad input.

    ``start_time``, ``end_time`` and ``queue`` are not used (``duration`` is the run time).
    O(rows).
    """
    rows = []
    for f in read_csv(path, HELIOS_COLUMNS):
        state = f.text("state").upper()
        if state not in _STATES:
            raise f.bad("state", f"must be one of {', '.join(_STATES)}")
        f.integer("cpu_num")
        f.integer("node_num")
        rows.append(TraceRow(
            job_id=f.text("job_id"), line=f.line, path=f.path,
            submit_s=f.timestamp("submit_time"), duration_s=f.number("duration"),
            workers=f.integer("gpu_num"), status=_STATES[state], vc=f.text("vc"),
        ))
    return rows
