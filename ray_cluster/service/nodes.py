"""The service's Ray nodes: lost ones remapped, joined ones replacing lost ones or growing
the model, and a restart rebuilding the cluster from the journal.

:class:`Nodes` runs before every slot (a before-slot hook of the loop, in placed mode: a
``node_of`` map and an executor that places actors) and reads Ray's node list:

* *lost node*: the servers of a dead node are pointed at a live node of the same pool
  (:func:`ray_cluster.runtime.cluster_model.remap_lost`), journaled as ``node_lost``; the
  executor is told which servers were there (``servers_lost(servers)``): it gives up the
  actors of the jobs placed there (killed for good: no orphan if the node comes back),
  and they restart on the new placement from their last checkpoint; lost progress is caught
  by the behind-plan rule. A node that dies in the middle of a slot fails only the jobs placed
  on it for the rest of that slot (:meth:`ray_cluster.runtime.executor.RayExecutor.apply`);
* *joined node*: a node offering the same pools as a lost one replaces it
  (:func:`ray_cluster.runtime.cluster_model.replacement`; its servers move onto it for good,
  journaled ``servers_rehomed``; no capacity is added); any other joined node is turned into
  servers (:mod:`ray_cluster.runtime.cluster_model`) appended to the model at this slot boundary
  (``SchedulerLoop.set_cluster``; the policy's ``on_cluster_change``), journaled
  ``cluster_grown``, so a restart rebuilds the same cluster (:meth:`Nodes.regrow`).

Complexity: O(nodes + servers) per slot.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from psched.core.executor import Executor
from psched.core.loop import SchedulerLoop
from psched.core.model import Cluster
from ray_cluster.service.config import cluster_from_dict
from ray_cluster.service.journal import Journal

__all__ = ["NodeRow", "Nodes"]

#: the service's own logger: its lines keep one name (``service_actor`` sets its level)
log = logging.getLogger("ray_cluster.service")

#: One row of ``ray.nodes()``: ``NodeID``, ``Alive``, ``Resources``...
NodeRow = Mapping[str, Any]


def _ray_nodes() -> list[NodeRow] | None:
    """Ray's node list, or None when Ray is not up (a simulated service)."""
    try:
        import ray

        from ray_cluster.runtime.cluster_model import ray_nodes

        if not ray.is_initialized():
            return None
        rows: list[NodeRow] = list(ray_nodes())
        return rows
    except Exception:  # the node list is advisory: a failed read skips one refresh
        log.warning("could not read Ray's node list", exc_info=True)
        return None


