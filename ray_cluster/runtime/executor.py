"""psched's :class:`~psched.core.executor.Executor` on Ray: many jobs trained for real, slot by
slot.

At each slot boundary :meth:`RayExecutor.apply` carries out the slot's plan: a job absent from
the plan is suspended (checkpointed, its actors stopped; it resumes from disk when planned
again); every planned job is resized to its plan (:meth:`ray_cluster.runtime.JobRuntime.resize`)
with each actor placed on the Ray node standing for its planned server; then all jobs train
concurrently until the slot's end, their finished tasks dispatched from one ``ray.wait`` loop;
then each job checkpoints and reports its progress.

Placement. Server index ``h`` of the psched :class:`~psched.core.model.Cluster` stands for the Ray
node whose resources contain ``psched_server:<server_id>`` (:func:`server_node_resources` gives
what to declare when starting a node; :func:`nodes_for_servers` finds them). Actors get a hard
``NodeAffinitySchedulingStrategy`` to that node, ``num_gpus`` = the demand's GPUs and, with
``demands_as_resources``, the other demands as custom resources ``psched_<pool>_<resource>``
(``psched_worker_cpu``, ``psched_ps_memory_gb``, ...; the node then must declare them, as
:func:`server_node_resources` does, and as :mod:`ray_cluster.runtime.cluster_model` reads them), so
a
node split into a worker and a PS server keeps the two capacities apart. A single machine
stands for both virtual servers of a pool pair (section 7 of ``oasis.md``).

Progress. A job trains ``E N M`` mini-batches in all; one mini-batch is ``W / (E N M)``
worker-slots (:func:`ray_cluster.runtime.worker_slots`), and the slot in which the budget is
reached reports exactly what is left of ``W``, so the loop sees the job complete then. A
rollback (a lost shard) can undo mini-batches already reported; they are not reported twice
(progress never goes negative; the job trains them again before completing).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from psched.core.errors import InputError
from psched.core.executor import FATAL, JobNote, Lookahead, SlotReport
from psched.core.model import (
    RESOURCES,
    Alloc,
    Cluster,
    Job,
    JobSpec,
    Pool,
    Resources,
    Server,
    SlotPlan,
    ceil_eps,
)
from ray_cluster.runtime import JobRuntime, RuntimeConfig, TrainingJob, worker_slots
from ray_cluster.runtime.cluster_model import ray_nodes
from ray_cluster.runtime.warmpool import WarmProcesses
from ray_cluster.workloads.builtin import get_workload

__all__ = [
    "DEMAND_PREFIX",
    "SERVER_MARK",
    "RayExecutor",
    "RayPlacer",
    "demand_resource",
    "nodes_for_servers",
    "profile_seconds_per_batch",
    "profiled_spec",
    "server_node_resources",
    "training_job",
    "with_measured_tau",
]

log = logging.getLogger(__name__)

#: Custom resource marking the Ray node that stands for a psched server: ``SERVER_MARK + id``.
SERVER_MARK = "psched_server:"
#: Prefix of the custom resources carrying non-GPU demands: ``psched_worker_cpu``, ...
DEMAND_PREFIX = "psched_"


def demand_resource(pool: Pool, resource: str) -> str:
    """Name of the custom resource for ``resource`` in ``pool``: ``psched_<pool>_<resource>``."""
    return f"{DEMAND_PREFIX}{pool.value}_{resource}"


def server_node_resources(*servers: Server) -> dict[str, float]:
    """Custom resources a Ray node standing for ``servers`` declares (GPUs go to num_gpus).

    The server marks, plus each positive non-GPU capacity summed over the ``servers`` of each
    pool as ``psched_<pool>_<resource>``.
    """
    out: dict[str, float] = {SERVER_MARK + s.server_id: 1.0 for s in servers}
    for s in servers:
        for r in RESOURCES:
            if r != "gpu" and getattr(s.capacity, r) > 0:
                key = demand_resource(s.pool, r)
                out[key] = out.get(key, 0.0) + float(getattr(s.capacity, r))
    return out


def nodes_for_servers(cluster: Cluster) -> dict[int, str]:
    """Server index -> id of the alive Ray node carrying that server's mark.

    Raises
    ------
    ValueError
        If a server has no such node.
    """
    marks: dict[str, str] = {}
    for node in ray_nodes():
        if node.get("Alive"):
            for key in node.get("Resources", {}):
                if key.startswith(SERVER_MARK):
                    marks[key[len(SERVER_MARK):]] = node["NodeID"]
    out = {}
    for i, s in enumerate(cluster.servers):
        if s.server_id not in marks:
            raise ValueError(f"no Ray node carries {SERVER_MARK}{s.server_id}")
        out[i] = marks[s.server_id]
    return out


def training_job(spec_job: Job, allow_import: bool = False) -> TrainingJob:
    """What a psched job trains: its workload, ``N`` partitions, ``M`` mini-batches, ``E``.

    Raises
    ------
    InputError
        If the job names no workload (it is simulated only), its hparams are bad, or it
        names an import path and ``allow_import`` is false.
    """
    spec = spec_job.spec
    if not spec.workload:
        raise InputError(f"job {spec.job_id!r} names no workload", field="workload")
    try:
        hparams = json.loads(spec.hparams) if spec.hparams else {}
    except json.JSONDecodeError as err:
        raise InputError(f"job {spec.job_id!r}: hparams is not JSON: {err}",
                         field="hparams") from None
    workload = get_workload(spec.workload, hparams, allow_import=allow_import)
    return TrainingJob(job_id=spec.job_id, workload=workload,
                       n_partitions=spec.max_workers, minibatches=spec.minibatches,
                       epochs=spec.epochs)


def profile_seconds_per_batch(job: TrainingJob, config: RuntimeConfig | None = None,
                              steps: int = 40, *, workers: int = 1, shards: int = 1,
                              gpus: float = 0.0) -> float:
    """Measure the seconds one worker spends per mini-batch (pull, gradient, push) on Ray.

    ``workers`` workers served by ``shards`` PS shards train the job's own workload and batch
    size at once for ``steps`` mini-batches each, after a warm-up of one mini-batch each
    (actor start-up and data load are not counted). The result is wall time x ``workers`` /
    mini-batches: with several workers it includes their contention for the machine, which is
    what a plan of that many workers meets on a machine they share (the embedded Ray); on a
    cluster whose workers own their GPUs or cores, one worker is the honest figure. Runs on the
    connected Ray. ``gpus``: each worker's GPUs, as its jobs' workers get them from Ray (it
    then trains on the device it will have; asked only where the cluster has that many GPUs,
    else it is measured on the CPU).
    """
    if workers < 1 or shards < 1:
        raise ValueError("workers and shards must be at least 1")
    cfg = dataclasses.replace(config or RuntimeConfig(), checkpoint_dir=None, evaluate=False,
                              checkpoint_every_s=None)
    probe = TrainingJob(job_id=f"profile-{job.job_id}", workload=job.workload,
                        n_partitions=workers, minibatches=steps + 1, epochs=1)
    has = float(ray.cluster_resources().get("GPU", 0.0)) if gpus > 0 else 0.0  # type: ignore[no-untyped-call]
    placer = RayPlacer(None, {probe.job_id: (Resources(gpu=gpus if has >= gpus * workers
                                                       else 0.0), Resources())})
    rt = JobRuntime(probe, cfg, placer)
    try:
        rt.resize([None] * workers, [None] * shards)
        rt.run_until(time.time() + 600, until_batches=workers)  # warm-up
        b0, t0 = rt.batches, time.perf_counter()
        rt.run_until(time.time() + 600)
        elapsed, batches = time.perf_counter() - t0, rt.batches - b0
    finally:
        rt.close()
    if batches <= 0:
        raise RuntimeError(f"profiling {job.job_id} trained nothing")
    return elapsed * workers / batches


def profiled_spec(spec: JobSpec, config: RuntimeConfig | None = None, *, workers: int = 1,
                  steps: int = 200, allow_import: bool = False) -> JobSpec:
    """``spec`` with tau measured by :func:`profile_seconds_per_batch` with ``workers``
    workers (at most its ``N``) and the PS shards a plan gives them, ``ceil(b/B workers)``."""
    workers = max(1, min(workers, spec.max_workers))
    job = training_job(Job(spec=spec, work=1, window=1), allow_import=allow_import)
    sec = profile_seconds_per_batch(job, config, steps, workers=workers,
                                    shards=max(1, ceil_eps(spec.ps_ratio * workers)),
                                    gpus=spec.worker_demand.gpu)
    return with_measured_tau(spec, sec)


def with_measured_tau(spec: JobSpec, seconds_per_batch: float) -> JobSpec:
    """``spec`` with ``tau`` = the measured seconds per mini-batch, communication included.

    ``Job.work`` then divides ``E N M tau`` by the slot length: tau in slots is the measured
    seconds over ``slot_seconds`` (``oasis.md`` section 7: no double count of ``2e/b``).
    """
    return dataclasses.replace(spec, tau_s=float(seconds_per_batch), tau_includes_comm=True)


class RayPlacer:
    """Actor options that put a job's containers on the nodes of their planned servers.

    Parameters
    ----------
    node_of
        Server index -> Ray node id (None: no node affinity).
    demands
        Job id -> (worker demand, PS demand).
    demands_as_resources
        Also ask for the non-GPU demands as ``psched_<pool>_<resource>`` custom resources.
    """

    def __init__(self, node_of: Mapping[int, str] | None,
                 demands: Mapping[str, tuple[Resources, Resources]],
                 demands_as_resources: bool = False) -> None:
        self.node_of = node_of
        self.demands = demands
        self.demands_as_resources = demands_as_resources

    def _options(self, pool: Pool, demand: Resources, server: int | None) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": 0, "num_gpus": demand.gpu}
        if self.node_of is not None and server is not None:
            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                self.node_of[server], soft=False)
        if self.demands_as_resources:
            opts["resources"] = {demand_resource(pool, r): float(getattr(demand, r))
                                 for r in RESOURCES if r != "gpu" and getattr(demand, r) > 0}
        return opts

    def worker_options(self, job_id: str, server: int | None) -> dict[str, Any]:
        return self._options(Pool.WORKER, self.demands[job_id][0], server)

    def ps_options(self, job_id: str, server: int | None) -> dict[str, Any]:
        return self._options(Pool.PS, self.demands[job_id][1], server)


def _expand(pairs: Sequence[tuple[int, int]]) -> list[int | None]:
    return [h for h, n in pairs for _ in range(n)]


class RayExecutor:
    """Runs every planned job on Ray for one slot per :meth:`apply`.

    Parameters
    ----------
    cluster
        The psched cluster the plans refer to.
    config
        How every job trains (mode, optimizer, learning-rate rule, checkpoints).
    slot_seconds
        Wall length of a slot (default ``cluster.slot_seconds``): seconds in tests and
        demos, hours in production.
    node_of
        Server index -> Ray node id; None: no placement (one machine);
        ``"auto"``: :func:`nodes_for_servers`.
    demands_as_resources
        See :class:`RayPlacer`.
    allow_import
        Accept workloads named by import path (``pkg.module:Class``): they run user code.
    lookahead
        ``t -> plan of slot t`` where already known (a policy that commits schedules on
        arrival knows it), else None. Right after slot ``t``'s resizes, the actors that slot
        ``t + 1``'s plan adds are started in the background, so that boundary waits for no
        actor start-up; spares a boundary did not use are stopped after its resizes. In a
        placed cluster a spare holds its demand from its start, a slot early.
    warm_processes
        Fresh Ray worker processes to keep waiting on every node the plans use
        (:class:`~ray_cluster.runtime.warmpool.WarmProcesses`), topped up in the background after
        each boundary: an actor no lookahead foresaw (a re-planning policy's new plan, a
        replaced worker) then starts without waiting for a process. 0: none.
    """

    def __init__(self, cluster: Cluster, config: RuntimeConfig | None = None, *,
                 slot_seconds: float | None = None,
                 node_of: Mapping[int, str] | str | None = None,
                 demands_as_resources: bool = False, allow_import: bool = False,
                 lookahead: Lookahead | None = None,
                 warm_processes: int = 4) -> None:
        self.cluster = cluster
        self.allow_import = allow_import
        self.lookahead = lookahead
        self.config = config or RuntimeConfig()
        self.slot_seconds = float(slot_seconds or cluster.slot_seconds)
        nodes = nodes_for_servers(cluster) if node_of == "auto" else node_of
        self._demands: dict[str, tuple[Resources, Resources]] = {}
        self.placer = RayPlacer(nodes if not isinstance(nodes, str) else None, self._demands,
                                demands_as_resources)
        self.runtimes: dict[str, JobRuntime] = {}
        self.reported: dict[str, float] = {}  #: worker-slots reported so far, per job
        self.slot_log: list[dict[str, Any]] = []  #: per slot: timings and sizes
        self.warm = WarmProcesses(warm_processes,
                                  keep_alive_s=max(600.0, 3 * self.slot_seconds))
        if ray.is_initialized():
            self.warm.fill_later(self._nodes())

    def runtime(self, job: Job) -> JobRuntime:
        """The job's runtime, created on first use."""
        rt = self.runtimes.get(job.job_id)
        if rt is None:
            spec = job.spec
            self._demands[job.job_id] = (spec.worker_demand, spec.ps_demand)
            rt = JobRuntime(training_job(job, self.allow_import), self.config, self.placer)
            self.runtimes[job.job_id] = rt
            self.reported.setdefault(job.job_id, 0.0)
        return rt

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        """Run slot ``t``: suspend unplanned jobs, stop the workers planned jobs leave, resize
        planned ones, train until the slot ends, checkpoint, report worker-slots done per
        job."""
        start = time.time()
        deadline = start + self.slot_seconds
        failed: dict[str, str] = {}
        for job_id, rt in self.runtimes.items():
            if job_id not in plan and rt.shards:
                try:
                    rt.suspend()
                except RayError as err:  # a lost node: nothing left to checkpoint from
                    rt.abandon(f"suspend failed: {type(err).__name__}")
        for job_id, alloc in plan.items():  # every job frees what it leaves, then any starts
            rt_old = self.runtimes.get(job_id)
            if rt_old is not None and rt_old.workers:
                try:
                    rt_old.release_workers(_expand(alloc.workers))
                except RayError as err:
                    rt_old.abandon(f"release failed: {type(err).__name__}")
        running: dict[str, JobRuntime] = {}
        for job_id, alloc in plan.items():
            try:
                rt = self.runtime(jobs[job_id])
                rt.resize(_expand(alloc.workers), _expand(alloc.ps))
                running[job_id] = rt
            except (RayError, InputError, ValueError) as err:
                log.warning("slot %d: job %s cannot run: %s", t, job_id, err)
                failed[job_id] = str(err)
                if isinstance(err, RayError) and job_id in self.runtimes:
                    self.runtimes[job_id].abandon(f"resize failed: {type(err).__name__}")
        resized = time.time()
        for rt in self.runtimes.values():
            rt.drop_spares()
        self._prepare(t + 1, jobs)
        if ray.is_initialized():  # a slot that started no actor starts no Ray either
            self.warm.fill_later(self._nodes())
        for rt in running.values():
            rt.begin(deadline)
        self._train(t, running, failed)
        progress: dict[str, float] = {}
        for job_id, rt in running.items():
            try:
                rt.end()
            except RayError as err:
                self._give_up(t, job_id, f"slot end failed: {type(err).__name__}", failed)
            progress[job_id] = self._progress(jobs[job_id], rt, plan[job_id])
            if rt.fatal:
                failed[job_id] = FATAL + rt.fatal
        self.slot_log.append({"slot": t, "resize_s": resized - start,
                              "slot_s": time.time() - start,
                              "jobs": {j: (a.n_workers, a.n_ps) for j, a in plan.items()}})
        return SlotReport(slot=t, progress=progress, failed=failed)

    def _train(self, t: int, running: dict[str, JobRuntime], failed: dict[str, str]) -> None:
        """Dispatch every running job's finished tasks until all are quiescent. A job whose
        recovery fails inside Ray (a replacement actor bound to a node that died meanwhile,
        a checkpoint a lost shard cannot write) is given up for the rest of the slot; the
        others go on."""
        by_job = {id(rt): job_id for job_id, rt in running.items()}
        while True:
            owner = {ref: rt for rt in running.values() for ref in rt.pending()}
            due = [u for rt in running.values() if (u := rt.deferred_until) is not None]
            if not owner and not due:
                return
            timeout = max(0.0, min(due) - time.time()) if due else None
            if owner:
                ready, _ = ray.wait(list(owner), num_returns=1, timeout=timeout)
                if ready:
                    self._step(t, by_job[id(owner[ready[0]])], owner[ready[0]], failed,
                               ready[0])
            else:
                time.sleep(timeout or 0.0)  # back-offs only: nothing else to wait for
            for rt in running.values():  # a job whose back-off has ended launches again
                self._step(t, by_job[id(rt)], rt, failed, None)

    def _step(self, t: int, job_id: str, rt: JobRuntime, failed: dict[str, str],
              ref: Any) -> None:
        """Hand ``rt`` its finished reference ``ref`` (None: only :meth:`JobRuntime.poll`)."""
        try:
            if ref is not None:
                rt.handle(ref)
            else:
                rt.poll()
        except RayError as err:
            self._give_up(t, job_id, f"recovery failed: {type(err).__name__}", failed)

    def _give_up(self, t: int, job_id: str, why: str, failed: dict[str, str]) -> None:
        log.warning("slot %d: job %s stops for this slot: %s", t, job_id, why)
        self.runtimes[job_id].abandon(why)
        failed[job_id] = why

    def set_lookahead(self, lookahead: Lookahead | None) -> None:
        """Where the plan of a coming slot is read (see the class docstring)."""
        self.lookahead = lookahead

    def set_cluster(self, cluster: Cluster) -> None:
        """Servers joined (their nodes are already in the placement map)."""
        self.cluster = cluster

    def seed_progress(self, done: Mapping[str, float]) -> None:
        """A restarted service: each job had reported ``done`` worker-slots."""
        self.reported.update(done)

    def places_on_nodes(self) -> bool:
        """True when actors are placed on the servers' nodes (a ``node_of`` map)."""
        return self.placer.node_of is not None

    def as_modelled(self) -> bool:
        """False: real training runs at whatever speed its devices give it."""
        return False

    def notes(self, job_ids: Iterable[str]) -> dict[str, JobNote]:
        """Each job's latest checkpoint path and last loss figures (jobs that ran)."""
        out: dict[str, JobNote] = {}
        for job_id in job_ids:
            rt = self.runtimes.get(job_id)
            if rt is None:
                continue
            ckpt = str(rt.store.path(rt.version)) if rt.version >= 0 else ""
            last = rt.history[-1] if rt.history else None
            loss = ("" if last is None or last.train_loss is None
                    else f"loss={last.train_loss:.4f}")
            if last is not None and last.eval_loss is not None:
                loss += f" eval={last.eval_loss:.4f}"
            out[job_id] = JobNote(checkpoint=ckpt, loss=loss.strip(), devices=rt.device_line())
        return out

    def servers_lost(self, servers: set[int]) -> None:
        """The nodes of ``servers`` were lost (the service already pointed the servers at
        live nodes): every job with an actor placed on one gives up all its actors; its next
        resize starts them on the new placement from its last checkpoint. O(jobs)."""
        for job_id, rt in self.runtimes.items():
            if rt.uses(servers):
                rt.abandon(f"node of server(s) {sorted(servers)} lost")
                log.warning("job %s: actors on a lost node; restarts from its checkpoint",
                            job_id)

    def _prepare(self, t: int, jobs: Mapping[str, Job]) -> None:
        """Start, in the background, the actors slot ``t``'s known plan will add."""
        plan = self.lookahead(t) if self.lookahead is not None else None
        for job_id, alloc in (plan or {}).items():
            if job_id not in jobs:
                continue  # not arrived yet: it has no runtime to prepare
            try:
                rt = self.runtime(jobs[job_id])
                rt.prestart(*rt.missing(_expand(alloc.workers), _expand(alloc.ps)), wait=False)
            except (RayError, InputError, ValueError) as err:
                log.info("slot %d: cannot prepare %s: %s", t, job_id, err)

    def _nodes(self) -> list[str]:
        """The Ray nodes actors may start on: the servers' nodes, or this machine's."""
        if self.placer.node_of is not None:
            return sorted(set(self.placer.node_of.values()))
        return [ray.get_runtime_context().get_node_id()]

    def _progress(self, job: Job, rt: JobRuntime, alloc: Alloc) -> float:
        """Worker-slots newly done by ``job`` (never negative, exactly W in all)."""
        done_before = self.reported[job.job_id]
        if rt.done:
            now = float(job.work)
        else:
            now = min(worker_slots(rt.batches, rt.job.budget, job.work), job.work - 1e-6)
        delta = max(0.0, now - done_before)
        self.reported[job.job_id] = done_before + delta
        return delta

    def release(self, job_id: str) -> None:
        """Stop the job's actors for good (its checkpoints stay on disk)."""
        rt = self.runtimes.pop(job_id, None)
        if rt is not None:
            rt.close()

    def close(self) -> None:
        self.warm.close()
        for job_id in list(self.runtimes):
            self.release(job_id)
