"""Sweeps on Ray: cells run as tasks on the session's Ray give the rows a serial run gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from psched.sweep import SweepSpec, cells_of, run_cell, run_sweep

DATA = Path(__file__).resolve().parent / "data"

pytestmark = pytest.mark.ray


def _strip(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items() if k != "wall_s"}


def test_sweep_on_ray_matches_the_cells_run_one_by_one(ray_session: object,
                                                       tmp_path: Path) -> None:
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "drf"), seeds=(0, 1), loads=(1.0, 3.0), scales=(1.0,))
    seen: list[dict[str, object]] = []
    rows = run_sweep(spec, tmp_path, parallel=True, cpus_per_cell=0.5, on_cell=seen.append)
    assert len(seen) == len(rows) == 8
    expected = [_strip(run_cell(spec, c)) for c in cells_of(spec)]
    assert [_strip(r) for r in rows] == expected
    import ray

    assert ray.is_initialized()  # the session's Ray is left running for other tests
