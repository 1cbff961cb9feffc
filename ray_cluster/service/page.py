"""The live page's data: one JSON document of the running service, rebuilt on each change.

:class:`PageData` turns a :class:`~ray_cluster.service.views.LiveView` (copied from the
service under its lock in O(jobs)) and the journal (read through its own read-only SQLite
connection: WAL readers never block the writer) into what the page draws
(``page_static/page.js``):

* ``service`` -- slot, phase, policy, slot length, the latest slot boundaries' times;
* ``servers`` -- each server's id, pool, capacity and readable name (:func:`server_labels`);
* ``jobs`` -- each job's state, decision, promise, plan end, progress, utility so far;
* ``cells`` -- the Gantt chart's containers ``[slot, job, server, role, count, kind]`` over
  a window of slots around the current one: what ran (from the journal's ``slots`` rows),
  what runs now, and the plan ahead (each job's committed schedule);
* ``usage`` -- share of each pool's capacity in use per resource and slot (same cells);
* ``prices`` -- for a priced policy (the OASiS family), the mean over each pool's servers of
  the price ``L (U/L)^(g/c)`` at that usage, the formula of the report
  (:func:`psched.results.report_data.mean_prices`, here :func:`psched.oasis.prices.log_prices`);
* ``events`` -- the journal's latest decisions and events, newest first.

Figures are drawn in the browser from this document, not here: the page is served from the
service's own process, and drawing there would take the interpreter from the slot loop.
Each rebuild is O(jobs + cells in the window + events shown); executed plans are read from
the journal incrementally (only slots finished since the last rebuild).
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from psched.core.model import RESOURCES, Cluster
from psched.oasis.prices import log_prices
from ray_cluster.service.core import SchedulerService
from ray_cluster.service.views import LiveView

__all__ = ["AHEAD_SLOTS", "CHUNK", "EVENTS_SHOWN", "JOBS_SHOWN", "MAX_CELLS", "PAST_SLOTS",
           "PageData", "server_labels"]

PAST_SLOTS = 40  #: slots before the current one the Gantt chart shows
#: slots from the current one on that it shows at most (the plan ahead; fewer when every
#: plan ends sooner: up to 3 past the last planned slot, at least 10)
AHEAD_SLOTS = 80
EVENTS_SHOWN = 40  #: journal entries listed
#: most Gantt cells in one document: past this, the window narrows around the current slot
#: (whole slots, nearest first), so a document stays near 100 kB however busy the cluster
MAX_CELLS = 5000
#: most jobs listed: those in the chart's window, then the live ones (running, waiting, held,
#: queued), then the latest others; ``counts`` still counts every job
JOBS_SHOWN = 300
CHUNK = 1000  #: list items encoded between two looks at the slot loop (:meth:`PageData.encode`)
_LIVE = ("running", "waiting", "held", "queued")
RAN, NOW, PLANNED = 0, 1, 2  #: a cell's kind
_POOLS = ("worker", "ps")


class PageData:
    """Builds the page's JSON document from the service and its journal (module docstring).

    Parameters
    ----------
    svc
        The running service (read through :meth:`~SchedulerService.view` and
        :meth:`~SchedulerService.price_bounds` only).
    journal
        Its journal file, opened read-only here.
    pause
        Called between the steps of a rebuild (the server's: wait while a slot boundary is
        in progress, :meth:`SchedulerService.wait_quiet`).
    """

    def __init__(self, svc: SchedulerService, journal: Path, *,
                 pause: Callable[[], object] = lambda: None) -> None:
        self.svc, self._pause = svc, pause
        self._db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True,
                                   check_same_thread=False)
        self._ran: dict[int, dict[str, Any]] = {}  # slot -> executed plan (journal JSON)
        self._labels: tuple[tuple[str, ...], list[str]] = ((), [])  # server ids, their labels

    def close(self) -> None:
        self._db.close()

    def build(self) -> dict[str, Any]:
        """The document now (see the module docstring), in small steps with ``pause()``
        between them."""
        self._pause()
        view = self.svc.view()
        self._pause()
        self._read_slots()
        st = view.status
        t, running = int(st["slot"]), st["phase"] == "run"
        first = max(0, t - PAST_SLOTS)
        planned = max((max(s) for j, s in view.schedules.items() if s), default=t)
        last = min(view.horizon, t + AHEAD_SLOTS, max(t + 10, planned + 3))
        index = {j["job_id"]: i for i, j in enumerate(st["jobs"])}
        cells = self._cells(view, index, t, running, first, last)
        first, last, cells = _narrow(cells, t, first, last)
        shown = _shown(st["jobs"], {c[1] for c in cells})
        renumber = {i: k for k, i in enumerate(shown)}
        cells = [[c[0], renumber[c[1]], *c[2:]] for c in cells]
        jobs = [st["jobs"][i] for i in shown]
        index = {j["job_id"]: k for k, j in enumerate(jobs)}
        self._pause()
        usage = self._usage(view, cells, index, first, last)
        self._pause()
        prices = self._prices(view, usage)
        self._pause()
        counts: dict[str, int] = {}
        for j in st["jobs"]:
            counts[j["state"]] = counts.get(j["state"], 0) + 1
        return {
            "changes": view.changes, "now": time.time(),
            "service": {**{k: st[k] for k in ("slot", "phase", "policy", "slot_seconds",
                                              "running", "error")},
                        "horizon": view.horizon, "slot_started": view.slot_started,
                        "boundary_ms": _boundary(view.boundary_ms)},
            "resources": list(RESOURCES),
            "servers": [{"id": s.server_id, "label": label, "pool": s.pool.value,
                         "capacity": [float(getattr(s.capacity, r)) for r in RESOURCES]}
                        for s, label in zip(view.cluster.servers, self._server_labels(view),
                                            strict=True)],
            "counts": counts,
            "jobs": [{**_job_row(j, view.demands.get(j["job_id"])), "seq": i}
                     for j, i in zip(jobs, shown, strict=True)],
            "window": [first, last],
            "cells": cells,
            "usage": {p: _clean(u) for p, u in _pool_shares(view, usage).items()},
            "prices": prices,
            "events": self._events(),
        }

    def encode(self, doc: dict[str, Any]) -> bytes:
        """``doc`` as compact JSON, its long lists :data:`CHUNK` items at a time with
        ``pause()`` between: no one call holds the interpreter for long."""
        parts = []
        for key, value in doc.items():
            head = json.dumps(key) + ":"
            if isinstance(value, list) and len(value) > CHUNK:
                pieces = []
                for i in range(0, len(value), CHUNK):
                    self._pause()
                    pieces.append(_dumps(value[i:i + CHUNK])[1:-1])
                parts.append(head + "[" + ",".join(p for p in pieces if p) + "]")
            else:
                self._pause()
                parts.append(head + _dumps(value))
        return ("{" + ",".join(parts) + "}").encode()

    # -- the schedule -------------------------------------------------------------------------
    def _read_slots(self) -> None:
        done = max(self._ran, default=-1)
        for t, plan in self._db.execute("SELECT t, plan FROM slots WHERE t > ? ORDER BY t",
                                        (done,)):
            self._ran[int(t)] = json.loads(plan)

    def _cells(self, view: LiveView, index: dict[str, int], t: int, running: bool,
               first: int, last: int) -> list[list[int]]:
        """``[slot, job, server, role (0 worker, 1 PS), count, kind]`` in the window."""
        out: list[list[int]] = []
        for s in range(first, min(t, last)):
            if (s - first) % 10 == 0:
                self._pause()
            for job_id, (workers, ps) in self._ran.get(s, {}).items():
                if job_id in index:
                    out += [[s, index[job_id], int(h), 0, int(n), RAN] for h, n in workers]
                    out += [[s, index[job_id], int(k), 1, int(n), RAN] for k, n in ps]
        if running:
            for job_id, a in view.slot_plan.items():
                if job_id in index:
                    out += [[t, index[job_id], h, 0, n, NOW] for h, n in a.workers]
                    out += [[t, index[job_id], k, 1, n, NOW] for k, n in a.ps]
        ahead = t + 1 if running else t
        active = {j["job_id"] for j in view.status["jobs"]
                  if j["state"] in ("running", "waiting")}
        for job_id in active:
            for s, a in view.schedules.get(job_id, {}).items():
                if ahead <= s < last:
                    out += [[s, index[job_id], h, 0, n, PLANNED] for h, n in a.workers]
                    out += [[s, index[job_id], k, 1, n, PLANNED] for k, n in a.ps]
        return out

    @staticmethod
    def _usage(view: LiveView, cells: list[list[int]], index: dict[str, int], first: int,
               last: int) -> np.ndarray:
        """Usage per slot of the window, server and resource, from the cells."""
        usage = np.zeros((max(0, last - first), len(view.cluster.servers), len(RESOURCES)))
        if not cells:
            return usage
        ids = list(index)
        dem = np.array([view.demands.get(j, ((0.0,) * len(RESOURCES),) * 2) for j in ids],
                       dtype=float)  # (jobs, roles, resources)
        c = np.array(cells, dtype=int)
        keep = c[:, 2] < usage.shape[1]
        c = c[keep]
        np.add.at(usage, (c[:, 0] - first, c[:, 2]), c[:, 4, None] * dem[c[:, 1], c[:, 3]])
        return usage

    def _prices(self, view: LiveView, usage: np.ndarray) -> dict[str, Any] | None:
        """Mean price over each pool's servers per slot and resource (a priced policy)."""
        bounds = self.svc.price_bounds()
        if bounds is None:
            return None
        cap = _capacity(view)
        pools = np.array([s.pool.value for s in view.cluster.servers])
        out: dict[str, Any] = {}
        for pool in _POOLS:
            idx = np.flatnonzero(pools == pool)
            log_l = _log(bounds[f"L_{pool}"])
            log_u = np.array([_log((bounds[f"U_{pool}"] or {}).get(r)) for r in RESOURCES])
            if idx.size == 0 or math.isnan(log_l):
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                price = np.exp(log_prices(usage[:, idx], cap[idx], log_u, log_l))
            out[pool] = _clean(price.mean(axis=1))
        return out

    def _server_labels(self, view: LiveView) -> list[str]:
        """:func:`server_labels` of the cluster, read from Ray again only when it changed."""
        ids = tuple(s.server_id for s in view.cluster.servers)
        if self._labels[0] != ids:
            self._labels = ids, server_labels(view.cluster, self.svc.node_of, _ray_nodes())
        return self._labels[1]

    # -- the journal ----------------------------------------------------------------------------
    def _events(self) -> list[dict[str, Any]]:
        rows = [{"at": at, "slot": slot, "job": job, "kind": kind, "info": info}
                for job, slot, kind, info, at in self._db.execute(
                    "SELECT job_id, slot, kind, info, at FROM events ORDER BY seq DESC "
                    "LIMIT ?", (EVENTS_SHOWN,))]
        for job, kind, slot, admitted, reason, promised, ms, at in self._db.execute(
                "SELECT job_id, kind, slot, admitted, reason, promised, latency_ms, decided "
                "FROM decisions ORDER BY seq DESC LIMIT ?", (EVENTS_SHOWN,)):
            if kind == "release":  # finished before its plan's end (rules.reuse_freed)
                rows.append({"at": at, "slot": slot, "job": job, "kind": "finished early",
                             "info": "the rest of its plan released"})
                continue
            verdict = ("held" if kind == "hold" else "admitted" if admitted else "rejected")
            info = " ".join(x for x in (verdict, reason,
                                        "" if promised is None else f"promised by {promised}",
                                        f"({ms:.1f} ms)") if x)
            rows.append({"at": at, "slot": slot, "job": job, "kind": kind, "info": info})
        rows.sort(key=lambda r: -float(r["at"]))
        return rows[:EVENTS_SHOWN]


