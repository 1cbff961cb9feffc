"""The psched :class:`~psched.core.model.Cluster` of a Ray cluster, built from its nodes.

Rules (``oasis.md`` section 7, "Pools"):

* a node declaring the custom resource ``psched_pool:worker`` is one worker server, one with
  ``psched_pool:ps`` one PS server;
* any other node (the embedded local Ray, say) is split into two virtual servers,
  ``<name>/w`` (workers) and ``<name>/ps`` (parameter servers), both placed on that node;
* a server's name is the node's ``psched_server:<id>`` mark if it has one, else the first
  8 hex digits of its node id;
* capacities: GPU = the node's GPUs (worker servers only), CPU = the node's CPUs, memory = the
  node's memory in GB (halved between the two virtual servers of a split node), bandwidth
  :data:`DEFAULT_BANDWIDTH_GBPS`; a node overrides any of them with custom resources
  ``psched_<pool>_<resource>`` (``psched_worker_cpu = 2`` declares room for two 1-CPU
  workers: the honest model of a 2-core machine).

:func:`remap_lost` moves the servers of dead nodes onto live nodes of the same pool (the jobs
placed there move at the next slot boundary); nodes that join are found by :func:`joined_nodes`.
A joining node first replaces a lost one (:func:`replacement`): the lost node's servers move
onto it, and the model's capacity stays what it was. Otherwise its servers
(:func:`servers_of_nodes`) are appended to the model at the next slot boundary (the service
grows the policy's ledger; see :meth:`ray_cluster.service.nodes.Nodes.grow`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from psched.core.model import RESOURCES, Cluster, Pool, Resources, Server

__all__ = [
    "DEFAULT_BANDWIDTH_GBPS",
    "POOL_MARK",
    "cluster_from_nodes",
    "joined_nodes",
    "ray_nodes",
    "remap_lost",
    "replacement",
    "servers_of_nodes",
]

log = logging.getLogger(__name__)

#: Custom resource naming a node's pool: ``psched_pool:worker`` or ``psched_pool:ps``.
POOL_MARK = "psched_pool:"
#: Bandwidth of a server when its node declares none, Gbps.
DEFAULT_BANDWIDTH_GBPS = 10.0
_SERVER_MARK = "psched_server:"  # same as ray_cluster.runtime.executor.SERVER_MARK (no Ray import)


def ray_nodes() -> list[dict[str, Any]]:
    """``ray.nodes()``: one row per node of the connected Ray (imports Ray when called)."""
    import ray

    read: Callable[[], list[dict[str, Any]]] = ray.nodes  # Ray leaves it unannotated
    return read()


def _name(node: Mapping[str, Any]) -> str:
    for key in node.get("Resources", {}):
        if key.startswith(_SERVER_MARK):
            return str(key)[len(_SERVER_MARK):]
    return str(node["NodeID"])[:8]


def _capacity(res: Mapping[str, float], pool: Pool, share: float) -> Resources:
    base = {
        "gpu": float(res.get("GPU", 0.0)) if pool == Pool.WORKER else 0.0,
        "cpu": float(res.get("CPU", 0.0)),
        "memory_gb": float(res.get("memory", 0.0)) / 2**30 * share,
        "storage_gb": 0.0,
        "bandwidth_gbps": DEFAULT_BANDWIDTH_GBPS,
    }
    for r in RESOURCES:
        key = f"psched_{pool.value}_{r}"
        if key in res:
            base[r] = float(res[key])
    return Resources(**base)


def cluster_from_nodes(nodes: Sequence[Mapping[str, Any]], slot_seconds: float,
                       ) -> tuple[Cluster, dict[int, str]]:
    """The cluster of the alive nodes (``ray.nodes()`` rows) and server index -> node id.

    Servers are ordered by node name, worker server before PS server of a split node.
    Complexity O(nodes log nodes).

    Raises
    ------
    ValueError
        If no node is alive, or the result has no worker or no PS server.
    """
    alive = [n for n in nodes if n.get("Alive")]
    if not alive:
        raise ValueError("the Ray cluster has no alive node")
    pairs = servers_of_nodes(alive)
    node_of = {i: node for i, (_, node) in enumerate(pairs)}
    cluster = Cluster(servers=tuple(s for s, _ in pairs), slot_seconds=slot_seconds)
    if not cluster.indices(Pool.WORKER).size or not cluster.indices(Pool.PS).size:
        raise ValueError("the Ray cluster gives no worker server or no PS server "
                         f"(nodes marked {POOL_MARK}worker / {POOL_MARK}ps)")
    return cluster, node_of


def servers_of_nodes(nodes: Sequence[Mapping[str, Any]], taken: Sequence[str] = (),
                     ) -> list[tuple[Server, str]]:
    """The servers the given nodes stand for (rules in the module docstring), each with its
    node id, ordered by node name; a name in ``taken`` gets a ``#2``, ``#3``... suffix."""
    used = set(taken)
    out: list[tuple[Server, str]] = []
    for node in sorted(nodes, key=_name):
        res = node.get("Resources", {})
        name = _name(node)
        if POOL_MARK + "worker" in res or POOL_MARK + "ps" in res:
            pool = Pool.WORKER if POOL_MARK + "worker" in res else Pool.PS
            parts = [(name, pool, 1.0)]
        else:
            parts = [(f"{name}/w", Pool.WORKER, 0.5), (f"{name}/ps", Pool.PS, 0.5)]
        for sid, pool, share in parts:
            unique, k = sid, 1
            while unique in used:
                k += 1
                unique = f"{sid}#{k}"
            used.add(unique)
            out.append((Server(server_id=unique, pool=pool,
                               capacity=_capacity(res, pool, share)), str(node["NodeID"])))
    return out


