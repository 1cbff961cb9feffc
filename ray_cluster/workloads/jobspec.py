"""Job spec files: one training job as TOML data, validated into a
:class:`psched.core.model.JobSpec`.

A job spec is data only: it is parsed with :mod:`tomllib` and never evaluated or unpickled.
Its workload is a built-in name (:func:`ray_cluster.workloads.builtin.available_workloads`) or, only
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

    [utility]                # kind + value, decay, target (psched.core.utility) ...
    kind = "sigmoid"
    value = 10
    decay = 0.5
    target = 5
    # ... or a deadline: value = 10 and deadline = 6 (slots)

Every problem raises :class:`psched.core.errors.InputError` naming the file, the line (of the
field where it is present, else of its table) and the field. Numbers, ids and sizes are
checked by :func:`psched.core.limits.validate_spec`, the validator every job passes (traces, these
files, the service), and the hyper-parameters against the workload's schema
(:data:`ray_cluster.workloads.builtin.HPARAMS`): :func:`check_submission` is both, and the service
calls it on everything it receives.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

from psched.core.errors import InputError
from psched.core.limits import MAX_SPEC_BYTES, MAX_WORKLOAD_CHARS, Where, shown, validate_spec
from psched.core.model import RESOURCES, JobSpec, Resources
from psched.core.utility import Utility
from ray_cluster.workloads.hparams import builtin_workloads, check_hparams

__all__ = [
    "TAU_UNKNOWN",
    "CheckedJob",
    "ImportRefused",
    "check_submission",
    "import_refused",
    "load_jobspec",
    "load_jobspec_where",
    "parse_jobspec",
    "parse_jobspec_where",
    "spec_from_json",
    "spec_lines",
    "spec_to_json",
    "submission_from_json",
]

#: ``tau_s`` of a spec without speed figures: the service profiles it before deciding.
TAU_UNKNOWN = -1.0

_TOP = {"id", "workload", "epochs", "partitions", "minibatches", "grad_mb", "tau_s", "arrival",
        "hparams", "worker", "ps", "utility"}
_UTILITY_KEYS = {"kind", "value", "decay", "target", "deadline"}
_TOML_LINE = re.compile(r"at line (\d+)")
_HEADER = re.compile(r"^\[\[?\s*([^\[\]]+?)\s*\]\]?")
_KEY = re.compile(r"^\"?([A-Za-z0-9_.-]+)\"?\s*=")
#: The validator's field names as this format spells them.
_NAMES = {"job_id": "id", "max_workers": "partitions", "worker_demand.": "worker.",
          "ps_demand.": "ps.", "worker_demand": "worker", "ps_demand": "ps"}


class ImportRefused(InputError):
    """A workload given by import path while imports are not allowed."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckedJob:
    """A job that passed :func:`check_submission` where it entered a service (the actor's
    :func:`submission_from_json`): :meth:`ray_cluster.service.SchedulerService.submit` takes
    it as it is, without checking it again."""

    spec: JobSpec  #: the job, rebuilt with plain types
    slot_seconds: float | None  #: the slot length its work was checked against (None: not)
    allow_import: bool  #: whether an import-path workload was allowed when it was checked


def import_refused(workload: str, where: Where) -> ImportRefused:
    """The one-line refusal of an import-path workload (``serve`` without ``--allow-import``),
    naming the file, the line and the field ``workload``."""
    return ImportRefused(
        f"import path {shown(workload)} refused: the operator does not allow user "
        "workloads (serve --allow-import)", path=where.path,
        line=where.lines.get("workload", where.line), field="workload")


def spec_lines(text: str) -> dict[str, int]:
    """``field -> 1-based line`` for every key and table of a spec (``worker.gpu``, ``ps``).

    The first occurrence wins; array tables (``[[jobs]]``) are named by their first header.
    O(size of the text).
    """
    out: dict[str, int] = {}
    table = ""
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = _HEADER.match(line)
        if header:
            table = header.group(1).strip()
            out.setdefault(table, i)
            continue
        key = _KEY.match(line)
        if key:
            out.setdefault(f"{table}.{key.group(1)}" if table else key.group(1), i)
    return out


def parse_jobspec(text: str, *, path: str = "<input>", default_id: str = "job",
                  allow_import: bool = False) -> JobSpec:
    """Parse and validate one job spec (TOML text); :func:`parse_jobspec_where` says more."""
    return parse_jobspec_where(text, path=path, default_id=default_id,
                               allow_import=allow_import)[0]


