"""Dynamic mini-batch SGD: the learning-rate scale when the number of workers changes.

With a fixed per-worker batch, going from ``old`` to ``new`` workers multiplies the total batch
by ``k = new / old``. The linear-scaling rule multiplies the learning rate by ``k`` at once;
with momentum that is harmful, because the buffer holds gradients of the old batch size.
Dynamic SGD [1]_ ramps the scale linearly over ``T`` steps instead::

    gamma_t = 1 + ((t - t0) / T) (k - 1)   while t - t0 < T;   gamma_t = k afterwards,

relative to the scale in force before the change (``T = 8`` works well in practice [1]_).

Our reading (``shared/papers/dynamic_sgd.md``):

* **Steps.** ``t`` counts optimizer updates; ``on_resize(old, new, t0)`` means update ``t0``
  is the first one computed with the new worker count. So ``scale(t0)`` is still the old
  scale under ``"dynamic"`` (gamma = 1) and the new one under ``"linear"``.
* **LR outside the buffer** (``u = mu u + g; w -= eta_t u``): ``eta_t = scale(t) * eta``; the
  buffer is left alone.
* **LR inside the buffer** (``v = mu v + eta_t g; w -= v``): the buffer is multiplied by
  :meth:`LRScaleSchedule.buffer_factor` ``= scale(t) / scale(t - 1)`` before update ``t``; the
  factors telescope to ``k``, and both forms then give identical iterates, under every rule.
* **Scale-down** (``k < 1``) ramps down the same way.
* **A change inside a ramp** restarts the ramp from the scale in force at the new change,
  towards the previous *target* times the new ``k``: the target always equals the linear-rule
  scale of the current worker count (``target = prod k``), whatever the interruptions. With no
  ramp in progress this is exactly ``scale_before * gamma_t``. Two changes at the same step
  compose (the second sees the first's start and target).
* **Asynchronous mode.** A step is one *applied push*: the parameter server (each shard,
  counting the pushes it applied) advances ``t`` by one per gradient it applies, so the ramp
  lasts ``T`` applied pushes. The total batch of one update stays one worker's batch there;
  ``k`` is still the ratio of worker counts (the rate of updates grows by ``k``), and the
  runtime may prefer ``rule="none"`` for asynchronous jobs.

Everything is a pure function of the recorded changes: replaying the same ``on_resize`` calls
gives the same scales, which is what a restarted or re-sharded parameter server needs.

References
----------
.. [1] H. Lin, H. Zhang, Y. Ma, T. He, Z. Zhang, S. Zha, M. Li, "Dynamic Mini-batch SGD for
   Elastic Distributed Training: Learning in the Limbo of Resources", arXiv 1904.12043, 2019.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

__all__ = ["RULES", "LRScaleSchedule", "Ramp"]

RULES: tuple[str, ...] = ("dynamic", "linear", "none")


@dataclass(frozen=True, kw_only=True)
class Ramp:
    """One recorded change of the worker count."""

    step: int                   #: t0, the first update computed with the new worker count
    start: float                #: scale in force at t0 before the change
    target: float               #: scale reached after the ramp (linear-rule scale)


class LRScaleSchedule:
    """Learning-rate scale under a changing number of workers (Lin et al. 2019).

    Parameters
    ----------
    rule
        ``"dynamic"``: linear ramp over ``ramp_steps`` updates; ``"linear"``: jump to ``k`` at
        once; ``"none"``: always 1.
    ramp_steps
        ``T`` of the paper (default 8).

    Notes
    -----
    :meth:`on_resize` is O(1) amortised; :meth:`scale` is O(log r) for r recorded changes.

    Examples
    --------
    >>> s = LRScaleSchedule(rule="dynamic", ramp_steps=4)
    >>> s.on_resize(1, 5, step=10)
    >>> [s.scale(t) for t in range(9, 16)]
    [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 5.0]
    """

    def __init__(self, rule: str = "dynamic", ramp_steps: int = 8) -> None:
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        if ramp_steps < 1:
            raise ValueError(f"ramp_steps must be >= 1, got {ramp_steps}")
        self.rule = rule
        self.ramp_steps = ramp_steps
        self._ramps: list[Ramp] = []

    def __repr__(self) -> str:
        return (f"LRScaleSchedule(rule={self.rule!r}, ramp_steps={self.ramp_steps}, "
                f"ramps={self._ramps!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LRScaleSchedule) and self.to_dict() == other.to_dict()

    @property
    def ramps(self) -> tuple[Ramp, ...]:
        """The recorded changes, in order."""
        return tuple(self._ramps)

    @property
    def target(self) -> float:
        """Scale reached once the current ramp ends (1.0 before any change)."""
        if self.rule == "none" or not self._ramps:
            return 1.0
        return self._ramps[-1].target

    def on_resize(self, old_workers: int, new_workers: int, step: int) -> None:
        """Record that update ``step`` is the first computed with ``new_workers`` workers.

        Raises ``ValueError`` for non-positive counts or a step before the last change.
        """
        if old_workers < 1 or new_workers < 1:
            raise ValueError(f"worker counts must be >= 1, got {old_workers} -> {new_workers}")
        if step < 0 or (self._ramps and step < self._ramps[-1].step):
            last = self._ramps[-1].step if self._ramps else 0
            raise ValueError(f"resize at step {step} is before the last change ({last})")
        if self.rule == "none" or old_workers == new_workers:
            return
        start = self.scale(step)
        target = self.target * (new_workers / old_workers)
        self._ramps.append(Ramp(step=step, start=start, target=target))

    def scale(self, step: int) -> float:
        """Multiplier of the base learning rate at update ``step``."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if self.rule == "none" or not self._ramps:
            return 1.0
        # last ramp with ramp.step <= step (later entries win on equal steps)
        i = bisect.bisect_right([r.step for r in self._ramps], step) - 1
        if i < 0:
            return 1.0
        r = self._ramps[i]
        elapsed = step - r.step
        if self.rule == "linear" or elapsed >= self.ramp_steps:
            return r.target
        return r.start + elapsed * (r.target - r.start) / self.ramp_steps

    def buffer_factor(self, step: int) -> float:
        """``scale(step) / scale(step - 1)``: multiply an LR-inside buffer by it before update
        ``step`` (1.0 at step 0)."""
        return 1.0 if step == 0 else self.scale(step) / self.scale(step - 1)

    def factors(self, step: int) -> tuple[float, float]:
        """``(lr_scale, buffer_factor)`` for update ``step``, as ``MomentumSGD.update`` takes."""
        return self.scale(step), self.buffer_factor(step)

    # -- checkpoints -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-able) that :meth:`from_dict` turns back into this schedule."""
        return {"rule": self.rule, "ramp_steps": self.ramp_steps,
                "ramps": [[r.step, r.start, r.target] for r in self._ramps]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LRScaleSchedule:
        """Inverse of :meth:`to_dict`."""
        out = cls(rule=data["rule"], ramp_steps=int(data["ramp_steps"]))
        out._ramps = [Ramp(step=int(s), start=float(a), target=float(b))
                      for s, a, b in data["ramps"]]
        return out
