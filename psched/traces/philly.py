"""Microsoft Philly 2017 traces: the Pollux/Sia ``philly.csv`` and the raw ``cluster_job_log``.

* ``philly.csv`` (petuum/adaptdl simulator): ``timestamp,duration,num_gpus,gpu_time,cluster``
  -- submission time like ``2017-10-09 07:01:55`` (UTC), run time in seconds, GPUs,
  ``gpu_time`` = duration x GPUs (redundant, checked to be a number), hashed virtual cluster.
  No job ids: a job is named ``L<line>``. Every row is a finished job. Rows are not sorted.
* ``cluster_job_log`` (msr-fiddle/philly-traces): a JSON list of jobs ``{jobid, user, vc,
  status, submitted_time, attempts: [{start_time, end_time, detail: [{ip, gpus: [...]}]}]}``.
  GPUs = GPUs of the last attempt; run time = its end minus start; status Pass -> completed,
  Killed -> killed, Failed -> failed. A job with no attempt or an unfinished last attempt
  (no ``end_time``) is skipped and counted as ``unfinished`` whatever the status filter.
"""

from __future__ import annotations

import json
import os
from typing import Any

from psched.core.errors import InputError
from psched.core.limits import shown
from psched.traces.mapping import TraceRow
from psched.traces.rows import MAX_SECONDS, parse_timestamp, read_csv, read_text

__all__ = ["PHILLY_POLLUX_COLUMNS", "read_philly_json", "read_philly_pollux"]

PHILLY_POLLUX_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
_STATUS = {"pass": "completed", "killed": "killed", "failed": "failed"}


def read_philly_pollux(path: str | os.PathLike[str]) -> list[TraceRow]:
    """Rows of a Pollux/Sia ``philly.csv``, in file order; :class:`InputError` on bad input."""
    rows = []
    for f in read_csv(path, PHILLY_POLLUX_COLUMNS):
        f.number("gpu_time", most=MAX_SECONDS * 1e6)
        rows.append(TraceRow(
            job_id=f"L{f.line}", line=f.line, path=f.path, submit_s=f.timestamp("timestamp"),
            duration_s=f.number("duration"), workers=f.integer("num_gpus"),
            vc=f.text("cluster", required=False),
        ))
    return rows


def read_philly_json(path: str | os.PathLike[str]) -> list[TraceRow]:
    """Jobs of a raw Philly ``cluster_job_log`` (JSON list); errors name the job's line.

    O(size of the file): the list is decoded one job object at a time, so each job's line is
    known.
    """
    name = str(path)
    text = read_text(path)
    rows = []
    for line, obj in _json_objects(text, name):
        rows.append(_philly_job(obj, name, line))
    return rows


def _json_objects(text: str, path: str) -> list[tuple[int, Any]]:
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if pos >= len(text):
        raise InputError("empty trace", path=path)
    if text[pos] != "[":
        raise InputError("a Philly job log must be a JSON list of jobs", path=path,
                         line=text.count("\n", 0, pos) + 1)
    pos = _skip(text, pos + 1)
    out: list[tuple[int, Any]] = []
    while True:
        line = text.count("\n", 0, pos) + 1
        if pos < len(text) and text[pos] == "]" and not out:
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise InputError(f"bad JSON: {err.msg}", path=path, line=err.lineno) from None
        except RecursionError:
            raise InputError("bad JSON: nested too deeply", path=path, line=line) from None
        out.append((line, obj))
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip(text, pos + 1)
            continue
        if pos < len(text) and text[pos] == "]":
            break
        raise InputError("bad JSON: expected ',' or ']' after a job", path=path,
                         line=text.count("\n", 0, pos) + 1)
    return out


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _philly_job(obj: Any, path: str, line: int) -> TraceRow:
    def bad(field: str, problem: str) -> InputError:
        return InputError(problem, path=path, line=line, field=field)

    if not isinstance(obj, dict):
        raise bad("job", f"must be a JSON object, got {type(obj).__name__}")
    job_id = obj.get("jobid")
    if not isinstance(job_id, str) or not job_id.strip():
        raise bad("jobid", f"must be a non-empty string, got {shown(job_id)}")
    status = str(obj.get("status", "")).strip().lower()
    if status not in _STATUS:
        raise bad("status", f"must be Pass, Killed or Failed, got {shown(obj.get('status'))}")
    submitted = _time(obj.get("submitted_time"), "submitted_time", bad)
    attempts = obj.get("attempts")
    if not isinstance(attempts, list):
        raise bad("attempts", f"must be a list, got {shown(attempts)}")
    vc = obj.get("vc")
    vc = vc if isinstance(vc, str) else ""
    if not attempts or not isinstance(attempts[-1], dict) or attempts[-1].get("end_time") in (
            None, "None", ""):
        return TraceRow(job_id=job_id, line=line, path=path, submit_s=submitted,
                        duration_s=0.0, workers=0, status="unfinished", vc=vc)
    last = attempts[-1]
    start = _time(last.get("start_time"), "attempts[-1].start_time", bad)
    end = _time(last.get("end_time"), "attempts[-1].end_time", bad)
    if end < start:
        raise bad("attempts[-1].end_time", "ends before it starts")
    detail = last.get("detail")
    if not isinstance(detail, list):
        raise bad("attempts[-1].detail", f"must be a list, got {shown(detail)}")
    gpus = 0
    for d in detail:
        if not isinstance(d, dict) or not isinstance(d.get("gpus"), list):
            raise bad("attempts[-1].detail", "each entry needs a 'gpus' list")
        gpus += len(d["gpus"])
    return TraceRow(job_id=job_id, line=line, path=path, submit_s=submitted,
                    duration_s=end - start, workers=gpus, status=_STATUS[status], vc=vc)


def _time(value: Any, field: str, bad: Any) -> float:
    seconds = parse_timestamp(value) if isinstance(value, str) else None
    if seconds is None:
        raise bad(field, f"must be a time like 2017-10-03 03:41:09, got {shown(value)}")
    return seconds
