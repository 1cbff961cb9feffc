"""Job spec files: one training job as TOML data, validated into a :class:`psched.model.JobSpec`.

A job spec is data only: it is parsed with :mod:`tomllib` and never evaluated or unpickled.
Its workload is a built-in name (:func:`ray_cluster.workloads.available_workloads`) or, only
when the operator allows it, an import path ``pkg.module:Class``. Layout (units of
``oasis.md`` section 7)::

    id = "digits-a"          # optional: default the file name without .toml
    workload = "softmax"     # built-in name or pkg.module:Class
    epochs = 1               # E
    partitions = 2           # N: data partitions = most concurrent workers
    minibatches = 100        # M: mini-batches per partition per epoch
    grad_mb = 0.003          # e: gradient size, MB
    tau_s = 0.004            # optional: seconds per mini-batch on one worker, communication
                             # included; absent: a short profiling run measures it
    arrival = 0              # optional: slot of arrival (psched run); absent: on submission

    [hparams]                # optional: the workload's hyper-parameters
    dataset = "digits"

    [worker]                 # one worker's demand; bandwidth_gbps = b (required)
    gpu = 0
    cpu = 1
    memory_gb = 1
    bandwidth_gbps = 1

    [ps]                     # one parameter server's demand; bandwidth_gbps = B >= b
    cpu = 1
    memory_gb = 1
    bandwidth_gbps = 1

    [utility]                # kind + value, decay, target (psched.utility) ...
    kind = "sigmoid"
    value = 10
    decay = 0.5
    target = 5
    # ... or a deadline: value = 10 and deadline = 6 (slots)

Every problem raises :class:`psched.errors.InputError` naming the file, the line (of the
field where it is present, else of its table) and the field.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import tomllib

from psched.errors import InputError
from psched.model import RESOURCES, JobSpec, Resources
from psched.utility import UTILITY_KINDS, Utility

__all__ = ["TAU_UNKNOWN", "load_jobspec", "parse_jobspec"]

#: ``tau_s`` of a spec without speed figures: the service profiles it before deciding.
TAU_UNKNOWN = -1.0

_TOP = {"id", "workload", "epochs", "partitions", "minibatches", "grad_mb", "tau_s", "arrival",
        "hparams", "worker", "ps", "utility"}
_UTILITY_KEYS = {"kind", "value", "decay", "target", "deadline"}
_TOML_LINE = re.compile(r"at line (\d+)")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _locate(text: str, table: str, key: str | None) -> int | None:
    """1-based line of ``key`` in ``[table]`` ("" = top level), else of the table header."""
    current, header = "", None
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        m = re.match(r"^\[([^\[\]]+)\]", line)
        if m:
            current = m.group(1).strip()
            if current == table:
                header = i
            continue
        if key is not None and current == table and re.match(rf"^{re.escape(key)}\s*=", line):
            return i
        if key is not None and table == "" and current == "" and \
                re.match(rf"^{re.escape(key)}\s*=", line):
            return i
    return header


def parse_jobspec(text: str, *, path: str = "<input>", default_id: str = "job",
                  allow_import: bool = False) -> JobSpec:
    """Parse and validate one job spec (TOML text).

    Complexity O(size of the text). ``tau_s`` is :data:`TAU_UNKNOWN` when the file gives no
    speed figure (the service profiles it).

    Raises
    ------
    InputError
        On any problem, naming ``path``, the line and the field.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = _TOML_LINE.search(str(err))
        raise InputError(f"not valid TOML: {err}", path=path,
                         line=int(m.group(1)) if m else None, field="toml") from None

    def bad(field: str, problem: str) -> InputError:
        table, _, key = field.rpartition(".")
        return InputError(problem, path=path, line=_locate(text, table, key), field=field)

    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise bad(unknown[0], f"unknown field (known: {', '.join(sorted(_TOP))})")

    def get(table: dict[str, Any], field: str, kind: type, *, required: bool = True,
            default: Any = None, least: float | None = None, positive: bool = False) -> Any:
        key = field.rpartition(".")[2]
        if key not in table:
            if required:
                raise bad(field, "missing")
            return default
        v = table[key]
        if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
            raise bad(field, f"expected an integer, got {v!r}")
        if kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise bad(field, f"expected a number, got {v!r}")
            v = float(v)
            if not math.isfinite(v):
                raise bad(field, f"expected a finite number, got {v!r}")
        if kind is str and not isinstance(v, str):
            raise bad(field, f"expected a string, got {v!r}")
        if least is not None and v < least:
            raise bad(field, f"must be >= {least:g}, got {v!r}")
        if positive and not v > 0:
            raise bad(field, f"must be > 0, got {v!r}")
        return v

    job_id = get(data, "id", str, required=False, default=default_id)
    if not _ID.match(job_id):
        raise bad("id", f"expected letters, digits, '.', '_' or '-' (at most 100), got {job_id!r}")
    workload = get(data, "workload", str)
    _check_workload(workload, allow_import, bad)
    hparams = data.get("hparams", {})
    if not isinstance(hparams, dict):
        raise bad("hparams", "expected a table")
    demands = {}
    for role in ("worker", "ps"):
        table = data.get(role)
        if not isinstance(table, dict):
            raise bad(role, "missing table" if table is None else "expected a table")
        extra = sorted(set(table) - set(RESOURCES))
        if extra:
            raise bad(f"{role}.{extra[0]}", f"unknown resource (known: {', '.join(RESOURCES)})")
        values = {r: get(table, f"{role}.{r}", float, required=r == "bandwidth_gbps",
                         default=0.0, least=0.0) for r in RESOURCES}
        if values["bandwidth_gbps"] <= 0:
            raise bad(f"{role}.bandwidth_gbps", "must be > 0")
        demands[role] = Resources(**values)
    if demands["worker"].bandwidth_gbps > demands["ps"].bandwidth_gbps:
        raise bad("ps.bandwidth_gbps", "must be >= worker.bandwidth_gbps (b <= B)")
    tau = get(data, "tau_s", float, required=False, default=TAU_UNKNOWN, least=0.0)
    return JobSpec(
        job_id=job_id,
        arrival=get(data, "arrival", int, required=False, default=0, least=0),
        epochs=get(data, "epochs", int, least=1),
        max_workers=get(data, "partitions", int, least=1),
        minibatches=get(data, "minibatches", int, least=1),
        tau_s=tau,
        grad_mb=get(data, "grad_mb", float, least=0.0),
        tau_includes_comm=True,
        worker_demand=demands["worker"],
        ps_demand=demands["ps"],
        utility=_utility(data.get("utility"), get, bad),
        workload=workload,
        hparams=json.dumps(hparams, sort_keys=True) if hparams else "",
    )


