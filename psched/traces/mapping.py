"""From a public trace's rows to parameter-server jobs: the documented mapping rules.

Adapters turn each file into :class:`TraceRow` records (what the trace states, in seconds and
containers); :func:`map_rows` turns them into :class:`~psched.core.model.JobSpec` under
:class:`MappingOptions`. ``traces/README.md`` ("Public traces: mapping to jobs") states every
rule and assumption; in short, with slot length S and a job that ran ``duration`` seconds on
``n0`` workers (one GPU each unless the trace says otherwise):

* arrival slot ``floor((submit - t0) / S)``, t0 = first kept submission;
* work ``W = ceil(duration * n0 / S)`` worker-slots (``E = 1``, ``tau`` includes
  communication; ``E N M tau = duration * n0`` exactly);
* max workers ``N = min(ceil(elastic * n0), W)`` (elastic: may exceed ``n0``; more than ``W``
  workers cannot finish sooner than one slot);
* gradient size from :data:`MODEL_CATALOG`; worker bandwidth b = the rate that moves one
  gradient out and back per iteration, clipped to [0.1, 5] Gbps; B from the options;
* utility: the trace's own where it states one (value steps at completion times, a
  deadline, a best-effort flag), otherwise the paper's type mix;
* a model the catalog lacks is renamed by ``model_map``, else by its family, else
  :data:`DEFAULT_MODEL`, counted and named in one warning line.

Deterministic for a seed: every draw comes from ``numpy.random.default_rng(seed)``, in the
order of the kept jobs sorted stably by submission time.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from psched.core.errors import InputError
from psched.core.limits import MAX_JOBS, Where, shown, validate_spec
from psched.core.model import JobSpec, Resources, ceil_eps
from psched.core.utility import Utility, step_utility

__all__ = [
    "BEST_EFFORT_VALUE",
    "DEFAULT_MODEL",
    "DEFAULT_PS",
    "DEFAULT_WORKER",
    "ITERATION_SECONDS",
    "MODEL_CATALOG",
    "MapReport",
    "MappingOptions",
    "ModelInfo",
    "TraceRow",
    "catalog_model",
    "map_rows",
]


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """A model of the catalog: its size, and where that figure comes from."""

    name: str  #: name as traces write it (lower case)
    params_m: float  #: parameters, millions
    source: str  #: where the parameter count comes from

    @property
    def grad_mb(self) -> float:
        """fp32 gradient (= parameter) size, MB (10^6 bytes): 4 bytes per parameter."""
        return self.params_m * 4.0


_FORMATS = "shared/traces/FORMATS.md (model catalog facts)"
_TV = "torchvision model documentation (weights' num_params)"
#: Models the traces name. ``traces/README.md`` lists the same table.
MODEL_CATALOG: dict[str, ModelInfo] = {m.name: m for m in (
    ModelInfo(name="resnet50", params_m=25.6, source=_FORMATS),
    ModelInfo(name="vgg16", params_m=138.0, source=_FORMATS),
    ModelInfo(name="vgg19", params_m=144.0, source=_FORMATS),
    ModelInfo(name="inception3", params_m=23.8, source=_FORMATS),
    ModelInfo(name="bert", params_m=110.0, source=_FORMATS + ", BERT-base"),
    ModelInfo(name="gpt2", params_m=124.0, source=_FORMATS + ", GPT-2 small"),
    ModelInfo(name="alexnet", params_m=61.0, source=_FORMATS),
    ModelInfo(name="deepspeech2", params_m=52.5,
              source="Wolfram Neural Net Repository, 'Deep Speech 2 trained on Baidu English "
                     "data': 52,504,416 parameters"),
    ModelInfo(name="googlenet", params_m=6.6, source=_TV + ": GoogLeNet 6,624,904"),
    ModelInfo(name="inception4", params_m=42.7,
              source="timm inception_v4 (Szegedy et al. 2017): 42.7 M"),
    ModelInfo(name="resnet101", params_m=44.5, source=_TV + ": ResNet-101 44,549,160"),
    ModelInfo(name="resnet152", params_m=60.2, source=_TV + ": ResNet-152 60,192,808"),
    ModelInfo(name="vgg11", params_m=132.9, source=_TV + ": VGG-11 132,863,336"),
    ModelInfo(name="resnet18", params_m=11.7, source=_TV + ": ResNet-18 11,689,512"),
    ModelInfo(name="mobilenet_v2", params_m=3.5, source=_TV + ": MobileNet V2 3,504,872"),
)}

#: The catalog model of a name it lacks, by the name's start (lower case, letters and digits
#: only); anything else is :data:`DEFAULT_MODEL`. Only e, b and tau depend on it, never W.
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("resnet", "resnet50"), ("inception", "inception3"), ("vgg", "vgg16"), ("bert", "bert"),
    ("gpt", "gpt2"), ("deepspeech", "deepspeech2"), ("mobilenet", "mobilenet_v2"),
    ("googlenet", "googlenet"), ("alexnet", "alexnet"),
)
#: The model of a name with no family in the catalog (ResNet-50, a mid-size model: 25.6 M).
DEFAULT_MODEL = "resnet50"
#: Utility of a best-effort job (Chronus ``best_effort`` / ``job_type`` best-effort): Chronus's
#: own value for such jobs, 1, against 100 for a job with a deadline.
BEST_EFFORT_VALUE = 1.0

#: Seconds per iteration on the job's GPUs, for traces without iteration counts: the median
#: of ``duration / num_iteration`` per model in ElasticFlow ``augmented/cluster04.csv``
#: (15,802 jobs; command in ``traces/README.md``). Only ``tau`` and the bandwidth demand depend
#: on it, never the work.
ITERATION_SECONDS: dict[str, float] = {
    "resnet50": 0.274, "vgg16": 0.215, "inception3": 0.207, "bert": 0.166,
    "gpt2": 0.137, "deepspeech2": 0.331,
}

#: One worker's demand when the trace gives none (one GPU; CPU and memory well under a
#: default server's 8/64/488 per GPU share, so GPU binds): GPU, vCPU, GB.
DEFAULT_WORKER = Resources(gpu=1.0, cpu=4.0, memory_gb=32.0)
#: One PS's demand when the trace gives none: vCPU, GB.
DEFAULT_PS = Resources(cpu=4.0, memory_gb=8.0)
_B_RANGE = (0.1, 5.0)  # worker bandwidth b range of the paper's scenario, Gbps
_DECAY = ((0.0, 0.0), (0.01, 1.0), (4.0, 6.0))  # gamma2 per type, as oasis-paper
_MIX = (0.10, 0.55, 0.35)  # insensitive / sensitive / critical


@dataclass(frozen=True, kw_only=True)
class TraceRow:
    """One job as a trace states it, before mapping (seconds, containers)."""

    job_id: str  #: the trace's id (unique in the trace)
    line: int  #: 1-based line of the row in its file (errors name it)
    path: str  #: the file it came from
    submit_s: float  #: submission time on the trace's clock, seconds
    duration_s: float  #: run time, seconds
    workers: int  #: workers the job ran with (its GPUs, for one-GPU workers)
    worker_demand: Resources | None = None  #: one worker's demand; None = DEFAULT_WORKER
    ps: int = 0  #: PS containers in the trace (Alibaba PAI); 0 = not stated
    ps_demand: Resources | None = None  #: one PS's demand; None = DEFAULT_PS
    iterations: int | None = None  #: training iterations (global steps), if stated
    model: str = ""  #: model name, "" = not stated (drawn from the catalog)
    deadline_s: float | None = None  #: absolute deadline on the trace's clock, if stated
    steps_s: tuple[tuple[float, float], ...] = ()  #: (absolute time s, value) the trace states
    value: float | None = None  #: the job's value (priority) if the trace states one
    best_effort: bool = False  #: the trace marks it best-effort (no deadline)
    status: str = "completed"  #: completed / failed / killed / unfinished / other
    vc: str = ""  #: virtual cluster (or the trace's cluster column)
    skip: str = ""  #: a reason the adapter found to skip it ("" = none); counted


@dataclass(frozen=True, kw_only=True)
class MappingOptions:
    """How trace rows become jobs (``--slot-seconds``, ``--seed``, ``--elastic``, ...)."""

    slot_seconds: float = 3600.0  #: slot length S, seconds
    seed: int = 0  #: seed of every draw (model when absent, utility)
    elastic: float = 2.0  #: max workers = ceil(elastic * trace workers), capped by W
    max_workers_cap: int | None = None  #: optional absolute cap on max workers
    statuses: str = "completed"  #: "completed" keeps finished jobs only; "all" keeps all
    window_start_s: float | None = None  #: keep jobs submitted at/after this offset, s
    window_end_s: float | None = None  #: keep jobs submitted before this offset, s
    vc: str | None = None  #: keep only this virtual cluster
    utility: str = "auto"  #: auto (the trace's own if stated, else mix) / mix / deadline
    ps_bandwidth_gbps: float = 20.0  #: B, one PS's bandwidth, Gbps
    time_scale: float = 1.0  #: arrival offsets are multiplied by this (load scaling)
    model_map: tuple[tuple[str, str], ...] = ()  #: (trace name, catalog/step-table name)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_map", tuple(
            (str(a).strip().lower(), str(b).strip().lower()) for a, b in self.model_map))
        checks = {
            "slot_seconds": self.slot_seconds > 0 and math.isfinite(self.slot_seconds),
            "elastic": self.elastic >= 1 and math.isfinite(self.elastic),
            "statuses": self.statuses in ("completed", "all"),
            "utility": self.utility in ("auto", "mix", "deadline"),
            "ps_bandwidth_gbps": self.ps_bandwidth_gbps >= _B_RANGE[1]
            and math.isfinite(self.ps_bandwidth_gbps),
            "time_scale": self.time_scale > 0 and math.isfinite(self.time_scale),
            "max_workers_cap": self.max_workers_cap is None or self.max_workers_cap >= 1,
        }
        unknown = [b for _, b in self.model_map if not _known_name(b)]
        if unknown:
            from psched.traces.steps import STEP_TIMES

            raise InputError(f"unknown model {shown(unknown[0])} (known: "
                             f"{', '.join(sorted(MODEL_CATALOG))}; step table: "
                             f"{', '.join(sorted(STEP_TIMES))})", path="--model-map",
                             field="model_map")
        for name, ok in checks.items():
            if not ok:
                raise InputError(f"bad mapping option, got {getattr(self, name)!r}",
                                 path=f"--{name.replace('_', '-')}", field=name)


@dataclass(kw_only=True)
class MapReport:
    """What mapping kept and what it skipped, by reason."""

    rows: int = 0  #: job rows read
    jobs: int = 0  #: jobs produced
    skipped: Counter[str] = field(default_factory=Counter)  #: reason -> rows skipped
    t0_s: float = 0.0  #: time origin (first kept submission), trace clock, seconds
    models_mapped: Counter[tuple[str, str]] = field(default_factory=Counter)  #: (trace, used)

    def __str__(self) -> str:
        skips = ", ".join(f"{k}: {v}" for k, v in sorted(self.skipped.items())) or "none"
        return f"{self.rows} rows, {self.jobs} jobs; skipped: {skips}"


def map_rows(rows: Sequence[TraceRow], opts: MappingOptions) -> tuple[list[JobSpec], MapReport]:
    """Map trace rows to jobs (module docstring; ``traces/README.md`` has every rule).

    Parameters
    ----------
    rows : sequence of TraceRow
        In file order; sorted here stably by submission time.
    opts : MappingOptions
        Slot length, filters, elasticity, seed.

    Returns
    -------
    (list of JobSpec, MapReport)
        Jobs sorted by arrival; the report counts rows skipped by a filter the user asked for
        (status, window, virtual cluster) and rows the model cannot express (no GPU, zero
        duration).

    Raises
    ------
    InputError
        For a duplicated job id, an unknown model, a deadline before submission, or a job
        whose numbers overflow; naming the row's file, line and field.

    Notes
    -----
    O(n log n) for the sort, O(n) for the rest.
    """
    report = MapReport(rows=len(rows))
    first: dict[str, TraceRow] = {}
    for row in rows:
        if row.job_id in first:
            raise InputError(f"duplicate job id {shown(row.job_id)} (first on line "
                             f"{first[row.job_id].line})", path=row.path, line=row.line,
                             field="job_id")
        first[row.job_id] = row
    ordered = sorted(rows, key=lambda r: r.submit_s)
    origin = ordered[0].submit_s if ordered else 0.0
    kept = [r for r in ordered if _keep(r, opts, origin, report.skipped)]
    if len(kept) > MAX_JOBS:
        raise InputError(f"{len(kept)} jobs kept, more than {MAX_JOBS} in one trace: use "
                         "--window-start/--window-end or --vc", path=kept[MAX_JOBS].path,
                         line=kept[MAX_JOBS].line)
    report.t0_s = kept[0].submit_s if kept else origin
    rng = np.random.default_rng(opts.seed)
    n = len(kept)
    draws = {
        "model": rng.integers(0, len(ITERATION_SECONDS), size=n),
        "type": rng.permutation(_type_labels(n)),
        "value": rng.uniform(1.0, 100.0, size=n),
        "decay": rng.uniform(0.0, 1.0, size=n),
        "target": rng.uniform(0.0, 1.0, size=n),
    }
    names = dict(opts.model_map)
    specs = [_map_one(r, i, draws, opts, report.t0_s, names, report.models_mapped)
             for i, r in enumerate(kept)]
    report.jobs = len(specs)
    if report.models_mapped:
        from psched.traces.steps import describe_fallbacks

        warnings.warn(f"{rows[0].path}: "
                      f"{describe_fallbacks(report.models_mapped, 'model catalog')}",
                      stacklevel=2)
    return specs, report


def _known_name(name: str) -> bool:
    from psched.traces.steps import STEP_TIMES

    return name in MODEL_CATALOG or name in STEP_TIMES


def catalog_model(name: str, model_map: dict[str, str],
                  mapped: Counter[tuple[str, str]]) -> str:
    """The catalog model of a trace's model name (any case); O(1) but for the family scan.

    ``model_map`` renames first (to a catalog model); then the name itself, or the same
    letters and digits (so ``mobilenet-v2`` is ``mobilenet_v2``); then the first family of
    :data:`_FAMILIES` the name starts with; else :data:`DEFAULT_MODEL`. A name read as another
    model is counted in ``mapped`` as ``(name, model)``.
    """
    key = name.strip().lower()
    if model_map.get(key) in MODEL_CATALOG:
        return model_map[key]
    if key in MODEL_CATALOG:
        return key
    bare = re.sub(r"[^a-z0-9]", "", key)
    same = next((m for m in MODEL_CATALOG if re.sub(r"[^a-z0-9]", "", m) == bare), None)
    if same is not None:
        return same
    model = next((m for start, m in _FAMILIES if bare.startswith(start)), DEFAULT_MODEL)
    mapped[(key, model)] += 1
    return model


def _type_labels(n: int) -> np.ndarray:
    """Exactly the mix's counts (largest remainder) of types 0, 1, 2."""
    raw = np.array(_MIX) * n
    counts = np.floor(raw).astype(int)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: n - counts.sum()]] += 1
    return np.repeat(np.arange(3), counts)


