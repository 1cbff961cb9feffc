"""``psched stop`` and the end of a service: SIGINT/SIGTERM while ``serve`` holds the embedded Ray,
the actor's shutdown with its journal flushed, and the embedded Ray's processes that outlived
their ``serve`` found and ended (:func:`reap_orphans`)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from psched.cli.connect import service_handle
from psched.core.errors import InputError

__all__ = [
    "RAY_PIDS_FILE",
    "SERVE_PID_FILE",
    "StopRequested",
    "StopSignals",
    "child_processes",
    "cmd_stop",
    "process_line",
    "reap_orphans",
    "refuse_if_serving",
    "shutdown_service",
]

log = logging.getLogger(__name__)

#: Files ``serve`` keeps in ``--dir`` while it holds an embedded Ray.
SERVE_PID_FILE, RAY_PIDS_FILE = "serve.pid", "ray.pids"


class StopRequested(Exception):
    """SIGINT or SIGTERM reached ``serve``."""


class StopSignals:
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
        """Wait ``seconds``; raise :class:`StopRequested` once a stop signal came."""
        if self.event.wait(seconds):
            raise StopRequested

    def _handle(self, signum: int, _frame: Any) -> None:
        import signal

        self.name = signal.Signals(signum).name
        self.event.set()


def shutdown_service(actor: Any, workdir: Path) -> None:
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


def process_line(pid: int) -> str:
    import psutil

    return f"{pid} {psutil.Process(pid).create_time():.3f}\n"


def child_processes(pid: int) -> list[Any]:
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


def refuse_if_serving(workdir: Path) -> None:
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
    procs += [c for p in procs for c in child_processes(p.pid) if c not in procs]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    alive = _wait_all_gone(procs, grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    _wait_all_gone(alive, grace_s)
    (workdir / RAY_PIDS_FILE).unlink(missing_ok=True)
    if procs:
        log.warning("stopped %d process(es) of an earlier embedded Ray", len(procs))
    return len(procs)


def _wait_all_gone(procs: list[Any], timeout_s: float) -> list[Any]:
    """Wait until every process of ``procs`` has exited, at most ``timeout_s``; those still
    running. A zombie counts as exited: an orphan's zombie waits for a reaper that a
    container's first process may never be (``psutil.wait_procs`` would wait it out)."""
    end = time.time() + timeout_s
    alive = list(procs)
    while alive:
        alive = [p for p in alive if not _exited(p)]
        if not alive or time.time() >= end:
            break
        time.sleep(0.1)
    return alive


def _exited(proc: Any) -> bool:
    import psutil

    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return True


def _wait_gone(proc: Any, timeout_s: float) -> bool:
    """Wait until ``proc`` has exited (a zombie its parent has not reaped yet counts)."""
    return not _wait_all_gone([proc], timeout_s)


def cmd_stop(args: argparse.Namespace) -> int:
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
            actor = service_handle(args)
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