def parse_jobspec_where(text: str, *, path: str = "<input>", default_id: str = "job",
                        allow_import: bool = False) -> tuple[JobSpec, Where]:
    """Parse and validate one job spec (TOML text); also where its fields are (to name the
    file and line in errors decided later, e.g. by the service).

    Complexity O(size of the text). ``tau_s`` is :data:`TAU_UNKNOWN` when the file gives no
    speed figure (the service profiles it).

    Raises
    ------
    InputError
        On any problem, naming ``path``, the line and the field (:class:`ImportRefused` for
        an import path when ``allow_import`` is false).
    """
    if len(text) > MAX_SPEC_BYTES:
        raise InputError(f"a job spec is at most {MAX_SPEC_BYTES} bytes, this one has "
                         f"{len(text)}", path=path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = _TOML_LINE.search(str(err))
        raise InputError(f"not valid TOML: {err}", path=path,
                         line=int(m.group(1)) if m else None, field="toml") from None
    except RecursionError:
        raise InputError("not valid TOML: nested too deeply", path=path, field="toml") from None
    except ValueError as err:  # an integer of more than 4300 digits
        raise InputError(f"not valid TOML: {str(err)[:100]}", path=path, field="toml") from None
    deadline = isinstance(data.get("utility"), dict) and "deadline" in data["utility"]
    where = Where(path=path, lines=spec_lines(text),
                  names={**_NAMES, "utility.target": "utility.deadline"} if deadline else _NAMES)
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise where.error(unknown[0][:40], f"unknown field (known: {', '.join(sorted(_TOP))})")
    fields = {
        "job_id": data.get("id", default_id), "arrival": data.get("arrival", 0),
        "epochs": _required(data, "epochs", where),
        "max_workers": _required(data, "partitions", where),
        "minibatches": _required(data, "minibatches", where),
        "tau_s": data.get("tau_s", TAU_UNKNOWN), "grad_mb": _required(data, "grad_mb", where),
        "tau_includes_comm": True, "workload": _required(data, "workload", where),
        "worker_demand": _demand(data, "worker", where),
        "ps_demand": _demand(data, "ps", where),
        "utility": _utility(data.get("utility"), where),
    }
    hparams = data.get("hparams", {})
    if not isinstance(hparams, dict):
        raise where.error("hparams", "expected a table", hparams)
    if isinstance(fields["tau_s"], (int, float)) and fields["tau_s"] < 0 and \
            fields["tau_s"] != TAU_UNKNOWN:
        raise where.error("tau_s", "must be >= 0", fields["tau_s"])
    _check_workload(fields["workload"], allow_import, where)
    fields["hparams"] = _hparams_text(fields["workload"], hparams, where)
    if isinstance(fields["tau_s"], int) and not isinstance(fields["tau_s"], bool):
        fields["tau_s"] = float(fields["tau_s"])
    return check_submission(fields, where=where, allow_import=allow_import), where


def _required(data: Mapping[str, Any], key: str, where: Where) -> Any:
    if key not in data:
        raise InputError("missing", path=where.path, field=key)
    return data[key]


def _demand(data: Mapping[str, Any], role: str, where: Where) -> Any:
    table = data.get(role)
    if not isinstance(table, dict):
        raise where.error(f"{role}_demand", "missing table" if table is None
                          else "expected a table", ... if table is None else table)
    extra = sorted(set(table) - set(RESOURCES))
    if extra:
        raise where.error(f"{role}_demand.{extra[0][:40]}",
                          f"unknown resource (known: {', '.join(RESOURCES)})")
    if "bandwidth_gbps" not in table:
        raise where.error(f"{role}_demand.bandwidth_gbps", "missing")
    return table


def _utility(table: Any, where: Where) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise where.error("utility", "missing table" if table is None else "expected a table",
                          ... if table is None else table)
    extra = sorted(set(table) - _UTILITY_KEYS)
    if extra:
        known = ", ".join(sorted(_UTILITY_KEYS))
        raise where.error(f"utility.{extra[0][:40]}", f"unknown field (known: {known})")
    if "value" not in table:
        raise where.error("utility.value", "missing")
    if "deadline" in table:
        if "kind" in table and table["kind"] != "deadline":
            raise where.error("utility.deadline", "a deadline goes with kind = \"deadline\" only")
        deadline = table["deadline"]
        if isinstance(deadline, bool) or not isinstance(deadline, int) or deadline < 1:
            raise where.error("utility.deadline", "expected an integer >= 1", deadline)
        return {"kind": "deadline", "value": table["value"], "target": float(deadline)}
    if "kind" not in table:
        raise where.error("utility.kind", "missing")
    return {k: table.get(k, 0.0) for k in ("kind", "value", "decay", "target")}


def _hparams_text(workload: Any, hparams: dict[str, Any], where: Where) -> str:
    """The hyper-parameters as canonical JSON, after the workload's schema is checked."""
    check_hparams(workload, hparams, where)
    try:
        return json.dumps(hparams, sort_keys=True, default=str) if hparams else ""
    except (TypeError, ValueError, RecursionError):
        raise where.error("hparams", "expected plain values") from None


def _check_workload(workload: Any, allow_import: bool, where: Where) -> None:
    if not isinstance(workload, str) or not workload or len(workload) > MAX_WORKLOAD_CHARS:
        raise where.error("workload", f"expected a built-in name or pkg.module:Class (at most "
                          f"{MAX_WORKLOAD_CHARS} characters)", workload)
    if ":" in workload:
        if not allow_import:
            raise import_refused(workload, where)
        return
    if workload not in builtin_workloads():
        raise where.error("workload", f"unknown workload (built-in: "
                          f"{', '.join(builtin_workloads())})", workload)


def check_submission(spec: JobSpec | Mapping[str, Any], *, where: Where | None = None,
                     allow_import: bool = False, slot_seconds: float | None = None) -> JobSpec:
    """Everything a job must satisfy to be submitted for real training.

    :func:`psched.core.limits.validate_spec` (bounds, id, types), then a workload that is built in
    or an allowed import path, then hyper-parameters the workload accepts. The service calls
    it on every job it receives; ``slot_seconds`` adds the check of the work in worker-slots
    (skipped while ``tau_s`` is :data:`TAU_UNKNOWN`; call again after profiling).

    Raises
    ------
    InputError
        The first problem, with ``where``'s file, line and field names.
    """
    where = where or Where()
    out = validate_spec(spec, where=where, slot_seconds=slot_seconds, tau_unknown=TAU_UNKNOWN)
    if out.tau_s < 0 and out.tau_s != TAU_UNKNOWN:
        raise where.error("tau_s", "must be >= 0", out.tau_s)
    _check_workload(out.workload, allow_import, where)
    check_hparams(out.workload, json.loads(out.hparams) if out.hparams else {}, where)
    return out


def submission_from_json(text: Any, *, where: Where | None = None, allow_import: bool = False,
                         slot_seconds: float | None = None) -> CheckedJob:
    """A job sent to the service as JSON (``journal.spec_to_json``), fully checked, once
    (:func:`check_submission`; ``slot_seconds``: the service's, so that its work is checked
    too): the service takes the :class:`CheckedJob` without checking it again.

    Anything malformed -- not text, too long, not JSON, missing or unknown fields, wrong
    types -- is an :class:`InputError`, never another exception.
    """
    where = where or Where()
    if not isinstance(text, str):
        raise where.error("job", "expected the job as JSON text", text)
    if len(text) > MAX_SPEC_BYTES:
        raise where.error("job", f"a job is at most {MAX_SPEC_BYTES} bytes of JSON")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise where.error("job", f"not JSON ({str(err)[:80]})") from None
    spec = check_submission(data, where=where, allow_import=allow_import,
                            slot_seconds=slot_seconds)
    return CheckedJob(spec=spec, slot_seconds=slot_seconds, allow_import=allow_import)


def load_jobspec(path: str | Path, *, allow_import: bool = False) -> JobSpec:
    """Read and validate a job spec file. Raises :class:`InputError` (file, line, field)."""
    return load_jobspec_where(path, allow_import=allow_import)[0]


def load_jobspec_where(path: str | Path, *,
                       allow_import: bool = False) -> tuple[JobSpec, Where]:
    """:func:`load_jobspec`, with where its fields are (:func:`parse_jobspec_where`)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
        text = raw.decode("utf-8-sig")  # a byte-order mark (some editors write one) is dropped
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=str(p)) from None
    if len(raw) > MAX_SPEC_BYTES:
        raise InputError(f"a job spec is at most {MAX_SPEC_BYTES} bytes", path=str(p))
    return parse_jobspec_where(text, path=str(p), default_id=p.stem, allow_import=allow_import)


def spec_to_json(spec: JobSpec) -> str:
    """A job spec as JSON (plain data)."""
    return json.dumps(dataclasses.asdict(spec), sort_keys=True)


def spec_from_json(text: str) -> JobSpec:
    """The inverse of :func:`spec_to_json` (data only, nothing evaluated)."""
    d = json.loads(text)
    d["worker_demand"] = Resources(**d["worker_demand"])
    d["ps_demand"] = Resources(**d["ps_demand"])
    d["utility"] = Utility(**d["utility"])
    return JobSpec(**d)
