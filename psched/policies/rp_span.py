"""A cap on how steep OASiS's prices are: the ``price_span`` lever of ``oasis-rp``.

A price runs from ``L`` at zero load to ``U`` at full load, ``p(u) = L (U/L)^u``; with the
hindsight bounds of section 3 of ``oasis.md`` the span ``ln(U/L)`` is 32-37 on the oasis-paper
and ElasticFlow traces, so a server costs almost nothing until it is nearly full (at 60% load
``p`` is still ``e^-13`` of ``U``): a job of low value per unit of the cluster is admitted
whenever room is left, and its promise then holds the room. Capping the span at ``s`` raises
the floor to ``L' = max(L, U_min e^-s)`` (``U_min`` the smallest ``U`` of the pool), so prices
charge sooner, the same way on every trace whatever its units or values (a fixed factor on
``L`` does not: ``floor_factor=1e9`` leaves the oasis-paper span at 16 and the Fig. 5 spans,
13-25, near 0, where every job is priced out). Theorem 4's guarantee assumes the hindsight
``L``; the certificate stays valid (weak duality holds for any non-negative prices).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from psched.prices import PriceParams

__all__ = ["cap_span"]


def cap_span(params: PriceParams, span: float) -> PriceParams:
    """``params`` with each pool's floor raised so that ``ln(U_min / L) <= span``.

    Raises
    ------
    ValueError
        ``span`` is not positive and finite.
    """
    if not (span > 0 and math.isfinite(span)):
        raise ValueError(f"price_span must be positive, got {span!r}")
    ll = tuple(max(lo, float(np.min(u)) - span)
               for u, lo in zip(params.log_u, params.log_l, strict=True))
    return replace(params, log_l=(ll[0], ll[1]))
