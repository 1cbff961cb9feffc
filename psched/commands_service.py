"""``psched serve | submit | status | cancel | logs | run``: the Ray cluster front door.

``serve`` starts the scheduler service (:mod:`ray_cluster.service`) as a detached, named Ray
actor: on an embedded local Ray by default (loopback only; ``serve`` then stays in the
foreground and holds that Ray), on an existing cluster with ``--address`` (or from inside
``ray job submit -- psched serve``, which sets ``RAY_ADDRESS``). The other commands find the
service by name, on the Ray at ``--address``, ``RAY_ADDRESS`` or the address ``serve`` wrote
into ``--dir``. ``run`` needs no service: it runs a whole trace through a fresh one in this
process and writes what really ran as ``psched simulate --out`` does. Ray is imported lazily.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from psched.errors import InputError

__all__ = ["init_ray", "register"]

log = logging.getLogger(__name__)

#: Default folder of the journal, checkpoints and the embedded Ray's address.
DEFAULT_DIR = ".psched"
_BAR = 20


def register(commands: Any, trace_actions: Any) -> None:
    """Add ``serve``, ``submit``, ``status``, ``cancel``, ``logs`` and ``run``."""
    from psched.argtypes import (
        factor_arg,
        processes_arg,
        slot_seconds_arg,
        slots_arg,
    )

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--address", help="Ray address of an existing cluster")
        p.add_argument("--dir", default=DEFAULT_DIR,
                       help=f"service folder: journal, checkpoints (default {DEFAULT_DIR})")

    def service_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--policy", default="oasis", help="policy name (default oasis)")
        p.add_argument("--slot-seconds", type=slot_seconds_arg, default=30.0,
                       help="slot length in seconds (default 30)")
        p.add_argument("--horizon", type=slots_arg, help="most slots to run")
        p.add_argument("--prices", help="OASiS U_w,L_w,U_ps,L_ps (instead of --history)")
        p.add_argument("--history", action="append", default=[], metavar="FILE",
                       help="OASiS: U and L from these jobs (trace CSV or job TOML)")
        p.add_argument("--price-estimate-factor", type=factor_arg, default=1.0,
                       help="OASiS: scale U by this factor (default 1)")
        p.add_argument("--worker-cpus", type=factor_arg,
                       help="embedded Ray: worker capacity in CPUs (default: the cores)")
        p.add_argument("--allow-import", action="store_true",
                       help="allow user workloads given by import path")
        p.add_argument("--mode", default="async", help="training mode: async or sync")
        p.add_argument("--warm-processes", type=processes_arg, default=4,
                       help="fresh Ray worker processes kept waiting per node, so actors a "
                            "boundary adds start at once (default 4; 0: none)")

    s = commands.add_parser("serve", help="start the scheduler service on Ray")
    common(s)
    service_options(s)
    s.set_defaults(func=_cmd_serve)
    sb = commands.add_parser("submit", help="submit job spec files (TOML) to the service")
    common(sb)
    sb.add_argument("jobs", nargs="+", metavar="JOB.toml", help="job spec file(s) to submit")
    sb.set_defaults(func=_cmd_submit)
    st = commands.add_parser("status", help="the service's jobs, with progress")
    common(st)
    st.add_argument("--watch", action="store_true", help="refresh until every job is over")
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(func=_cmd_status)
    c = commands.add_parser("cancel", help="cancel a job")
    common(c)
    c.add_argument("job_id", help="id of the job to cancel")
    c.set_defaults(func=_cmd_cancel)
    lg = commands.add_parser("logs", help="a job's journal: decisions, progress, events")
    common(lg)
    lg.add_argument("job_id", help="id of the job whose log to print")
    lg.set_defaults(func=_cmd_logs)
    r = commands.add_parser("run", help="run a trace on Ray through the service (real training)")
    r.add_argument("trace", metavar="TRACE",
                   help="native trace whose jobs name a workload to train for real")
    r.add_argument("--out", metavar="DIR", help="write the files of 'psched simulate --out' "
                   "(a new or empty folder; checked before any work)")
    r.add_argument("--overwrite", action="store_true",
                   help="let --out replace an earlier psched output (only that)")
    r.add_argument("--address", help="Ray address of an existing cluster")
    r.add_argument("--profile", action="store_true",
                   help="measure tau of every job on this Ray first (else the trace's tau_s); "
                        "embedded: with as many workers at once as --worker-cpus holds")
    service_options(r)
    r.set_defaults(func=_cmd_run)


# -- Ray connection -------------------------------------------------------------------------
def init_ray(address: str | None, *, num_cpus: int | None = None,
             resources: dict[str, float] | None = None) -> str:
    """Connect to ``address`` (or ``RAY_ADDRESS``), else start an embedded Ray on 127.0.0.1.

    Returns the GCS address. The embedded Ray binds to the loopback interface only
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, node IP 127.0.0.1), has no dashboard and a
    capped object store. ``resources``: custom resources of the embedded node (for instance
    ``psched_worker_cpu``, see :mod:`ray_cluster.cluster_model`).
    """
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:  # read when Ray is first imported
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray._private import ray_constants

    if not ray.is_initialized():
        if address:
            ray.init(address=address, namespace=_namespace(), log_to_driver=False)
        else:
            ray_constants.ENABLE_RAY_CLUSTER = False  # Ray was imported before: loopback
            ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                     num_cpus=num_cpus or os.cpu_count() or 1,
                     object_store_memory=300 * 2**20, namespace=_namespace(),
                     resources=dict(resources or {}), log_to_driver=False)
    return str(ray.get_runtime_context().gcs_address)


def _namespace() -> str:
    from ray_cluster.service import SERVICE_NAMESPACE

    return SERVICE_NAMESPACE


def _service(args: argparse.Namespace) -> Any:
    import ray

    from ray_cluster.service import SERVICE_NAME, SERVICE_NAMESPACE

    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address and not ray.is_initialized():
        f = Path(args.dir) / "address"
        if not f.exists():
            raise InputError("no service: start 'psched serve' (or give --address)",
                             path=str(f))
        address = f.read_text().strip()
    init_ray(address)
    try:
        return ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
    except ValueError:
        raise InputError(f"no service named {SERVICE_NAME!r} on this Ray; start "
                         "'psched serve'", field="address") from None


# -- commands -------------------------------------------------------------------------------
def _config(args: argparse.Namespace, specs: list[Any] | None = None) -> Any:
    from ray_cluster.service import ServiceConfig

    prices = None
    if args.prices:
        try:
            prices = tuple(float(x) for x in args.prices.split(","))
        except ValueError:
            prices = ()
        if len(prices) != 4 or min(prices) <= 0:
            raise InputError(f"expected four positive numbers U_w,L_w,U_ps,L_ps, got "
                             f"{args.prices!r}", field="--prices")
    history = [s for f in args.history for s in _load_jobs(f, allow_import=True)]
    if specs is not None and not history and prices is None:
        history = list(specs)
    return ServiceConfig(policy=args.policy, slot_seconds=args.slot_seconds,
                         horizon=args.horizon or 500, prices=prices, history=tuple(history),
                         estimate_factor=args.price_estimate_factor,
                         runtime={"mode": args.mode}, allow_import=args.allow_import,
                         warm_processes=args.warm_processes)


def _load_jobs(path: str, *, allow_import: bool) -> list[Any]:
    if path.endswith(".toml"):
        from ray_cluster.jobspec import TAU_UNKNOWN, load_jobspec

        spec = load_jobspec(path, allow_import=allow_import)
        if spec.tau_s == TAU_UNKNOWN:
            raise InputError("history jobs need tau_s", path=path, field="tau_s")
        return [spec]
    from psched.traces.native import load_trace

    return load_trace(path)


def _worker_resources(args: argparse.Namespace, embedded: bool) -> dict[str, float]:
    """The embedded node declares its worker capacity as a custom resource."""
    if embedded and args.worker_cpus:
        return {"psched_worker_cpu": float(args.worker_cpus)}
    return {}


def _local_cluster(args: argparse.Namespace, slot_seconds: float) -> tuple[Any, dict[int, str]]:
    """The cluster model of the connected Ray (``--worker-cpus`` caps every worker server
    on an existing cluster; an embedded node declares it as ``psched_worker_cpu``)."""
    import dataclasses

    import ray

    from ray_cluster.cluster_model import cluster_from_nodes

    cluster, node_of = cluster_from_nodes(ray.nodes(), slot_seconds)
    if args.worker_cpus:
        servers = tuple(dataclasses.replace(s, capacity=dataclasses.replace(
            s.capacity, cpu=float(args.worker_cpus))) if s.pool.value == "worker" else s
            for s in cluster.servers)
        cluster = dataclasses.replace(cluster, servers=servers)
    return cluster, node_of


def _cmd_serve(args: argparse.Namespace) -> int:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ray_cluster.service import (
        SERVICE_NAME,
        SERVICE_NAMESPACE,
        service_actor,
        watch_service,
    )

    config = _config(args)
    if config.policy == "oasis":
        config.make_policy()  # fails now, in one line, without prices or history
    embedded = not (args.address or os.environ.get("RAY_ADDRESS"))
    address = init_ray(args.address, resources=_worker_resources(args, embedded))
    workdir = Path(args.dir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "address").write_text(address + "\n")
    cluster, node_of = _local_cluster(args, config.slot_seconds)
    here = ray.get_runtime_context().get_node_id()  # the journal lives on this node
    actor = service_actor().options(
        name=SERVICE_NAME, namespace=SERVICE_NAMESPACE, lifetime="detached",
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(str(workdir), config.to_json(), cluster.to_dict(),
             {str(k): v for k, v in node_of.items()})
    ray.get(actor.ping.remote())
    print(f"psched service on {address} (policy {config.policy}, slot "
          f"{config.slot_seconds:g} s, {len(cluster.servers)} servers); journal "
          f"{workdir / 'journal.db'}", flush=True)
    if not embedded:
        return 0
    # the embedded Ray lives as long as this process; actor restarts are ridden out
    with contextlib.suppress(KeyboardInterrupt):
        watch_service(actor)
    with contextlib.suppress(ray.exceptions.RayError):  # gone already: nothing to stop
        ray.get(actor.stop.remote(), timeout=60)
        ray.kill(actor)
    ray.shutdown()
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    import ray

    from ray_cluster.journal import spec_to_json

    actor, specs = _submissions(args)  # all checked here first; the service re-checks each
    failed = 0
    for spec, where in specs:
        out = ray.get(actor.submit.remote(spec_to_json(spec), where=where.to_dict()))
        if "error" in out:
            print(f"psched: error: {out['error']}", file=sys.stderr)
            failed += 1
            continue
        verdict = "admitted" if out.get("admitted") else f"rejected ({out.get('reason')})"
        end = out.get("planned_completion")
        print(f"{spec.job_id}: arrival slot {out['arrival']}: {verdict}"
              + (f", planned completion slot {end}" if end is not None else "")
              + (f", payoff {out['payoff']:.4g}" if out.get("payoff") is not None else ""))
    return 2 if failed else 0


def _submissions(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The service actor, and every job file of ``psched submit`` as ``(spec, where)``,
    parsed and checked before anything is sent: import paths only if the service allows
    them, no id twice in one command (nothing is submitted then)."""
    import ray

    from psched.limits import MAX_SUBMIT_JOBS
    from ray_cluster.jobspec import ImportRefused, load_jobspec_where

    if len(args.jobs) > MAX_SUBMIT_JOBS:
        raise InputError(f"{len(args.jobs)} job files, more than {MAX_SUBMIT_JOBS} in one "
                         "submit", field="jobs")
    parsed: list[Any] = []
    for f in args.jobs:
        try:
            parsed.append(load_jobspec_where(f, allow_import=False))
        except ImportRefused:
            parsed.append(f)  # decided once the service says whether it allows imports
    actor = _service(args)
    if any(isinstance(p, str) for p in parsed):
        allow = bool(ray.get(actor.status.remote()).get("allow_import", False))
        parsed = [load_jobspec_where(p, allow_import=allow) if isinstance(p, str) else p
                  for p in parsed]
    first: dict[str, Any] = {}
    for spec, where in parsed:
        if spec.job_id in first:
            raise where.error("job_id", f"id {spec.job_id!r} also in {first[spec.job_id].path}"
                              "; nothing submitted")
        first[spec.job_id] = where
    return actor, parsed


