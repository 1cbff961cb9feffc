"""ElasticFlow traces (github.com/microsoft/elasticflow-traces), raw and augmented CSV.

* raw: ``job_id,submission_time,duration,num_gpu`` -- seconds from the start of collection,
  run time in seconds, GPUs used;
* augmented: the same jobs plus ``num_iteration,model_name,deadline,batch_size`` (deadline
  absolute, seconds on the same clock).

Both list finished jobs only (every row has status ``completed``). Mapping:
:mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os

from psched.traces.mapping import TraceRow
from psched.traces.rows import MAX_COUNT, read_csv

__all__ = ["AUGMENTED_COLUMNS", "RAW_COLUMNS", "read_elasticflow"]

RAW_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
AUGMENTED_COLUMNS = (*RAW_COLUMNS, "num_iteration", "model_name", "deadline", "batch_size")


def read_elasticflow(path: str | os.PathLike[str], *, augmented: bool) -> list[TraceRow]:
    """Rows of an ElasticFlow file (raw or augmented), in file order.

    Raises :class:`~psched.core.errors.InputError` for a missing column or a bad value (a negative
    or non-numeric time, a non-integer GPU count, ...), naming file, line and column.
    O(rows).
    """
    rows = []
    for f in read_csv(path, AUGMENTED_COLUMNS if augmented else RAW_COLUMNS):
        extra: dict[str, object] = {}
        if augmented:
            f.integer("batch_size", least=1, most=10**9)
            extra = {"iterations": f.integer("num_iteration", least=1, most=10**12),
                     "model": f.text("model_name"),
                     "deadline_s": f.number("deadline")}
        rows.append(TraceRow(
            job_id=f.text("job_id"), line=f.line, path=f.path,
            submit_s=f.number("submission_time"), duration_s=f.number("duration"),
            workers=f.integer("num_gpu", most=MAX_COUNT), **extra,  # type: ignore[arg-type]
        ))
    return rows
