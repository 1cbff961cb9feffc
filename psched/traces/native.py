"""The native trace format: one job per CSV row, every parameter of the paper explicit.

A header line names the columns, in any order; every following non-blank line is one job.
``traces/README.md`` documents every column, unit and rule; in short:

=====================  ========  ===========================================================
column                 required  meaning (units of ``oasis.md`` section 7)
=====================  ========  ===========================================================
``job_id``             yes       unique, non-empty name
``arrival``            yes       slot of arrival a_i, integer >= 0
``epochs``             yes       E_i, integer >= 1
``max_workers``        yes       N_i, integer >= 1
``minibatches``        yes       M_i, mini-batches per chunk, integer >= 1
``tau_s``              yes       tau_i, seconds per mini-batch on one worker, >= 0
``grad_mb``            yes       e_i, gradient size in MB, >= 0 (tau and e not both 0)
``tau_includes_comm``  no        true/false (default false): tau already counts 2e/b
``worker_<r>``         see note  w_i^r, one worker's demand for resource r
``ps_<r>``             see note  s_i^r, one PS's demand for resource r
``utility``            yes       sigmoid / constant / linear / deadline / step
``value``              yes       maximum utility (gamma1), >= 0
``decay``              yes       gamma2 or loss per late slot, >= 0
``target``             yes       gamma3 / deadline in slots, >= 0
``utility_steps``      no        a step utility's ``slots:value;...`` (psched.core.utility)
``workload``           no        what trains for real ("" = simulated only)
``hparams``            no        JSON object of hyper-parameters for ``workload``
=====================  ========  ===========================================================

``<r>`` ranges over :data:`psched.core.model.RESOURCES`. ``worker_bandwidth_gbps`` (b_i) and
``ps_bandwidth_gbps`` (B_i) are required and > 0, with b_i <= B_i (a job with b > B is
malformed, section 7); the other resource columns may be omitted (= 0) and are >= 0.

Every problem raises :class:`psched.core.errors.InputError` naming the file, the 1-based line of
the file and the column, with the bad value. :func:`write_trace` writes floats with ``repr``
so that ``load_trace(write_trace(x)) == x`` exactly.
"""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from psched.core.errors import InputError
from psched.core.limits import MAX_JOBS, Where, shown, validate_spec
from psched.core.model import RESOURCES, JobSpec
from psched.core.utility import format_steps, parse_steps
from psched.traces.rows import csv_rows, read_text

__all__ = [
    "INT_COLUMNS",
    "NATIVE_COLUMNS",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "atomic_write_bytes",
    "atomic_write_text",
    "load_trace",
    "parse_trace_text",
    "write_trace",
]

#: Integer columns and their least allowed value.
INT_COLUMNS: dict[str, int] = {"arrival": 0, "epochs": 1, "max_workers": 1, "minibatches": 1}
_UTILITY_COLUMNS = ("utility", "value", "decay", "target")
REQUIRED_COLUMNS: tuple[str, ...] = (
    "job_id", *INT_COLUMNS, "tau_s", "grad_mb",
    "worker_bandwidth_gbps", "ps_bandwidth_gbps", *_UTILITY_COLUMNS,
)
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "tau_includes_comm",
    *(f"{role}_{r}" for role in ("worker", "ps") for r in RESOURCES if r != "bandwidth_gbps"),
    "workload", "hparams", "utility_steps",
)
#: Every column, in the order :func:`write_trace` writes them.
NATIVE_COLUMNS: tuple[str, ...] = (
    "job_id", *INT_COLUMNS, "tau_s", "grad_mb", "tau_includes_comm",
    *(f"worker_{r}" for r in RESOURCES), *(f"ps_{r}" for r in RESOURCES),
    *_UTILITY_COLUMNS, "workload", "hparams",
)
#: Longest number cell read (a longer one is refused before parsing).
_MAX_NUMBER_CHARS = 100
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


