"""The cell cache and table of ``bench_traces.py`` (the per-policy trace-scale table).

A cell is one (trace, jobs, policy, cluster options) simulation run in a fresh
child process. Every finished or capped cell is one row of a CSV cache (written to a temp file
then renamed, so an interrupted run leaves the previous cache whole), stamped with the commit,
the UTC time and the load average before and after it, so that cells can be run in pieces (the
80k cells on a quiet machine, one per call) and the table printed from the cache alone.

Rules: a cell with a result is not run again (``force`` re-runs it); a capped cell is run again
only under a larger cap (a cell capped by ``--cpu-limit``, ``> N CPU s (cap)``, only with
``force``); a capped cell prints ``> N s (cap)``, never a number.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["CACHE_COLUMNS", "KEY_COLUMNS", "cell_key", "format_table", "needs_run",
           "read_cache", "write_cache"]

#: Columns that identify a cell.
KEY_COLUMNS: tuple[str, ...] = ("trace", "jobs", "policy", "impl", "workers_opt", "load",
                                "check", "active")
#: Every column of the cache, in order.
CACHE_COLUMNS: tuple[str, ...] = (
    *KEY_COLUMNS, "status", "cap_s", "commit", "utc", "loadavg_before", "loadavg_after",
    "wall_s", "load_s", "sim_s", "sim_cpu_s", "base_mb", "peak_mb", "horizon", "workers",
    "events", "dec_p50", "dec_p99", "cpu_p50", "cpu_p99", "max_active", "busy_events",
    "busy_p99", "admitted", "completed", "utility")


def cell_key(row: dict[str, object]) -> tuple[str, ...]:
    """The identity of a cell (its key columns, as text)."""
    return tuple(str(row.get(k, "")) for k in KEY_COLUMNS)


def read_cache(path: str | os.PathLike[str]) -> dict[tuple[str, ...], dict[str, str]]:
    """The cached cells by key; empty when ``path`` does not exist. O(rows)."""
    p = Path(path)
    if not p.exists():
        return {}
    with p.open(newline="", encoding="utf-8") as f:
        return {cell_key(r): r for r in csv.DictReader(f)}


def write_cache(path: str | os.PathLike[str], rows: Iterable[dict[str, object]]) -> None:
    """Write every row to ``path`` atomically (temp file in the same folder, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=CACHE_COLUMNS, extrasaction="ignore",
                               lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow({k: "" if r.get(k) is None else r[k] for k in CACHE_COLUMNS})
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def needs_run(cached: dict[str, str] | None, cap_s: float, force: bool = False) -> bool:
    """Whether a cell must run: not cached, forced, or capped under a smaller cap than now."""
    if cached is None or force:
        return True
    if cached["status"] == "capped":
        return float(cached["cap_s"]) < cap_s
    if cached["status"] == "capped-cpu":  # a CPU-time cap (``--cpu-limit``): not comparable
        return False
    return cached["status"] != "ok"


def _num(row: dict[str, str], key: str, spec: str) -> str:
    v = row.get(key, "")
    if v in ("", "None"):
        return "-"
    return format(float(v), spec)


def _pair(row: dict[str, str], a: str, b: str) -> str:
    return f"{_num(row, a, '.2f')} / {_num(row, b, '.2f')}"


def format_table(rows: Sequence[dict[str, str]], active: int) -> str:
    """The markdown table of ``rows`` (cache rows, in the order given): one line per cell."""
    out = [f"| jobs | policy | sim wall s | sim CPU s | peak MB (before sim) | "
           "decision wall ms p50 / p99 | decision CPU ms p50 / p99 | CPU ms p99 at >= "
           f"{active} active (events) | most active | completed | utility | commit, UTC, load |",
           "|---:|---|---:|---:|---:|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        head = f"| {r['jobs']} | {r['policy']} |"
        stamp = (f"{r.get('commit', '')}, {r.get('utc', '')}, "
                 f"{r.get('loadavg_before', '')}–{r.get('loadavg_after', '')}")
        if r["status"] in ("capped", "capped-cpu"):
            unit = "CPU s" if r["status"] == "capped-cpu" else "s"
            out.append(f"{head} > {float(r['cap_s']):g} {unit} (cap) | | | | | | | | | "
                       f"{stamp} |")
        elif r["status"] != "ok":
            out.append(f"{head} failed ({r['status']}) | | | | | | | | | {stamp} |")
        else:
            busy = _num(r, "busy_p99", ".2f")
            out.append(
                f"{head} {_num(r, 'sim_s', '.1f')} | {_num(r, 'sim_cpu_s', '.1f')} | "
                f"{_num(r, 'peak_mb', '.0f')} ({_num(r, 'base_mb', '.0f')}) | "
                f"{_pair(r, 'dec_p50', 'dec_p99')} | {_pair(r, 'cpu_p50', 'cpu_p99')} | "
                f"{busy} ({r['busy_events'] or 0}) | {r['max_active'] or '-'} | "
                f"{r['completed']} | {_num(r, 'utility', '.1f')} | {stamp} |")
    return "\n".join(out)
