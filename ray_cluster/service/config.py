"""The scheduler service's configuration and the names it is known by.

:class:`ServiceConfig` says how the service schedules (policy, slot length, horizon, price
bounds, runtime options); it is journaled on first start and read back on restart, as is the
cluster (:func:`cluster_from_dict` reads it back). The constants name the detached Ray actor
(:func:`ray_cluster.service.service_actor`) and the reasons the service records for jobs it
stops. The service itself is :mod:`ray_cluster.service.core`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from psched.core.errors import InputError
from psched.core.model import Cluster, JobSpec, Pool, Resources, Server
from psched.core.policy import Policy, takes_price_bounds
from psched.policies import policy_factory
from psched.policies.options import check_options, policy_options
from ray_cluster.workloads.jobspec import spec_from_json, spec_to_json

__all__ = ["CANCELLED", "DROPPED_BEHIND", "FAILED", "LIVE_COMMIT_MARGIN", "SERVICE_NAME",
           "SERVICE_NAMESPACE", "ServiceConfig", "cluster_from_dict"]

SERVICE_NAME = "psched-scheduler"  #: name of the detached service actor
SERVICE_NAMESPACE = "psched"  #: its Ray namespace
DROPPED_BEHIND = "dropped_behind"  #: reason of a job dropped when its re-plan is rejected
CANCELLED = "cancelled"  #: reason of a cancelled job
FAILED = "failed"  #: reason of a job whose training raises every time (released, not retried)
#: ``commit_margin`` of a policy that takes one (``oasis-rp``), unless ``policy_options`` set
#: it: a promise keeps one slot of slack, for a slot lost to an actor's start-up or a slow node
LIVE_COMMIT_MARGIN = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """How the service schedules; journaled on first start, read back on restart."""

    policy: str = "oasis"  #: policy name (psched.policies)
    policy_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)  #: its options
    slot_seconds: float = 30.0  #: wall length of a slot
    horizon: int = 500  #: slots the service runs at most
    prices: tuple[float, float, float, float] | None = None  #: OASiS U_w, L_w, U_ps, L_ps
    history: tuple[JobSpec, ...] = ()  #: reference jobs for OASiS's U and L when no prices
    estimate_factor: float = 1.0  #: OASiS: scales U with L fixed
    runtime: Mapping[str, Any] = dataclasses.field(default_factory=dict)  #: RuntimeConfig
    allow_import: bool = False  #: user workloads by import path
    replan: bool = True  #: re-decide jobs behind plan (policies committing on arrival)
    #: re-plan waiting jobs into capacity freed by jobs that finished early (policies
    #: committing on arrival that can ``release`` commitments; re-planners do it anyway)
    reuse_freed: bool = True
    #: explicit cap on a job's window (slots), for experiments; None (the default): a window
    #: ends at the utility floor (1e-6 of the maximum) or the horizon (oasis.md section 7)
    max_window: int | None = None
    warm_processes: int = 4  #: fresh Ray processes kept waiting per node (RayExecutor)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["history"] = [spec_to_json(s) for s in self.history]
        d["policy_options"] = dict(self.policy_options)
        d["runtime"] = dict(self.runtime)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ServiceConfig:
        d = dict(d)
        d["history"] = tuple(spec_from_json(s) for s in d["history"])
        d["prices"] = tuple(d["prices"]) if d["prices"] is not None else None
        return cls(**d)

    def make_policy(self) -> Policy:
        """A fresh policy as configured. A priced policy
        (:func:`~psched.core.policy.takes_price_bounds`: ``oasis``, ``oasis-rp``) gets its U
        and L from ``prices`` (``price_source="fixed"``)
        or from the ``history`` jobs, and ``estimate_factor``; the service has no hindsight.
        With neither, a policy whose own default ``price_source`` is ``"online"``
        (``oasis-rp``) estimates them from the jobs submitted so far.

        Raises
        ------
        InputError
            An unknown policy name, an option the policy does not take or refuses, or a
            priced policy without ``prices`` or ``history``.
        """
        opts = dict(self.policy_options)
        try:
            factory = policy_factory(self.policy)
        except KeyError as err:
            raise InputError(str(err.args[0]), field="policy") from None
        takes = policy_options(self.policy)
        if "commit_margin" in takes:  # a real executor may lose a slot: promises keep one
            opts.setdefault("commit_margin", LIVE_COMMIT_MARGIN)
        check_options(self.policy, opts)
        if takes_price_bounds(factory):
            if self.prices is not None:
                bounds = dict(zip(("u_worker", "l_worker", "u_ps", "l_ps"), self.prices,
                                  strict=True))
                # oasis-rp takes them as one mapping, oasis as four options
                opts.update(price_source="fixed",
                            **({"prices": bounds} if "prices" in takes else bounds))
            elif self.history:
                opts.update(price_source="history")
            elif takes.get("price_source") is not None and \
                    takes["price_source"].default == "online":
                pass
            else:
                raise InputError(f"{self.policy} needs price bounds: give --prices or "
                                 "--history", field="prices")
            opts.setdefault("estimate_factor", self.estimate_factor)
        try:
            return factory(**opts)
        except (TypeError, ValueError) as err:
            raise InputError(f"{self.policy}: {err}", field="policy_options") from None


def cluster_from_dict(d: Mapping[str, Any]) -> Cluster:
    """The inverse of :meth:`psched.core.model.Cluster.to_dict`."""
    return Cluster(servers=tuple(Server(server_id=s["id"], pool=Pool(s["pool"]),
                                        capacity=Resources(**s["capacity"]))
                                 for s in d["servers"]), slot_seconds=float(d["slot_seconds"]))
