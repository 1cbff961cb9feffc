"""What ``psched simulate`` and ``psched trace synth`` do, as library calls.

The CLI only parses arguments into these functions; notebooks and benchmarks call them too.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TextIO

from psched.core.errors import InputError
from psched.core.limits import check_run_size
from psched.core.model import Cluster, JobSpec
from psched.core.reality import Reality
from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.policies import available_policies, make_policy
from psched.runs.progress import Progress

__all__ = [
    "PschedWarning",
    "SimulateRequest",
    "check_jobs_work",
    "parse_policies",
    "prepare",
    "print_table",
    "run_simulation",
    "synth_trace",
]

DEFAULT_SLOT_SECONDS = 3600.0
DEFAULT_SCENARIO_SLOTS = 300


@dataclass(frozen=True, kw_only=True)
class SimulateRequest:
    """Everything ``psched simulate`` can be asked."""

    trace: str | None = None  #: trace file (exclusive with ``scenario``)
    scenario: str | None = None  #: scenario name, e.g. ``oasis-paper``
    jobs: int | None = None  #: jobs to generate, or the first N of the trace
    format: str = "auto"  #: trace format (``auto``: detected from the header or layout)
    cluster: str | None = None  #: cluster file; default: scenario's, or sized to the trace
    policies: str = "all"  #: comma-separated names or ``all``
    #: ``NAME=VALUE`` / ``POLICY:NAME=VALUE`` (:func:`psched.policies.options.options_from_pairs`)
    policy_options: tuple[str, ...] = ()
    slots: int | None = None  #: horizon T; default: scenario's 300, or the trace rule
    slot_seconds: float | None = None  #: slot length, seconds
    seed: int = 0  #: seed of the scenario and of every policy
    load: float = 0.8  #: target load of the default cluster for a trace
    scenario_opt: tuple[tuple[str, str], ...] = ()  #: scenario options
    max_window: int | None = None  #: explicit cap on a job's window, slots (None: no cap)
    price_estimate_factor: float = 1.0  #: OASiS: U scaled by this factor
    history: str | None = None  #: OASiS: history trace for U and L
    out: str | None = None  #: output folder
    overwrite: bool = False  #: replace an earlier psched output at ``out``
    plots: bool = True  #: write PNG plots
    check: bool = True  #: run the independent plan checker
    progress: bool = True  #: progress on stderr (a bar on a terminal, else a line every 5 s)
    bound: str | None = None  #: "lp": add the pooled LP bound to params (psched.offline.optimum)
    #: how progress departs from the model (:mod:`psched.core.reality`): a Reality, a mapping
    #: of its fields or ``"rate=0.9,sigma_job=0.1"``; None or exact: the model itself
    reality: Reality | Mapping[str, Any] | str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  #: recorded in params as is


def parse_policies(text: str) -> list[str]:
    """``"all"`` or a comma-separated list of registered names; unknown -> InputError."""
    known = available_policies()
    if text.strip() == "all":
        return known
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError("no policy named", path="--policies", field="policies")
    for n in names:
        if n not in known:
            raise InputError(f"unknown policy {n!r}; available: {', '.join(known)}",
                             path="--policies", field="policies")
    return list(dict.fromkeys(names))


def prepare(req: SimulateRequest, *, jobs: Sequence[JobSpec] | None = None,
            cluster: Cluster | None = None,
            ) -> tuple[list[JobSpec], Cluster, int, dict[str, Any]]:
    """Jobs, cluster, horizon and the ``params`` record of a request.

    ``jobs`` / ``cluster``: job specs / a cluster already in memory, in place of
    ``req.trace`` / ``req.cluster`` (the API, :func:`psched.compare`).
    """
    if jobs is not None:
        return _prepare_jobs(req, list(jobs), cluster)
    from psched.core.horizon import trace_horizon
    from psched.traces.clusters import default_cluster_for_trace, load_cluster

    params: dict[str, Any] = {k: v for k, v in asdict(req).items()
                              if k not in ("extra", "progress", "scenario_opt", "overwrite")}
    params["scenario_opt"] = dict(req.scenario_opt)
    params["reality"] = Reality.parse(req.reality).to_dict()
    params.update(req.extra)
    slot_s = req.slot_seconds
    if cluster is not None:
        slot_s = cluster.slot_seconds if slot_s is None else slot_s
        cluster = Cluster(servers=cluster.servers, slot_seconds=slot_s)
        params["cluster_source"] = "a Cluster given in memory"
    elif req.cluster:
        cluster = load_cluster(req.cluster)
        if slot_s is None:
            slot_s = cluster.slot_seconds
        elif slot_s != cluster.slot_seconds:
            cluster = Cluster(servers=cluster.servers, slot_seconds=slot_s)
    slot_s = slot_s or DEFAULT_SLOT_SECONDS
    if req.scenario is not None:
        from psched.traces.synth import SCENARIOS

        if req.scenario not in SCENARIOS:
            raise InputError(f"unknown scenario {req.scenario!r}; available: "
                             f"{', '.join(SCENARIOS)}", path="--scenario", field="scenario")
        jobs_fn, cluster_fn = SCENARIOS[req.scenario]
        horizon = req.slots or DEFAULT_SCENARIO_SLOTS
        specs, report = jobs_fn(req.jobs or 100, seed=req.seed, slots=horizon,
                                slot_seconds=slot_s, options=dict(req.scenario_opt))
        params["scenario_report"] = _as_dict(report)
        default_slots = getattr(report, "default_slots", None)
        if req.slots is None and default_slots:
            horizon = int(default_slots)  # a trace-like scenario: the trace's rule
        if cluster is None:
            cluster = cluster_fn(seed=req.seed, slot_seconds=slot_s)
            params["cluster_source"] = f"scenario {req.scenario}"
    else:
        assert req.trace is not None
        specs = _load(req.trace, req.format, slot_seconds=slot_s, seed=req.seed)
        if req.jobs is not None:
            specs = specs[: req.jobs]
        if not specs:
            raise InputError("the trace has no jobs", path=req.trace)
        check_jobs_work(specs, slot_s, path=req.trace)
        horizon = req.slots or trace_horizon(specs, slot_s, req.max_window)
        if cluster is None:
            cluster = default_cluster_for_trace(specs, slot_seconds=slot_s, load=req.load)
            params["cluster_source"] = f"default for the trace at load {req.load}"
    if req.cluster:
        params["cluster_source"] = req.cluster
    check_run_size(horizon, len(cluster.servers))
    params.update(horizon=horizon, slot_seconds=slot_s, n_jobs=len(specs),
                  worker_servers=sum(s.pool.value == "worker" for s in cluster.servers),
                  ps_servers=sum(s.pool.value == "ps" for s in cluster.servers))
    return specs, cluster, horizon, params


def check_jobs_work(specs: Sequence[JobSpec], slot_seconds: float, *, path: str) -> None:
    """Refuse a trace with a job whose work in worker-slots at this slot length is more than
    the model holds (:func:`psched.core.limits.check_work`), before the horizon is sized."""
    from psched.core.limits import Where, check_work

    for spec in specs:
        check_work(spec, slot_seconds, Where(path=path, names={"epochs": f"job {spec.job_id}"}))
def _prepare_jobs(req: SimulateRequest, specs: list[JobSpec], cluster: Cluster | None,
                  ) -> tuple[list[JobSpec], Cluster, int, dict[str, Any]]:
    """:func:`prepare` for job specs in memory (arrivals already in slots)."""
    from psched.core.horizon import trace_horizon
    from psched.traces.clusters import default_cluster_for_trace, load_cluster

    params: dict[str, Any] = {k: v for k, v in asdict(req).items()
                              if k not in ("extra", "progress", "scenario_opt", "overwrite")}
    params.update(req.extra, trace=None, source="job specs given in memory",
                  reality=Reality.parse(req.reality).to_dict())
    if cluster is None and req.cluster:
        cluster = load_cluster(req.cluster)
        params["cluster_source"] = req.cluster
    slot_s = req.slot_seconds or (cluster.slot_seconds if cluster else DEFAULT_SLOT_SECONDS)
    if req.jobs is not None:
        specs = specs[: req.jobs]
    if not specs:
        raise InputError("no jobs given", field="jobs")
    if cluster is None:
        cluster = default_cluster_for_trace(specs, slot_seconds=slot_s, load=req.load)
        params["cluster_source"] = f"default for the jobs at load {req.load}"
    else:
        params.setdefault("cluster_source", "a Cluster given in memory")
        cluster = Cluster(servers=cluster.servers, slot_seconds=slot_s)
    horizon = req.slots or trace_horizon(specs, slot_s, req.max_window)
    params.update(horizon=horizon, slot_seconds=slot_s, n_jobs=len(specs),
                  worker_servers=sum(s.pool.value == "worker" for s in cluster.servers),
                  ps_servers=sum(s.pool.value == "ps" for s in cluster.servers))
    return specs, cluster, horizon, params


def _load(path: str, fmt: str, **options: Any) -> list[JobSpec]:
    from psched.traces import load_any

    return load_any(path, fmt, **options)


def _as_dict(obj: Any) -> Any:
    if obj is None:
        return None
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    return obj


def _policy_options(name: str, req: SimulateRequest) -> dict[str, Any]:
    """The request's options for policy ``name``: those of ``--price-estimate-factor`` and
    ``--history`` that it takes, then its ``--policy-option`` pairs (checked by
    :func:`run_simulation` first)."""
    from psched.policies.options import options_from_pairs, policy_options

    wanted: dict[str, Any] = {"estimate_factor": req.price_estimate_factor}
    if req.history:
        wanted["price_source"] = "history"
    accepted = policy_options(name)
    given = options_from_pairs(parse_policies(req.policies), req.policy_options).get(name, {})
    return {**{k: v for k, v in wanted.items() if k in accepted}, **given}


class PschedWarning(UserWarning):
    """A result that is easy to misread (:func:`psched.results.summary.pitfalls`)."""


def run_simulation(req: SimulateRequest, *, progress: Progress | None = None,
                   command: Sequence[str] | str | None = None,
                   jobs: Sequence[JobSpec] | None = None, cluster: Cluster | None = None,
                   ) -> tuple[dict[str, Any], dict[str, RunResult]]:
    """Run every requested policy on the same jobs and cluster; write ``req.out`` if set.

    ``req.out`` is checked (:func:`psched.results.output.check_out`) before any work. Each pitfall
    of :func:`psched.results.summary.pitfalls` is also issued as a :class:`PschedWarning`.
    ``progress``: where to show progress (default: stderr if ``req.progress``); ``command``:
    the command line recorded in the provenance (default ``sys.argv``); ``jobs``,
    ``cluster``: in memory, in place of the request's files (:func:`prepare`).
    """
    from psched.results.summary import build_summary, provenance

    prov = provenance(seed=req.seed, command=command)
    names = parse_policies(req.policies)
    Reality.parse(req.reality)  # a bad reality fails before any work
    from psched.policies.options import checked_policy, options_from_pairs

    for name, options in options_from_pairs(names, req.policy_options).items():
        checked_policy(name, options)  # a bad option: one line, before any work
    if req.out:
        from psched.results.output import check_out

        check_out(req.out, overwrite=req.overwrite)
    specs, cluster, horizon, params = prepare(req, jobs=jobs, cluster=cluster)
    history: Sequence[JobSpec] = (
        _load(req.history, "auto", slot_seconds=cluster.slot_seconds, seed=req.seed)
        if req.history else ())
    params["policies"] = names
    results: dict[str, RunResult] = {}
    own = progress is None and req.progress
    bar = Progress(horizon * len(names), sys.stderr) if own else progress
    try:
        for name in names:
            results[name] = _run_one(name, req, specs, cluster, horizon, history, bar)
    finally:
        if own and bar is not None:
            bar.close()
    if req.bound == "lp":
        from psched.offline.optimum import pooled_bound

        params["upper_bound"] = pooled_bound(
            specs, cluster, horizon, max_window=req.max_window,
            utilities={n: sum(r.utility for r in res.records.values())
                       for n, res in results.items()})
    summary = build_summary(params, results, specs=specs, prov=prov)
    for text in summary["warnings"]:
        warnings.warn(text, PschedWarning, stacklevel=2)
    if req.out:
        from psched.results.output import write_run

        summary = write_run(req.out, params, cluster, results, plots=req.plots,
                            overwrite=req.overwrite, summary=summary)
    return summary, results


#: Policies whose one-off start-up costs this process has paid (:func:`_warm_up`).
_WARMED: set[str] = set()
#: Jobs and slots of the small instance :func:`_warm_up` runs.
WARM_UP_JOBS, WARM_UP_SLOTS = 8, 60


def _warm_up(name: str, req: SimulateRequest, specs: Sequence[JobSpec], cluster: Cluster,
             bar: Progress | None) -> None:
    """Pay ``name``'s one-off start-up costs before its timed run, once per process.

    The first decisions of a process would otherwise count what no later one pays: imports
    made on first use and, for the numba kernels of ``oasis-rp``, their compilation (on the
    first run on a machine, tens of seconds; later runs load numba's disk cache, a fraction
    of a second; :mod:`psched.core.lazy_numba`). The policy runs on the first
    :data:`WARM_UP_JOBS` jobs (arrivals shifted to slot 0, the run's cluster,
    :data:`WARM_UP_SLOTS` slots, the result discarded); when numba starts compiling the
    progress says so, once.
    """
    if name in _WARMED:
        return
    from psched.core.lazy_numba import on_compile

    first = sorted(specs, key=lambda s: s.arrival)[:WARM_UP_JOBS]
    if not first:
        return
    a0 = first[0].arrival
    small = [replace(s, arrival=s.arrival - a0) for s in first]
    said: list[bool] = []

    def say() -> None:
        if bar is not None and not said:
            said.append(True)
            bar.announce(f"{name}: compiling kernels (first run only: numba caches them "
                         "on disk)...")

    remove = on_compile(say)
    try:
        simulate(small, cluster, make_policy(name, **_policy_options(name, req)),
                 WARM_UP_SLOTS, seed=req.seed, check=False)
    finally:
        remove()
    _WARMED.add(name)


def _run_one(name: str, req: SimulateRequest, specs: Sequence[JobSpec], cluster: Cluster,
             horizon: int, history: Sequence[JobSpec], bar: Progress | None) -> RunResult:
    """One policy's run, its start-up costs paid first (:func:`_warm_up`); the phase turns
    to the policy's report once the slots are done."""
    from psched.core.lazy_numba import startup_seconds

    if bar is not None:
        bar.phase(f"{name}: start-up")
    _warm_up(name, req, specs, cluster, bar)
    policy = make_policy(name, **_policy_options(name, req))
    on_slot = None
    if bar is not None:
        bar.phase(f"{name}: slots")

        def on_slot(t: int) -> None:
            bar.advance(1)
            if t >= horizon:
                bar.phase(f"{name}: final report (the dual certificate, if the policy has one)")

    before = startup_seconds()
    result = simulate(specs, cluster, policy, horizon, history=history,
                      max_window=req.max_window, seed=req.seed, check=req.check,
                      on_slot=on_slot, executor=Reality.parse(req.reality).executor())
    late = startup_seconds() - before
    if late > 0.0:  # a kernel the small run did not reach: say so, never hide it
        warnings.warn(f"{name}: {late:.2f} s of numba compilation or loading fell inside "
                      "the run and is counted in its decision times", PschedWarning,
                      stacklevel=3)
    return result


