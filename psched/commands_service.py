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
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from psched.errors import InputError

__all__ = ["CLIENT_LOG", "DEFAULT_DIR", "TOKEN_FILE", "ensure_token", "format_status",
           "init_ray", "page_address", "policy_options", "register", "submit_line",
           "use_token"]

log = logging.getLogger(__name__)

#: Default folder of the journal, checkpoints and the embedded Ray's address.
DEFAULT_DIR = ".psched"
#: The embedded Ray's authentication token, in ``--dir`` (mode 0600).
TOKEN_FILE = "auth_token"
#: Ray's own messages below warnings, from the commands that connect to it, in ``--dir``.
CLIENT_LOG = "psched.log"
_BAR = 20


def register(commands: Any, trace_actions: Any) -> None:
    """Add ``serve``, ``stop``, ``submit``, ``status``, ``cancel``, ``logs`` and ``run``."""
    from psched.argtypes import (
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

    def service_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--policy", default="oasis",
                       help="policy name (default oasis; oasis-rp: promises kept, plans "
                            "revised, a revision is a resize at the next boundary)")
        p.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an option of the policy (repeatable; VALUE as JSON, else a "
                            "string), e.g. defer=1 for oasis-rp's deferred admission")
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

    s = commands.add_parser("serve", help="start the scheduler service on Ray")
    common(s)
    service_options(s)
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
    sp.set_defaults(func=_cmd_stop)
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
    pg = commands.add_parser("page", help="the address of the service's live page, with its "
                                          "access token")
    pg.add_argument("--dir", default=DEFAULT_DIR,
                    help=f"service folder (default {DEFAULT_DIR})")
    pg.set_defaults(func=_cmd_page)
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
             resources: dict[str, float] | None = None,
             token_dir: str | Path | None = None, log_dir: str | Path | None = None) -> str:
    """Connect to ``address`` (or ``RAY_ADDRESS``), else start an embedded Ray on 127.0.0.1.

    Returns the GCS address. The embedded Ray binds to the loopback interface only
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, node IP 127.0.0.1), has no dashboard, a capped
    object store and token authentication on, with the token in ``token_dir/auth_token``
    (mode 0600; created if missing; a fresh private folder if ``token_dir`` is None).
    Connecting to a loopback address keeps it on the loopback (Ray would rewrite
    127.0.0.1 to the host's first interface). ``resources``: custom resources of the
    embedded node (for instance ``psched_worker_cpu``, see :mod:`ray_cluster.cluster_model`).
    A client's connection prints Ray's warnings only; its lower messages go to
    ``log_dir/psched.log`` (mode 0600) when ``log_dir`` is given.
    """
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        import ray

        return str(ray.get_runtime_context().gcs_address)  # connected already: as it is
    address = address or os.environ.get("RAY_ADDRESS")
    embedded = not address
    if embedded:
        use_token(ensure_token(token_dir))
    if embedded or _is_loopback(address or ""):  # read when Ray is first imported
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray._private import ray_constants

    if not ray.is_initialized():
        if embedded or _is_loopback(address or ""):
            ray_constants.ENABLE_RAY_CLUSTER = False  # Ray was imported before: loopback
        if address:
            _quiet_ray(log_dir)
            ray.init(address=address, namespace=_namespace(), log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                     num_cpus=num_cpus or os.cpu_count() or 1,
                     object_store_memory=300 * 2**20, namespace=_namespace(),
                     resources=dict(resources or {}), log_to_driver=False)
    return str(ray.get_runtime_context().gcs_address)


def _quiet_ray(log_dir: str | Path | None) -> None:
    """Ray's messages below warnings off the terminal (``ray.init(configure_logging=False)``
    leaves Ray's logger without a handler: Python then prints warnings only), and its
    connection's messages into ``log_dir/psched.log`` (0600)."""
    if log_dir is None or not Path(log_dir).is_dir():
        return
    path = Path(log_dir) / CLIENT_LOG
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("ray._private.worker").addHandler(handler)  # Ray's config keeps it


