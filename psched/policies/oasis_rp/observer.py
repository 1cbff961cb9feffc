"""The one hook through which tests and benchmarks watch ``oasis-rp`` decide.

:class:`Observer` is what :attr:`~psched.policies.oasis_rp.OasisRpPolicy.observer` takes: a
policy with none (the default) times and reports nothing. Subclass it and override the
events you want; each is called synchronously, inside the decision, and must not change the
policy.
"""

from __future__ import annotations

__all__ = ["Observer"]


class Observer:
    """Events of an ``oasis-rp`` run; every method does nothing unless overridden."""

    def decided(self, job_id: str, cpu_s: float) -> None:
        """A job of a boundary's batch was decided, taking ``cpu_s`` CPU seconds of its own
        (the ordering and the boundary's upkeep are not in them)."""

    def queued(self, t: int, job_id: str, outcome: str) -> None:
        """The queue took a held or uncommitted job at the boundary of slot ``t``, with
        ``outcome`` (:data:`~psched.policies.oasis_rp.queue.OUTCOMES`)."""