def _check_workload(workload: str, allow_import: bool, bad: Any) -> None:
    from ray_cluster.workloads import available_workloads

    if ":" in workload:
        if not allow_import:
            raise bad("workload", f"import path {workload!r} refused: the operator does not "
                      "allow user workloads (serve --allow-import)")
        return
    if workload not in available_workloads():
        raise bad("workload", f"unknown workload {workload!r} "
                  f"(built-in: {', '.join(available_workloads())})")


def _utility(table: Any, get: Any, bad: Any) -> Utility:
    if not isinstance(table, dict):
        raise bad("utility", "missing table" if table is None else "expected a table")
    extra = sorted(set(table) - _UTILITY_KEYS)
    if extra:
        known = ", ".join(sorted(_UTILITY_KEYS))
        raise bad(f"utility.{extra[0]}", f"unknown field (known: {known})")
    value = get(table, "utility.value", float, least=0.0)
    if "deadline" in table:
        if "kind" in table and table["kind"] != "deadline":
            raise bad("utility.deadline", "a deadline goes with kind = \"deadline\" only")
        return Utility(kind="deadline", value=value,
                       target=float(get(table, "utility.deadline", int, least=1)))
    kind = get(table, "utility.kind", str)
    if kind not in UTILITY_KINDS:
        raise bad("utility.kind", f"expected one of {', '.join(UTILITY_KINDS)}, got {kind!r}")
    return Utility(kind=kind, value=value,
                   decay=get(table, "utility.decay", float, required=False, default=0.0,
                             least=0.0),
                   target=get(table, "utility.target", float, required=False, default=0.0,
                              least=0.0))


def load_jobspec(path: str | Path, *, allow_import: bool = False) -> JobSpec:
    """Read and validate a job spec file. Raises :class:`InputError` (file, line, field)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=str(p)) from None
    return parse_jobspec(text, path=str(p), default_id=p.stem, allow_import=allow_import)
