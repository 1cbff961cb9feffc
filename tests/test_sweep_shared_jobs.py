"""Jobs a sweep maps once: every seed of a native trace runs the same jobs (mapped once,
serially and on Ray), and the driver's forked cell hands the jobs it mapped to the driver,
pickled, so the driver ships them without mapping them again."""

from __future__ import annotations

import contextlib
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from psched.core.errors import InputError
from psched.runs import sweep
from psched.runs.sweep import SweepCell, run_cell, run_sweep
from psched.runs.sweep_spec import SweepSpec, cells_of, jobs_key, seeds_share_jobs
from psched.traces.detect import load_any
from psched.traces.native import write_trace

DATA = Path(__file__).resolve().parent / "data"
HELIOS = str(DATA / "helios_cluster_log_sample.csv")
TIMING = ("wall_s", "cpu_s", "ray_node", "start_unix_s", "end_unix_s")


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in TIMING}


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A native trace: the Helios sample mapped with seed 3, written out."""
    path = tmp_path_factory.mktemp("native") / "jobs.csv"
    write_trace(path, load_any(HELIOS, seed=3))
    return str(path)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    mapped: list[int] = []
    real = sweep.load_cell_jobs

    def counting(spec: SweepSpec, seed: int) -> Any:
        mapped.append(seed)
        return real(spec, seed)

    monkeypatch.setattr(sweep, "load_cell_jobs", counting)
    return mapped


@pytest.mark.parametrize("fmt", ["auto", "native"])
def test_every_seed_of_a_native_trace_maps_to_the_same_jobs_and_shares_one_key(
        native: str, fmt: str) -> None:
    spec = SweepSpec(trace=(native,), fmt=fmt, seeds=(0, 1, 7))
    assert seeds_share_jobs(spec)
    assert {jobs_key(spec, s) for s in spec.seeds} == {None}
    first = sweep.load_cell_jobs(spec, 0)
    assert all(sweep.load_cell_jobs(spec, s) == first for s in (1, 7))


def test_a_public_traces_seeds_keep_their_own_jobs() -> None:
    spec = SweepSpec(trace=(HELIOS,), seeds=(0, 1))
    assert not seeds_share_jobs(spec)
    assert [jobs_key(spec, s) for s in spec.seeds] == [0, 1]
    assert jobs_key(spec, 5, shared=True) is None and jobs_key(spec, 5, shared=False) == 5


@pytest.mark.parametrize(("trace", "maps"), [("native", 1), ("helios", 2)])
def test_a_serial_sweep_maps_each_distinct_set_of_jobs_once_and_gives_each_cells_row(
        native: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace: str,
        maps: int) -> None:
    spec = SweepSpec(trace=(native if trace == "native" else HELIOS,),
                     policies=("fifo", "srtf"), seeds=(0, 1), loads=(1.0, 2.0))
    mapped = _counting(monkeypatch)
    rows = run_sweep(spec, tmp_path, parallel=False)
    assert len(mapped) == maps
    monkeypatch.undo()
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.parametrize(("trace", "seed"), [("native", 0), ("helios", 1)])
def test_the_forked_cell_hands_its_mapped_jobs_to_the_driver_pickled(
        native: str, trace: str, seed: int) -> None:
    spec = SweepSpec(trace=(native if trace == "native" else HELIOS,), policies=("drf",),
                     seeds=(seed,))
    cell = SweepCell(policy="drf", seed=seed, load=1.0, scale=1.0)
    with contextlib.ExitStack() as stack:
        row, handed = sweep._start_driver_cell(stack, spec, cell, None, hand_jobs=True)
        jobs = pickle.loads(handed.result(timeout=120))
        assert _strip(row.result(timeout=120)) == _strip(run_cell(spec, cell))
    assert jobs == sweep.load_cell_jobs(spec, seed)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_cell_that_fails_to_map_closes_the_pipe_and_raises(tmp_path: Path) -> None:
    spec = SweepSpec(trace=(str(tmp_path / "missing.csv"),), fmt="native", policies=("fifo",))
    cell = SweepCell(policy="fifo", seed=0, load=1.0, scale=1.0)
    with contextlib.ExitStack() as stack:
        row, handed = sweep._start_driver_cell(stack, spec, cell, None, hand_jobs=True)
        assert handed.result(timeout=120) == b""  # EOF, no jobs: the driver is not left waiting
        with pytest.raises(InputError, match=r"missing\.csv"):
            row.result(timeout=120)


@pytest.mark.ray
def test_on_ray_seeds_sharing_their_jobs_ship_them_once_pickled_or_not(
        ray_session: object, native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_drain`` puts one object for every seed sharing a future of jobs (here one future
    of pickled jobs, as the forked cell hands them, and one of a list), and the rows equal a
    one-by-one run."""
    from concurrent.futures import ThreadPoolExecutor

    import ray

    spec = SweepSpec(trace=(native,), policies=("fifo", "drf"), seeds=(0, 1, 2))
    cells = cells_of(spec)
    put: list[type] = []
    real_put = ray.put

    def counting_put(obj: object, **kw: Any) -> Any:
        put.append(type(obj))
        return real_put(obj, **kw)

    monkeypatch.setattr(ray, "put", counting_put)
    saved: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        pickled = pool.submit(lambda: pickle.dumps(sweep.load_cell_jobs(spec, 0)))
        listed = pool.submit(sweep.load_cell_jobs, spec, 2)
        sweep._drain(spec, cells, {0: pickled, 1: pickled, 2: listed}, saved.append, 1.0, None)
    assert sorted(t.__name__ for t in put) == ["bytes", "list"]
    key = lambda r: (r["policy"], r["seed"])  # noqa: E731
    assert sorted((_strip(r) for r in saved), key=key) == sorted(
        (_strip(run_cell(spec, c)) for c in cells), key=key)


@pytest.mark.ray
def test_a_worker_maps_a_native_traces_jobs_once_for_every_seed(
        ray_session: object, native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SweepSpec(trace=(native,), policies=("fifo",), seeds=(0, 1, 2))
    mapped = _counting(monkeypatch)
    monkeypatch.setattr(sweep, "_WORKER_JOBS", {})
    rows = [sweep._cell_task(spec, c, None) for c in cells_of(spec)]
    assert len(mapped) == 1
    monkeypatch.undo()
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]
