"""The scheduler service's entry points: a detached Ray actor, or one whole trace.

:func:`service_actor` wraps :class:`ray_cluster.service.core.SchedulerService` in a detached,
named Ray actor (``psched serve``): Ray restarts it after a crash (``max_restarts=-1``) with the
same arguments, and the new service resumes from its journal. :func:`watch_service` is what
the process that started it runs meanwhile: it polls the actor and rides out its restarts.
:func:`run_trace` runs a whole trace through a fresh service (``psched run``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from psched.core.errors import InputError
from psched.core.executor import Executor
from psched.core.limits import Where, check_arrival
from psched.core.model import Cluster, JobSpec
from psched.core.records import RunResult
from ray_cluster.service.config import (
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    ServiceConfig,
    cluster_from_dict,
)
from ray_cluster.service.core import SchedulerService
from ray_cluster.service.http import ServiceHTTP
from ray_cluster.service.journal import Journal
from ray_cluster.workloads.jobspec import submission_from_json

__all__ = ["FOLLOW_S", "run_trace", "service_actor", "watch_service"]

#: the service's logger: the actor raises it to INFO
log = logging.getLogger("ray_cluster.service")


def service_actor() -> Any:
    """The Ray actor class wrapping :class:`SchedulerService` (imports Ray)."""
    import ray

    class ServiceActor:
        """A detached, named service; Ray restarts it from its journal after a crash."""

        def __init__(self, workdir: str, config: dict[str, Any] | None,
                     cluster: dict[str, Any] | None, node_of: dict[str, str] | None,
                     page_port: int | None = 0) -> None:
            logging.basicConfig(level=logging.WARNING)
            log.setLevel(logging.INFO)
            nodes = None if node_of is None else {int(k): v for k, v in node_of.items()}
            cl = cluster_from_dict(cluster) if cluster is not None else None
            if cl is None:
                from ray_cluster.runtime.cluster_model import cluster_from_nodes, ray_nodes

                cfg = ServiceConfig.from_json(config) if config else ServiceConfig()
                cl, nodes = cluster_from_nodes(ray_nodes(), cfg.slot_seconds)
            journal = Journal(Path(workdir) / "journal.db")
            meta_nodes = journal.meta().get("node_of")
            journal.close()
            if meta_nodes:
                nodes = {int(k): v for k, v in meta_nodes.items()}
            self.svc = SchedulerService(
                workdir, config=ServiceConfig.from_json(config) if config else None,
                cluster=cl, node_of=nodes)
            self.svc.start()
            self.http: ServiceHTTP | None = None
            if page_port is not None:  # the page and the commands' door on 127.0.0.1
                self.http = ServiceHTTP(self.svc, workdir, submit=self.submit, port=page_port)
                self.http.start()

        def submit(self, spec_json: str, arrival: int | None = None,
                   where: dict[str, Any] | None = None) -> dict[str, Any]:
            """Decide a job sent as JSON; ``where`` (file, lines) names it in errors."""
            source = Where.from_dict(where)
            try:
                spec = submission_from_json(spec_json, where=source,
                                            allow_import=self.svc.config.allow_import,
                                            slot_seconds=self.svc.config.slot_seconds)
                return self.svc.submit(spec, arrival=check_arrival(arrival, source))
            except InputError as err:
                return {"error": str(source.locate(err))}

        def status(self) -> dict[str, Any]:
            return self.svc.status()

        def cancel(self, job_id: str) -> bool:
            return self.svc.cancel(job_id)

        def logs(self, job_id: str) -> list[str]:
            return self.svc.logs(job_id)

        def ping(self) -> bool:
            return True

        def stop(self) -> None:
            if self.http is not None:
                self.http.close()
            self.svc.close()

    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 32, "max_restarts": -1}
    return ray.remote(**options)(ServiceActor)


def watch_service(actor: Any, *, poll_s: float = 2.0, give_up_s: float = 300.0,
                  sleep: Callable[[float], None] = time.sleep) -> str:
    """Poll the service actor until its loop stops; ride out its restarts.

    While Ray restarts the actor (``ActorUnavailableError``, ``RayActorError``, a timeout)
    the poll is retried with exponential back-off (0.1 s doubling to ``poll_s``); the
    restarted actor resumes from its journal. Returns ``"stopped"`` when the service reports
    that its loop no longer runs, ``"gone"`` when the named actor no longer exists (killed
    for good, ``psched stop``) or stayed unreachable for ``give_up_s`` seconds.
    """
    import ray
    from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

    delay, down_since = 0.1, None
    while True:
        try:
            state = ray.get(actor.status.remote(), timeout=60)
        except (ActorUnavailableError, RayActorError, GetTimeoutError) as err:
            now = time.monotonic()
            down_since = now if down_since is None else down_since
            if not _named_actor_exists() or now - down_since > give_up_s:
                log.warning("the service actor is gone: %s", type(err).__name__)
                return "gone"
            log.warning("the service actor is unavailable (%s); retrying in %.1f s",
                        type(err).__name__, delay)
            sleep(delay)
            delay = min(2 * delay, poll_s)
            continue
        if down_since is not None:
            log.warning("the service actor is back after %.1f s",
                        time.monotonic() - down_since)
        delay, down_since = 0.1, None
        if not state["running"]:
            return "stopped"
        sleep(poll_s)


def _named_actor_exists() -> bool:
    import ray

    try:
        ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
    except ValueError:
        return False
    return True


#: how often :func:`run_trace` looks whether the service changed, for its ``on_status``
FOLLOW_S = 0.5


def run_trace(specs: list[JobSpec], workdir: str | Path, *, config: ServiceConfig,
              cluster: Cluster, node_of: dict[int, str] | None = None,
              executor: Executor | None = None, timeout_s: float | None = None,
              on_status: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
    """Run a whole trace through a fresh service: each job submitted for its arrival slot.

    Returns what really ran (the loop's :class:`~psched.core.records.RunResult`), the same
    record :func:`psched.core.simulator.simulate` returns for a simulated run.
    ``on_status`` gets the service's status (:meth:`SchedulerService.status`) whenever it
    changed (looked at every :data:`FOLLOW_S` seconds), and once more when the run is over.
    """
    svc = SchedulerService(workdir, config=config, cluster=cluster, node_of=node_of,
                           executor=executor)
    try:
        for spec in sorted(specs, key=lambda s: s.arrival):
            svc.submit(spec, arrival=spec.arrival)
        svc.start(until_idle=True)
        end = None if timeout_s is None else time.monotonic() + timeout_s
        seen = -1
        while True:
            running = svc.status()["running"]
            if on_status is not None and svc.changes != seen:
                seen = svc.changes
                on_status(svc.status())
            left = None if end is None else end - time.monotonic()
            if not running or (left is not None and left <= 0):
                break
            svc.join(FOLLOW_S if left is None else min(FOLLOW_S, left))
        if svc.error:
            raise RuntimeError(f"the service failed: {svc.error}")
        return svc.result()
    finally:
        svc.close()
