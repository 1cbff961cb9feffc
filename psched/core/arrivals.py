"""Where a loop's jobs and time come from: a trace or a queue filled while the loop runs
(:class:`ArrivalSource`), and simulated or wall-clock time (:class:`Clock`)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from typing import Protocol

from psched.core.model import JobSpec

__all__ = [
    "ArrivalSource",
    "Clock",
    "QueueArrivals",
    "SimClock",
    "TraceArrivals",
    "WallClock",
]


class ArrivalSource(Protocol):
    """Where jobs come from."""

    def pop(self, t: int) -> list[JobSpec]:
        """Jobs arriving in slot ``t`` (and any earlier one not yet popped), in order."""
        ...

    def pending(self) -> bool:
        """True while more jobs may come."""
        ...


class TraceArrivals:
    """Arrivals replayed from a list of job specs (stably sorted by arrival)."""

    def __init__(self, specs: Iterable[JobSpec]) -> None:
        self._queue = deque(sorted(specs, key=lambda s: s.arrival))

    def pop(self, t: int) -> list[JobSpec]:
        out: list[JobSpec] = []
        while self._queue and self._queue[0].arrival <= t:
            out.append(self._queue.popleft())
        return out

    def pending(self) -> bool:
        return bool(self._queue)


class QueueArrivals:
    """Arrivals pushed while the loop runs (a live service); ``close`` ends the stream."""

    def __init__(self) -> None:
        self._queue: deque[JobSpec] = deque()
        self._closed = False

    def push(self, spec: JobSpec) -> None:
        self._queue.append(spec)

    def close(self) -> None:
        self._closed = True

    def pop(self, t: int) -> list[JobSpec]:
        out = list(self._queue)
        self._queue.clear()
        return out

    def pending(self) -> bool:
        return bool(self._queue) or not self._closed


class Clock(Protocol):
    """When slot ``t`` begins."""

    def wait_until(self, t: int) -> None:
        """Return once slot ``t`` has begun."""
        ...


class SimClock:
    """Simulated time: every slot begins at once."""

    def wait_until(self, t: int) -> None:
        return None


class WallClock:
    """Real time: slot ``t`` begins ``t * slot_seconds`` after ``start`` (``time.time()``)."""

    def __init__(self, slot_seconds: float, start: float | None = None) -> None:
        self.slot_seconds = slot_seconds
        self.start = time.time() if start is None else start

    def slot_now(self) -> int:
        """The slot the wall clock is in now."""
        return int((time.time() - self.start) // self.slot_seconds)

    def wait_until(self, t: int) -> None:
        delay = self.start + t * self.slot_seconds - time.time()
        if delay > 0:
            time.sleep(delay)
