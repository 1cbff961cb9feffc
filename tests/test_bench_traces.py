"""Issue 18's trace-scale benchmark: its cell cache, cap rule and table (no timing asserted)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from trace_cells import (  # noqa: E402
    CACHE_COLUMNS,
    cell_key,
    format_table,
    needs_run,
    read_cache,
    write_cache,
)

TRACE = ROOT / "tests" / "data" / "helios_cluster_log_sample.csv"


def _row(**kw: object) -> dict[str, str]:
    base = {"trace": "t.csv", "jobs": "100", "policy": "fifo", "impl": "after",
            "workers_opt": "", "load": "0.8", "check": "True", "active": "1000",
            "status": "ok", "cap_s": "300", "commit": "abc1234", "utc": "2026-12-01 17:00",
            "loadavg_before": "1.0", "loadavg_after": "1.2", "sim_s": "2.5",
            "sim_cpu_s": "2.4", "base_mb": "60", "peak_mb": "80", "dec_p50": "1.0",
            "dec_p99": "2.0", "cpu_p50": "0.9", "cpu_p99": "1.9", "busy_p99": "",
            "busy_events": "0", "max_active": "40", "completed": "100", "utility": "123.4"}
    return {**base, **{k: str(v) for k, v in kw.items()}}


def test_cache_round_trips_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "cells.csv"
    rows = [_row(), _row(policy="drf", status="capped", sim_s="")]
    write_cache(path, rows)
    back = read_cache(path)
    assert list(back) == [cell_key(r) for r in rows]
    assert back[cell_key(rows[1])]["status"] == "capped"
    assert sorted(p.name for p in path.parent.iterdir()) == ["cells.csv"]
    with path.open(encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(CACHE_COLUMNS)


def test_missing_cache_reads_empty(tmp_path: Path) -> None:
    assert read_cache(tmp_path / "none.csv") == {}


@pytest.mark.parametrize(("cached", "cap", "force", "expected"), [
    (None, 300.0, False, True),
    (_row(), 300.0, False, False),
    (_row(), 300.0, True, True),
    (_row(status="capped", cap_s="100"), 300.0, False, True),
    (_row(status="capped", cap_s="300"), 300.0, False, False),
    (_row(status="capped", cap_s="600"), 300.0, False, False),
    (_row(status="exit 1"), 300.0, False, True),
    (_row(status="capped-cpu", cap_s="120"), 300.0, False, False),
    (_row(status="capped-cpu", cap_s="120"), 300.0, True, True),
])
def test_a_cell_runs_only_when_missing_forced_failed_or_capped_lower(
        cached: dict[str, str] | None, cap: float, force: bool, expected: bool) -> None:
    assert needs_run(cached, cap, force) is expected


def test_table_prints_caps_never_a_number() -> None:
    rows = [_row(), _row(policy="drf", status="capped", cap_s="300", sim_s="9.9"),
            _row(policy="rrh", status="capped-cpu", cap_s="120", sim_s="7.7")]
    lines = format_table(rows, 1000).splitlines()
    assert len(lines) == 2 + 3
    assert "| 100 | fifo | 2.5 | 2.4 | 80 (60) |" in lines[2]
    assert "> 300 s (cap)" in lines[3] and "9.9" not in lines[3]
    assert "> 120 CPU s (cap)" in lines[4] and "7.7" not in lines[4]


def _bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PSCHED_BENCH_NO_PIN": "1",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_traces.py"), "--trace", str(TRACE),
         "--jobs", "40", "--cache", str(tmp_path / "cells.csv"), *args],
        capture_output=True, text=True, env=env, timeout=300, check=True)


def test_bench_runs_cells_once_caches_them_and_prints_the_table_from_the_cache(
        tmp_path: Path) -> None:
    _bench(tmp_path, "--policies", "fifo,dorm")
    cache = read_cache(tmp_path / "cells.csv")
    by = {r["policy"]: r for r in cache.values()}
    assert set(by) == {"fifo", "dorm"}
    for row in by.values():
        assert row["status"] == "ok"
        assert float(row["peak_mb"]) >= float(row["base_mb"]) > 0
    first = (tmp_path / "cells.csv").read_text(encoding="utf-8")
    again = _bench(tmp_path, "--policies", "fifo,dorm")  # all cached
    assert (tmp_path / "cells.csv").read_text(encoding="utf-8") == first
    table = _bench(tmp_path, "--policies", "fifo,dorm", "--table-only")
    assert table.stdout == again.stdout
    assert table.stdout.count("\n| 40 | ") == 2


def test_a_cell_past_its_wall_cap_is_cached_as_capped(tmp_path: Path) -> None:
    # 10 ms: less than a fresh interpreter takes to import the benchmark, on any machine (a
    # 0.2-s cap let the 40-job FIFO cell finish on a fast one)
    out = _bench(tmp_path, "--policies", "fifo", "--cap", "0.01")
    (row,) = read_cache(tmp_path / "cells.csv").values()
    assert row["status"] == "capped" and row["sim_s"] == ""
    assert "> 0.01 s (cap)" in out.stdout