def _keep(row: TraceRow, opts: MappingOptions, origin: float, skipped: Counter[str]) -> bool:
    offset = row.submit_s - origin
    reason = ""
    if row.skip:
        reason = row.skip
    elif row.status == "unfinished":
        reason = "unfinished"
    elif opts.statuses == "completed" and row.status != "completed":
        reason = f"status {row.status}"
    elif opts.window_start_s is not None and offset < opts.window_start_s:
        reason = "before window"
    elif opts.window_end_s is not None and offset >= opts.window_end_s:
        reason = "after window"
    elif opts.vc is not None and row.vc != opts.vc:
        reason = "other virtual cluster"
    elif row.workers == 0 or (row.worker_demand is not None and row.worker_demand.gpu <= 0):
        reason = "no GPU"
    elif row.duration_s <= 0:
        reason = "zero duration"
    if reason:
        skipped[reason] += 1
    return not reason


def _map_one(row: TraceRow, i: int, draws: dict[str, np.ndarray], opts: MappingOptions,
             t0: float, names: dict[str, str], mapped: Counter[tuple[str, str]]) -> JobSpec:
    def bad(fld: str, problem: str) -> InputError:
        return InputError(problem, path=row.path, line=row.line, field=fld)

    slot = opts.slot_seconds
    model = (catalog_model(row.model, names, mapped) if row.model
             else sorted(ITERATION_SECONDS)[int(draws["model"][i])])
    n0 = row.workers
    worker_s = row.duration_s * n0
    work = max(1, ceil_eps(worker_s / slot))
    n_max = max(1, min(math.ceil(opts.elastic * n0 - 1e-9), work))
    if opts.max_workers_cap is not None:
        n_max = min(n_max, opts.max_workers_cap)
    if row.iterations:
        iter_s = row.duration_s / row.iterations
        total = row.iterations * n0
    else:
        iter_s = ITERATION_SECONDS.get(model, 0.25)
        total = max(1, round(row.duration_s / iter_s)) * n0
    minibatches = max(1, math.ceil(total / n_max))
    tau_s = worker_s / (n_max * minibatches)
    grad_mb = MODEL_CATALOG[model].grad_mb
    big_b = opts.ps_bandwidth_gbps
    if row.ps > 0:
        b = big_b * min(1.0, row.ps / n0)
    else:
        need = 2.0 * grad_mb * 8.0 / 1000.0 / iter_s if iter_s > 0 else _B_RANGE[1]
        b = float(np.clip(need, *_B_RANGE))
    worker = row.worker_demand or DEFAULT_WORKER
    ps = row.ps_demand or DEFAULT_PS
    arrival = math.floor((row.submit_s - t0) * opts.time_scale / slot + 1e-9)
    utility = _utility(row, i, draws, opts, t0, arrival, work, n_max, bad)
    spec = JobSpec(
        job_id=row.job_id, arrival=arrival, epochs=1, max_workers=n_max,
        minibatches=minibatches, tau_s=tau_s, grad_mb=grad_mb, tau_includes_comm=True,
        worker_demand=Resources(gpu=worker.gpu, cpu=worker.cpu, memory_gb=worker.memory_gb,
                                storage_gb=worker.storage_gb, bandwidth_gbps=b),
        ps_demand=Resources(gpu=ps.gpu, cpu=ps.cpu, memory_gb=ps.memory_gb,
                            storage_gb=ps.storage_gb, bandwidth_gbps=big_b),
        utility=utility,
    )
    return validate_spec(spec, where=Where(path=row.path, line=row.line), slot_seconds=slot)