def format_status(st: dict[str, Any]) -> str:
    """The status table, one row per job, a progress bar each."""
    lines = [f"slot {st['slot']} ({st['phase']}), policy {st['policy']}, "
             f"{st['slot_seconds']:g} s slots" + (f"  ERROR {st['error']}" if st['error'] else "")]
    lines.append(f"{'job':<16} {'state':<15} {'arr':>4} {'w/ps':>6} {'progress':<{_BAR + 2}} "
                 f"{'done/W':>11} {'plan':>5} {'end':>5} {'utility':>8}  loss")
    for j in st["jobs"]:
        frac = min(1.0, j["done"] / j["work"]) if j["work"] else 0.0
        bar = "#" * round(frac * _BAR)
        lines.append(
            f"{j['job_id'][:16]:<16} {j['state'][:15]:<15} {j['arrival']:>4} "
            f"{j['workers']:>3}/{j['ps']:<2} [{bar:<{_BAR}}] "
            f"{j['done']:>5.1f}/{j['work']:<5} "
            f"{'' if j['planned_completion'] is None else j['planned_completion']:>5} "
            f"{'' if j['completion'] is None else j['completion']:>5} "
            f"{j['utility']:>8.3g}  {j['loss']}")
    return "\n".join(lines)


def _cmd_status(args: argparse.Namespace) -> int:
    import ray

    actor = _service(args)
    while True:
        st = ray.get(actor.status.remote())
        if args.json:
            print(json.dumps(st))
        else:
            if args.watch:
                print("\x1b[2J\x1b[H", end="")
            print(format_status(st), flush=True)
        over = all(j["state"] not in ("running", "waiting", "queued") for j in st["jobs"])
        if not args.watch or over or not st["running"]:
            return 0
        time.sleep(min(2.0, st["slot_seconds"] / 2))


