"""The files of an ``--out`` folder read back as tables and arrays, for the report and the API.

Everything here works from the files alone (``summary.json``, ``cluster.json``,
``POLICY/jobs.csv``, ``POLICY/allocations.csv``), so ``psched report DIR`` rebuilds the
report of any earlier run. Per-slot arrays are bucketed to at most ``max_columns`` time
columns (a bucket's value is the mean over its slots), so memory stays bounded for long
horizons: O(allocation rows + max_columns x servers x resources).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psched.core.model import RESOURCES, Cluster
from psched.core.records import RunResult

__all__ = ["PolicyFiles", "RunFiles", "Usage", "allocations_frame", "jobs_frame", "load_run",
           "mean_prices", "run_in_memory", "usage_of"]

ROLES: tuple[str, str] = ("worker", "ps")


@dataclass(frozen=True, kw_only=True)
class PolicyFiles:
    """One policy's files."""

    name: str  #: policy name
    summary: dict[str, Any]  #: its entry in ``summary.json``
    jobs: pd.DataFrame  #: ``jobs.csv``
    allocations: pd.DataFrame  #: ``allocations.csv`` (slot, job_id, server, role, count)


@dataclass(frozen=True, kw_only=True)
class RunFiles:
    """Everything an ``--out`` folder holds."""

    folder: Path  #: the folder
    summary: dict[str, Any]  #: ``summary.json``
    cluster: dict[str, Any]  #: ``cluster.json``
    policies: dict[str, PolicyFiles]  #: per policy, in the summary's order

    @property
    def server_ids(self) -> list[str]:
        return [s["id"] for s in self.cluster["servers"]]

    @property
    def server_pools(self) -> list[str]:
        return [s["pool"] for s in self.cluster["servers"]]

    @property
    def capacity(self) -> np.ndarray:
        """Servers x resources."""
        return np.array([[float(s["capacity"].get(r, 0.0)) for r in RESOURCES]
                         for s in self.cluster["servers"]]).reshape(-1, len(RESOURCES))

    @property
    def horizon(self) -> int:
        """Slots of the run: ``params.horizon``, else one past the last slot any file names
        (an output written by a library caller with no params)."""
        given = self.summary.get("params", {}).get("horizon")
        if given is not None:
            return int(given)
        last = -1
        for files in self.policies.values():
            if len(files.allocations):
                last = max(last, int(files.allocations["slot"].max()))
            done = pd.to_numeric(files.jobs.get("completion"), errors="coerce")
            if done is not None and done.notna().any():
                last = max(last, int(done.max()))
        return max(last + 1, 1)

    @property
    def slot_seconds(self) -> float:
        return float(self.cluster["slot_seconds"])


def load_run(folder: str | Path) -> RunFiles:
    """Read an ``--out`` folder (raises ``OSError``/``ValueError`` naming the bad file)."""
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    cluster = json.loads((folder / "cluster.json").read_text())
    policies = {}
    for name, entry in summary["policies"].items():
        jobs = pd.read_csv(folder / name / "jobs.csv",
                           dtype={"job_id": str, "reason": str, "restated": str,
                                  "waits": str},
                           keep_default_na=False, na_values={"completion": [""],
                                                             "duration": [""],
                                                             "eta_start": [""],
                                                             "eta_finish": [""]})
        alloc = pd.read_csv(folder / name / "allocations.csv",
                            dtype={"job_id": str, "server": str, "role": str})
        policies[name] = PolicyFiles(name=name, summary=entry, jobs=jobs, allocations=alloc)
    return RunFiles(folder=folder, summary=summary, cluster=cluster, policies=policies)


def jobs_frame(result: RunResult) -> pd.DataFrame:
    """``jobs.csv`` of a run as a table, with the dtypes :func:`load_run` reads."""
    from psched.results.job_rows import JOBS_COLUMNS, job_rows

    frame = pd.DataFrame(job_rows(result), columns=list(JOBS_COLUMNS))
    for col in JOBS_COLUMNS:
        if col not in ("job_id", "utility_kind", "utility_steps", "reason", "restated",
                       "waits"):
            frame[col] = pd.to_numeric(frame[col].replace("", np.nan))
    return frame