def server_labels(cluster: Cluster, node_of: Mapping[int, str] | None,
                  nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each server's name on the page: ``HOST worker`` or ``HOST PS`` for a server that stands
    for a share of a Ray node without a name of its own (its id is the node id's first 8
    hex digits, ``8607a5b8/w``), where HOST is the node's host name, else its address
    (``#2``, ``#3``... for further nodes of one host); otherwise the server's id and role.

    Parameters
    ----------
    cluster
        The service's cluster.
    node_of
        Server index -> Ray node id (None: a service without Ray).
    nodes
        Rows of ``ray.nodes()`` (``NodeID``, ``NodeManagerHostname``, ``NodeName``).
    """
    by_id = {str(n.get("NodeID", "")): n for n in nodes}
    hosts: dict[str, str] = {}  # node id -> its label
    taken: dict[str, int] = {}  # host -> nodes of it seen
    out = []
    for i, server in enumerate(cluster.servers):
        role = "PS" if server.pool.value == "ps" else "worker"
        node = by_id.get((node_of or {}).get(i, ""))
        if node is None or not server.server_id.startswith(str(node["NodeID"])[:8]):
            out.append(f"{server.server_id} ({role})")
            continue
        node_id = str(node["NodeID"])
        if node_id not in hosts:
            host = str(node.get("NodeManagerHostname") or node.get("NodeName") or node_id[:8])
            taken[host] = taken.get(host, 0) + 1
            hosts[node_id] = host if taken[host] == 1 else f"{host}#{taken[host]}"
        out.append(f"{hosts[node_id]} {role}")
    return out


def _ray_nodes() -> list[dict[str, Any]]:
    """``ray.nodes()`` where this process is connected to Ray, else nothing."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return []
    from ray_cluster.runtime.cluster_model import ray_nodes

    try:
        return ray_nodes()
    except Exception:  # the labels are cosmetic: ids then
        return []


def _narrow(cells: list[list[int]], t: int, first: int,
            last: int) -> tuple[int, int, list[list[int]]]:
    """The window ``[first, last)`` and its cells, narrowed to the whole slots nearest ``t``
    that hold at most :data:`MAX_CELLS` cells."""
    if len(cells) <= MAX_CELLS:
        return first, last, cells
    per = [0] * (last - first)
    for c in cells:
        per[c[0] - first] += 1
    lo, hi, n = t, t + 1, per[t - first] if first <= t < last else 0
    while True:
        grown = False
        for s in (hi, lo - 1):
            if first <= s < last and n + per[s - first] <= MAX_CELLS:
                n += per[s - first]
                lo, hi = min(lo, s), max(hi, s + 1)
                grown = True
        if not grown:
            break
    hi = min(hi, last)
    lo = min(lo, hi)
    return lo, hi, [c for c in cells if lo <= c[0] < hi]


def _shown(jobs: list[dict[str, Any]], charted: set[int]) -> list[int]:
    """Indices of the jobs listed, in the service's order: every job with a cell in the
    window, then the live ones, then the latest others, :data:`JOBS_SHOWN` in all (more only
    if the window's cells name more)."""
    live = [i for i, j in enumerate(jobs) if i not in charted and j["state"] in _LIVE]
    rest = [i for i, j in enumerate(jobs) if i not in charted and j["state"] not in _LIVE]
    keep = sorted(charted) + live[:max(0, JOBS_SHOWN - len(charted))]
    room = JOBS_SHOWN - len(keep)
    return sorted(keep + (rest[-room:] if room > 0 else []))


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def _job_row(j: dict[str, Any], demand: Any) -> dict[str, Any]:
    if j["state"] == "queued":
        decision = f"queued for slot {j['arrival']}"
    elif j["state"] == "held":
        decision = f"held ({j['reason']})" if j["reason"] else "held"
    elif j["admitted"]:
        decision = "admitted"
    else:
        decision = f"rejected ({j['reason']})" if j["reason"] else "rejected"
    if j.get("waits"):
        decision += f": {j['waits']}"
    keys = ("job_id", "state", "arrival", "promised", "planned_completion", "completion",
            "done", "work", "workers", "ps", "utility", "loss", "payoff", "window_end",
            "speed", "restated", "first_promise", "eta_start", "eta_finish")
    return {**{k: j.get(k) for k in keys}, "decision": decision,
            "demand": [list(d) for d in demand] if demand else None}


def _boundary(ms: tuple[float, ...]) -> dict[str, Any]:
    if not ms:
        return {"n": 0, "last": None, "p50": None, "p99": None}
    a = np.array(ms)
    return {"n": len(ms), "last": ms[-1], "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99))}


def _capacity(view: LiveView) -> np.ndarray:
    return np.array([[float(getattr(s.capacity, r)) for r in RESOURCES]
                     for s in view.cluster.servers]).reshape(-1, len(RESOURCES))


def _pool_shares(view: LiveView, usage: np.ndarray) -> dict[str, np.ndarray]:
    """Share of each pool's capacity in use, (slots, resources); NaN where it has none."""
    cap = _capacity(view)
    pools = np.array([s.pool.value for s in view.cluster.servers])
    out = {}
    for pool in _POOLS:
        idx = np.flatnonzero(pools == pool)
        total = cap[idx].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[pool] = np.where(total > 0, usage[:, idx].sum(axis=1) / total, np.nan)
    return out


def _log(value: Any) -> float:
    v = float("nan") if value is None else float(value)
    return math.log(v) if v > 0 and math.isfinite(v) else float("nan")


def _clean(a: np.ndarray) -> list[list[float | None]]:
    """Rows as lists, NaN and infinities as None (JSON has neither)."""
    return [[float(v) if math.isfinite(v) else None for v in row] for row in a.tolist()]
