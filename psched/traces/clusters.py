"""Cluster files (TOML or JSON) and the default cluster for a trace.

Schema (``traces/README.md`` has the full text)::

    slot_seconds = 3600          # optional, default 3600
    description = "..."          # optional, ignored
    [[servers]]
    id = "w0"                    # optional; generated if absent (w00, w01, ... / p00, ...)
    pool = "worker"              # "worker" or "ps"
    count = 4                    # optional: this many identical servers (ids <id>-0, <id>-1...)
    gpu = 8                      # capacities; an omitted resource is 0
    cpu = 64
    memory_gb = 488
    storage_gb = 1000
    bandwidth_gbps = 50

Capacities may also sit in a ``capacity`` table (``[servers.capacity]`` / ``"capacity": {}``),
which is how :meth:`psched.core.model.Cluster.to_dict` writes ``cluster.json``: an output file can
be fed back. A ``.json`` file (or one starting with ``{``) is read as JSON, anything else as
TOML. Every problem raises :class:`~psched.core.errors.InputError` naming file, line and field
(``servers[3].gpu``; servers count from 0).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from psched.core.errors import InputError
from psched.core.horizon import trace_horizon
from psched.core.limits import (
    MAX_DEFAULT_SERVERS,
    MAX_ID_CHARS,
    MAX_LOAD,
    MAX_SLOT_SECONDS,
    MIN_SLOT_SECONDS,
    shown,
)
from psched.core.model import RESOURCES, Cluster, JobSpec, Pool, Resources, Server
from psched.traces.native import atomic_write_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "DEFAULT_PS_SERVER",
    "DEFAULT_WORKER_SERVER",
    "MAX_CAPACITY",
    "MAX_CLUSTER_BYTES",
    "MAX_SERVERS",
    "cluster_from_dict",
    "cluster_toml_text",
    "default_cluster_for_trace",
    "load_cluster",
    "write_cluster_json",
]

#: The worker server of the default cluster (``oasis.md`` section 7).
DEFAULT_WORKER_SERVER = Resources(gpu=8, cpu=64, memory_gb=488, storage_gb=1000,
                                  bandwidth_gbps=50)
#: The PS server of the default cluster.
DEFAULT_PS_SERVER = Resources(cpu=36, memory_gb=60, storage_gb=1000, bandwidth_gbps=50)

#: Most servers a cluster file may describe (a guard against ``count = 10**12``).
MAX_SERVERS = 100_000
#: Largest capacity of one server per resource (keeps sums over servers finite).
MAX_CAPACITY = 1e9
#: Largest cluster file, bytes (MAX_SERVERS servers written one per line take about 20 MB).
MAX_CLUSTER_BYTES = 64 * 2**20

_SERVER_KEYS = {"id", "pool", "count", "capacity", *RESOURCES}
_TOP_KEYS = {"slot_seconds", "servers", "description"}


def load_cluster(path: str | os.PathLike[str]) -> Cluster:
    """Read a cluster file (TOML or JSON; schema in the module docstring).

    Raises
    ------
    InputError
        Unreadable file, bad syntax (with the parser's line), unknown key or pool, a
        negative, NaN or non-numeric capacity, no worker or no PS server, duplicate ids.
    """
    name = str(path)
    try:
        with Path(path).open("rb") as fh:
            raw = fh.read(MAX_CLUSTER_BYTES + 1)
        if len(raw) > MAX_CLUSTER_BYTES:
            raise InputError(f"a cluster file is at most {MAX_CLUSTER_BYTES} bytes", path=name)
        text = raw.decode("utf-8-sig")
    except OSError as err:
        raise InputError(f"cannot read cluster file: {err.strerror or err}", path=name) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason})", path=name) from None
    is_json = name.lower().endswith(".json") or text.lstrip().startswith("{")
    data = _parse_json(text, name) if is_json else _parse_toml(text, name)
    return cluster_from_dict(data, path=name, locate=_locator(text, is_json))


def cluster_from_dict(data: Any, *, path: str = "<input>",
                      locate: Any = None) -> Cluster:
    """Build a :class:`Cluster` from parsed file content; ``locate(i, key)`` gives a line."""
    def fail(problem: str, field: str, index: int | None = None, key: str = "") -> InputError:
        line = locate(index, key) if locate is not None else None
        return InputError(problem, path=path, line=line, field=field)

    if not isinstance(data, Mapping):
        raise fail("the file must hold a table/object with a 'servers' list", "servers")
    for key in data:
        if key not in _TOP_KEYS:
            raise fail(f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})", str(key))
    slot_seconds = data.get("slot_seconds", 3600.0)
    if not _is_number(slot_seconds) or \
            not MIN_SLOT_SECONDS <= slot_seconds <= MAX_SLOT_SECONDS:
        raise fail(f"must be seconds in [{MIN_SLOT_SECONDS:g}, {MAX_SLOT_SECONDS:g}], got "
                   f"{shown(slot_seconds)}", "slot_seconds", None, "slot_seconds")
    entries = data.get("servers")
    if not isinstance(entries, Sequence) or isinstance(entries, str) or not entries:
        raise fail("a non-empty list of servers is required", "servers")
    servers: list[Server] = []
    first_index: dict[str, int] = {}
    generated = {Pool.WORKER: 0, Pool.PS: 0}
    for i, entry in enumerate(entries):
        where = f"servers[{i}]"
        if not isinstance(entry, Mapping):
            raise fail("must be a table/object", where, i)
        for key in entry:
            if key not in _SERVER_KEYS:
                raise fail(f"unknown key (known: {', '.join(sorted(_SERVER_KEYS))})",
                           f"{where}.{key}", i, str(key))
        try:
            pool = Pool(entry.get("pool"))
        except ValueError:
            raise fail(f"must be 'worker' or 'ps', got {entry.get('pool')!r}", f"{where}.pool",
                       i, "pool") from None
        count = entry.get("count", 1)
        if (isinstance(count, bool) or not isinstance(count, int) or count < 1
                or count + len(servers) > MAX_SERVERS):
            raise fail(f"must be an integer >= 1 (at most {MAX_SERVERS} servers in all), got "
                       f"{shown(count)}", f"{where}.count", i, "count")
        capacity = _capacity(entry, where, lambda p, f, k, i=i: fail(p, f, i, k))
        base = entry.get("id")
        if base is not None and (not isinstance(base, str) or not base.strip()
                                 or len(base) > MAX_ID_CHARS):
            raise fail(f"must be a non-empty string of at most {MAX_ID_CHARS} characters, got "
                       f"{shown(base)}", f"{where}.id", i, "id")
        for j in range(count):
            if base is None:
                server_id = f"{'w' if pool is Pool.WORKER else 'p'}{generated[pool]:02d}"
                generated[pool] += 1
            else:
                server_id = base if count == 1 else f"{base}-{j}"
            if server_id in first_index:
                raise fail(f"duplicate server id {server_id!r} (also servers"
                           f"[{first_index[server_id]}])", f"{where}.id", i, "id")
            first_index[server_id] = i
            servers.append(Server(server_id=server_id, pool=pool, capacity=capacity))
    for pool in Pool:
        if not any(s.pool is pool for s in servers):
            raise fail(f"the cluster needs at least one {pool.value} server", "servers")
    return Cluster(servers=tuple(servers), slot_seconds=float(slot_seconds))


def write_cluster_json(path: str | os.PathLike[str], cluster: Cluster) -> None:
    """Write ``cluster`` as ``cluster.json`` (:meth:`Cluster.to_dict`), atomically."""
    atomic_write_text(Path(path), json.dumps(cluster.to_dict(), indent=2) + "\n")


def cluster_toml_text(cluster: Cluster, header: str = "") -> str:
    """``cluster`` as a cluster file in TOML, one inline table per server.

    ``header`` (lines of text) is written first as ``#`` comments. Floats use ``repr``, so
    :func:`load_cluster` reads back an equal cluster.
    """
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    out += [f"slot_seconds = {cluster.slot_seconds!r}", "servers = ["]
    for s in cluster.servers:
        caps = ", ".join(f"{r} = {getattr(s.capacity, r)!r}" for r in RESOURCES)
        out.append(f"  {{ id = {json.dumps(s.server_id)}, pool = \"{s.pool.value}\", {caps} }},")
    out.append("]")
    return "\n".join(out) + "\n"


def default_cluster_for_trace(specs: Sequence[JobSpec], *, slot_seconds: float,
                              load: float = 0.8) -> Cluster:
    """The cluster for a trace run without ``--cluster`` (``oasis.md`` section 7).

    ``n`` worker servers (GPU 8, CPU 64, memory 488 GB, storage 1000 GB, 50 Gbps) and ``n``
    PS servers (CPU 36, memory 60 GB, storage 1000 GB, 50 Gbps), with
    ``n = ceil(max(G_max / 8, D / (8 * load)))``, at least 1, where

    * ``G_max`` = GPUs of the largest job = max over jobs of ``worker_gpu * max_workers``
      (the job at full width);
    * ``D`` = mean GPU demand over the trace's span = ``sum_i worker_gpu_i * W_i / span``,
      ``W_i`` in worker-slots, ``span = T - min arrival`` slots, T from
      :func:`psched.core.horizon.trace_horizon` (first arrival to the end of the horizon).

    Raises
    ------
    InputError
        For an empty trace or a ``load`` outside (0, inf).

    Notes
    -----
    O(sum of windows) for the horizon, O(n) for the rest.
    """
    if not specs:
        raise InputError("the trace has no jobs", field="trace")
    if not (math.isfinite(load) and 0 < load <= MAX_LOAD):
        raise InputError(f"must be a number in (0, {MAX_LOAD:g}], got {load!r}", field="load")
    horizon = trace_horizon(specs, slot_seconds)
    span = max(1, horizon - min(s.arrival for s in specs))
    gpu_slots = sum(s.worker_demand.gpu * s.work(slot_seconds) for s in specs)
    largest = max(s.worker_demand.gpu * s.max_workers for s in specs)
    per_server = DEFAULT_WORKER_SERVER.gpu
    n = max(1, math.ceil(max(largest / per_server, gpu_slots / span / (per_server * load))
                         - 1e-9))
    if n > MAX_DEFAULT_SERVERS:  # checked before a single server is built
        big = max(specs, key=lambda s: s.worker_demand.gpu * s.max_workers)
        why = (f"job {big.job_id!r} alone needs {largest:g} GPUs" if largest / per_server > n - 1
               else f"the trace's mean demand at load {load:g} needs that many")
        raise InputError(f"the default cluster would have {n} worker servers, more than "
                         f"{MAX_DEFAULT_SERVERS} ({why}): give --cluster", field="cluster")
    width = max(2, len(str(n - 1)))
    servers = [Server(server_id=f"w{h:0{width}d}", pool=Pool.WORKER,
                      capacity=DEFAULT_WORKER_SERVER) for h in range(n)]
    servers += [Server(server_id=f"p{k:0{width}d}", pool=Pool.PS, capacity=DEFAULT_PS_SERVER)
                for k in range(n)]
    return Cluster(servers=tuple(servers), slot_seconds=float(slot_seconds))


def _capacity(entry: Mapping[str, Any], where: str, fail: Any) -> Resources:
    nested = entry.get("capacity", {})
    if not isinstance(nested, Mapping):
        raise fail("must be a table/object of capacities", f"{where}.capacity", "capacity")
    values: dict[str, float] = {}
    for key, value in nested.items():
        if key not in RESOURCES:
            raise fail(f"unknown resource (known: {', '.join(RESOURCES)})",
                       f"{where}.capacity.{key}", str(key))
        values[key] = value
    for r in RESOURCES:
        if r in entry:
            if r in values:
                raise fail("given both here and in capacity", f"{where}.{r}", r)
            values[r] = entry[r]
    for r, value in values.items():
        if not _is_number(value) or not math.isfinite(value) or not 0 <= value <= MAX_CAPACITY:
            raise fail(f"must be a number in [0, {MAX_CAPACITY:g}], got {shown(value)}",
                       f"{where}.{r}", r)
    return Resources(**{r: float(v) for r, v in values.items()})


def _is_number(value: Any) -> bool:
    """A real number that converts to a float (huge integers do not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _parse_json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"bad JSON: {err.msg} (column {err.colno})", path=path,
                         line=err.lineno) from None
    except ValueError as err:  # an integer of more than 4300 digits
        raise InputError(f"bad JSON: {str(err)[:100]}", path=path) from None
    except RecursionError:
        raise InputError("bad JSON: nested too deeply", path=path) from None


def _parse_toml(text: str, path: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        found = re.search(r"line (\d+)", str(err))
        line = getattr(err, "lineno", None) or (int(found.group(1)) if found else None)
        raise InputError(f"bad TOML: {err}", path=path, line=line) from None
    except ValueError as err:  # an integer of more than 4300 digits
        raise InputError(f"bad TOML: {str(err)[:100]}", path=path) from None
    except RecursionError:
        raise InputError("bad TOML: nested too deeply", path=path) from None


def _locator(text: str, is_json: bool) -> Any:
    """Best-effort ``(server index, key) -> line`` for errors after parsing.

    TOML: the line of ``key =`` inside the i-th ``[[servers]]`` block (else the block header),
    or the i-th line holding an inline table with a ``pool`` key. JSON: the line of the first
    ``"key":`` inside the i-th object of the ``"servers"`` list (found by scanning brackets),
    else that object's first line. ``None`` when not found.
    """
    lines = text.splitlines()

    def toml(index: int | None, key: str) -> int | None:
        starts = [n for n, ln in enumerate(lines) if re.match(r"\s*\[\[\s*servers\s*\]\]", ln)]
        if not starts:  # inline tables, one server per line
            starts = [n for n, ln in enumerate(lines) if re.search(r"[{,]\s*pool\s*=", ln)]
            if index is not None:
                line = starts[index] + 1 if index < len(starts) else None
                return line
        lo, hi = 0, len(lines)
        if index is not None:
            if index >= len(starts):
                return None
            lo = starts[index]
            hi = starts[index + 1] if index + 1 < len(starts) else len(lines)
        elif starts:
            hi = starts[0]
        for n in range(lo, hi):
            if key and re.match(rf"\s*\"?{re.escape(key)}\"?\s*=", lines[n]):
                return n + 1
        return lo + 1 if index is not None else None

    def js(index: int | None, key: str) -> int | None:
        lo, hi = 0, len(text)
        if index is not None:
            starts = _json_server_starts(text)
            if index >= len(starts):
                return None
            lo = starts[index]
            hi = starts[index + 1] if index + 1 < len(starts) else len(text)
        found = re.search(rf"\"{re.escape(key)}\"\s*:", text[lo:hi]) if key else None
        if found is None and index is None:
            return None
        pos = lo + found.start() if found else lo
        return text.count("\n", 0, pos) + 1

    return js if is_json else toml


def _json_server_starts(text: str) -> list[int]:
    """Offsets of the objects in the top-level ``"servers": [...]`` list of a JSON text."""
    found = re.search(r"\"servers\"\s*:\s*\[", text)
    if found is None:
        return []
    starts: list[int] = []
    depth, in_string, escaped = 0, False, False
    for pos in range(found.end(), len(text)):
        char = text[pos]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            if depth == 0 and char == "{":
                starts.append(pos)
            depth += 1
        elif char in "}]":
            if depth == 0:
                break
            depth -= 1
    return starts
