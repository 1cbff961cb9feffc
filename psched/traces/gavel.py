"""Gavel's ``.trace`` files (github.com/stanford-futuredata/gavel, ``scheduler/traces/``).

Tab-separated, no header, one job per line, in one of three layouts told apart by the number
of fields (every line of a file has the same):

* 7: ``job_type, command, num_steps_arg, needs_data_dir, total_steps, arrival_time,
  scale_factor``;
* 9: ``job_type, command, num_steps_arg, needs_data_dir, total_steps, scale_factor,
  priority_weight, SLO, arrival_time``;
* 10 (``physical_cluster/*.trace``): ``job_type, command, working_dir, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time``.

``arrival_time`` is seconds from the start; ``scale_factor`` the job's GPUs; ``total_steps``
its training steps. Run time on ``scale_factor`` GPUs = ``total_steps`` x one GPU's seconds
per step for ``job_type`` (:mod:`psched.traces.steps`) / ``scale_factor``. ``SLO`` > 0 is a
hard deadline, as Gavel sets it: arrival + SLO x that run time; ``SLO`` <= 0 (the files write
-1) is none. ``priority_weight`` is the job's value. ``command``, ``working_dir``,
``num_steps_arg`` are checked non-empty; ``needs_data_dir`` 0 or 1. No job ids: a job is
``L<line>``. Every job finished. Mapping: :mod:`psched.traces.mapping`.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Mapping

from psched.core.errors import InputError
from psched.traces.mapping import TraceRow
from psched.traces.rows import MAX_SECONDS, Fields, read_text
from psched.traces.steps import describe_fallbacks, lookup

__all__ = ["GAVEL_LAYOUTS", "looks_like_gavel", "read_gavel"]

_COMMON = ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps")
#: The column names of each layout, by its number of fields.
GAVEL_LAYOUTS: dict[int, tuple[str, ...]] = {
    7: (*_COMMON, "arrival_time", "scale_factor"),
    9: (*_COMMON, "scale_factor", "priority_weight", "SLO", "arrival_time"),
    10: ("job_type", "command", "working_dir", "num_steps_arg", "needs_data_dir",
         "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time"),
}


def looks_like_gavel(first_line: str) -> bool:
    """Whether a file's first non-blank line is a Gavel row (tabs, 7, 9 or 10 fields)."""
    return "\t" in first_line and len(first_line.rstrip("\r\n").split("\t")) in GAVEL_LAYOUTS


def read_gavel(path: str | os.PathLike[str], *,
               model_map: Mapping[str, str] | None = None) -> list[TraceRow]:
    """Rows of a Gavel ``.trace``, in file order; :class:`InputError` on bad input. O(rows).

    ``model_map`` renames job types missing from the step-time table (lower case); those
    still missing take the table's stand-in, named in one warning line.
    """
    name = str(path)
    used: Counter[tuple[str, str]] = Counter()
    rows: list[TraceRow] = []
    layout: tuple[str, ...] | None = None
    for line, raw in enumerate(read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        cells = raw.split("\t")
        if layout is None:
            layout = GAVEL_LAYOUTS.get(len(cells))
            if layout is None:
                raise InputError(f"a Gavel trace line has 7, 9 or 10 tab-separated fields, "
                                 f"got {len(cells)}", path=name, line=line)
        if len(cells) != len(layout):
            raise InputError(f"row has {len(cells)} fields, expected {len(layout)}",
                             path=name, line=line)
        rows.append(_row(Fields(dict(zip(layout, cells, strict=True)), name, line),
                         dict(model_map or {}), used))
    if layout is None:
        raise InputError("empty trace: no rows", path=name)
    if used:
        warnings.warn(f"{name}: {describe_fallbacks(used)}", stacklevel=2)
    return rows


def _row(f: Fields, model_map: dict[str, str], used: Counter[tuple[str, str]]) -> TraceRow:
    for col in ("command", "working_dir", "num_steps_arg"):
        if col in f.cells:
            f.text(col)
    f.integer("needs_data_dir", most=1)
    job_type = f.text("job_type")
    entry = lookup(job_type, "gavel", model_map, used)
    steps = f.integer("total_steps", least=1, most=10**12)
    gpus = f.integer("scale_factor", least=1)
    run_s = steps * entry.step_s / gpus
    if run_s > MAX_SECONDS:
        raise f.bad("total_steps", f"run time {run_s:g} s is beyond {MAX_SECONDS:g} s")
    arrival = f.number("arrival_time")
    deadline = value = None
    if "SLO" in f.cells:
        value = f.number("priority_weight", positive=True, most=1e12)
        slo = f.number("SLO", least=-1e12, most=1e6)
        deadline = arrival + slo * run_s if slo > 0 else None
    return TraceRow(job_id=f"L{f.line}", line=f.line, path=f.path, submit_s=arrival,
                    duration_s=run_s, workers=gpus, iterations=steps, model=entry.model,
                    deadline_s=deadline, value=value)
