"""Ray worker processes started ahead of need, so that a slot boundary adding actors does not
wait for Python and Ray to start.

Ray runs every actor in a worker process of its own, leased from the raylet of the actor's
node: a *fresh* idle process of the same job if one is waiting (one that has run no task and
hosts no actor), else a new one. Starting a process costs about 0.5 s of CPU (``import ray``)
plus registration, 0.8 s for one actor and 1.4-1.7 s for three at once on a 2-core machine
(``benchmarks/bench_runtime.py``, baseline rows) - longer than the whole slot boundary the
runtime aims at. Ray keeps only a few idle processes by itself (as many as the node's CPUs,
started once, not for a given job, and used up by the first actors).

:class:`WarmProcesses` keeps ``per_node`` fresh idle processes of this job waiting on each
node it is told about, through the raylet's own ``PrestartWorkers`` call (the one Ray's core
worker uses to start processes ahead of tasks), reached the way Ray's state API reaches a
raylet (:func:`ray._private.grpc_utils.init_grpc_channel`, so TLS and token authentication
apply). An actor created later with any options (node affinity, GPUs, custom resources) takes
one of them at once; nothing is reserved, and a pooled process holds no resources. A process
nobody takes exits after ``keep_alive_s``. Counting is exact: the raylet's per-worker
statistics say which processes are fresh and idle (:meth:`WarmProcesses.fresh`; only those
of this job count, which the raylet keeps alive).

The pool is an optimisation only and never fails its caller: a node that is gone or does not
answer is skipped until the next fill; a Ray without these calls disables the pool (logged
once). Actors then start cold, exactly as without it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import ray

from ray_cluster.runtime.cluster_model import ray_nodes

__all__ = ["WarmProcesses"]

log = logging.getLogger(__name__)

_NIL = b"\xff"  # Ray's nil ids are all 0xff bytes


def _is_nil(raw: bytes) -> bool:
    return not raw or raw == _NIL * len(raw)


class WarmProcesses:
    """Keeps ``per_node`` fresh idle Ray worker processes of this job on each node.

    Parameters
    ----------
    per_node
        Processes to keep waiting per node: the most actors one boundary may add there
        without waiting for start-up. 0 disables the pool.
    keep_alive_s
        A pooled process nobody takes exits after this long (Ray's idle-worker rule).
    settle_s
        After asking for processes, wait this long for them to register before counting
        again (a process takes 0.5-1 s to start; asking again sooner would over-start).
    timeout_s
        A top-up gives up after this long (the pool stays short; actors then start cold).

    Notes
    -----
    A fill costs, per round, one ``GetNodeStats`` call per node (the raylet asks each of its
    workers: O(processes on the node)) and one ``PrestartWorkers`` call per missing process;
    it takes one round when nothing is missing, else about one per ``settle_s``.
    """

    def __init__(self, per_node: int, *, keep_alive_s: float = 600.0, settle_s: float = 1.5,
                 timeout_s: float = 30.0) -> None:
        if per_node < 0:
            raise ValueError(f"per_node must be >= 0, not {per_node}")
        self.per_node = per_node
        self.keep_alive_s = keep_alive_s
        self.settle_s = settle_s
        self.timeout_s = timeout_s
        self.requested = 0  #: processes asked for so far (all nodes)
        self.counts: dict[str, int] = {}  #: fresh processes per node at the last fill's end
        self._stubs: dict[str, Any] = {}
        self._job = b""
        self._broken = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None  # the background filler, if started
        self._running = False  # it is filling (under _lock)
        self._again = False  # asked again while filling (under _lock)
        self._want: list[str] = []  # the nodes of the latest request (under _lock)
        self._stop = threading.Event()

    # -- raylet calls --------------------------------------------------------------------
    def _stub(self, node_id: str) -> Any:
        stub = self._stubs.get(node_id)
        if stub is None:
            from ray._private.grpc_utils import init_grpc_channel
            from ray.core.generated import node_manager_pb2_grpc

            node = next((n for n in ray_nodes() if n["NodeID"] == node_id and n["Alive"]),
                        None)
            if node is None:
                raise LookupError(f"no live Ray node {node_id}")
            address = f"{node['NodeManagerAddress']}:{node['NodeManagerPort']}"
            stub = node_manager_pb2_grpc.NodeManagerServiceStub(init_grpc_channel(address))
            self._stubs[node_id] = stub
            self._job = bytes.fromhex(ray.get_runtime_context().get_job_id())
        return stub

    def fresh(self, node_id: str) -> int:
        """Idle processes of this job on the node that have run nothing: what actors created
        now take instead of starting processes. Ray's own start-up processes (of no job yet)
        are taken too when they wait, but not counted: the raylet stops them whenever it
        trims idle processes, while those started here are kept alive ``keep_alive_s``."""
        return len(self.fresh_pids(node_id))

    def fresh_pids(self, node_id: str, *, unbound: bool = False) -> list[int]:
        """Process ids of :meth:`fresh` processes (from the raylet's worker statistics);
        ``unbound``: also Ray's start-up processes of no job yet."""
        from ray.core.generated import common_pb2, node_manager_pb2

        reply = self._stub(node_id).GetNodeStats(
            node_manager_pb2.GetNodeStatsRequest(include_memory_info=False), timeout=10)
        return [w.pid for w in reply.core_workers_stats
                if w.worker_type == common_pb2.WORKER and w.language == common_pb2.PYTHON
                and _is_nil(w.actor_id) and w.num_executed_tasks == 0
                and w.num_running_tasks == 0
                and (w.job_id == self._job or (unbound and _is_nil(w.job_id)))]

    def _request(self, node_id: str, n: int) -> None:
        """Ask the node's raylet for ``n`` more processes, one call each (a call for several
        starts at most as many as the raylet may start at once)."""
        from ray.core.generated import common_pb2, node_manager_pb2

        stub = self._stub(node_id)
        for _ in range(n):
            stub.PrestartWorkers(node_manager_pb2.PrestartWorkersRequest(
                language=common_pb2.PYTHON, job_id=self._job, num_workers=1,
                keep_alive_duration_secs=max(1, round(self.keep_alive_s))), timeout=10)
        self.requested += n

    # -- filling -------------------------------------------------------------------------
    def fill(self, node_ids: Iterable[str]) -> dict[str, int]:
        """Bring every node up to ``per_node`` fresh processes; blocks until they are there
        or ``timeout_s`` passes. Returns the fresh count per node."""
        nodes = list(dict.fromkeys(node_ids))
        have: dict[str, int] = {}
        if self.per_node == 0 or self._broken:
            return have
        end = time.monotonic() + self.timeout_s
        while True:
            have = {}
            for n in list(nodes):
                got = self._guard(n, lambda n=n: self.fresh(n))
                if got is None:
                    nodes.remove(n)  # gone or unreachable: skipped until the next fill
                else:
                    have[n] = got
            self.counts = dict(have)
            short = {n: self.per_node - k for n, k in have.items() if k < self.per_node}
            if self._broken or not short or time.monotonic() >= end or self._stop.is_set():
                return have
            for n, k in short.items():
                self._guard(n, lambda n=n, k=k: self._request(n, k))
            if self._stop.wait(self.settle_s):
                return have

    def _guard(self, node_id: str, call: Any) -> Any:
        """``call()``, or None where the node cannot be asked (it is gone, or its raylet does
        not answer: skipped this time); a Ray without these calls disables the pool for good.
        The pool is an optimisation: it never fails its caller."""
        try:
            return call()
        except (ImportError, AttributeError) as err:
            self._broken = True
            log.warning("no pre-started Ray processes (actors will start cold): %s", err)
        except LookupError:
            pass
        except Exception as err:  # grpc errors of a node that died after we reached it
            self._stubs.pop(node_id, None)
            log.info("pre-started processes: node %s not reachable: %s", node_id[:8], err)
        return None

    def fill_later(self, node_ids: Iterable[str]) -> None:
        """:meth:`fill` in a background thread. One thread at a time: a call while it runs
        only leaves its nodes for one more fill after the current one (calls never queue up,
        and counts are never raced)."""
        if self.per_node == 0 or self._broken:
            return
        with self._lock:
            self._want = list(dict.fromkeys(node_ids))
            if self._running:
                self._again = True
                return
            self._running = True
            self._thread = threading.Thread(target=self._fill_while_asked,
                                            name="psched-warm-processes", daemon=True)
            self._thread.start()

    def _fill_while_asked(self) -> None:
        while True:
            with self._lock:
                nodes, self._again = self._want, False
            self.fill(nodes)
            with self._lock:
                if not self._again or self._stop.is_set():
                    self._running = False
                    return

    def wait(self) -> None:
        """Block until the background fills asked for so far are done."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Stop filling (processes already started exit after ``keep_alive_s`` idle)."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