def allocations_frame(result: RunResult) -> pd.DataFrame:
    """``allocations.csv`` of a run as a table (servers by id)."""
    ids = [s.server_id for s in result.cluster.servers]
    return pd.DataFrame([(t, j, ids[h], role, n) for t, j, h, role, n in result.allocations],
                        columns=["slot", "job_id", "server", "role", "count"]).astype(
        {"slot": int, "job_id": str, "server": str, "role": str, "count": int})


def run_in_memory(summary: dict[str, Any], cluster: Cluster,
                  results: dict[str, RunResult]) -> RunFiles:
    """The :class:`RunFiles` an ``--out`` folder of these results would hold."""
    policies = {name: PolicyFiles(name=name, summary=summary["policies"][name],
                                  jobs=jobs_frame(res), allocations=allocations_frame(res))
                for name, res in results.items()}
    return RunFiles(folder=Path("."), summary=summary, cluster=cluster.to_dict(),
                    policies=policies)


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Usage per time bucket, server and resource (raw units, mean over the bucket's slots)."""

    bucket_slots: int  #: slots per time column
    usage: np.ndarray  #: (columns, servers, resources)

    @property
    def starts(self) -> np.ndarray:
        """First slot of every column."""
        return np.arange(self.usage.shape[0]) * self.bucket_slots


def _demands(jobs: pd.DataFrame) -> np.ndarray:
    """(jobs, 2 roles, resources) demand of one container."""
    cols = [[f"{role}_{r}" for r in RESOURCES] for role in ROLES]
    return np.stack([jobs[c].to_numpy(dtype=float) for c in cols], axis=1)


def usage_of(run: RunFiles, policy: str, max_columns: int = 600) -> Usage:
    """Executed usage of ``policy`` per time bucket, server and resource."""
    pf = run.policies[policy]
    horizon = max(1, run.horizon)
    k = max(1, math.ceil(horizon / max_columns))
    cols = math.ceil(horizon / k)
    out = np.zeros((cols, len(run.server_ids), len(RESOURCES)))
    a = pf.allocations
    if len(a):
        job_index = {j: i for i, j in enumerate(pf.jobs["job_id"])}
        server_index = {s: i for i, s in enumerate(run.server_ids)}
        ji = a["job_id"].map(job_index).to_numpy(dtype=int)
        si = a["server"].map(server_index).to_numpy(dtype=int)
        ri = (a["role"] == "ps").to_numpy(dtype=int)
        amount = a["count"].to_numpy(dtype=float)[:, None] * _demands(pf.jobs)[ji, ri] / k
        slot = a["slot"].to_numpy(dtype=int)
        keep = slot < cols * k
        np.add.at(out, (slot[keep] // k, si[keep]), amount[keep])
    return Usage(bucket_slots=k, usage=out)


def _log_bound(value: Any) -> float | None:
    if value is None:
        return None
    v = float(value)
    return math.log(v) if v > 0 and math.isfinite(v) else None


def mean_prices(run: RunFiles, policy: str, usage: Usage) -> dict[str, np.ndarray] | None:
    """Mean price over each pool's servers per time column and resource, for a policy whose
    summary reports the price bounds ``U_worker``, ``L_worker``, ``U_ps``, ``L_ps``.

    The price of server h, resource r in slot t is ``L (U^r / L)^(g / c)`` (paper (22),
    (23)) at the usage ``g`` executed in t (for a policy that commits schedules on arrival,
    such as OASiS, what was committed for slot t). Returns ``{pool: (columns, resources)}``
    in the policy's price units, NaN where U is out of the float range; None without bounds.
    """
    s = run.policies[policy].summary
    if not all(k in s for k in ("U_worker", "L_worker", "U_ps", "L_ps")):
        return None
    cap = run.capacity
    pools = np.array(run.server_pools)
    out = {}
    for pool in ROLES:
        idx = np.flatnonzero(pools == pool)
        log_l = _log_bound(s[f"L_{pool}"])
        log_u = np.array([_log_bound((s[f"U_{pool}"] or {}).get(r)) or np.nan
                          for r in RESOURCES])
        if idx.size == 0 or log_l is None:
            continue
        c = cap[idx]
        safe = np.where(c > 0, c, 1.0)
        util = np.clip(np.where(c > 0, usage.usage[:, idx] / safe, 0.0), 0.0, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            price = np.exp(log_l + util * (log_u - log_l))
        out[pool] = price.mean(axis=1)
    return out
