"""Sweeps on Ray: cells run as tasks on the session's Ray give the rows a serial run gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from psched.runs.sweep import run_cell, run_sweep
from psched.runs.sweep_spec import SweepSpec, cells_of

DATA = Path(__file__).resolve().parent / "data"

pytestmark = pytest.mark.ray


def _strip(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items()
            if k not in ("wall_s", "cpu_s", "ray_node", "start_unix_s", "end_unix_s")}


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


_DRIVER = """
import json, sys
from psched.runs.sweep import run_sweep
from psched.runs.sweep_spec import SweepSpec
spec = SweepSpec(**json.loads(sys.argv[1]))
rows = run_sweep(spec, sys.argv[2], parallel=True, address=sys.argv[3], cpus_per_cell=1)
print(json.dumps(rows))
"""


def test_sweep_runs_unchanged_on_a_two_node_cluster_from_another_driver(
        ray_session: object, tmp_path: Path) -> None:
    """A second driver process joins the session's cluster by address (as after ``ray start``),
    with one more CPU node added: cells spread over both CPU nodes, the trace is read by the
    driver only, and the rows equal the cells run one by one."""
    import json
    import os
    import subprocess
    import sys

    cluster = ray_session.cluster  # type: ignore[attr-defined]
    extra = cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20)
    cluster.wait_for_nodes()
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "srtf"), seeds=(0, 1), loads=(1.0, 2.0), scales=(1.0,))
    try:
        env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
        args = json.dumps({"trace": list(spec.trace), "policies": list(spec.policies),
                           "seeds": list(spec.seeds), "loads": list(spec.loads),
                           "scales": list(spec.scales)})
        out = subprocess.run([sys.executable, "-c", _DRIVER, args, str(tmp_path),
                              cluster.address], capture_output=True, text=True, env=env,
                             timeout=300, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
    finally:
        cluster.remove_node(extra)
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(rows) == len(cells_of(spec)) == 8
    assert {r["ray_node"] for r in rows} == {cluster.head_node.node_id, extra.node_id}
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]


def test_a_worker_fetches_a_seeds_jobs_once_for_all_its_cells(
        ray_session: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_cell_task`` gets the jobs' ObjectRef inside a list and keeps what it fetched: the
    second cell of the same seed in the same process does not fetch them again."""
    import ray

    from psched.runs import sweep

    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "drf"), seeds=(0,), loads=(1.0,), scales=(1.0,))
    ref = ray.put(sweep.load_cell_jobs(spec, 0))
    fetched: list[object] = []
    real_get = ray.get

    def counting_get(obj: object, **kw: object) -> object:
        fetched.append(obj)
        return real_get(obj, **kw)

    monkeypatch.setattr(ray, "get", counting_get)
    monkeypatch.setattr(sweep, "_WORKER_JOBS", {})
    rows = [sweep._cell_task(spec, c, [ref]) for c in cells_of(spec)]
    assert fetched == [ref]
    assert [_strip(r) for r in rows] == [_strip(run_cell(spec, c)) for c in cells_of(spec)]


def test_cells_on_ray_and_the_drivers_own_cell_are_all_saved_once(ray_session: object) -> None:
    """While an embedded Ray starts, the driver runs the first cell in a thread; ``_drain``
    saves it beside the Ray cells' rows, each once, and the rows equal a one-by-one run."""
    from concurrent.futures import ThreadPoolExecutor

    from psched.runs import sweep

    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "drf"), seeds=(0, 1), loads=(1.0,), scales=(1.0,))
    cells = cells_of(spec)
    saved: list[dict[str, object]] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        loading = {s: pool.submit(sweep.load_cell_jobs, spec, s) for s in spec.seeds}
        local = pool.submit(sweep._driver_cell, spec, cells[0], loading[cells[0].seed])
        sweep._drain(spec, cells[1:], loading, saved.append, 0.5, local)
    assert sorted(r["ray_node"] == "driver" for r in saved) == [False, False, False, True]
    key = lambda r: (r["policy"], r["seed"])  # noqa: E731
    assert sorted((_strip(r) for r in saved), key=key) == sorted(
        (_strip(run_cell(spec, c)) for c in cells), key=key)


@pytest.mark.parametrize("pin", [False, True])
def test_no_more_cells_run_at_once_than_the_cluster_has_cpus_the_drivers_counted(
        ray_session: object, pin: bool) -> None:
    """The driver's own cell takes one of the machine's places: with 2 CPUs and the driver
    busy, Ray runs one cell, never two (three cells on two cores slowed every cell)."""
    from concurrent.futures import ThreadPoolExecutor

    import ray

    from psched.runs import sweep

    cpus = int(ray.cluster_resources()["CPU"])
    spec = SweepSpec(trace=(str(DATA / "helios_cluster_log_sample.csv"),),
                     policies=("fifo", "drf", "srtf"), seeds=(0, 1), loads=(1.0, 2.0),
                     scales=(1.0,))
    cells = cells_of(spec)
    saved: list[dict[str, object]] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        loading = {s: pool.submit(sweep.load_cell_jobs, spec, s) for s in spec.seeds}
        local = pool.submit(sweep._driver_cell, spec, cells[0], loading[cells[0].seed],
                            0 if pin else None)
        sweep._drain(spec, cells[1:], loading, saved.append, 1.0, local, pin=pin)
    assert sorted(r["policy"] + str(r["seed"]) + str(r["load"]) for r in saved) == sorted(
        c.policy + str(c.seed) + str(c.load) for c in cells)
    events = sorted([(float(r["start_unix_s"]), 1) for r in saved]  # type: ignore[arg-type]
                    + [(float(r["end_unix_s"]), -1) for r in saved])  # type: ignore[arg-type]
    running = most = 0
    for _, step in events:  # an end sorts before a start at the same instant
        running += step
        most = max(most, running)
    assert 1 <= most <= cpus
