"""Tiresias simulator input CSV (github.com/SymbioticLab/Tiresias, Apache-2.0).

Columns ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``: submission
time and run time in seconds, GPUs used, training iterations, model name; ``interval`` (the gap
to the previous arrival) is redundant with ``submit_time`` and only checked to be a number.
Every row is a finished job. Mapping: :mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os

from psched.traces.mapping import TraceRow
from psched.traces.rows import read_csv

__all__ = ["TIRESIAS_COLUMNS", "read_tiresias"]

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration",
                    "interval")


def read_tiresias(path: str | os.PathLike[str]) -> list[TraceRow]:
    """Rows of a Tiresias CSV, in file order; :class:`InputError` on bad input. O(rows)."""
    rows = []
    for f in read_csv(path, TIRESIAS_COLUMNS):
        f.number("interval")
        rows.append(TraceRow(
            job_id=f.text("job_id"), line=f.line, path=f.path,
            submit_s=f.number("submit_time"), duration_s=f.number("duration"),
            workers=f.integer("num_gpu"),
            iterations=f.integer("iterations", least=1, most=10**12),
            model=f.text("model_name"),
        ))
    return rows
