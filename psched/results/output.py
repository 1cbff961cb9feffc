"""The ``--out DIR`` files, written atomically (a temporary folder, then one rename).

An output never loses data (:func:`check_out`, called before any simulation work):

* an existing *file* at ``DIR`` is never touched: refused;
* an existing non-empty folder is refused unless it is an earlier psched output (it holds
  :data:`MANIFEST`, or the ``summary.json`` of an older psched, and nothing else) *and*
  ``overwrite`` is set; an empty folder is used;
* the parent must be writable: probed by creating (and removing) a temporary folder there.

Layout::

    DIR/.psched-output.json        the manifest: what psched wrote here (and nothing else)
    DIR/summary.json               {"params": {...}, "policies": {name: summarize(result)}}
    DIR/cluster.json               Cluster.to_dict()
    DIR/<policy>/jobs.csv          one row per job (spec, then outcome)
    DIR/<policy>/allocations.csv   slot,job_id,server,role,count -- the executed schedule
    DIR/plots/utility.png          total utility per policy
    DIR/plots/jct_cdf.png          completion-time CDF per policy
    DIR/report.html                the visual report (self-contained, :mod:`psched.results.report`)
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

from psched.core.errors import InputError
from psched.core.model import Cluster
from psched.core.records import RunResult
from psched.results.job_rows import JOBS_COLUMNS, job_rows

__all__ = ["JOBS_COLUMNS", "MANIFEST", "atomic_dir", "check_out", "is_psched_output",
           "job_rows", "jsonable", "write_run"]

#: Written last into every output folder: the entries psched wrote there.
MANIFEST = ".psched-output.json"

#: Entries an output of an older psched (before the manifest) may hold at its top level.
_LEGACY_FILES = frozenset({"summary.json", "cluster.json", "ratio.csv", "report.html", "plots"})
_LEGACY_POLICY_FILES = frozenset({"jobs.csv", "allocations.csv"})

def jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return jsonable(x.item())
    return x


def _legacy_output(folder: Path) -> bool:
    """An output of psched before the manifest: its summary.json and known files only."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(summary, dict) or "params" not in summary:
        return False
    for entry in folder.iterdir():
        if entry.name in _LEGACY_FILES or entry.suffix == ".png":
            continue
        if not entry.is_dir() or not {p.name for p in entry.iterdir()} <= _LEGACY_POLICY_FILES:
            return False
    return True


def is_psched_output(folder: str | os.PathLike[str]) -> bool:
    """True if ``folder`` holds an earlier psched output and nothing else."""
    folder = Path(folder)
    try:
        listed = json.loads((folder / MANIFEST).read_text())["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        return _legacy_output(folder)
    return {p.name for p in folder.iterdir()} <= {*map(str, listed), MANIFEST}


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_out(dest: str | os.PathLike[str], *, overwrite: bool = False,
              flag: str = "--out") -> None:
    """Raise :class:`InputError` (naming ``dest``) unless writing an output there is safe.

    Cheap (one probe folder created and removed); call it before any work. ``flag`` names the
    option in the message.
    """
    p = Path(dest).absolute()
    hint = "choose a new or empty folder"
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise InputError(f"exists and is not a folder; psched never replaces a file "
                             f"({hint})", path=str(dest), field=flag)
        if any(p.iterdir()):
            if not is_psched_output(p):
                raise InputError(f"is a non-empty folder that is not a psched output; "
                                 f"nothing was written ({hint})", path=str(dest), field=flag)
            if not overwrite:
                raise InputError("holds an earlier psched output; pass --overwrite to replace "
                                 f"it, or {hint}", path=str(dest), field=flag)
    parent = _existing_ancestor(p.parent)
    if not parent.is_dir():
        raise InputError(f"{parent} is not a folder", path=str(dest), field=flag)
    try:
        probe = tempfile.mkdtemp(prefix=f".{p.name}.probe-", dir=parent)
    except OSError as err:
        raise InputError(f"cannot write in {parent}: {err.strerror or err}", path=str(dest),
                         field=flag) from None
    os.rmdir(probe)


def _write_manifest(folder: Path) -> None:
    entries = sorted(p.name for p in folder.iterdir())
    (folder / MANIFEST).write_text(json.dumps({"writer": "psched", "entries": entries}) + "\n")


@contextlib.contextmanager
def atomic_dir(dest: str | os.PathLike[str], *,  # type: ignore[no-untyped-def]
               overwrite: bool = False):
    """Yield a temporary folder beside ``dest``; on success it replaces ``dest`` at once.

    The rules of :func:`check_out` hold (checked again before anything is created); the
    folder gets a :data:`MANIFEST`. An earlier output is replaced only with ``overwrite``.
    """
    dest = Path(dest).absolute()  # "." has no name to put a temporary folder beside
    check_out(dest, overwrite=overwrite)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 is for the probe, not for the output
    try:
        yield tmp
        _write_manifest(tmp)
        check_out(dest, overwrite=overwrite)  # nothing appeared there meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if dest.is_dir() and any(dest.iterdir()):  # an earlier psched output, overwrite given
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        dest.rename(old)
    elif dest.is_dir():
        dest.rmdir()  # empty: rename cannot replace it on every platform
    tmp.rename(dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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
    report: bool = True,
    overwrite: bool = False,
    summary: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write every output file of a run into ``dest`` atomically; return the summary.

    ``summary``: the run's :func:`psched.results.summary.build_summary` (built here if None).
    ``overwrite``: replace an earlier psched output at ``dest`` (see :func:`check_out`).
    ``report``: also write ``report.html`` (its figures are most of the time a small run takes
    to write; a caller that reads only the CSV files may leave it out).
    """
    from psched.results.summary import build_summary

    out = dict(summary) if summary is not None else build_summary(params, results)
    with atomic_dir(dest, overwrite=overwrite) as tmp:
        (tmp / "summary.json").write_text(json.dumps(jsonable(out), indent=2) + "\n")
        (tmp / "cluster.json").write_text(json.dumps(cluster.to_dict(), indent=2) + "\n")
        ids = [s.server_id for s in cluster.servers]
        for name, res in results.items():
            d = tmp / name
            d.mkdir()
            _write_csv(d / "jobs.csv", JOBS_COLUMNS, job_rows(res))
            _write_csv(d / "allocations.csv", ["slot", "job_id", "server", "role", "count"],
                       [[t, j, ids[h], role, n] for t, j, h, role, n in res.allocations])
        if plots:
            from psched.results.plots import plot_run

            (tmp / "plots").mkdir()
            plot_run(tmp / "plots", out, results, cluster)
        if report:
            from psched.results.report import write_report

            write_report(tmp)
    return out
