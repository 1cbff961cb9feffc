"""Old import path of :mod:`ray_cluster.service.config` (re-exported)."""

from ray_cluster.service.config import (
    CANCELLED,
    DROPPED_BEHIND,
    FAILED,
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    ServiceConfig,
    cluster_from_dict,
)

__all__ = ["CANCELLED", "DROPPED_BEHIND", "FAILED", "SERVICE_NAME", "SERVICE_NAMESPACE",
           "ServiceConfig", "cluster_from_dict"]
