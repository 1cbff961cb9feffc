"""Bounds on every input size and number, and the one validator of a job.

Every path by which a job enters psched -- a trace row (:mod:`psched.traces`), a job spec file
(:mod:`ray_cluster.workloads.jobspec`), a submission the service receives (which re-checks
everything:
a Ray client can call the service directly) -- ends in :func:`validate_spec`; every command-line
number goes through :mod:`psched.cli.argtypes`, built on the same constants. Each check runs before
anything is allocated from the value it checks.

Why these bounds. The aim: **no input of at most 100,000 rows makes memory exceed 2 GB**, and
no number turns into an overflow, an absurd allocation or a silent hour of work. What the model
holds per job and per slot decides each bound:

* the horizon ``T`` (:data:`MAX_HORIZON_SLOTS`, 10^6): a job's window is evaluated on up to
  ``T`` durations; OASiS's ledger keeps 5 float64 per server and slot, so
  ``T x servers <=`` :data:`MAX_SERVER_SLOTS` (2.5e7: 1 GB) is checked too;
* a job's work ``W`` in worker-slots (:data:`MAX_WORK_SLOTS`, 10^7): OASiS's cost-to-go holds
  one float64 per worker-slot (80 MB at the bound), and its min-plus step a ``(W + 1) x
  (N + 1)`` array (``W N <=`` :data:`MAX_WORK_WIDTH`, 10^8: 800 MB); ``W`` depends on the slot
  length, so it is checked where that is known (:func:`check_work`);
* the workers ``N`` (:data:`MAX_WORKERS`, 8192 = twice 4096 GPUs, the largest jobs of public
  traces at the default elasticity of 2): placement arrays are ``N + 1`` wide per slot, and a
  trace's default cluster is at least ``N x gpu / 8`` servers;
* epochs, mini-batches, seconds, gradient size: finite products. ``E N M (tau + 2e/b)``
  (:data:`MAX_WORKER_SECONDS`) stays far from float overflow;
* container demands (:data:`MAX_DEMAND`): 100x the largest machines of today; a container
  larger than every server is rejected at arrival anyway ("cannot fit", counted), the bound
  only keeps sums over jobs finite and the default cluster bounded;
* the default cluster for a trace (:data:`MAX_DEFAULT_SERVERS` per pool) and jobs per trace
  (:data:`MAX_JOBS`, about 1.5 KB each once parsed);
* text: ids (:data:`ID_PATTERN`, at most 128 characters of ``[A-Za-z0-9._-]``, not starting
  with ``.`` or ``-``: an id names a checkpoint folder, so ``../x`` must be impossible),
  workload names, hyper-parameters (:data:`MAX_HPARAMS_CHARS`), job spec files
  (:data:`MAX_SPEC_BYTES`); an echoed bad value is cut to :data:`MAX_ECHO_CHARS`.

Errors are :class:`~psched.core.errors.InputError`: one line naming the file, the line and the
field (:class:`Where` carries them from the reader to the validator and, for the service, over
the wire), and the value, shortened.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from psched.core.errors import InputError
from psched.core.horizon import MAX_HORIZON_SLOTS
from psched.core.model import RESOURCES, JobSpec, Resources
from psched.core.utility import ALL_KINDS, Utility

__all__ = [
    "ID_PATTERN",
    "MAX_DEFAULT_SERVERS",
    "MAX_DEMAND",
    "MAX_ECHO_CHARS",
    "MAX_EPOCHS",
    "MAX_GRAD_MB",
    "MAX_HORIZON_SLOTS",
    "MAX_HPARAMS_CHARS",
    "MAX_ID_CHARS",
    "MAX_JOBS",
    "MAX_LOAD",
    "MAX_MINIBATCHES",
    "MAX_SEED",
    "MAX_SERVER_SLOTS",
    "MAX_SLOT_SECONDS",
    "MAX_SPEC_BYTES",
    "MAX_SUBMIT_JOBS",
    "MAX_TAU_S",
    "MAX_UTILITY",
    "MAX_WORKERS",
    "MAX_WORKER_SECONDS",
    "MAX_WORKLOAD_CHARS",
    "MAX_WORK_SLOTS",
    "MAX_WORK_WIDTH",
    "MIN_SLOT_SECONDS",
    "Where",
    "check_arrival",
    "check_id",
    "check_run_size",
    "check_work",
    "shown",
    "validate_spec",
]

#: Most jobs in one trace, one ``--jobs``, one run.
MAX_JOBS = 1_000_000
#: Most job spec files in one ``psched submit``.
MAX_SUBMIT_JOBS = 10_000
#: Most slots x servers of one run (OASiS's ledger: 5 float64 per server and slot, 1 GB).
MAX_SERVER_SLOTS = 25_000_000
#: Most worker-slots W of one job (8 bytes each in OASiS's cost-to-go: 80 MB).
MAX_WORK_SLOTS = 10_000_000
#: Most W x N of one job: OASiS's min-plus step holds a (W + 1) x (N + 1) float64 array at
#: worst (800 MB here); its time is O(window x W x N).
MAX_WORK_WIDTH = 100_000_000
#: Most servers per pool of the default cluster sized for a trace.
MAX_DEFAULT_SERVERS = 10_000
#: Most workers N of one job.
MAX_WORKERS = 8192
#: Most epochs E of one job.
MAX_EPOCHS = 1_000_000
#: Most mini-batches M per partition (mapped traces: iterations x GPUs / N, up to 10^12).
MAX_MINIBATCHES = 10**12
#: Longest mini-batch tau, seconds (11.6 days).
MAX_TAU_S = 1e6
#: Largest gradient e, MB (10 TB).
MAX_GRAD_MB = 1e7
#: Largest E N M (tau + 2e/b), worker-seconds: a million GPU-years, far from overflow.
MAX_WORKER_SECONDS = 1e15
#: Largest demand of one container per resource (about 100x the largest machines).
MAX_DEMAND: Mapping[str, float] = {"gpu": 1024.0, "cpu": 1e5, "memory_gb": 1e7,
                                   "storage_gb": 1e9, "bandwidth_gbps": 1e6}
#: Largest utility parameter per field: value (priority), decay per slot, target in slots.
MAX_UTILITY: Mapping[str, float] = {"value": 1e12, "decay": 1e6, "target": 1e15}
#: Slot length bounds, seconds (1 ms to 116 days).
MIN_SLOT_SECONDS = 1e-3
MAX_SLOT_SECONDS = 1e7
#: Largest target load of a default cluster.
MAX_LOAD = 100.0
#: Largest seed (a signed 64-bit integer: journaled in SQLite, fed to numpy).
MAX_SEED = 2**63 - 1
#: Ids: letters, digits, ``.``, ``_``, ``-``; not starting with ``.`` or ``-``; 1 to 128.
MAX_ID_CHARS = 128
ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
#: Longest workload name or import path, characters.
MAX_WORKLOAD_CHARS = 200
#: Longest hyper-parameter JSON text, characters.
MAX_HPARAMS_CHARS = 4096
#: Largest job spec file, bytes.
MAX_SPEC_BYTES = 1_000_000
#: Longest echo of a bad value in an error message, characters.
MAX_ECHO_CHARS = 60


def _printable(text: str) -> str:
    """``text`` with every non-printable character escaped as ``repr`` would."""
    return text if text.isprintable() else repr(text)[1:-1]


def shown(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with the full length said."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**16:
        if abs(value) >= 10**4000:  # str() of it would raise (int_max_str_digits)
            return "an integer of over 4000 digits"
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[:6]}... ({len(digits)} digits)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where a job came from, for error messages: file, line, and the input's field names."""

    path: str = ""  #: file (or flag) named in errors; "" = ``<input>``
    line: int | None = None  #: line of the whole job (a trace row), if any
    lines: Mapping[str, int] = field(default_factory=dict)  #: input field -> its line
    names: Mapping[str, str] = field(default_factory=dict)  #: JobSpec field -> input field

    def name(self, spec_field: str) -> str:
        """The input's name of a :class:`JobSpec` field (``max_workers`` -> ``partitions``).

        ``names`` maps whole fields, or prefixes ending in ``.`` (``"worker_demand."`` ->
        ``"worker_"`` turns ``worker_demand.gpu`` into ``worker_gpu``).
        """
        if spec_field in self.names:
            return self.names[spec_field]
        head, dot, tail = spec_field.partition(".")
        if dot and head + "." in self.names:
            return self.names[head + "."] + tail
        return spec_field

    def error(self, spec_field: str, problem: str, value: Any = ...) -> InputError:
        """The one-line error for ``spec_field`` (a JobSpec field, dotted for nested; a name
        taken from the input, such as an unknown key, is shown with its control characters
        escaped, so the error stays one line)."""
        name = self.name(_printable(spec_field))
        line = self.lines.get(name, self.line)
        text = problem if value is ... else f"{problem}, got {shown(value)}"
        return InputError(text, path=self.path, line=line, field=name)

    def locate(self, err: InputError) -> InputError:
        """``err`` named with this file and line when it names no file (an error decided
        elsewhere, e.g. inside the service, about a job that came from here)."""
        if err.path or not (self.path or self.line):
            return err
        name = self.name(err.field) if err.field else ""
        line = self.lines.get(name, self.line) if name else self.line
        return InputError(err.problem, path=self.path, line=line, field=name)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, to send along with a job (the service names file and line)."""
        return {"path": self.path, "line": self.line, "lines": dict(self.lines),
                "names": dict(self.names)}

    @classmethod
    def from_dict(cls, data: Any) -> Where:
        """The inverse of :meth:`to_dict`; anything malformed gives an empty :class:`Where`
        (a location is a courtesy of the client, never trusted for more than messages)."""
        if not isinstance(data, Mapping):
            return cls()
        path = data.get("path", "")
        line = data.get("line")
        lines, names = data.get("lines", {}), data.get("names", {})
        ok = (isinstance(path, str) and len(path) <= 4096
              and (line is None or (type(line) is int and 0 < line <= 10**9))
              and _small_str_map(lines, int) and _small_str_map(names, str))
        if not ok:
            return cls()
        return cls(path=path, line=line, lines=dict(lines), names=dict(names))


def _small_str_map(value: Any, kind: type) -> bool:
    return (isinstance(value, Mapping) and len(value) <= 64
            and all(isinstance(k, str) and len(k) <= 64 and type(v) is kind
                    and (not isinstance(v, str) or len(v) <= 64) for k, v in value.items()))


def check_id(value: Any, where: Where, spec_field: str = "job_id") -> str:
    """``value`` if it is a safe id (:data:`ID_PATTERN`), else :class:`InputError`."""
    if not isinstance(value, str):
        raise where.error(spec_field, "expected a string", value)
    if not ID_PATTERN.fullmatch(value):
        raise where.error(spec_field, f"expected 1 to {MAX_ID_CHARS} letters, digits, '.', "
                          "'_' or '-', not starting with '.' or '-'", value)
    return value


def check_arrival(value: Any, where: Where | None = None) -> int | None:
    """An explicit arrival slot (None = on submission) in ``[0, MAX_HORIZON_SLOTS)``."""
    if value is None:
        return None
    return _integer(value, where or Where(), "arrival", 0, MAX_HORIZON_SLOTS - 1)


def _integer(value: Any, where: Where, spec_field: str, least: int, most: int) -> int:
    if isinstance(value, bool):
        raise where.error(spec_field, "expected an integer", value)
    try:
        number = operator.index(value)
    except TypeError:
        raise where.error(spec_field, "expected an integer", value) from None
    if not least <= number <= most:
        raise where.error(spec_field, f"must be in [{least}, {most:g}]", number)
    return number


def _real(value: Any, where: Where, spec_field: str, least: float, most: float, *,
          positive: bool = False) -> float:
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        raise where.error(spec_field, "expected a number", value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise where.error(spec_field, "expected a finite number", value) from None
    if not math.isfinite(number):
        raise where.error(spec_field, "expected a finite number", value)
    if number < least or (positive and number <= least) or number > most:
        low = "(" if positive else "["
        raise where.error(spec_field, f"must be in {low}{least:g}, {most:g}]", value)
    return number


def _text(value: Any, where: Where, spec_field: str, most: int, *,
          printable: bool = True) -> str:
    if not isinstance(value, str):
        raise where.error(spec_field, "expected a string", value)
    if len(value) > most:
        raise where.error(spec_field, f"at most {most} characters", value)
    if printable and any(not ch.isprintable() for ch in value):
        raise where.error(spec_field, "control characters are not allowed", value)
    return value


def _hparams(value: Any, where: Where) -> str:
    text = _text(value, where, "hparams", MAX_HPARAMS_CHARS, printable=False)
    if not text:
        return text
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise where.error("hparams", f"bad JSON ({str(err)[:80]})", text) from None
    if not isinstance(parsed, dict):
        raise where.error("hparams", "must be a JSON object", text)
    return text


def _resources(value: Any, where: Where, role: str) -> Resources:
    if isinstance(value, Resources):
        value = {r: getattr(value, r) for r in RESOURCES}
    if not isinstance(value, Mapping):
        raise where.error(role, "expected a table of resources", value)
    extra = sorted(str(k) for k in value if k not in RESOURCES)
    if extra:
        raise where.error(f"{role}.{extra[0]}",
                          f"unknown resource (known: {', '.join(RESOURCES)})")
    amounts = {r: _real(value.get(r, 0.0), where, f"{role}.{r}", 0.0, MAX_DEMAND[r],
                        positive=r == "bandwidth_gbps") for r in RESOURCES}
    return Resources(**amounts)


def _utility(value: Any, where: Where) -> Utility:
    if isinstance(value, Utility):
        value = {"kind": value.kind, "value": value.value, "decay": value.decay,
                 "target": value.target, "steps": value.steps}
    if not isinstance(value, Mapping):
        raise where.error("utility", "expected a utility table", value)
    extra = sorted(str(k) for k in value
                   if k not in ("kind", "value", "decay", "target", "steps"))
    if extra:
        raise where.error(f"utility.{extra[0]}", "unknown field")
    kind = value.get("kind")
    if kind not in ALL_KINDS:
        raise where.error("utility.kind", f"expected one of {', '.join(ALL_KINDS)}", kind)
    numbers = {k: _real(value.get(k, 0.0), where, f"utility.{k}", 0.0, MAX_UTILITY[k])
               for k in ("value", "decay", "target")}
    steps = value.get("steps") or ()
    if kind != "step" and not steps:
        return Utility(kind=kind, value=numbers["value"], decay=numbers["decay"],
                       target=numbers["target"])
    if not isinstance(steps, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in steps):
        raise where.error("utility.steps", "expected (slots, value) pairs", steps)
    pairs = tuple((_real(t, where, "utility.steps", 0.0, MAX_UTILITY["target"]),
                   _real(v, where, "utility.steps", 0.0, MAX_UTILITY["value"])) for t, v in steps)
    try:
        return Utility(kind=kind, value=numbers["value"], decay=numbers["decay"],
                       target=numbers["target"], steps=pairs)
    except ValueError as err:
        raise where.error("utility.steps", str(err), steps) from None


_SPEC_FIELDS = ("job_id", "arrival", "epochs", "max_workers", "minibatches", "tau_s", "grad_mb",
                "worker_demand", "ps_demand", "utility", "tau_includes_comm", "workload",
                "hparams")


def validate_spec(spec_or_fields: JobSpec | Mapping[str, Any], *, where: Where | None = None,
                  slot_seconds: float | None = None, tau_unknown: float | None = None) -> JobSpec:
    """The one check of a job, from any source; returns it rebuilt with plain types.

    Parameters
    ----------
    spec_or_fields : JobSpec or mapping
        A job, or its fields as :func:`dataclasses.asdict` gives them (decoded JSON).
    where : Where, optional
        File, line and field names for errors.
    slot_seconds : float, optional
        When known, the work ``W`` in worker-slots is checked too (:func:`check_work`).
    tau_unknown : float, optional
        A ``tau_s`` value that means "not measured yet" (job spec files), accepted as is.

    Returns
    -------
    JobSpec
        Equal to the input when it was a valid :class:`JobSpec`.

    Raises
    ------
    InputError
        The first problem: wrong type, a value out of the bounds of this module, an unsafe
        id, b > B, a mini-batch taking no time, hyper-parameters that are not a JSON object.

    Notes
    -----
    O(size of the text fields); nothing is allocated from a numeric value.
    """
    where = where or Where()
    data = _as_fields(spec_or_fields, where)
    job_id = check_id(data["job_id"], where)
    ints = {
        "arrival": _integer(data["arrival"], where, "arrival", 0, MAX_HORIZON_SLOTS - 1),
        "epochs": _integer(data["epochs"], where, "epochs", 1, MAX_EPOCHS),
        "max_workers": _integer(data["max_workers"], where, "max_workers", 1, MAX_WORKERS),
        "minibatches": _integer(data["minibatches"], where, "minibatches", 1, MAX_MINIBATCHES),
    }
    tau = data["tau_s"]
    unknown = tau_unknown is not None and tau == tau_unknown and not isinstance(tau, bool)
    tau_s = float(tau) if unknown else _real(tau, where, "tau_s", 0.0, MAX_TAU_S)
    grad_mb = _real(data["grad_mb"], where, "grad_mb", 0.0, MAX_GRAD_MB)
    includes = data["tau_includes_comm"]
    if not isinstance(includes, bool):
        raise where.error("tau_includes_comm", "expected true or false", includes)
    worker = _resources(data["worker_demand"], where, "worker_demand")
    ps = _resources(data["ps_demand"], where, "ps_demand")
    if worker.bandwidth_gbps > ps.bandwidth_gbps:
        raise where.error("worker_demand.bandwidth_gbps", "worker bandwidth b exceeds PS "
                          f"bandwidth B = {ps.bandwidth_gbps!r} (b <= B, oasis.md section 7)",
                          worker.bandwidth_gbps)
    if not unknown and tau_s == 0 and (grad_mb == 0 or includes):
        raise where.error("tau_s", "a mini-batch must take time: tau_s and grad_mb are both 0"
                          if not includes else "must be > 0 when tau includes communication",
                          tau_s)
    spec = JobSpec(
        job_id=job_id, **ints, tau_s=tau_s, grad_mb=grad_mb, worker_demand=worker,
        ps_demand=ps, utility=_utility(data["utility"], where), tau_includes_comm=includes,
        workload=_text(data["workload"], where, "workload", MAX_WORKLOAD_CHARS),
        hparams=_hparams(data["hparams"], where),
    )
    if not unknown:
        total = _worker_seconds(spec)
        if total > MAX_WORKER_SECONDS:
            raise where.error("epochs", f"the job's work E*N*M*(tau + 2e/b) = {total:.3g} "
                              f"worker-seconds exceeds {MAX_WORKER_SECONDS:g}")
        if slot_seconds is not None:
            check_work(spec, slot_seconds, where)
    return spec


def _as_fields(spec_or_fields: JobSpec | Mapping[str, Any], where: Where) -> dict[str, Any]:
    if isinstance(spec_or_fields, JobSpec):
        return {f: getattr(spec_or_fields, f) for f in _SPEC_FIELDS}
    if not isinstance(spec_or_fields, Mapping):
        raise where.error("job", "expected a job (a table of fields)", spec_or_fields)
    extra = sorted(str(k) for k in spec_or_fields if k not in _SPEC_FIELDS)
    if extra:
        raise where.error(extra[0], "unknown field")
    defaults = {"tau_includes_comm": False, "workload": "", "hparams": ""}
    missing = [f for f in _SPEC_FIELDS if f not in spec_or_fields and f not in defaults]
    if missing:
        raise where.error(missing[0], "missing")
    return {**defaults, **spec_or_fields}


def _worker_seconds(spec: JobSpec) -> float:
    """``E N M (tau + 2e/b)`` in worker-seconds (inf on overflow)."""
    try:
        return spec.epochs * spec.max_workers * spec.minibatches * spec.minibatch_seconds()
    except OverflowError:
        return math.inf


def check_work(spec: JobSpec, slot_seconds: float, where: Where | None = None) -> int:
    """The work W of ``spec`` in worker-slots, if at most :data:`MAX_WORK_SLOTS` and its
    fastest duration ``ceil(W / N)`` fits in :data:`MAX_HORIZON_SLOTS`; else InputError."""
    where = where or Where()
    total = _worker_seconds(spec) / slot_seconds
    if not total <= MAX_WORK_SLOTS:
        raise where.error("epochs", f"the job needs {total:.3g} worker-slots of "
                          f"{slot_seconds:g} s, more than {MAX_WORK_SLOTS:g}: use longer slots")
    work = spec.work(slot_seconds)
    if work * spec.max_workers > MAX_WORK_WIDTH:
        raise where.error("epochs", f"the job's work W = {work} worker-slots of "
                          f"{slot_seconds:g} s times its N = {spec.max_workers} workers "
                          f"exceeds {MAX_WORK_WIDTH:g}: use longer slots")
    fastest = -(-work // spec.max_workers)
    if fastest >= MAX_HORIZON_SLOTS:
        raise where.error("epochs", f"the job's fastest duration, {fastest} slots of "
                          f"{slot_seconds:g} s, exceeds {MAX_HORIZON_SLOTS} slots")
    return work


def check_run_size(horizon: int, n_servers: int, *, path: str = "--slots") -> None:
    """Refuse a run whose slots x servers exceed :data:`MAX_SERVER_SLOTS`."""
    if horizon > MAX_HORIZON_SLOTS:
        raise InputError(f"horizon of {horizon} slots exceeds {MAX_HORIZON_SLOTS}",
                         path=path, field="slots")
    if horizon * n_servers > MAX_SERVER_SLOTS:
        raise InputError(f"{horizon} slots x {n_servers} servers = {horizon * n_servers:.3g} "
                         f"server-slots exceeds {MAX_SERVER_SLOTS:g}: use fewer or longer "
                         "slots, or a smaller cluster", path=path, field="slots")
