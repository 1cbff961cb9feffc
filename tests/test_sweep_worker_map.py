"""Sweeps whose Ray workers map each seed's jobs themselves (``ship_jobs=False``, the default
on the embedded Ray): the rows equal a serial run's, and a worker maps a seed once however many
of its cells use it."""

from __future__ import annotations

from pathlib import Path

import pytest

from psched.runs import sweep
from psched.runs.sweep import run_cell, run_sweep
from psched.runs.sweep_spec import SweepSpec, cells_of

DATA = Path(__file__).resolve().parent / "data"
TIMING = ("wall_s", "cpu_s", "ray_node", "start_unix_s", "end_unix_s")

pytestmark = pytest.mark.ray


def _strip(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items() if k not in TIMING}


@pytest.mark.parametrize("ship", [False, True])
def test_a_sweep_gives_the_serial_rows_whether_workers_map_the_jobs_or_fetch_them(
        ray_session: object, tmp_path: Path, ship: bool) -> None:
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "srtf"), seeds=(0, 1), loads=(1.0, 2.0), scales=(1.0,))
    rows = run_sweep(spec, tmp_path, parallel=True, cpus_per_cell=1.0, ship_jobs=ship)
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]


def test_a_worker_maps_a_seeds_jobs_once_for_all_its_cells(
        ray_session: object, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "drf"), seeds=(0, 1), loads=(1.0,), scales=(1.0,))
    mapped: list[int] = []
    real = sweep.load_cell_jobs

    def counting(spec_: SweepSpec, seed: int) -> object:
        mapped.append(seed)
        return real(spec_, seed)

    monkeypatch.setattr(sweep, "load_cell_jobs", counting)
    monkeypatch.setattr(sweep, "_WORKER_JOBS", {})
    rows = [sweep._cell_task(spec, c, None) for c in cells_of(spec)]
    assert sorted(mapped) == [0, 1]
    monkeypatch.setattr(sweep, "load_cell_jobs", real)
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]


def test_seeds_mapped_by_the_driver_are_shipped_and_the_others_mapped_by_the_workers(
        ray_session: object) -> None:
    """What the embedded Ray does by default: ``loading`` holds the seeds the driver mapped
    while Ray started (seed 0 here); the workers map seed 1 themselves; every row is the
    serial one."""
    from concurrent.futures import ThreadPoolExecutor

    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "drf"), seeds=(0, 1), loads=(1.0,), scales=(1.0,))
    cells = cells_of(spec)
    saved: list[dict[str, object]] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        loading = {0: pool.submit(sweep.load_cell_jobs, spec, 0)}
        sweep._drain(spec, cells, loading, saved.append, 1.0, None)
    key = lambda r: (r["policy"], r["seed"])  # noqa: E731
    assert sorted((_strip(r) for r in saved), key=key) == sorted(
        (_strip(run_cell(spec, c)) for c in cells), key=key)


def test_workers_mapping_seeds_find_a_trace_given_relative_to_the_drivers_folder(
        ray_session: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's workers started in another folder; the trace path they map from is
    made absolute by the driver."""
    monkeypatch.chdir(DATA.parent)
    spec = SweepSpec(trace=("data/helios_cluster_log_sample.csv",), policies=("fifo",),
                     seeds=(0, 1), loads=(1.0,), scales=(1.0,))
    rows = run_sweep(spec, tmp_path, parallel=True, cpus_per_cell=1.0, ship_jobs=False)
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]