class Nodes:
    """Where the service's servers are, kept in step with Ray's nodes (module docstring).

    Parameters
    ----------
    loop
        The service's loop (its cluster grows through ``set_cluster``).
    journal
        Where node events are journaled.
    executor
        The executor: placed mode needs one that places on nodes; it is told of lost
        servers and of the grown cluster (:class:`~psched.core.executor.Executor`).
    node_of
        Server index -> Ray node id, changed in place (the executor's placer reads it), or
        None (no placement: nothing to watch).
    list_nodes
        Reads Ray's node list (default ``ray.nodes()``; tests inject their own).
    """

    def __init__(self, loop: SchedulerLoop, journal: Journal, executor: Executor,
                 node_of: dict[int, str] | None,
                 list_nodes: Callable[[], list[NodeRow] | None] = _ray_nodes) -> None:
        self.loop, self.journal, self.executor = loop, journal, executor
        self.node_of = node_of
        #: server -> the node it belongs on (``node_of`` before any loss was remapped)
        self.home: dict[int, str] = dict(node_of or {})
        self.joined: set[str] = set()  #: nodes seen joining (handled once)
        self._list_nodes = list_nodes

    @property
    def placed(self) -> bool:
        """True when actors are placed on nodes (a ``node_of`` map, a placing executor)."""
        return self.node_of is not None and self.executor.places_on_nodes()

    def refresh(self, t: int) -> None:
        """Before slot ``t``: bring the model and placement up to date with Ray's nodes."""
        if not self.placed:
            return
        nodes = self._list_nodes()
        if nodes is not None:
            self.apply(nodes, t)

    def apply(self, nodes: Sequence[NodeRow], t: int) -> None:
        """Remap servers of dead nodes, let joined nodes replace lost ones or grow the model
        (``nodes``: rows of ``ray.nodes()``)."""
        from ray_cluster.runtime.cluster_model import joined_nodes, remap_lost, replacement

        assert self.node_of is not None
        alive = {str(n["NodeID"]) for n in nodes if n.get("Alive")}
        lost = {h for h, n in self.node_of.items() if n not in alive}
        for line in remap_lost(self.loop.cluster, self.node_of, alive):
            self.journal.event("", t, "node_lost", line)
            log.warning("slot %d: node lost: %s", t, line)
        if lost:
            self.executor.servers_lost(lost)  # before the plan: the jobs there restart elsewhere
        new = set(joined_nodes(self.node_of, nodes)) - self.joined
        fresh = []
        for node in sorted((n for n in nodes if n["NodeID"] in new), key=lambda n: n["NodeID"]):
            taken = replacement(self.loop.cluster, self.home, alive, node)
            if taken:
                self.rehome(taken, str(node["NodeID"]), t)
            else:
                fresh.append(node)
        self.joined.update(new)
        if fresh:
            self.grow(fresh, t)

    def rehome(self, servers: list[int], node_id: str, t: int) -> None:
        """A joining node replaces a lost one: ``servers`` (all of the lost node's) move onto
        it for good; the model's capacity is unchanged (it never dropped the lost node's).
        Journaled, so a restart places them there too."""
        assert self.node_of is not None
        moved = {h: node_id for h in servers}
        self.node_of.update(moved)  # in place: the executor's placer reads this mapping
        self.home.update(moved)
        self.journal.event("", t, "servers_rehomed",
                           json.dumps({"node_of": {str(h): n for h, n in moved.items()}}))
        log.info("slot %d: node %s replaces a lost node: %s", t, node_id[:8],
                 ", ".join(self.loop.cluster.servers[h].server_id for h in servers))

    def grow(self, nodes: Sequence[NodeRow], t: int) -> None:
        """Nodes joined: append their servers to the model, the policy and the placement
        (before slot ``t``'s plan). Journaled, so a restart rebuilds the same cluster."""
        from ray_cluster.runtime.cluster_model import servers_of_nodes

        assert self.node_of is not None
        cluster = self.loop.cluster
        pairs = servers_of_nodes(nodes, taken=[s.server_id for s in cluster.servers])
        grown = dataclasses.replace(cluster, servers=cluster.servers + tuple(s for s, _ in pairs))
        base = len(cluster.servers)
        added = {base + i: node for i, (_, node) in enumerate(pairs)}
        self.joined.update(str(n["NodeID"]) for n in nodes)
        try:
            self._set_cluster(grown, at=t)
        except ValueError as err:
            for n in nodes:
                self.journal.event("", t, "node_joined", f"{n['NodeID']} unused: {err}")
            log.warning("nodes joined but stay unused: %s", err)
            return
        self.node_of.update(added)  # in place: the executor's placer reads this mapping
        self.home.update(added)
        self.journal.event("", t, "cluster_grown", json.dumps(
            {"cluster": grown.to_dict(), "node_of": {str(k): v for k, v in added.items()}}))
        log.info("slot %d: %s joined the model", t,
                 ", ".join(f"{s.server_id} ({s.pool.value})" for s, _ in pairs))

    def _set_cluster(self, cluster: Cluster, at: int | None = None) -> None:
        self.loop.set_cluster(cluster, at)  # the policy first: raises if it cannot grow
        self.executor.set_cluster(cluster)

    def regrow(self) -> None:
        """Restart: the cluster and placement as the journaled growths and replacements left
        them (in journal order)."""
        for _, t, kind, info in self.journal.events():
            if kind not in ("cluster_grown", "servers_rehomed"):
                continue
            d = json.loads(info)
            if kind == "cluster_grown":
                self._set_cluster(cluster_from_dict(d["cluster"]), at=t)
            if self.node_of is not None:
                placed = {int(k): str(v) for k, v in d["node_of"].items()}
                self.node_of.update(placed)
                self.home.update(placed)
