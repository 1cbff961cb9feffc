"""What ``psched simulate`` and ``psched trace synth`` do, as library calls.

The CLI only parses arguments into these functions; notebooks and benchmarks call them too.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from psched.errors import InputError
from psched.model import Cluster, JobSpec
from psched.policies.base import available_policies, make_policy
from psched.simulator import RunResult, simulate

__all__ = [
    "SimulateRequest",
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
    slots: int | None = None  #: horizon T; default: scenario's 300, or the trace rule
    slot_seconds: float | None = None  #: slot length, seconds
    seed: int = 0  #: seed of the scenario and of every policy
    load: float = 0.8  #: target load of the default cluster for a trace
    scenario_opt: tuple[tuple[str, str], ...] = ()  #: scenario options
    max_window: int | None = None  #: explicit cap on a job's window, slots (None: no cap)
    price_estimate_factor: float = 1.0  #: OASiS: U scaled by this factor
    history: str | None = None  #: OASiS: history trace for U and L
    out: str | None = None  #: output folder
    plots: bool = True  #: write PNG plots
    check: bool = True  #: run the independent plan checker
    progress: bool = True  #: progress bar on stderr (only on a terminal)
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


def prepare(req: SimulateRequest) -> tuple[list[JobSpec], Cluster, int, dict[str, Any]]:
    """Jobs, cluster, horizon and the ``params`` record of a request."""
    from psched.clusters import default_cluster_for_trace, load_cluster
    from psched.horizon import trace_horizon

    params: dict[str, Any] = {k: v for k, v in asdict(req).items()
                              if k not in ("extra", "progress", "scenario_opt")}
    params["scenario_opt"] = dict(req.scenario_opt)
    params.update(req.extra)
    slot_s = req.slot_seconds
    cluster: Cluster | None = None
    if req.cluster:
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
        if req.slots is None and getattr(report, "default_slots", None):
            horizon = int(report.default_slots)  # a trace-like scenario: the trace's rule
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
        horizon = req.slots or trace_horizon(specs, slot_s, req.max_window)
        if cluster is None:
            cluster = default_cluster_for_trace(specs, slot_seconds=slot_s, load=req.load)
            params["cluster_source"] = f"default for the trace at load {req.load}"
    if req.cluster:
        params["cluster_source"] = req.cluster
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
    """The request's policy options that the policy's factory accepts."""
    wanted: dict[str, Any] = {"estimate_factor": req.price_estimate_factor}
    if req.history:
        wanted["price_source"] = "history"
    from psched.policies.base import _REGISTRY

    factory = _REGISTRY[name]
    accepted = inspect.signature(factory).parameters
    return {k: v for k, v in wanted.items() if k in accepted}


def run_simulation(req: SimulateRequest) -> tuple[dict[str, Any], dict[str, RunResult]]:
    """Run every requested policy on the same jobs and cluster; write ``req.out`` if set."""
    names = parse_policies(req.policies)
    specs, cluster, horizon, params = prepare(req)
    history: Sequence[JobSpec] = (
        _load(req.history, "auto", slot_seconds=cluster.slot_seconds, seed=req.seed)
        if req.history else ())
    params["policies"] = names
    results: dict[str, RunResult] = {}
    bar = _progress_bar(total=horizon * len(names), enabled=req.progress)
    for name in names:
        policy = make_policy(name, **_policy_options(name, req))
        if bar is not None:
            bar.set_description(name)
        results[name] = simulate(
            specs, cluster, policy, horizon, history=history, max_window=req.max_window,
            seed=req.seed, check=req.check,
            on_slot=(lambda _t: bar.update(1)) if bar is not None else None,
        )
    if bar is not None:
        bar.close()
    if req.out:
        from psched.output import write_run

        summary = write_run(req.out, params, cluster, results, plots=req.plots)
    else:
        from psched.metrics import summarize

        summary = {"params": params, "policies": {n: summarize(r) for n, r in results.items()}}
    return summary, results


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="slot", file=sys.stderr, leave=False)


def _fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(summary: Mapping[str, Any], file: TextIO = sys.stdout) -> None:
    """The comparison table of ``psched simulate``."""
    cols = ("policy", "utility", "admit", "reject", "done", "unfin", "jct_mean", "jct_p99",
            "late_mean", "queue", "gpu_util", "dec_p50_ms", "dec_p99_ms", "dual_bound", "ratio")
    rows = []
    for name, s in summary["policies"].items():
        gpu = s["utilization"].get("worker", {}).get("gpu")
        rows.append((name, _fmt(s["total_utility"]), str(s["admitted"]), str(s["rejected"]),
                     str(s["completed"]), str(s["unfinished"]), _fmt(s["jct_mean"]),
                     _fmt(s["jct_p99"]), _fmt(s["lateness_mean"]), _fmt(s["queueing_mean"]),
                     _fmt(gpu, ".2f"), _fmt(s["decision_ms_p50"], ".2f"),
                     _fmt(s["decision_ms_p99"], ".2f"), _fmt(s.get("dual_bound")),
                     _fmt(s.get("certified_ratio"), ".3f")))
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    p = summary["params"]
    print(f"# {p['n_jobs']} jobs, T = {p['horizon']} slots of {p['slot_seconds']:g} s, "
          f"{p['worker_servers']} worker + {p['ps_servers']} PS servers", file=file)
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
        from psched.clusters import write_cluster_json

        write_cluster_json(cluster_out, cluster_fn(seed=seed, slot_seconds=slot_seconds))
    return f"wrote {len(specs)} jobs to {out}\n{report}"