def _cmd_cancel(args: argparse.Namespace) -> int:
    import ray

    if not ray.get(_service(args).cancel.remote(args.job_id)):
        raise InputError(f"no active job {args.job_id!r}", field="job_id")
    print(f"{args.job_id}: cancelled at the next slot boundary")
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    import ray

    lines = ray.get(_service(args).logs.remote(args.job_id))
    if not lines:
        raise InputError(f"no job {args.job_id!r} in the journal", field="job_id")
    print("\n".join(lines))
    return 0


def _profile_specs(specs: list[Any], args: argparse.Namespace, embedded: bool) -> list[Any]:
    """Every job with tau measured on the connected Ray, once per workload and size.

    Embedded (one machine whose workers share its cores): with as many workers at once as
    the declared worker capacity holds (``--worker-cpus``, default the cores), so tau includes
    their contention; on a cluster: one worker, which owns its GPU or cores.
    """

    from ray_cluster.executor import profiled_spec, with_measured_tau

    slots = int(args.worker_cpus or os.cpu_count() or 1) if embedded else 1
    measured: dict[tuple[Any, ...], float] = {}
    out = []
    for s in specs:
        workers = max(1, min(s.max_workers, int(slots // max(s.worker_demand.cpu, 1.0))))
        key = (s.workload, s.hparams, workers, s.ps_ratio)
        if key not in measured:
            measured[key] = profiled_spec(s, workers=workers, steps=1000,
                                          allow_import=args.allow_import).tau_s
            print(f"tau of {s.workload} {s.hparams or ''} with {workers} worker(s): "
                  f"{measured[key] * 1e3:.2f} ms", file=sys.stderr)
        out.append(with_measured_tau(s, measured[key]))
    return out


def _check_trace_jobs(specs: list[Any], args: argparse.Namespace) -> None:
    """Every job of a ``psched run`` trace as the service will check it (workload, its
    hyper-parameters, work at this slot length), before Ray starts."""
    from ray_cluster.jobspec import check_submission

    for spec in specs:
        try:
            check_submission(spec, allow_import=args.allow_import,
                             slot_seconds=args.slot_seconds)
        except InputError as err:
            raise InputError(f"job {spec.job_id!r}: {err.problem}", path=args.trace,
                             field=err.field) from None


def _cmd_run(args: argparse.Namespace) -> int:
    import dataclasses
    import tempfile

    from psched.horizon import trace_horizon
    from psched.output import check_out, write_run
    from psched.traces.native import load_trace
    from ray_cluster.service import run_trace

    if args.out:
        check_out(args.out, overwrite=args.overwrite)
    specs = load_trace(args.trace)
    if any(not s.workload for s in specs):
        bad = next(s for s in specs if not s.workload)
        raise InputError(f"job {bad.job_id!r} names no workload (a real run trains every job)",
                         path=args.trace, field="workload")
    _check_trace_jobs(specs, args)
    embedded = not (args.address or os.environ.get("RAY_ADDRESS"))
    init_ray(args.address, resources=_worker_resources(args, embedded))
    if args.profile:
        specs = _profile_specs(specs, args, embedded)
    config = _config(args, specs)
    horizon = args.horizon or trace_horizon(specs, args.slot_seconds)
    config = dataclasses.replace(config, horizon=horizon)
    cluster, node_of = _local_cluster(args, args.slot_seconds)
    with tempfile.TemporaryDirectory(prefix="psched-run-") as work:
        result = run_trace(specs, work, config=config, cluster=cluster, node_of=node_of)
    params = {"trace": args.trace, "policy": config.policy, "slot_seconds": args.slot_seconds,
              "horizon": horizon, "executor": "ray"}
    if args.out:
        write_run(args.out, params, cluster, {config.policy: result},
                  overwrite=args.overwrite)
        print(f"wrote {args.out}", file=sys.stderr)
    for rec in result.records.values():
        print(f"{rec.job.job_id}: {'admitted' if rec.admitted else 'rejected'} "
              f"completion={rec.completion} utility={rec.utility:.4g}")
    return 0
