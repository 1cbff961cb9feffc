"""One cell of a sweep: a policy, a seed, a load factor and a cluster scale. Below both the
sweep driver (:mod:`psched.runs.sweep`) and the order it runs cells in
(:mod:`psched.runs.sweep_order`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SweepCell"]


@dataclass(frozen=True, kw_only=True)
class SweepCell:
    """One simulation of a sweep."""

    policy: str  #: policy name
    seed: int  #: seed
    load: float  #: load factor
    scale: float  #: cluster scale

    @property
    def key(self) -> str:
        """File-name-safe identity of the cell."""
        return f"{self.policy}_s{self.seed}_l{self.load:g}_c{self.scale:g}"
