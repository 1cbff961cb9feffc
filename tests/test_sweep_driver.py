"""The driver's own cell of a sweep on an embedded Ray runs in a forked child process, not in
a thread of the driver (whose interpreter lock maps and ships every seed's jobs meanwhile),
and gives the row a serial run gives."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from psched.runs import sweep
from psched.runs.sweep import SweepCell, run_cell
from psched.runs.sweep_spec import SweepSpec

DATA = Path(__file__).resolve().parent / "data"
TIMING = ("wall_s", "cpu_s", "ray_node", "start_unix_s", "end_unix_s", "pid")


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in TIMING}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.parametrize(("policy", "seed"), [("fifo", 0), ("srtf", 1)])
def test_the_drivers_cell_runs_in_another_process_and_gives_the_serial_row(
        monkeypatch: pytest.MonkeyPatch, policy: str, seed: int) -> None:
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),), policies=(policy,),
                     seeds=(seed,))
    cell = SweepCell(policy=policy, seed=seed, load=1.0, scale=1.0)

    def run_and_say_where(*args: Any) -> dict[str, Any]:
        return {**run_cell(*args), "pid": os.getpid()}

    monkeypatch.setattr(sweep, "run_cell", run_and_say_where)  # the fork inherits it
    with contextlib.ExitStack() as stack:
        row = sweep._start_driver_cell(stack, spec, cell, None)[0].result(timeout=120)
    assert row["pid"] != os.getpid()
    assert row["ray_node"] == "driver"
    assert row["cpu_s"] >= 0.0 and row["end_unix_s"] >= row["start_unix_s"]
    assert _strip(row) == _strip(run_cell(spec, cell))
