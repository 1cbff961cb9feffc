"""The scheduler service's entry points: a detached Ray actor, or one whole trace.

:func:`service_actor` wraps :class:`ray_cluster.service.SchedulerService` in a detached, named
Ray actor (``psched serve``; Ray restarts it from its journal after a crash); :func:`run_trace`
runs a whole trace through a fresh service (``psched run``). Both are re-exported by
:mod:`ray_cluster.service`, the public import path, so they import the service class when
called, not at import time (the two modules would otherwise import each other).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from psched.errors import InputError
from psched.executor import Executor
from psched.limits import Where, check_arrival
from psched.model import Cluster, JobSpec
from psched.simulator import RunResult
from ray_cluster.jobspec import submission_from_json
from ray_cluster.journal import Journal
from ray_cluster.service_config import ServiceConfig, cluster_from_dict

__all__ = ["run_trace", "service_actor"]

#: the service's logger: the actor raises it to INFO
log = logging.getLogger("ray_cluster.service")


def service_actor() -> Any:
    """The Ray actor class wrapping :class:`SchedulerService` (imports Ray)."""
    import ray

    from ray_cluster.service import SchedulerService

    @ray.remote(num_cpus=0, max_concurrency=32, max_restarts=-1)
    class ServiceActor:
        """A detached, named service; Ray restarts it from its journal after a crash."""

        def __init__(self, workdir: str, config: dict[str, Any] | None,
                     cluster: dict[str, Any] | None, node_of: dict[str, str] | None) -> None:
            logging.basicConfig(level=logging.WARNING)
            log.setLevel(logging.INFO)
            nodes = None if node_of is None else {int(k): v for k, v in node_of.items()}
            cl = cluster_from_dict(cluster) if cluster is not None else None
            if cl is None:
                from ray_cluster.cluster_model import cluster_from_nodes

                cfg = ServiceConfig.from_json(config) if config else ServiceConfig()
                cl, nodes = cluster_from_nodes(ray.nodes(), cfg.slot_seconds)
            journal = Journal(Path(workdir) / "journal.db")
            meta_nodes = journal.meta().get("node_of")
            journal.close()
            if meta_nodes:
                nodes = {int(k): v for k, v in meta_nodes.items()}
            self.svc = SchedulerService(
                workdir, config=ServiceConfig.from_json(config) if config else None,
                cluster=cl, node_of=nodes)
            self.svc.start()

        def submit(self, spec_json: str, arrival: int | None = None,
                   where: dict[str, Any] | None = None) -> dict[str, Any]:
            """Decide a job sent as JSON; ``where`` (file, lines) names it in errors."""
            source = Where.from_dict(where)
            try:
                spec = submission_from_json(spec_json, where=source,
                                            allow_import=self.svc.config.allow_import)
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
            self.svc.close()

    return ServiceActor


def run_trace(specs: list[JobSpec], workdir: str | Path, *, config: ServiceConfig,
              cluster: Cluster, node_of: dict[int, str] | None = None,
              executor: Executor | None = None, timeout_s: float | None = None) -> RunResult:
    """Run a whole trace through a fresh service: each job submitted for its arrival slot.

    Returns what really ran (the loop's :class:`~psched.simulator.RunResult`), the same
    record :func:`psched.simulator.simulate` returns for a simulated run.
    """
    from ray_cluster.service import SchedulerService

    svc = SchedulerService(workdir, config=config, cluster=cluster, node_of=node_of,
                           executor=executor)
    try:
        for spec in sorted(specs, key=lambda s: s.arrival):
            svc.submit(spec, arrival=spec.arrival)
        svc.start(until_idle=True)
        svc.join(timeout_s)
        if svc.error:
            raise RuntimeError(f"the service failed: {svc.error}")
        return svc.result()
    finally:
        svc.close()
