"""``psched serve | stop | submit | status | cancel | logs | run``: the Ray cluster front door.

``serve`` starts the scheduler service (:mod:`ray_cluster.service`) as a detached, named Ray
actor: on an embedded local Ray by default (loopback only; ``serve`` then stays in the
foreground and holds that Ray), on an existing cluster with ``--address`` (or from inside
``ray job submit -- psched serve``, which sets ``RAY_ADDRESS``). The other commands find the
service by name, on the Ray at ``--address``, ``RAY_ADDRESS`` or the address ``serve`` wrote
into ``--dir``; ``submit``, ``status``, ``logs`` and ``cancel`` go first to the service's own
HTTP door on 127.0.0.1 (:mod:`ray_cluster.service.http`, address and token in ``--dir``: no
Ray client, so ~0.3 s a call), and through Ray when it is not there (``--address``, an older
service). ``page`` prints the address of the service's live page, with its token. ``run``
needs no service: it runs a whole trace through a fresh one in this process and writes what
really ran as ``psched simulate --out`` does. Ray is imported lazily.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from psched.cli.connect import (
    CLIENT_LOG,
    DEFAULT_DIR,
    TOKEN_FILE,
    ensure_token,
    init_ray,
    page_address,
    use_token,
)
from psched.cli.jobs import (
    RunProgress,
    cmd_cancel,
    cmd_logs,
    cmd_page,
    cmd_status,
    cmd_submit,
    format_status,
    submit_line,
)
from psched.cli.stop import (
    RAY_PIDS_FILE,
    SERVE_PID_FILE,
    StopRequested,
    StopSignals,
    child_processes,
    cmd_stop,
    process_line,
    reap_orphans,
    refuse_if_serving,
    shutdown_service,
)
from psched.core.errors import InputError

__all__ = ["CLIENT_LOG", "DEFAULT_DIR", "TOKEN_FILE", "ensure_token", "format_status",
           "init_ray", "page_address", "register", "submit_line",
           "use_token"]

log = logging.getLogger(__name__)


def register(commands: Any, trace_actions: Any) -> None:
    """Add ``serve``, ``stop``, ``submit``, ``status``, ``cancel``, ``logs`` and ``run``."""
    from psched.cli.argtypes import (
        PolicyOptionsHelp,
        factor_arg,
        positive_float,
        processes_arg,
        slot_seconds_arg,
        slots_arg,
    )

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--address", help="Ray address of an existing cluster")
        p.add_argument("--dir", default=DEFAULT_DIR,
                       help=f"service folder: journal, checkpoints (default {DEFAULT_DIR})")

    def service_options(p: argparse.ArgumentParser, policy: str) -> None:
        what = {"oasis-rp": "a completion slot promised to each admitted job, plans revised, "
                            "a revision is a resize at the next boundary",
                "oasis": "the paper's scheduler, as the simulation it is held against"}[policy]
        p.add_argument("--policy", default=policy, help=f"policy name (default {policy}: {what})")
        p.add_argument("--policy-option", action="append", default=[], metavar="NAME=VALUE",
                       help="an option of the policy (repeatable; checked against what the "
                            "policy takes; the options and their defaults are listed below)")
        p.add_argument("--slot-seconds", type=slot_seconds_arg, default=30.0,
                       help="slot length in seconds (default 30)")
        p.add_argument("--horizon", type=slots_arg, help="most slots to run")
        p.add_argument("--prices", help="oasis/oasis-rp: U_w,L_w,U_ps,L_ps (instead of --history)")
        p.add_argument("--history", action="append", default=[], metavar="FILE",
                       help="oasis/oasis-rp: U and L from these jobs (trace CSV or job "
                            "TOML)")
        p.add_argument("--price-estimate-factor", type=factor_arg, default=1.0,
                       help="oasis/oasis-rp: scale U by this factor (default 1)")
        p.add_argument("--worker-cpus", type=factor_arg,
                       help="embedded Ray: worker capacity in CPUs (default: the cores)")
        p.add_argument("--allow-import", action="store_true",
                       help="allow user workloads given by import path")
        p.add_argument("--mode", default="async", help="training mode: async or sync")
        p.add_argument("--checkpoint-every", type=positive_float, metavar="S",
                       help="checkpoint every job also every S seconds within a slot, so a "
                            "lost PS shard costs at most S seconds of training (default: "
                            "at slot ends only)")
        p.add_argument("--warm-processes", type=processes_arg, default=4,
                       help="fresh Ray worker processes kept waiting per node, so actors a "
                            "boundary adds start at once (default 4; 0: none)")

    s = commands.add_parser("serve", help="start the scheduler service on Ray",
                            formatter_class=PolicyOptionsHelp)
    common(s)
    service_options(s, "oasis-rp")
    s.add_argument("--page-port", type=int, default=0, metavar="PORT",
                   help="port of the live page on 127.0.0.1 (default 0: the earlier one if "
                        "free, else any; -1: no page); 'psched page' prints its address")
    s.add_argument("--fresh", action="store_true",
                   help="start afresh if the journal cannot be read, or is empty while "
                        "checkpoints exist (both are set aside as *.bad-<time>)")
    s.set_defaults(func=_cmd_serve)
    sp = commands.add_parser("stop", help="stop the service: journal flushed, embedded Ray "
                                          "stopped, orphaned processes reaped")
    common(sp)
    sp.add_argument("--timeout", type=positive_float, default=900.0,
                    help="most seconds to wait for the slot in progress (default 900)")
    sp.set_defaults(func=cmd_stop)
    sb = commands.add_parser("submit", help="submit job spec files (TOML) to the service")
    common(sb)
    sb.add_argument("jobs", nargs="+", metavar="JOB.toml", help="job spec file(s) to submit")
    sb.set_defaults(func=cmd_submit)
    st = commands.add_parser("status", help="the service's jobs, with progress")
    common(st)
    st.add_argument("--watch", action="store_true", help="refresh until every job is over")
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(func=cmd_status)
    c = commands.add_parser("cancel", help="cancel a job")
    common(c)
    c.add_argument("job_id", help="id of the job to cancel")
    c.set_defaults(func=cmd_cancel)
    lg = commands.add_parser("logs", help="a job's journal: decisions, progress, events")
    common(lg)
    lg.add_argument("job_id", help="id of the job whose log to print")
    lg.set_defaults(func=cmd_logs)
    pg = commands.add_parser("page", help="the address of the service's live page, with its "
                                          "access token")
    pg.add_argument("--dir", default=DEFAULT_DIR,
                    help=f"service folder (default {DEFAULT_DIR})")
    pg.set_defaults(func=cmd_page)
    r = commands.add_parser("run", help="run a trace on Ray through the service (real training)",
                            formatter_class=PolicyOptionsHelp)
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
    service_options(r, "oasis")
    r.set_defaults(func=_cmd_run)


# -- commands -------------------------------------------------------------------------------
def _config(args: argparse.Namespace, specs: list[Any] | None = None) -> Any:
    from ray_cluster.service import ServiceConfig

    prices: tuple[float, float, float, float] | None = None
    if args.prices:
        try:
            got = tuple(float(x) for x in args.prices.split(","))
        except ValueError:
            got = ()
        if len(got) != 4 or not all(0 < v < float("inf") for v in got):  # nan too
            raise InputError(f"expected four positive numbers U_w,L_w,U_ps,L_ps, got "
                             f"{args.prices!r}", field="--prices")
        prices = (got[0], got[1], got[2], got[3])
    history = [s for f in args.history for s in _load_jobs(f, allow_import=True)]
    if specs is not None and not history and prices is None:
        history = list(specs)
    from psched.policies.options import checked_policy, options_from_pairs

    options = options_from_pairs([args.policy], args.policy_option)[args.policy]
    checked_policy(args.policy, options)  # what the factory refuses: one line, before Ray
    return ServiceConfig(policy=args.policy, policy_options=options,
                         slot_seconds=args.slot_seconds,
                         horizon=args.horizon or 500, prices=prices, history=tuple(history),
                         estimate_factor=args.price_estimate_factor,
                         runtime=_runtime_options(args), allow_import=args.allow_import,
                         warm_processes=args.warm_processes)


def _runtime_options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": args.mode}
    if args.checkpoint_every is not None:
        out["checkpoint_every_s"] = float(args.checkpoint_every)
    return out


def _load_jobs(path: str, *, allow_import: bool) -> list[Any]:
    if path.endswith(".toml"):
        from ray_cluster.workloads.jobspec import TAU_UNKNOWN, load_jobspec

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

    from ray_cluster.runtime.cluster_model import cluster_from_nodes

    cluster, node_of = cluster_from_nodes(ray.nodes(), slot_seconds)  # type: ignore[no-untyped-call]
    if args.worker_cpus:
        servers = tuple(dataclasses.replace(s, capacity=dataclasses.replace(
            s.capacity, cpu=float(args.worker_cpus))) if s.pool.value == "worker" else s
            for s in cluster.servers)
        cluster = dataclasses.replace(cluster, servers=servers)
    return cluster, node_of


def _cmd_serve(args: argparse.Namespace) -> int:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from psched.traces.native import atomic_write_text
    from ray_cluster.service import (
        SERVICE_NAME,
        SERVICE_NAMESPACE,
        service_actor,
        watch_service,
    )
    from ray_cluster.service.journal import check_journal

    config = _config(args)
    config.make_policy()  # fails now, in one line: unknown policy, or no price bounds
    if not -1 <= args.page_port <= 65535:
        raise InputError(f"must be a port (0: any, -1: no page), got {args.page_port}",
                         field="--page-port")
    embedded = not (args.address or os.environ.get("RAY_ADDRESS"))
    workdir = Path(args.dir).resolve()
    os.umask(0o077)  # every file of the folder, and of the embedded Ray, the owner's only
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o700)
    if embedded:
        refuse_if_serving(workdir)
        # the processes of a serve killed before it could stop its Ray: their GCS is gone, so
        # some wait out SIGTERM; the service actor among them is crash-safe (its journal)
        reap_orphans(workdir, grace_s=1.0)
    moved = check_journal(workdir, fresh=args.fresh)
    if moved:
        print(f"psched: {moved}", file=sys.stderr)
    stop = StopSignals() if embedded else None  # before Ray starts: no window without them
    address = init_ray(args.address, resources=_worker_resources(args, embedded),
                       token_dir=workdir)
    if stop is not None:
        stop.install()  # again: Ray's core worker installs its own SIGTERM handler
    atomic_write_text(workdir / "address", address + "\n")
    if embedded:
        atomic_write_text(workdir / SERVE_PID_FILE, process_line(os.getpid()))
        atomic_write_text(workdir / RAY_PIDS_FILE, "".join(process_line(p.pid) for p in
                                                 child_processes(os.getpid())))
    cluster, node_of = _local_cluster(args, config.slot_seconds)
    here = ray.get_runtime_context().get_node_id()  # the journal lives on this node
    actor = service_actor().options(
        name=SERVICE_NAME, namespace=SERVICE_NAMESPACE, lifetime="detached",
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(str(workdir), config.to_json(), cluster.to_dict(),
             {str(k): v for k, v in node_of.items()},
             None if args.page_port < 0 else args.page_port)
    ray.get(actor.ping.remote())
    print(f"psched service on {address} (policy {config.policy}, slot "
          f"{config.slot_seconds:g} s, {len(cluster.servers)} servers); journal "
          f"{workdir / 'journal.db'}; "
          + ("" if args.page_port < 0 else f"its live page: 'psched page --dir {args.dir}'; ")
          + f"stop it with 'psched stop --dir {args.dir}'", flush=True)
    if stop is None:
        return 0
    # the embedded Ray lives as long as this process; actor restarts are ridden out
    with contextlib.suppress(StopRequested):
        watch_service(actor, sleep=stop.sleep)
    shutdown_service(actor, workdir)
    print(f"psched service stopped ({stop.name or 'its loop ended'}); journal flushed",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    logging.shutdown()
    # everything is stopped and written: leave without waiting for threads Ray left behind
    os._exit(130 if stop.name == "SIGINT" else 0)




def _profile_specs(specs: list[Any], args: argparse.Namespace, embedded: bool) -> list[Any]:
    """Every job with tau measured on the connected Ray, once per workload and size.

    Embedded (one machine whose workers share its cores): with as many workers at once as
    the declared worker capacity holds (``--worker-cpus``, default the cores), so tau includes
    their contention; on a cluster: one worker, which owns its GPU or cores.
    """

    from ray_cluster.runtime.executor import profiled_spec, with_measured_tau

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
    from ray_cluster.workloads.jobspec import check_submission

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

    from psched.core.horizon import trace_horizon
    from psched.results.output import check_out, write_run
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
        result = run_trace(specs, work, config=config, cluster=cluster, node_of=node_of,
                           on_status=RunProgress(sys.stderr))
    params = {"trace": args.trace, "policy": config.policy, "slot_seconds": args.slot_seconds,
              "horizon": horizon, "executor": "ray"}
    if args.out:
        write_run(args.out, params, cluster, {config.policy: result},
                  overwrite=args.overwrite)
    for rec in result.records.values():
        print(f"{rec.job.job_id}: {'admitted' if rec.admitted else 'rejected'} "
              f"completion={rec.completion} utility={rec.utility:.4g}", flush=True)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
