"""When a job still waiting or running is expected to start and finish, and why it waits.

The same answer everywhere a user asks it (``psched status``, the live page, ``jobs.csv`` of
a run that ended with jobs unfinished), from the plans as they stand:

* a **held** job (deferred admission) has no plan: it waits for a schedule whose utility
  beats its priced cost, searched again at each boundary while its window is open;
* a job running **in the background** has no plan either: it runs on the capacity the plans
  leave idle until it completes;
* a job with a **plan** (the schedule a committing policy committed, or a revising policy's
  current plan) is expected to start at the plan's first slot (now, if it is running) and
  to finish at its last;
* any other admitted job (not promised yet, or of a policy that plans slot by slot) waits
  for room the plans leave.

Slots are the scheduler's; ``None`` where the plans do not tell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from psched.core.model import Alloc

__all__ = ["WAITS_BACKGROUND", "WAITS_ENDED", "WAITS_HELD", "WAITS_ROOM", "Eta", "eta"]

#: why a held job waits
WAITS_HELD = ("held: no schedule pays its priced cost yet; searched again at each boundary "
              "while its window is open")
#: why a job in the background has no expected finish
WAITS_BACKGROUND = "no plan pays: runs on idle capacity until done"
#: why an admitted job without a plan waits
WAITS_ROOM = "admitted, not promised yet: runs when the plans leave room"
#: why a job unfinished at the end of a finite run has no expected finish
WAITS_ENDED = "the run ended before it completed"


@dataclass(frozen=True, kw_only=True)
class Eta:
    """A waiting or running job's expected start and finish slots and why it waits."""

    start: int | None = None  #: expected first slot with workers (now if running)
    finish: int | None = None  #: expected completion slot
    waits: str = ""  #: why it waits; empty when it is running or nothing holds it

    def as_dict(self) -> dict[str, int | str | None]:
        """``eta_start``, ``eta_finish``, ``waits``: the fields as ``status`` shows them."""
        return {"eta_start": self.start, "eta_finish": self.finish, "waits": self.waits}


def eta(now: int, plan: Mapping[int, Alloc] | None, *, held: bool = False,
        background: bool = False, running: bool = False) -> Eta:
    """The :class:`Eta` of an unfinished job at the boundary of slot ``now`` (module
    docstring): ``plan`` its current plan (slot -> allocation; slots before ``now`` are
    ignored), ``held``/``background``/``running`` what it is doing. O(plan entries)."""
    if held:
        return Eta(waits=WAITS_HELD)
    if background:
        return Eta(waits=WAITS_BACKGROUND)
    ahead = [s for s, a in (plan or {}).items() if s >= now and a.n_workers]
    if ahead:
        first = min(ahead)
        return Eta(start=now if running else first, finish=max(ahead),
                   waits="" if running else f"planned from slot {first}")
    return Eta(waits=WAITS_ROOM)

