"""Reading public trace files: CSV rows and fields that fail with file, line and field.

Every adapter reads through :func:`read_csv` (or :func:`read_text` for JSON) and parses cells
with :class:`Fields`, so that every malformed input becomes one :class:`InputError` line
``file:line: field: problem, got 'value'`` and nothing else escapes.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from psched.core.errors import InputError
from psched.core.limits import shown

__all__ = [
    "MAX_COUNT",
    "MAX_SECONDS",
    "MAX_TRACE_BYTES",
    "Fields",
    "parse_timestamp",
    "read_csv",
    "read_text",
]

#: Largest time or duration accepted, seconds (about 3,000 years): beyond it a value is
#: refused as malformed instead of overflowing later arithmetic.
MAX_SECONDS = 1e11
#: Largest count accepted (GPUs, instances, workers).
MAX_COUNT = 1_000_000
#: Largest trace file read, bytes (its text and bytes together stay near 1 GB).
MAX_TRACE_BYTES = 512 * 2**20


def read_text(path: str | os.PathLike[str]) -> str:
    """The file as text (UTF-8, a BOM tolerated); :class:`InputError` if unreadable."""
    name = str(path)
    try:
        with Path(path).open("rb") as fh:
            raw = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as err:
        raise InputError(f"cannot read trace: {err.strerror or err}", path=name) from None
    if len(raw) > MAX_TRACE_BYTES:
        raise InputError(f"a trace file is at most {MAX_TRACE_BYTES} bytes (use --window-start"
                         "/--window-end on a cut of it)", path=name)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte {raw[err.start]:#04x})", path=name,
                         line=line) from None


def csv_rows(text: str, path: str) -> Iterator[tuple[int, list[str]]]:
    """The non-blank CSV rows of ``text``, each with the physical line it starts on (right even
    with quoted cells that span lines); a CSV syntax error becomes :class:`InputError`."""
    reader = csv.reader(io.StringIO(text, newline=""))
    last = 0
    try:
        for row in reader:
            line, last = last + 1, reader.line_num
            if any(cell.strip() for cell in row):
                yield line, row
    except csv.Error as err:
        raise InputError(f"bad CSV: {err}", path=path, line=reader.line_num) from None


@dataclass(frozen=True)
class Fields:
    """One row's cells by column name, with parsers that raise :class:`InputError`."""

    cells: dict[str, str]  #: column -> raw cell text
    path: str  #: file named in errors
    line: int  #: 1-based line of the row in the file

    def bad(self, field: str, problem: str) -> InputError:
        """The error for ``field`` of this row."""
        return InputError(f"{problem}, got {shown(self.cells.get(field, ''))}", path=self.path,
                          line=self.line, field=field)

    def text(self, field: str, *, required: bool = True) -> str:
        value = self.cells.get(field, "").strip()
        if required and not value:
            raise self.bad(field, "must not be empty")
        return value

    def number(self, field: str, *, least: float = 0.0, most: float = MAX_SECONDS,
               positive: bool = False) -> float:
        """A finite float in ``[least, most]`` (``> least`` when ``positive``)."""
        raw = self.cells.get(field, "").strip()
        try:
            value = float(raw)
        except ValueError:
            raise self.bad(field, "must be a number") from None
        if not math.isfinite(value):
            raise self.bad(field, "must be finite")
        if value < least or (positive and value <= least):
            raise self.bad(field, f"must be {'>' if positive else '>='} {least:g}")
        if value > most:
            raise self.bad(field, f"must be <= {most:g}")
        return value

    def integer(self, field: str, *, least: int = 0, most: int = MAX_COUNT) -> int:
        """An integer (``3`` or ``3.0``) in ``[least, most]``."""
        raw = self.cells.get(field, "").strip()
        try:
            value = int(raw)
        except ValueError:
            try:
                as_float = float(raw)
            except ValueError:
                raise self.bad(field, "must be an integer") from None
            if not (math.isfinite(as_float) and as_float.is_integer()):
                raise self.bad(field, "must be an integer") from None
            value = int(as_float)
        if value < least:
            raise self.bad(field, f"must be >= {least}")
        if value > most:
            raise self.bad(field, f"must be <= {most}")
        return value

    def timestamp(self, field: str) -> float:
        """Seconds since the epoch of a ``YYYY-MM-DD HH:MM:SS`` time (UTC unless it says)."""
        raw = self.cells.get(field, "").strip()
        value = parse_timestamp(raw)
        if value is None:
            raise self.bad(field, "must be a time like 2017-10-09 07:01:55")
        return value


def parse_timestamp(raw: str) -> float | None:
    """Seconds since the epoch of an ISO-like time, UTC when no zone is given; None if bad."""
    if not raw or len(raw) > 40:
        return None
    try:
        stamp = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    try:
        return stamp.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def read_csv(path: str | os.PathLike[str], required: Sequence[str], *,
             names: Sequence[str] | None = None) -> Iterator[Fields]:
    """The data rows of a CSV trace, as :class:`Fields`, in file order.

    Parameters
    ----------
    path : path-like
        The file.
    required : sequence of str
        Columns that must be present. With a header they may come in any order; extra
        columns are ignored; a repeated column is an error.
    names : sequence of str, optional
        For a file without a header line: the column names, in order; every row must have
        exactly that many fields.

    Raises
    ------
    InputError
        Unreadable or non-UTF-8 file, empty file, bad CSV, a missing or repeated column, a row
        with the wrong number of fields. Values are checked by the caller through
        :class:`Fields`.

    Notes
    -----
    Linear in the size of the file; blank lines are skipped.
    """
    name = str(path)
    text = read_text(path)
    header: list[str] | None = list(names) if names is not None else None
    seen_any = False
    for line, row in csv_rows(text, name):
        if header is None:
            header = _check_header([c.strip() for c in row], required, name, line)
            seen_any = True
            continue
        seen_any = True
        if len(row) != len(header):
            raise InputError(f"row has {len(row)} fields, expected {len(header)}",
                             path=name, line=line)
        yield Fields(dict(zip(header, row, strict=True)), name, line)
    if not seen_any:
        raise InputError("empty trace: no header line" if names is None else
                         "empty trace: no rows", path=name)


def _check_header(columns: list[str], required: Sequence[str], path: str,
                  line: int) -> list[str]:
    seen: set[str] = set()
    for col in columns:
        if col in seen:
            raise InputError(f"column {shown(col)} appears twice", path=path, line=line,
                             field=repr(col)[1:-1])
        seen.add(col)
    missing = [c for c in required if c not in seen]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)} (header: "
                         f"{','.join(columns)[:120]!r})", path=path, line=line,
                         field=missing[0])
    return columns