def _utility(row: TraceRow, i: int, draws: dict[str, np.ndarray], opts: MappingOptions,
             t0: float, arrival: int, work: int, n_max: int,
             bad: Callable[[str, str], InputError]) -> Utility:
    slot = opts.slot_seconds
    value = float(draws["value"][i]) if row.value is None else row.value
    if row.best_effort and opts.utility != "mix":
        return Utility(kind="constant", value=BEST_EFFORT_VALUE)
    if row.steps_s and opts.utility != "mix":
        return _trace_steps(row, t0, arrival, opts, bad)
    if row.deadline_s is not None and opts.utility != "mix":
        if row.deadline_s <= row.submit_s:
            raise bad("deadline", f"deadline {row.deadline_s:g} is not after submission "
                      f"{row.submit_s:g}")
        last = math.floor((row.deadline_s - t0) * opts.time_scale / slot + 1e-9)
        return Utility(kind="deadline", value=value, target=float(max(1, last - arrival + 1)))
    if opts.utility == "deadline":
        raise bad("deadline", "--utility deadline, but this trace states no deadline")
    fastest = ceil_eps(work / n_max)
    ran = max(1, ceil_eps(row.duration_s / slot))
    top = max(fastest, math.ceil(1.5 * ran))
    kind = int(draws["type"][i])
    lo, hi = _DECAY[kind]
    return Utility(kind="sigmoid", value=value,
                   decay=float(lo + (hi - lo) * draws["decay"][i]),
                   target=float(fastest + math.floor(draws["target"][i] * (top - fastest + 1))))


def _trace_steps(row: TraceRow, t0: float, arrival: int, opts: MappingOptions,
                 bad: Callable[[str, str], InputError]) -> Utility:
    """The trace's value steps as a utility of the duration in slots: a step at time t pays
    when the job completes in t's slot or before (as a deadline, ``mapping`` rule above); steps
    falling in one slot keep the first (highest) value. One step is a ``deadline`` utility."""
    slot = opts.slot_seconds
    pairs: list[tuple[float, float]] = []
    for when, value in row.steps_s:
        if when <= row.submit_s:
            raise bad("expect_time_list", f"time {when:g} is not after submission "
                      f"{row.submit_s:g}")
        last = math.floor((when - t0) * opts.time_scale / slot + 1e-9)
        target = float(max(1, last - arrival + 1))
        if not pairs or target > pairs[-1][0]:
            pairs.append((target, value))
    if len(pairs) == 1:
        return Utility(kind="deadline", value=pairs[0][1], target=pairs[0][0])
    return step_utility(pairs)