def load_trace(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read and validate a native trace.

    Parameters
    ----------
    path : path-like
        A CSV file in the native format (module docstring, ``traces/README.md``).

    Returns
    -------
    list of JobSpec
        The jobs, sorted stably by arrival slot.

    Raises
    ------
    InputError
        For an unreadable file or any malformed content; the message names the file, the
        line and the column, and shows the bad value. No other exception escapes.

    Notes
    -----
    Linear in the size of the file.
    """
    name = str(path)
    return parse_trace_text(read_text(path), path=name)


def parse_trace_text(text: str, *, path: str = "<input>") -> list[JobSpec]:
    """Parse the native format from a string; ``path`` only names it in errors."""
    header: list[str] | None = None
    specs: list[JobSpec] = []
    first_line: dict[str, int] = {}
    for line, row in csv_rows(text, path):
        if header is None:
            header = _check_header([c.strip() for c in row], path, line)
            continue
        if len(row) != len(header):
            raise InputError(f"row has {len(row)} fields, the header has {len(header)}",
                             path=path, line=line)
        if len(specs) >= MAX_JOBS:
            raise InputError(f"more than {MAX_JOBS} jobs in one trace", path=path, line=line)
        spec = _parse_row(dict(zip(header, row, strict=True)), path, line)
        if spec.job_id in first_line:
            raise InputError(f"duplicate job_id {shown(spec.job_id)} (first on line "
                             f"{first_line[spec.job_id]})", path=path, line=line,
                             field="job_id")
        first_line[spec.job_id] = line
        specs.append(spec)
    if header is None:
        raise InputError("empty trace: no header line", path=path)
    return sorted(specs, key=lambda s: s.arrival)


def write_trace(path: str | os.PathLike[str], specs: Iterable[JobSpec]) -> None:
    """Write ``specs`` in the native format, atomically (temp file + ``os.replace``).

    Floats are written with ``repr``; the text is parsed back before it is written, so what
    :func:`load_trace` returns is exactly ``specs`` (sorted by arrival). O(size of the trace).

    Raises
    ------
    InputError
        If a job is one :func:`load_trace` would refuse (e.g. b > B); nothing is written.
    ValueError
        If a job would read back different (a text field with surrounding whitespace).
    """
    specs = list(specs)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    stepped = any(s.utility.steps for s in specs)  # the column only where a job needs it
    writer.writerow((*NATIVE_COLUMNS, "utility_steps") if stepped else NATIVE_COLUMNS)
    for spec in specs:
        steps = [format_steps(spec.utility.steps)] if stepped else []
        writer.writerow([*(_format(v) for v in _row_values(spec)), *steps])
    text = buf.getvalue()
    back = {s.job_id: s for s in parse_trace_text(text, path=str(path))}
    for spec in specs:
        if back.get(spec.job_id) != spec:
            raise ValueError(f"job {spec.job_id!r} would not read back equal (a text field "
                             "with surrounding whitespace?)")
    atomic_write_text(Path(path), text)


def _row_values(spec: JobSpec) -> list[object]:
    return [
        spec.job_id, spec.arrival, spec.epochs, spec.max_workers, spec.minibatches,
        spec.tau_s, spec.grad_mb, spec.tau_includes_comm,
        *(getattr(spec.worker_demand, r) for r in RESOURCES),
        *(getattr(spec.ps_demand, r) for r in RESOURCES),
        spec.utility.kind, spec.utility.value, spec.utility.decay, spec.utility.target,
        spec.workload, spec.hparams,
    ]


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to a temp file beside ``path``, then rename it over ``path``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, then rename it over ``path``: readers
    see the old file or the whole new one, never a part; the temp file never outlives it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_header(columns: Sequence[str], path: str, line: int) -> list[str]:
    known = set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS)
    seen: set[str] = set()
    for col in columns:
        if col not in known:
            raise InputError(f"unknown column {shown(col)} (known: {', '.join(NATIVE_COLUMNS)})",
                             path=path, line=line, field=repr(col)[1:-1] or "<empty>")
        if col in seen:
            raise InputError(f"column {shown(col)} appears twice", path=path, line=line, field=col)
        seen.add(col)
    missing = [c for c in REQUIRED_COLUMNS if c not in seen]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=path, line=line,
                         field=missing[0])
    return list(columns)


#: How the validator's field names read in this format (``worker_demand.gpu`` -> ``worker_gpu``).
_NAMES = {"worker_demand.": "worker_", "ps_demand.": "ps_", "utility.kind": "utility",
          "utility.steps": "utility_steps", "utility.": ""}


def _parse_row(row: dict[str, str], path: str, line: int) -> JobSpec:
    """One row's cells as typed values, checked by :func:`psched.core.limits.validate_spec`."""
    def bad(field: str, problem: str) -> InputError:
        return InputError(f"{problem}, got {shown(row.get(field, '').strip())}", path=path,
                          line=line, field=field)

    def integer(field: str) -> int:
        raw = row[field].strip()
        if len(raw) > _MAX_NUMBER_CHARS:
            raise bad(field, "must be an integer")
        try:
            return int(raw)
        except ValueError:
            try:
                as_float = float(raw)
            except ValueError:
                raise bad(field, "must be an integer") from None
            if not (math.isfinite(as_float) and as_float.is_integer()):
                raise bad(field, "must be an integer") from None
            return int(as_float)

    def number(field: str) -> float:
        raw = row.get(field, "0").strip()
        try:
            if len(raw) > _MAX_NUMBER_CHARS:
                raise ValueError(raw)
            return float(raw)
        except ValueError:
            raise bad(field, "must be a number") from None

    def steps(raw: str) -> tuple[tuple[float, float], ...]:
        try:
            return parse_steps(raw) if raw else ()
        except ValueError as err:
            raise bad("utility_steps", str(err)) from None

    flag = row.get("tau_includes_comm", "").strip().lower()
    if flag not in _TRUE | _FALSE:
        raise bad("tau_includes_comm", "must be true or false")
    fields = {
        "job_id": row["job_id"].strip(), **{f: integer(f) for f in INT_COLUMNS},
        "tau_s": number("tau_s"), "grad_mb": number("grad_mb"),
        "tau_includes_comm": flag in _TRUE,
        "worker_demand": {r: number(f"worker_{r}") for r in RESOURCES},
        "ps_demand": {r: number(f"ps_{r}") for r in RESOURCES},
        "utility": {"kind": row["utility"].strip(), "value": number("value"),
                    "decay": number("decay"), "target": number("target"),
                    "steps": steps(row.get("utility_steps", "").strip())},
        "workload": row.get("workload", "").strip(), "hparams": row.get("hparams", "").strip(),
    }
    return validate_spec(fields, where=Where(path=path, line=line, names=_NAMES))
