"""A density guard on re-packs: the ``repack_quantile`` lever of ``oasis-rp``.

A re-pack (lever (a)) moves admitted jobs within their promises to make room for an arrival
that finds none; with ``repack_late`` the moved jobs are re-planned to complete as late as
their promises allow. It is kept whenever the newcomer is admitted and the planned utility of
the jobs involved rises, so the newcomer's value per unit of capacity never enters: on
ElasticFlow 195job (mapping seed 0) a job worth 9.2 that asks for the whole 32-GPU cluster
for 8 slots (234 worker-slots, density 1.3 where the trace's median is 110) is admitted by a
re-pack in slot 29 and runs on up to 28 GPUs in slots 29-36 and up to 32 in 45-48 while the
arrivals of slots 29-59, short and dense, find no room (BENCHMARKS section 11, "Other
mapping draws"). The density floor (``density_floor``) does not see it: on these
traces the clearing density is 0 (the trace's jobs fit the horizon; congestion is local).

With ``repack_quantile = q > 0`` a re-pack is tried only for an arrival whose density
(:func:`psched.policies.rp_batch.density`) is at least the ``q``-quantile of the price
jobs' densities (hindsight or history, as the prices and the floor). The arrival is still
searched and admitted on its own schedule if it finds one; only the moving of others for it
is withheld. Promises are untouched (a re-pack that is not tried changes nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from psched.model import Cluster, Job
from psched.policies.rp_batch import FitCounts, density

__all__ = ["density_quantile"]


def density_quantile(jobs: Sequence[Job], cluster: Cluster, q: float) -> float:
    """The ``q``-quantile (numpy's linear rule) of ``jobs``' densities on ``cluster``; 0 for
    no jobs or ``q <= 0``. The container counts are computed once per distinct demand
    (:class:`~psched.policies.rp_batch.FitCounts`). O(D S R + J log J) for D demands."""
    if q <= 0.0 or not jobs:
        return 0.0
    fits = FitCounts(cluster)
    return float(np.quantile(np.array([density(j, cluster, fits) for j in jobs]), q))
