"""The ``--out DIR`` files, written atomically (a temporary folder, then one rename).

Layout::

    DIR/summary.json               {"params": {...}, "policies": {name: summarize(result)}}
    DIR/cluster.json               Cluster.to_dict()
    DIR/<policy>/jobs.csv          one row per job (spec, then outcome)
    DIR/<policy>/allocations.csv   slot,job_id,server,role,count -- the executed schedule
    DIR/plots/utility.png          total utility per policy
    DIR/plots/jct_cdf.png          completion-time CDF per policy
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psched.metrics import summarize
from psched.model import RESOURCES, Cluster
from psched.simulator import RunResult

__all__ = ["JOBS_COLUMNS", "atomic_dir", "write_run"]

JOBS_COLUMNS: tuple[str, ...] = (
    "job_id", "arrival", "work", "max_workers", "ps_ratio",
    *(f"worker_{r}" for r in RESOURCES), *(f"ps_{r}" for r in RESOURCES),
    "utility_kind", "value", "decay", "target",
    "admitted", "reason", "completion", "duration", "utility", "promised",
)


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return _jsonable(x.item())
    return x


@contextlib.contextmanager
def atomic_dir(dest: str | os.PathLike[str]):  # type: ignore[no-untyped-def]
    """Yield a temporary folder beside ``dest``; on success it replaces ``dest`` at once."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        dest.rename(old)
    tmp.rename(dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _job_rows(result: RunResult) -> list[list[Any]]:
    rows = []
    for rec in result.records.values():
        spec = rec.job.spec
        u = spec.utility
        rows.append([
            spec.job_id, spec.arrival, rec.job.work, spec.max_workers, repr(spec.ps_ratio),
            *(spec.worker_demand.to_dict()[r] for r in RESOURCES),
            *(spec.ps_demand.to_dict()[r] for r in RESOURCES),
            u.kind, u.value, u.decay, u.target,
            int(rec.admitted), rec.reason,
            "" if rec.completion is None else rec.completion,
            "" if rec.duration is None else rec.duration,
            repr(rec.utility),
            "" if rec.promised is None else rec.promised,
        ])
    return rows


def _write_csv(path: Path, header: tuple[str, ...] | list[str], rows: list[list[Any]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def write_run(
    dest: str | os.PathLike[str],
    params: Mapping[str, Any],
    cluster: Cluster,
    results: Mapping[str, RunResult],
    *,
    plots: bool = True,
) -> dict[str, Any]:
    """Write every output file of a run into ``dest`` atomically; return the summary."""
    summary = {"params": dict(params),
               "policies": {name: summarize(res) for name, res in results.items()}}
    with atomic_dir(dest) as tmp:
        (tmp / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
        (tmp / "cluster.json").write_text(json.dumps(cluster.to_dict(), indent=2) + "\n")
        ids = [s.server_id for s in cluster.servers]
        for name, res in results.items():
            d = tmp / name
            d.mkdir()
            _write_csv(d / "jobs.csv", JOBS_COLUMNS, _job_rows(res))
            _write_csv(d / "allocations.csv", ["slot", "job_id", "server", "role", "count"],
                       [[t, j, ids[h], role, n] for t, j, h, role, n in res.allocations])
        if plots:
            from psched.plots import plot_run

            (tmp / "plots").mkdir()
            plot_run(tmp / "plots", summary, results)
    return summary
