"""Chronus's Philly-derived traces (Gao et al., SoCC 2021): Tiresias columns plus utilities.

Columns ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval`` as
:mod:`psched.traces.tiresias` (seconds, GPUs, iterations, model), plus the job's own value:

* ``expect_time_list`` -- completion times, ``-``-separated (``36000-39600-43200``), seconds on
  the ``submit_time`` clock, increasing;
* ``expect_value_list`` -- the value of completing by each of them (``100-80-50``), decreasing;
* ``best_effort`` -- 1 (or true) for a job with no deadline, else 0;
* ``job_type`` -- ``strict`` (one hard deadline), ``soft`` (several steps), ``best-effort``.

A best-effort job (either column says so) gets the constant utility
:data:`~psched.traces.mapping.BEST_EFFORT_VALUE`; any other its steps (one step: a deadline).
Model names are the trace's (``mobilenet_v2``, ``inception_v3``, ...); those the catalog lacks
are read as their family (``--model-map``). Extra columns (``user``) are ignored. Every row is
a finished job. Mapping: :mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os

from psched.core.errors import InputError
from psched.traces.mapping import TraceRow
from psched.traces.rows import Fields, read_csv
from psched.traces.tiresias import TIRESIAS_COLUMNS

__all__ = ["CHRONUS_COLUMNS", "JOB_TYPES", "read_chronus"]

CHRONUS_COLUMNS = (*TIRESIAS_COLUMNS, "expect_time_list", "expect_value_list", "best_effort",
                   "job_type")
#: Accepted ``job_type`` values (lower case) -> best-effort or not.
JOB_TYPES = {"strict": False, "soft": False, "best-effort": True, "best_effort": True,
             "best": True}
_FLAGS = {"0": False, "1": True, "false": False, "true": True}


def read_chronus(path: str | os.PathLike[str]) -> list[TraceRow]:
    """Rows of a Chronus CSV, in file order; :class:`InputError` on bad input. O(rows)."""
    rows = []
    for f in read_csv(path, CHRONUS_COLUMNS):
        f.number("interval")
        kind = f.text("job_type").lower()
        if kind not in JOB_TYPES:
            raise f.bad("job_type", "must be strict, soft or best-effort")
        flag = f.text("best_effort").lower()
        if flag not in _FLAGS:
            raise f.bad("best_effort", "must be 0 or 1")
        best = JOB_TYPES[kind] or _FLAGS[flag]
        rows.append(TraceRow(
            job_id=f.text("job_id"), line=f.line, path=f.path,
            submit_s=f.number("submit_time"), duration_s=f.number("duration"),
            workers=f.integer("num_gpu"),
            iterations=f.integer("iterations", least=1, most=10**12),
            model=f.text("model_name"), steps_s=() if best else _steps(f), best_effort=best,
        ))
    return rows


def _steps(f: Fields) -> tuple[tuple[float, float], ...]:
    times = _numbers(f, "expect_time_list")
    values = _numbers(f, "expect_value_list")
    if len(times) != len(values):
        raise f.bad("expect_value_list", f"has {len(values)} values for {len(times)} times")
    for i in range(1, len(times)):
        if times[i] <= times[i - 1]:
            raise f.bad("expect_time_list", "times must increase")
        if values[i] >= values[i - 1]:
            raise f.bad("expect_value_list", "values must decrease")
    return tuple(zip(times, values, strict=True))


def _numbers(f: Fields, field: str) -> list[float]:
    parts = f.text(field).split("-")
    out = []
    for part in parts:
        one = Fields({field: part}, f.path, f.line)
        try:
            out.append(one.number(field, most=1e12))
        except InputError:
            raise f.bad(field, "must be numbers joined by '-' (36000-39600)") from None
    return out
