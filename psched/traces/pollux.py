"""Pollux / Sia workload CSVs (github.com/petuum/adaptdl, ``simulator/workloads*/``).

Columns ``name,time,application,num_replicas,batch_size``: a job name (unique), its
submission in seconds from the start, its application (``cifar10``, ``imagenet``, ``bert``,
``deepspeech2``, ``yolov3``, ``ncf``), the GPUs it asked for and its batch size. The file gives
no run time: each application trains a fixed number of steps, and its work is that count x
one GPU's seconds per step (:mod:`psched.traces.steps`); on ``num_replicas`` GPUs it runs that
work / ``num_replicas`` seconds. ``batch_size`` is checked only (psched's jobs do not adapt it).
Every row is a job to run (status completed). Mapping: :mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Mapping

from psched.traces.mapping import TraceRow
from psched.traces.rows import read_csv
from psched.traces.steps import describe_fallbacks, lookup

__all__ = ["POLLUX_COLUMNS", "read_pollux"]

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def read_pollux(path: str | os.PathLike[str], *,
                model_map: Mapping[str, str] | None = None) -> list[TraceRow]:
    """Rows of a Pollux/Sia workload CSV, in file order; :class:`InputError` on bad input.

    ``model_map`` renames applications missing from the step-time table (lower case); those
    still missing take the table's stand-in, named in one warning line. O(rows).
    """
    names = dict(model_map or {})
    used: Counter[tuple[str, str]] = Counter()
    rows = []
    for f in read_csv(path, POLLUX_COLUMNS):
        f.integer("batch_size", least=1, most=10**9)
        entry = lookup(f.text("application"), "pollux", names, used)
        if entry.steps is None:
            raise f.bad("application", f"read as {entry.name!r}, which states no step count "
                        "(--model-map it to a Pollux application)")
        gpus = f.integer("num_replicas", least=1)
        steps = entry.steps
        rows.append(TraceRow(
            job_id=f.text("name"), line=f.line, path=f.path, submit_s=f.number("time"),
            duration_s=steps * entry.step_s / gpus, workers=gpus, iterations=steps,
            model=entry.model,
        ))
    if used:
        warnings.warn(f"{path}: {describe_fallbacks(used)}", stacklevel=2)
    return rows