def remap_lost(cluster: Cluster, node_of: dict[int, str], alive: set[str]) -> list[str]:
    """Point every server whose node died at a live node of a server of the same pool.

    Changes ``node_of`` in place (the executor's placer reads it at each actor start); the
    node chosen is the live one carrying the fewest servers of that pool. Returns one line
    per move. The model's capacities are not changed (the policy keeps its commitments; the
    moved server now shares a node, see the service's "reality differs" rules).
    """
    moves: list[str] = []
    for h, node in sorted(node_of.items()):
        if node in alive:
            continue
        pool = cluster.servers[h].pool
        candidates = [n for i, n in node_of.items()
                      if n in alive and cluster.servers[i].pool == pool]
        if not candidates:
            candidates = sorted(alive)
        if not candidates:
            continue
        target = min(sorted(set(candidates)), key=lambda n: list(node_of.values()).count(n))
        node_of[h] = target
        moves.append(f"server {cluster.servers[h].server_id}: node {node[:8]} lost, "
                     f"now on {target[:8]}")
        log.warning(moves[-1])
    return moves


def joined_nodes(node_of: Mapping[int, str], nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Ids of alive nodes that no server stands for (the service adds their servers)."""
    known = set(node_of.values())
    return [str(n["NodeID"]) for n in nodes if n.get("Alive") and n["NodeID"] not in known]


def _pools(node: Mapping[str, Any]) -> set[Pool]:
    """The pools a node's servers belong to (module rules)."""
    res = node.get("Resources", {})
    if POOL_MARK + "worker" in res:
        return {Pool.WORKER}
    if POOL_MARK + "ps" in res:
        return {Pool.PS}
    return {Pool.WORKER, Pool.PS}


def replacement(cluster: Cluster, home: Mapping[int, str], alive: set[str],
                node: Mapping[str, Any]) -> list[int]:
    """Servers a joining ``node`` takes over instead of adding capacity: all those of one lost
    node (``home``: server -> the node it was placed on before any loss) whose pools are the
    pools the joining node offers; among several lost nodes, the one with the most servers,
    then the smallest id. Empty when no lost node matches (the node then grows the model).
    """
    offers = _pools(node)
    lost: dict[str, list[int]] = {}
    for h, n in sorted(home.items()):
        if n not in alive:
            lost.setdefault(n, []).append(h)
    fits = [(n, hs) for n, hs in lost.items()
            if {cluster.servers[h].pool for h in hs} == offers]
    if not fits:
        return []
    _, best = min(fits, key=lambda item: (-len(item[1]), item[0]))
    return best
