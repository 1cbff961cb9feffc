"""The rival policies, placement and loop as they were before issue 18 (frozen copies).

Used only by ``tests/test_policy_equivalence.py`` (every allocation of the new implementation
equals the old one's) and by ``benchmarks/bench_scale.py`` (before/after in one run). Nothing
here is registered as a policy; :data:`LEGACY` maps a policy name to its old class.
Do not edit these files except to keep them importable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from legacy_policies.drf import DrfPolicy
from legacy_policies.fifo import FifoPolicy
from legacy_policies.greedy import GreedyFillPolicy, GreedyGainPolicy
from legacy_policies.optimus import OptimusPolicy
from legacy_policies.rrh import RrhPolicy
from legacy_policies.srtf import SrtfPolicy

__all__ = ["LEGACY", "make_legacy"]

#: Policy name -> the old implementation's class.
LEGACY: dict[str, Callable[..., Any]] = {
    "fifo": FifoPolicy, "drf": DrfPolicy, "srtf": SrtfPolicy, "rrh": RrhPolicy,
    "optimus": OptimusPolicy, "greedy-fill": GreedyFillPolicy, "greedy-gain": GreedyGainPolicy,
}


def make_legacy(name: str, **options: Any) -> Any:
    """A fresh old-implementation policy by name."""
    return LEGACY[name](**options)
