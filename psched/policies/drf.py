"""DRF, dominant resource fairness, the YARN/Mesos default (``baselines.md``).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011; as a baseline in Bao et al.,
INFOCOM 2018, section V. Admit every job. At each event, progressive filling over all active
jobs (running or waiting): repeatedly give one more worker, with the PS it now needs, to the
job with the smallest dominant share, placing each container round-robin on the next server
with room (:mod:`psched.placement`), until nothing more fits or every job is at its cap.
Between events the allocation, placement included, is kept.

Choices the specification leaves open, made to keep the rival strong:

* **Cap** of a job: ``min(N, ceil(remaining work))`` workers. More workers than the work left
  in a slot finish nothing sooner and only take resources from the others.
* **Dominant share**: a job's usage of each resource type over the total of that type in both
  pools together (``shares="combined"``, the specification's reading); ``"per_pool"`` treats
  the worker pool's and the PS pool's resources as distinct types instead.
* **Ties** go to the earlier arrival. A job whose next worker (or that worker's PS) does not
  fit anywhere is frozen for the rest of the event: free capacity only shrinks while filling.
* Each event places from an empty cluster (containers may move at events, as under every
  re-planning rival); both pools' cursors start at their first server.

Complexity per event: O(X (S R + log J)) for X containers placed, S servers, J active jobs.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from psched.model import Alloc, ceil_eps
from psched.placement import next_with_room
from psched.policies.base import View, register_policy
from psched.policies.replan import ReplanPolicy

__all__ = ["SHARE_MODES", "DrfPolicy", "dominant_shares"]

SHARE_MODES = ("combined", "per_pool")


def _unit_shares(capacity: np.ndarray, worker_rows: np.ndarray, ps_rows: np.ndarray,
                 w: np.ndarray, s: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Share vectors of one worker and one PS per job (J x R' each)."""
    if mode == "combined":
        tot = capacity.sum(axis=0)
        wz, sz = tot, tot
    else:
        zeros = np.zeros(capacity.shape[1])
        tot_w, tot_p = capacity[worker_rows].sum(axis=0), capacity[ps_rows].sum(axis=0)
        wz = np.concatenate([tot_w, np.full_like(zeros, np.inf)])
        sz = np.concatenate([np.full_like(zeros, np.inf), tot_p])
        w = np.concatenate([w, np.zeros_like(w)], axis=1)
        s = np.concatenate([np.zeros_like(s), s], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ws = np.where(wz > 0, w / wz, 0.0)
        ss = np.where(sz > 0, s / sz, 0.0)
    return ws, ss


def dominant_shares(workers: np.ndarray, ps: np.ndarray, worker_share: np.ndarray,
                    ps_share: np.ndarray) -> np.ndarray:
    """Dominant share of every job: ``max_r (workers w_r + ps s_r) / total_r``."""
    use = workers[:, None] * worker_share + ps[:, None] * ps_share
    return use.max(axis=1) if use.size else np.zeros(workers.shape[0])


@register_policy("drf")
class DrfPolicy(ReplanPolicy):
    """Progressive filling of dominant shares at every event."""

    name = "drf"

    def __init__(self, shares: str = "combined") -> None:
        super().__init__()
        if shares not in SHARE_MODES:
            raise ValueError(f"shares must be one of {SHARE_MODES}, got {shares!r}")
        self.shares = shares  #: how dominant shares are counted (module docstring)
        self._fills = 0

    def reset(self) -> None:
        self._fills = 0

    def replan(self, view: View) -> dict[str, Alloc]:
        statuses = list(view.active.values())
        if not statuses:
            return {}
        jobs = [st.job for st in statuses]
        w = np.array([j.spec.worker_demand.as_array() for j in jobs])
        s = np.array([j.spec.ps_demand.as_array() for j in jobs])
        ws, ss = _unit_shares(self.capacity, self.pools.worker, self.pools.ps, w, s, self.shares)
        cap = [0 if j.ps_needed(1) > 1 else min(j.max_workers, ceil_eps(st.remaining))
               for j, st in zip(jobs, statuses, strict=True)]
        n = [0] * len(jobs)
        p = [0] * len(jobs)
        w_at: list[dict[int, int]] = [{} for _ in jobs]
        p_at: list[dict[int, int]] = [{} for _ in jobs]
        free_w = self.capacity[self.pools.worker].copy()
        free_p = self.capacity[self.pools.ps].copy()
        cur_w = cur_p = 0
        heap = [(0.0, i) for i in range(len(jobs)) if cap[i] > 0]
        while heap:
            _, i = heapq.heappop(heap)
            h = next_with_room(free_w, w[i], cur_w)
            if h is None:
                continue  # frozen: its next worker fits nowhere
            need = jobs[i].ps_needed(n[i] + 1) - p[i]  # 0 or 1, as b <= B
            k = next_with_room(free_p, s[i], cur_p) if need > 0 else None
            if need > 0 and k is None:
                continue  # frozen: the PS its next worker needs fits nowhere
            free_w[h] -= w[i]
            n[i] += 1
            w_at[i][h] = w_at[i].get(h, 0) + 1
            cur_w = (h + 1) % free_w.shape[0]
            if k is not None:
                free_p[k] -= s[i]
                p[i] += 1
                p_at[i][k] = p_at[i].get(k, 0) + 1
                cur_p = (k + 1) % free_p.shape[0]
            self._fills += 1
            if n[i] < cap[i]:
                share = float(np.max(n[i] * ws[i] + p[i] * ss[i]))
                heapq.heappush(heap, (share, i))
        wi, pi = self.pools.worker, self.pools.ps
        return {
            jobs[i].job_id: Alloc.of({int(wi[h]): c for h, c in w_at[i].items()},
                                     {int(pi[k]): c for k, c in p_at[i].items()})
            for i in range(len(jobs)) if n[i] > 0
        }

    def report(self) -> dict[str, Any]:
        return {"drf_containers_placed": self._fills}