def _fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(summary: Mapping[str, Any], file: TextIO = sys.stdout) -> None:
    """The comparison table of ``psched simulate``; columns:
    :data:`psched.results.summary.COLUMN_LEGEND`.

    ``dl_met`` appears only when the trace has deadline jobs.
    """
    deadlines = any(s.get("deadline_met_fraction") is not None
                    for s in summary["policies"].values())
    cols = ["policy", "utility", "admit", "reject", "done", "unfin", "jct_mean", "jct_h",
            "jct_p99", "late_mean", "queue", "makespan_h", *(["dl_met"] if deadlines else []),
            "gpu_util", "dec_p50_ms", "dec_p99_ms", "dual_bound", "dual/util", "promised",
            "kept", "restated", "missed", "wasted_ws", "background_ws"]
    rows = []
    for name, s in summary["policies"].items():
        gpu = s["utilization"].get("worker", {}).get("gpu")
        rows.append((name, _fmt(s["total_utility"]), str(s["admitted"]), str(s["rejected"]),
                     str(s["completed"]), str(s["unfinished"]), _fmt(s["jct_mean"]),
                     _fmt(s.get("jct_mean_h"), ".2f"), _fmt(s["jct_p99"]),
                     _fmt(s["lateness_mean"]), _fmt(s["queueing_mean"]),
                     _fmt(s.get("makespan_h"), ".1f"),
                     *([_fmt(s.get("deadline_met_fraction"), ".2f")] if deadlines else []),
                     _fmt(gpu, ".2f"), _fmt(s["decision_ms_p50"], ".2f"),
                     _fmt(s["decision_ms_p99"], ".2f"), _fmt(s.get("dual_bound")),
                     _fmt(s.get("dual_per_utility"), ".3f"),
                     *(str(s[k]) for k in ("promised", "kept", "restated", "missed")),
                     _fmt(s["wasted_ws"]), _fmt(s["background_ws"])))
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    p = summary["params"]
    print(f"# {p['n_jobs']} jobs, T = {p['horizon']} slots of {p['slot_seconds']:g} s, "
          f"{p['worker_servers']} worker + {p['ps_servers']} PS servers "
          "(columns: psched simulate --help)", file=file)
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)), file=file)
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)), file=file)


def synth_trace(*, scenario: str, jobs: int, seed: int, slots: int, slot_seconds: float,
                options: Mapping[str, str], out: str, cluster_out: str | None = None) -> str:
    """Generate a scenario's trace into ``out``; return a short report."""
    from psched.traces.native import write_trace
    from psched.traces.synth import SCENARIOS

    if scenario not in SCENARIOS:
        raise InputError(f"unknown scenario {scenario!r}; available: {', '.join(SCENARIOS)}",
                         path="--scenario", field="scenario")
    jobs_fn, cluster_fn = SCENARIOS[scenario]
    specs, report = jobs_fn(jobs, seed=seed, slots=slots, slot_seconds=slot_seconds,
                            options=dict(options))
    write_trace(out, specs)
    if cluster_out:
        from psched.traces.clusters import write_cluster_json

        write_cluster_json(cluster_out, cluster_fn(seed=seed, slot_seconds=slot_seconds))
    return f"wrote {len(specs)} jobs to {out}\n{report}"