def _is_loopback(address: str) -> bool:
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def ensure_token(token_dir: str | Path | None) -> Path:
    """The token file ``token_dir/auth_token`` (mode 0600), created with a random token if
    missing; a group- or world-readable one is refused.

    Raises
    ------
    InputError
        If the file is readable by others or empty.
    """
    import secrets
    import stat
    import tempfile

    folder = Path(token_dir) if token_dir is not None else Path(
        tempfile.mkdtemp(prefix="psched-token-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        fd = -1
    if fd < 0:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise InputError(f"token file is readable by others (mode {mode:o}); "
                             "chmod 600 it", path=str(path))
        if not path.read_text().strip():
            raise InputError("token file is empty", path=str(path))
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def use_token(path: Path) -> None:
    """Token authentication for this process and the Ray processes it starts, with the token
    in ``path`` (Ray's ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH``)."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path.resolve())
    os.environ.pop("RAY_AUTH_TOKEN", None)
    if "ray._raylet" in sys.modules:  # Ray read its configuration already: read it again
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def _namespace() -> str:
    from ray_cluster.service import SERVICE_NAMESPACE

    return SERVICE_NAMESPACE


def _reachable(address: str, timeout_s: float = 3.0) -> str | None:
    """None if a TCP connection to ``address`` opens, else why not."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as err:
        return getattr(err, "strerror", None) or str(err) or type(err).__name__


def _service(args: argparse.Namespace) -> Any:
    """The service actor: on ``--address``, ``RAY_ADDRESS`` or the address in ``--dir``
    (with the token ``serve`` wrote there). A stale address fails at once, in one line."""
    import ray

    from ray_cluster.service import SERVICE_NAME, SERVICE_NAMESPACE

    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address and not ray.is_initialized():
        f = Path(args.dir) / "address"
        if not f.exists():
            raise InputError("no service: start 'psched serve' (or give --address)",
                             path=str(f))
        address = f.read_text().strip()
        token = Path(args.dir) / TOKEN_FILE
        if token.exists():
            use_token(token)
        why = _reachable(address)
        if why is not None:
            raise InputError(f"no service at {address} ({why}): the address is stale; "
                             "start 'psched serve'", path=str(f))
    init_ray(address, log_dir=args.dir)
    try:
        return ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
    except ValueError:
        raise InputError(f"no service named {SERVICE_NAME!r} on this Ray; start "
                         "'psched serve'", field="address") from None


_UNREACHABLE = object()


class _Client:
    """The service: through its HTTP door in ``--dir`` (``page.json``, ``control_token``)
    while it answers and the Ray it runs on is up, else through Ray (``--address``, a
    service without the door, or an actor left behind by a killed ``serve``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._actor: Any = None
        self.door: tuple[str, str] | None = None
        folder = Path(args.dir)
        if not (args.address or os.environ.get("RAY_ADDRESS")):
            try:
                self.door = (json.loads((folder / "page.json").read_text())["url"],
                             (folder / "control_token").read_text().strip())
                if _reachable((folder / "address").read_text().strip(), 1.0) is not None:
                    self.door = None  # its Ray is gone (serve killed): Ray's path says so
            except (OSError, ValueError, KeyError, TypeError):
                self.door = None

    def call(self, method: str, http: tuple[str, str, Any], *args: Any, **kwargs: Any) -> Any:
        """``method`` of the service: ``http`` (verb, path, JSON body) at the door, else the
        actor's ``method(*args, **kwargs)`` through Ray."""
        if self.door is not None:
            out = _http(self.door, *http)
            if out is not _UNREACHABLE:
                return out
            self.door = None  # gone, or another server's port now: Ray decides
        import ray

        return ray.get(getattr(self.actor(), method).remote(*args, **kwargs))

    def actor(self) -> Any:
        """The service actor, through Ray (connecting once)."""
        if self._actor is None:
            self._actor = _service(self.args)
        return self._actor


def _http(door: tuple[str, str], verb: str, path: str, body: Any,
          timeout_s: float = 900.0) -> Any:
    """The door's JSON answer; :data:`_UNREACHABLE` if nothing listens there (or a server
    that does not know this folder's token).

    Raises
    ------
    InputError
        Any other failure, in one line.
    """
    import urllib.error
    import urllib.request

    url, token = door
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=verb, headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    t0 = time.perf_counter()
    try:
        with opener.open(req, timeout=timeout_s) as answer:
            out = json.loads(answer.read())
            log.debug("%s %s: answered in %.1f ms (the service's own: %s)", verb, path,
                      (time.perf_counter() - t0) * 1e3,
                      answer.headers.get("Server-Timing", "not given"))
            return out
    except urllib.error.HTTPError as err:
        if err.code == 401:
            return _UNREACHABLE
        raise InputError(f"the service answered HTTP {err.code}: "
                         f"{err.read().decode(errors='replace').strip()[:200]}",
                         field=url) from None
    except ConnectionRefusedError:
        return _UNREACHABLE
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, ConnectionRefusedError):
            return _UNREACHABLE
        raise InputError(f"the service did not answer: {reason}", field=url) from None


def page_address(workdir: str | Path, *, timeout_s: float = 5.0) -> str:
    """The live page's address with its token, once it answers.

    Raises
    ------
    InputError
        No page recorded in ``workdir``, or the recorded one does not answer, in one line.
    """
    folder = Path(workdir)
    record, token_file = folder / "page.json", folder / "page_token"
    if not folder.is_dir():
        raise InputError("no such service folder", path=str(folder))
    try:
        url = str(json.loads(record.read_text())["url"])
        token = token_file.read_text().strip()
    except FileNotFoundError as err:
        raise InputError("no live page: start 'psched serve' (it serves the page)",
                         path=str(err.filename)) from None
    except (ValueError, KeyError, TypeError):
        raise InputError("cannot be read: start 'psched serve' again", path=str(record)
                         ) from None
    ray_address = folder / "address"
    ray_gone = ray_address.exists() and _reachable(ray_address.read_text().strip(), 1.0)
    out = _UNREACHABLE if ray_gone else _http((url, token), "GET", "api/status", None,
                                               timeout_s=timeout_s)
    if out is _UNREACHABLE:
        raise InputError(f"no page answers at {url}: the address is stale; start "
                         "'psched serve'", path=str(record))
    return f"{url}?token={token}"


def _cmd_page(args: argparse.Namespace) -> int:
    print(page_address(args.dir))
    return 0


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
    return ServiceConfig(policy=args.policy, policy_options=policy_options(args.policy_option),
                         slot_seconds=args.slot_seconds,
                         horizon=args.horizon or 500, prices=prices, history=tuple(history),
                         estimate_factor=args.price_estimate_factor,
                         runtime=_runtime_options(args), allow_import=args.allow_import,
                         warm_processes=args.warm_processes)


def policy_options(pairs: list[str]) -> dict[str, Any]:
    """``--policy-option KEY=VALUE`` pairs as options (VALUE read as JSON: ``1``, ``0.5``,
    ``true``; else kept as a string). Which keys the policy takes is checked when the service
    makes it (:meth:`ray_cluster.service.ServiceConfig.make_policy`).

    Raises
    ------
    InputError
        A pair without ``=`` or with an empty key, in one line.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip().isidentifier():
            raise InputError(f"expected KEY=VALUE, got {pair!r}", field="--policy-option")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def _runtime_options(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": args.mode}
    if args.checkpoint_every is not None:
        out["checkpoint_every_s"] = float(args.checkpoint_every)
    return out


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

    from ray_cluster.journal import check_journal
    from ray_cluster.service import (
        SERVICE_NAME,
        SERVICE_NAMESPACE,
        service_actor,
        watch_service,
    )

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
        _refuse_if_serving(workdir)
        reap_orphans(workdir)  # of a serve killed before it could stop its Ray
    moved = check_journal(workdir, fresh=args.fresh)
    if moved:
        print(f"psched: {moved}", file=sys.stderr)
    stop = _StopSignals() if embedded else None  # before Ray starts: no window without them
    address = init_ray(args.address, resources=_worker_resources(args, embedded),
                       token_dir=workdir)
    if stop is not None:
        stop.install()  # again: Ray's core worker installs its own SIGTERM handler
    _write(workdir / "address", address + "\n")
    if embedded:
        _write(workdir / SERVE_PID_FILE, _process_line(os.getpid()))
        _write(workdir / RAY_PIDS_FILE, "".join(_process_line(p.pid) for p in
                                                 _children(os.getpid())))
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
    with contextlib.suppress(_StopRequested):
        watch_service(actor, sleep=stop.sleep)
    _shutdown(actor, workdir)
    print(f"psched service stopped ({stop.name or 'its loop ended'}); journal flushed",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    logging.shutdown()
    # everything is stopped and written: leave without waiting for threads Ray left behind
    os._exit(130 if stop.name == "SIGINT" else 0)


#: Files ``serve`` keeps in ``--dir`` while it holds an embedded Ray.
SERVE_PID_FILE, RAY_PIDS_FILE = "serve.pid", "ray.pids"


class _StopRequested(Exception):
    """SIGINT or SIGTERM reached ``serve``."""


class _StopSignals:
    """SIGINT and SIGTERM stop ``serve`` cleanly: the handlers are installed explicitly,
    because a shell starting ``serve &`` from a script makes it ignore SIGINT."""

    def __init__(self) -> None:
        import threading

        self.event = threading.Event()
        self.name = ""
        self.install()

    def install(self) -> None:
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; raise :class:`_StopRequested` once a stop signal came."""
        if self.event.wait(seconds):
            raise _StopRequested

    def _handle(self, signum: int, _frame: Any) -> None:
        import signal

        self.name = signal.Signals(signum).name
        self.event.set()


def _shutdown(actor: Any, workdir: Path) -> None:
    """Stop the service (its journal closes), its actor, the embedded Ray, their orphans."""
    import ray

    try:
        ray.get(actor.stop.remote(), timeout=600)
    except ray.exceptions.RayError as err:
        log.warning("service did not stop cleanly: %s", type(err).__name__)
    with _suppress_ray_errors():
        ray.kill(actor, no_restart=True)
    ray.shutdown()
    for name in (SERVE_PID_FILE, "address"):
        (workdir / name).unlink(missing_ok=True)
    reap_orphans(workdir, grace_s=10.0)


def _suppress_ray_errors() -> Any:
    import ray

    return contextlib.suppress(ray.exceptions.RayError, ValueError)


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _process_line(pid: int) -> str:
    import psutil

    return f"{pid} {psutil.Process(pid).create_time():.3f}\n"


def _children(pid: int) -> list[Any]:
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def _listed(path: Path) -> list[Any]:
    """The live processes listed in ``path`` (pid and start time must both match: a pid
    reused by another process is never touched)."""
    import psutil

    out: list[Any] = []
    if not path.exists():
        return out
    for line in path.read_text().split("\n"):
        parts = line.split()
        if len(parts) != 2:
            continue
        try:
            p = psutil.Process(int(parts[0]))
            if abs(p.create_time() - float(parts[1])) < 0.01:
                out.append(p)
        except (psutil.Error, ValueError):
            continue
    return out


def _refuse_if_serving(workdir: Path) -> None:
    alive = _listed(workdir / SERVE_PID_FILE)
    if alive:
        raise InputError(f"a service already runs on this folder (pid {alive[0].pid}); "
                         f"stop it with 'psched stop --dir {workdir}'",
                         path=str(workdir / SERVE_PID_FILE))


def reap_orphans(workdir: str | Path, *, grace_s: float = 5.0) -> int:
    """Stop the embedded Ray's processes that a ``serve`` recorded in ``ray.pids`` and that
    outlived it (and their children): SIGTERM, then SIGKILL after ``grace_s``. Only while no
    ``serve`` of this folder is alive. Returns how many were stopped."""
    import psutil

    workdir = Path(workdir)
    if _listed(workdir / SERVE_PID_FILE):
        return 0
    procs = _listed(workdir / RAY_PIDS_FILE)
    procs += [c for p in procs for c in _children(p.pid) if c not in procs]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    (workdir / RAY_PIDS_FILE).unlink(missing_ok=True)
    if procs:
        log.warning("stopped %d process(es) of an earlier embedded Ray", len(procs))
    return len(procs)


def _wait_gone(proc: Any, timeout_s: float) -> bool:
    """Wait until ``proc`` has exited (a zombie its parent has not reaped yet counts)."""
    import psutil

    end = time.time() + timeout_s
    while time.time() < end:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True
        time.sleep(0.2)
    return False


def _cmd_stop(args: argparse.Namespace) -> int:
    """Stop ``serve``: by SIGTERM to its process (it stops the service, flushes the journal,
    stops its embedded Ray); a service on an existing cluster through Ray; then orphans."""
    workdir = Path(args.dir)
    serve = _listed(workdir / SERVE_PID_FILE)
    if serve:
        serve[0].terminate()
        if not _wait_gone(serve[0], args.timeout):
            raise InputError(f"serve (pid {serve[0].pid}) did not stop within "
                             f"{args.timeout:g} s", field="--timeout")
        print(f"stopped the service of {workdir} (pid {serve[0].pid})")
    elif args.address or os.environ.get("RAY_ADDRESS") or (workdir / "address").exists():
        import ray

        try:
            actor = _service(args)
        except InputError as err:
            log.info("no service to stop: %s", err)
        else:
            ray.get(actor.stop.remote())
            ray.kill(actor, no_restart=True)
            print(f"stopped the service on {ray.get_runtime_context().gcs_address}")
        if not (args.address or os.environ.get("RAY_ADDRESS")):
            (workdir / "address").unlink(missing_ok=True)
    reaped = reap_orphans(workdir)
    if not _listed(workdir / SERVE_PID_FILE):
        (workdir / SERVE_PID_FILE).unlink(missing_ok=True)
    if reaped:
        print(f"stopped {reaped} orphaned process(es) of an earlier embedded Ray")
    if not serve and not reaped:
        print(f"no service was running on {workdir}")
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    from ray_cluster.journal import spec_to_json

    client = _Client(args)
    specs = _submissions(args, client)  # all checked here first; the service re-checks each
    failed = 0
    for spec, where in specs:
        text, place = spec_to_json(spec), where.to_dict()
        out = client.call("submit", ("POST", "api/submit", {"spec": text, "where": place}),
                          text, where=place)
        if "error" in out:
            print(f"psched: error: {out['error']}", file=sys.stderr)
            failed += 1
            continue
        print(submit_line(spec.job_id, out))
    return 2 if failed else 0


def submit_line(job_id: str, out: dict[str, Any]) -> str:
    """The line ``psched submit`` prints for the service's reply ``out`` to one job: admitted
    (plan, promise, payoff), rejected (reason), held for deferred admission (the boundary it
    is next decided at and its window's last slot), or queued for a later arrival slot."""
    if out.get("held"):
        return (f"{job_id}: arrival slot {out['arrival']}: held: decided at the boundary of "
                f"slot {out['next_boundary']} or a later one; if not admitted by slot "
                f"{out['window_end']}, rejected ({out.get('reason')})")
    if out.get("decided") is False:
        return f"{job_id}: queued: decided when slot {out['arrival']} begins"
    verdict = "admitted" if out.get("admitted") else f"rejected ({out.get('reason')})"
    end = out.get("planned_completion")
    return (f"{job_id}: arrival slot {out['arrival']}: {verdict}"
            + (f", planned completion slot {end}" if end is not None else "")
            + (f", promised by slot {out['promised']}" if out.get("promised") is not None
               else "")
            + (f", payoff {out['payoff']:.4g}" if out.get("payoff") is not None else ""))


def _submissions(args: argparse.Namespace, client: _Client) -> list[Any]:
    """Every job file of ``psched submit`` as ``(spec, where)``, parsed and checked before
    anything is sent: import paths only if the service allows them, no id twice in one
    command (nothing is submitted then)."""
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
    if any(isinstance(p, str) for p in parsed):
        allow = bool(_status(client).get("allow_import", False))
        parsed = [load_jobspec_where(p, allow_import=allow) if isinstance(p, str) else p
                  for p in parsed]
    elif client.door is None:
        client.actor()  # no service: one line before anything else
    first: dict[str, Any] = {}
    for spec, where in parsed:
        if spec.job_id in first:
            raise where.error("job_id", f"id {spec.job_id!r} also in {first[spec.job_id].path}"
                              "; nothing submitted")
        first[spec.job_id] = where
    return parsed


def _status(client: _Client) -> dict[str, Any]:
    return dict(client.call("status", ("GET", "api/status", None)))


def format_status(st: dict[str, Any]) -> str:
    """The status table, one row per job, a progress bar each."""
    lines = [f"slot {st['slot']} ({st['phase']}), policy {st['policy']}, "
             f"{st['slot_seconds']:g} s slots" + (f"  ERROR {st['error']}" if st['error'] else "")]
    lines.append(f"{'job':<16} {'state':<15} {'arr':>4} {'w/ps':>6} {'progress':<{_BAR + 2}} "
                 f"{'done/W':>11} {'plan':>5} {'prom':>5} {'end':>5} {'utility':>8}  loss")
    for j in st["jobs"]:
        frac = min(1.0, j["done"] / j["work"]) if j["work"] else 0.0
        bar = "#" * round(frac * _BAR)
        lines.append(
            f"{j['job_id'][:16]:<16} {j['state'][:15]:<15} {j['arrival']:>4} "
            f"{j['workers']:>3}/{j['ps']:<2} [{bar:<{_BAR}}] "
            f"{j['done']:>5.1f}/{j['work']:<5} "
            f"{'' if j['planned_completion'] is None else j['planned_completion']:>5} "
            f"{'' if j.get('promised') is None else j['promised']:>5} "
            f"{'' if j['completion'] is None else j['completion']:>5} "
            f"{j['utility']:>8.3g}  {j['loss']}")
    return "\n".join(lines)


def _cmd_status(args: argparse.Namespace) -> int:
    client = _Client(args)
    while True:
        st = _status(client)
        if args.json:
            print(json.dumps(st))
        else:
            if args.watch:
                print("\x1b[2J\x1b[H", end="")
            print(format_status(st), flush=True)
        over = all(j["state"] not in ("running", "waiting", "queued", "held")
                   for j in st["jobs"])
        if not args.watch or over or not st["running"]:
            return 0
        time.sleep(min(2.0, st["slot_seconds"] / 2))


def _cmd_cancel(args: argparse.Namespace) -> int:
    client = _Client(args)
    if not client.call("cancel", ("POST", "api/cancel", {"job_id": args.job_id}), args.job_id):
        raise InputError(f"no active job {args.job_id!r}", field="job_id")
    print(f"{args.job_id}: cancelled at the next slot boundary")
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    client = _Client(args)
    lines = client.call("logs", ("GET", f"api/logs/{quote(args.job_id, safe='')}", None),
                        args.job_id)
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
