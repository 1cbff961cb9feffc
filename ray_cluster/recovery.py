"""Old import path of the service's node handling, now :mod:`ray_cluster.service.nodes`.

:func:`apply_nodes` and :func:`grow` act on a service's :class:`~ray_cluster.service.nodes.Nodes`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ray_cluster.service.core import SchedulerService
from ray_cluster.service.nodes import NodeRow

__all__ = ["apply_nodes", "grow"]


def apply_nodes(svc: SchedulerService, nodes: Sequence[NodeRow], t: int) -> None:
    """``svc.nodes.apply(nodes, t)``."""
    svc.nodes.apply(nodes, t)


def grow(svc: SchedulerService, nodes: Sequence[NodeRow], t: int) -> None:
    """``svc.nodes.grow(nodes, t)``."""
    svc.nodes.grow(nodes, t)
