"""Trace format detection and :func:`load_any`, the one entry point for every format.

Formats (``--format``): ``native``, ``elasticflow`` (augmented CSV), ``elasticflow-raw``,
``tiresias``, ``chronus`` (Tiresias columns plus utilities), ``philly`` (Pollux/Sia
``philly.csv``), ``pollux`` (Pollux/Sia workload CSV), ``philly-json`` (raw
``cluster_job_log``), ``helios`` (``cluster_log.csv``), ``helios-log`` (log excerpt with
inter-arrival times), ``gavel`` (tab-separated ``.trace``), ``alibaba`` (PAI 2020 job + task
tables: a folder or the two files), and ``auto``: the header line (CSV), a leading ``[``
(JSON), or the layout of headerless files (Gavel: 7, 9 or 10 tab-separated fields; Alibaba:
6- and 10-field rows, or the published file names) decides.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psched.core.errors import InputError
from psched.core.model import JobSpec
from psched.traces.mapping import MappingOptions, MapReport, TraceRow, map_rows

__all__ = ["FORMATS", "detect_format", "load_any", "load_with_report", "read_rows",
           "scale_arrivals"]

#: Every format name ``--format`` accepts, with a one-line description.
FORMATS: dict[str, str] = {
    "native": "psched's own CSV (every job parameter explicit)",
    "elasticflow": "ElasticFlow augmented CSV (iterations, model, deadline)",
    "elasticflow-raw": "ElasticFlow raw CSV (job_id,submission_time,duration,num_gpu)",
    "tiresias": "Tiresias simulator CSV",
    "chronus": "Chronus Philly CSV (Tiresias columns plus value steps, best-effort, job type)",
    "philly": "Philly-derived philly.csv of the Pollux/Sia simulators",
    "pollux": "Pollux/Sia workload CSV (name,time,application,num_replicas,batch_size)",
    "philly-json": "Microsoft Philly 2017 raw cluster_job_log (JSON)",
    "helios": "SenseTime Helios 2020 cluster_log.csv",
    "helios-log": "Helios log excerpt with inter-arrival times (interval, run_time, new_status)",
    "gavel": "Gavel .trace (tab-separated, no header; 7, 9 or 10 fields)",
    "alibaba": "Alibaba PAI GPU 2020 job + task tables (headerless; a folder or two files)",
}
_HEADER_KEYS: tuple[tuple[str, frozenset[str]], ...] = (
    ("native", frozenset({"job_id", "arrival", "max_workers", "tau_s"})),
    ("elasticflow", frozenset({"submission_time", "num_iteration", "model_name", "deadline"})),
    ("elasticflow-raw", frozenset({"job_id", "submission_time", "duration", "num_gpu"})),
    ("chronus", frozenset({"submit_time", "num_gpu", "expect_time_list", "expect_value_list"})),
    ("pollux", frozenset({"name", "time", "application", "num_replicas"})),
    ("helios-log", frozenset({"u_id", "gpu_num", "interval", "run_time", "new_status"})),
    ("tiresias", frozenset({"submit_time", "iterations", "interval", "num_gpu"})),
    ("philly", frozenset({"timestamp", "duration", "num_gpus", "gpu_time"})),
    ("helios", frozenset({"gpu_num", "vc", "state", "submit_time"})),
)

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _as_list(path_or_paths: Paths) -> list[Path]:
    if isinstance(path_or_paths, (str, os.PathLike)):
        return [Path(path_or_paths)]
    return [Path(p) for p in path_or_paths]


def detect_format(path_or_paths: Paths) -> str:
    """The format of a trace (file, folder or files), from its header or layout.

    Raises :class:`InputError` when nothing matches (naming what was seen).
    """
    paths = _as_list(path_or_paths)
    if not paths:
        raise InputError("no trace file given", field="trace")
    if len(paths) > 1 or paths[0].is_dir():
        return "alibaba"
    path = paths[0]
    if "job_table" in path.name or "task_table" in path.name:
        return "alibaba"
    head = _head(path)
    if re.match(r"\s*\[\s*(\{|\]|$)", head):
        return "philly-json"
    first = next(line for line in head.splitlines() if line.strip())
    from psched.traces.gavel import looks_like_gavel

    if looks_like_gavel(first):
        return "gavel"
    import csv

    cells = {c.strip() for c in next(csv.reader(io.StringIO(first)), [])}
    for name, keys in _HEADER_KEYS:
        if keys <= cells:
            return name
    raise InputError(f"cannot tell the trace format from the first line {first[:80]!r}; "
                     f"give --format (one of {', '.join(FORMATS)})", path=str(path), line=1)


def _head(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            head = fh.read(65536)
    except OSError as err:
        raise InputError(f"cannot read trace: {err.strerror or err}", path=str(path)) from None
    text = head.decode("utf-8-sig", errors="replace")
    if not text.strip():
        raise InputError("empty trace", path=str(path))
    return text


def read_rows(path_or_paths: Paths, fmt: str = "auto", *,
              model_map: dict[str, str] | None = None) -> tuple[str, list[TraceRow]]:
    """The format and the unmapped rows of a public trace (not ``native``); ``model_map``
    renames names the step-time table lacks (formats that count steps)."""
    fmt = detect_format(path_or_paths) if fmt == "auto" else fmt
    paths = _as_list(path_or_paths)
    if fmt not in FORMATS:
        raise InputError(f"unknown trace format {fmt!r}; available: auto, "
                         f"{', '.join(FORMATS)}", path="--format", field="format")
    if fmt == "native":
        raise InputError("a native trace has jobs, not trace rows", path=str(paths[0]))
    if fmt == "alibaba":
        from psched.traces.alibaba import read_alibaba

        return fmt, read_alibaba(paths)
    if len(paths) != 1 or paths[0].is_dir():
        raise InputError(f"format {fmt} reads one file", path=", ".join(map(str, paths)),
                         field="trace")
    path = paths[0]
    if fmt in ("elasticflow", "elasticflow-raw"):
        from psched.traces.elasticflow import read_elasticflow

        return fmt, read_elasticflow(path, augmented=fmt == "elasticflow")
    if fmt == "tiresias":
        from psched.traces.tiresias import read_tiresias

        return fmt, read_tiresias(path)
    if fmt == "helios":
        from psched.traces.helios import read_helios

        return fmt, read_helios(path)
    if fmt in ("chronus", "pollux", "helios-log", "gavel"):
        return fmt, _read_new(fmt, path, model_map or {})
    from psched.traces.philly import read_philly_json, read_philly_pollux

    return fmt, (read_philly_pollux(path) if fmt == "philly" else read_philly_json(path))


def load_with_report(path_or_paths: Paths, fmt: str = "auto",
                     **options: Any) -> tuple[list[JobSpec], MapReport, str]:
    """Jobs of any trace, with the mapping report and the format used.

    ``options`` are :class:`MappingOptions` fields (``slot_seconds``, ``seed``, ``elastic``,
    ``statuses``, ``window_start_s``, ``window_end_s``, ``vc``, ``utility``, ...); a native
    trace takes none but ``slot_seconds``/``seed`` (ignored) and ``time_scale``.
    """
    fmt = detect_format(path_or_paths) if fmt == "auto" else fmt
    unknown = set(options) - set(MappingOptions.__dataclass_fields__)
    if unknown:
        raise InputError(f"unknown mapping option(s) {', '.join(sorted(unknown))}",
                         field="options")
    opts = MappingOptions(**options)
    if fmt == "native":
        paths = _as_list(path_or_paths)
        if len(paths) != 1:
            raise InputError("format native reads one file", field="trace")
        from psched.traces.native import load_trace

        specs = load_trace(paths[0])
        if opts.time_scale != 1.0:
            specs = scale_arrivals(specs, opts.time_scale)
        return specs, MapReport(rows=len(specs), jobs=len(specs)), fmt
    fmt, rows = read_rows(path_or_paths, fmt, model_map=dict(opts.model_map))
    specs, report = map_rows(rows, opts)
    return specs, report, fmt


def _read_new(fmt: str, path: Path, model_map: dict[str, str]) -> list[TraceRow]:
    """Rows of a Chronus, Pollux, Helios-log or Gavel file (one reader module each)."""
    if fmt == "chronus":
        from psched.traces.chronus import read_chronus

        return read_chronus(path)
    if fmt == "pollux":
        from psched.traces.pollux import read_pollux

        return read_pollux(path, model_map=model_map)
    if fmt == "helios-log":
        from psched.traces.helios_log import read_helios_log

        return read_helios_log(path)
    from psched.traces.gavel import read_gavel

    return read_gavel(path, model_map=model_map)


def load_any(path_or_paths: Paths, fmt: str = "auto", **options: Any) -> list[JobSpec]:
    """Jobs of a trace in any supported format (see :data:`FORMATS`), sorted by arrival.

    Parameters
    ----------
    path_or_paths : path, or sequence of paths
        A file; for ``alibaba`` a folder or the two table files.
    fmt : str
        A name of :data:`FORMATS` or ``"auto"`` (detected from the header or layout).
    **options
        :class:`~psched.traces.mapping.MappingOptions` fields.

    Raises
    ------
    InputError
        Unknown or undetectable format, malformed content (file, line and field named).

    Notes
    -----
    O(n log n) in the number of rows.
    """
    return load_with_report(path_or_paths, fmt, **options)[0]


def scale_arrivals(specs: Sequence[JobSpec], time_scale: float) -> list[JobSpec]:
    """Jobs with arrival slots multiplied by ``time_scale`` (floored), order kept.

    A load factor L is ``time_scale = 1 / L``: arrivals L times denser.
    """
    from dataclasses import replace

    return sorted((replace(s, arrival=int(s.arrival * time_scale + 1e-9)) for s in specs),
                  key=lambda s: s.arrival)
