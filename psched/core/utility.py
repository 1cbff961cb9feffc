"""Utility functions f(d) of a job's duration d (slots from arrival through completion).

Every utility is non-negative and non-increasing in d, vectorised over numpy arrays, and
described by one kind and three numbers, as in the native trace format:
``utility`` (kind), ``value``, ``decay``, ``target``.

==========  ===========================================================================
kind        f(d)
==========  ===========================================================================
sigmoid     ``value / (1 + exp(decay * (d - target)))`` (the paper's gamma1, gamma2, gamma3)
constant    ``value``
linear      ``value`` up to ``target``, then falling by ``decay`` per slot, floored at 0
deadline    ``value`` up to ``target``, 0 after
==========  ===========================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: parsing a job file needs no numpy
    import numpy as np

__all__ = ["UTILITY_KINDS", "Utility", "expit", "make_utility"]

UTILITY_KINDS: tuple[str, ...] = ("sigmoid", "constant", "linear", "deadline")


@dataclass(frozen=True, kw_only=True)
class Utility:
    """A non-increasing utility of the duration in slots."""

    kind: str  #: one of :data:`UTILITY_KINDS`
    value: float  #: maximum utility (the paper's priority gamma1)
    decay: float = 0.0  #: steepness gamma2 (sigmoid) or loss per late slot (linear)
    target: float = 0.0  #: target duration gamma3 / deadline, slots

    def __post_init__(self) -> None:
        if self.kind not in UTILITY_KINDS:
            raise ValueError(f"utility kind must be one of {UTILITY_KINDS}, got {self.kind!r}")
        for name in ("value", "decay", "target"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"utility {name} must be finite and >= 0, got {v!r}")

    def __call__(self, d: Any) -> Any:
        """f(d) for a duration or an array of durations (slots). A Python or numpy integer
        takes :meth:`scalar` (the same float, a fraction of the cost)."""
        if isinstance(d, int):
            return self.scalar(d)
        import numpy as np

        if isinstance(d, np.integer):
            return self.scalar(d)
        return self.reference(d)

    def scalar(self, d: int | float | np.integer[Any]) -> float:
        """f(d) for one duration: the same float operations as :meth:`reference` on a 0-d
        array, on Python floats (IEEE double ``+ - * /`` round alike), with the exponential
        taken by the same numpy ufunc on one element (so the same ``exp`` loop: numpy's and
        the C library's ``exp`` may differ in the last bit). O(1)."""
        x = float(d)
        kind = self.kind
        if kind == "sigmoid":
            import numpy as np

            a = -self.decay * (x - self.target)
            z = float(np.exp(-abs(a)))
            return self.value * (1.0 / (1.0 + z) if a >= 0 else z / (1.0 + z))
        if kind == "constant":
            return self.value
        if kind == "linear":
            return max(self.value - self.decay * max(x - self.target, 0.0), 0.0)
        return self.value if x <= self.target else 0.0  # deadline

    def reference(self, d: Any) -> Any:
        """f(d) for a duration or an array of durations, on numpy arrays (the reference
        :meth:`scalar` is tested against)."""
        import numpy as np

        x = np.asarray(d, dtype=float)
        if self.kind == "sigmoid":
            out = self.value * expit(-self.decay * (x - self.target))
        elif self.kind == "constant":
            out = np.full_like(x, self.value)
        elif self.kind == "linear":
            out = np.clip(self.value - self.decay * np.maximum(x - self.target, 0.0), 0.0, None)
        else:  # deadline
            out = np.where(x <= self.target, self.value, 0.0)
        return float(out) if np.ndim(out) == 0 else out


def expit(x: np.ndarray) -> np.ndarray:
    """The logistic function ``1 / (1 + exp(-x))`` without overflow (numpy only: this module is
    imported by every Ray worker, which should not pay for importing scipy)."""
    import numpy as np

    z = np.exp(-np.abs(x))
    return np.asarray(np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z)))


def make_utility(kind: str, value: float, decay: float = 0.0, target: float = 0.0) -> Utility:
    """Build a utility from the four native-format fields."""
    return Utility(kind=kind, value=float(value), decay=float(decay), target=float(target))
