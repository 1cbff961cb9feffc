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
step        ``v_k`` for the first step ``(t_k, v_k)`` with ``d <= t_k``, 0 after the last
==========  ===========================================================================

A ``step`` utility is a trace's own value at given completion times (Chronus's
``expect_time_list`` / ``expect_value_list``): ``steps`` holds the pairs ``(t_k, v_k)``, times
in slots strictly increasing and values strictly decreasing; ``value`` is ``v_1`` (the most it
pays) and ``target`` is the last time ``t_K``, so a step utility with one step is exactly a
``deadline`` one. Every other kind has no steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: parsing a job file needs no numpy
    import numpy as np

__all__ = ["ALL_KINDS", "STEP_KIND", "UTILITY_KINDS", "Utility", "expit", "format_steps",
           "make_utility", "parse_steps", "step_utility"]

#: The kinds given by the three numbers ``value``, ``decay``, ``target``.
UTILITY_KINDS: tuple[str, ...] = ("sigmoid", "constant", "linear", "deadline")
#: The kind given by its ``steps`` (a trace's own values at completion times).
STEP_KIND = "step"
#: Every kind a :class:`Utility` may have.
ALL_KINDS: tuple[str, ...] = (*UTILITY_KINDS, STEP_KIND)


@dataclass(frozen=True, kw_only=True)
class Utility:
    """A non-increasing utility of the duration in slots."""

    kind: str  #: one of :data:`ALL_KINDS`
    value: float  #: maximum utility (the paper's priority gamma1)
    decay: float = 0.0  #: steepness gamma2 (sigmoid) or loss per late slot (linear)
    target: float = 0.0  #: target duration gamma3 / deadline, slots
    steps: tuple[tuple[float, float], ...] = ()  #: (slots, value) pairs of a step utility

    def __post_init__(self) -> None:
        if self.kind not in ALL_KINDS:
            raise ValueError(f"utility kind must be one of {ALL_KINDS}, got {self.kind!r}")
        for name in ("value", "decay", "target"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"utility {name} must be finite and >= 0, got {v!r}")
        if self.steps or self.kind == STEP_KIND:
            object.__setattr__(self, "steps", _checked_steps(self))
        elif type(self.steps) is not tuple:  # an empty list from JSON reads back equal
            object.__setattr__(self, "steps", ())

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
        if kind == "step":
            return next((v for t, v in self.steps if x <= t), 0.0)
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
        elif self.kind == "step":
            times = np.array([t for t, _ in self.steps])
            values = np.array([v for _, v in self.steps] + [0.0])
            out = values[np.searchsorted(times, x, side="left")]
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


def step_utility(steps: Any) -> Utility:
    """The ``step`` utility of ``(slots, value)`` pairs (times increasing, values decreasing).

    >>> u = step_utility([(3, 10.0), (6, 4.0)])
    >>> [u(d) for d in (1, 3, 4, 6, 7)]
    [10.0, 10.0, 4.0, 4.0, 0.0]
    """
    pairs = tuple((float(t), float(v)) for t, v in steps)
    if not pairs:
        raise ValueError("a step utility needs at least one step")
    return Utility(kind="step", value=pairs[0][1], target=pairs[-1][0], steps=pairs)


def format_steps(steps: tuple[tuple[float, float], ...]) -> str:
    """``steps`` as text, ``t1:v1;t2:v2`` (floats as ``repr``: read back equal)."""
    return ";".join(f"{t!r}:{v!r}" for t, v in steps)


def parse_steps(text: str) -> tuple[tuple[float, float], ...]:
    """The inverse of :func:`format_steps`; ``ValueError`` on malformed text."""
    pairs = []
    for part in text.split(";"):
        t, sep, v = part.partition(":")
        if not sep:
            raise ValueError(f"a step is SLOTS:VALUE, got {part.strip()!r}")
        pairs.append((float(t), float(v)))
    return tuple(pairs)


def _checked_steps(u: Utility) -> tuple[tuple[float, float], ...]:
    """``u.steps`` as a tuple of float pairs, checked against the kind, value and target."""
    if u.kind != "step":
        raise ValueError(f"only a step utility has steps, got kind {u.kind!r}")
    pairs = tuple((float(t), float(v)) for t, v in u.steps)
    if not pairs:
        raise ValueError("a step utility needs at least one step")
    for i, (t, v) in enumerate(pairs):
        if not (math.isfinite(t) and math.isfinite(v) and t >= 0 and v >= 0):
            raise ValueError(f"utility step {i}: slots and value must be finite and >= 0")
        if i and not (t > pairs[i - 1][0] and v < pairs[i - 1][1]):
            raise ValueError(f"utility step {i}: times must increase and values decrease")
    if u.value != pairs[0][1] or u.target != pairs[-1][0] or u.decay != 0.0:
        raise ValueError("a step utility's value is its first step's, its target its last "
                         "step's time, and its decay 0")
    return pairs
