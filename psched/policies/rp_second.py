"""A bank on the second order of re-packs: the ``repack_second_bank`` lever of ``oasis-rp``.

A re-pack (lever (a)) first places the newcomer's best schedule and fits the moved jobs
around it (the *first order*); when some job then finds no schedule within its promise, the
*second order* re-plans every moved job as late as its promise allows and searches the
newcomer again (``repack_second="all"``). Where capacity is scarce for long, the second
order rarely ends in a re-pack that is kept, and every search it ran is undone.

Measured on the 80,000-job Philly-like trace (first 32,190 arrivals, 120 CPU s, main
a4d43ce; BENCHMARKS section 11, "Session 10 (task 10c)"): of 14,708 re-packs tried, 12,269
failed, and 12,182 of those failed in the second order (it ran 12,851 times and was kept
669 times: 5 %), costing 34 of the run's 120 CPU s. Only 10 failed before it (the newcomer
found no room even with every candidate out). So an exact "fails before it runs" test
cannot cut this waste while keeping the same decisions: the slot bank (``effort_slots``)
binds at that scale and is debited the slots each failed re-pack searched, and which
searches a second order runs (and where it fails: a moved job finds no room, the newcomer
finds none, or the planned utility does not rise) is known only by running it.

This bank is the decision-changing rule that takes the waste out: it holds second-order
*attempts*, is credited ``per_arrival`` at every arrival decided, is held at most ``cap``
(full where a run starts), and is debited one attempt for each second order that ends in
a re-pack undone (a kept one costs nothing). When it holds less than one attempt, the
second order is skipped (as with ``repack_second="off"``) and the skip is counted. Counts
only, never the clock: the same seed, the same run. Where second orders mostly succeed or
are rare (every row of BENCHMARKS section 10 but the trace-scale runs) it never binds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from psched.policies.rp_effort import Bank

__all__ = ["SECOND_CAP", "SecondBank"]

#: second-order attempts banked at most, and at the start of a run
SECOND_CAP = 200.0


@dataclass(kw_only=True)
class SecondBank(Bank):
    """The bank of second-order attempts of one run (mutable: it follows the run)."""

    OPTION: ClassVar[str] = "repack_second_bank"
    CAP_OPTION: ClassVar[str] = "repack_second_cap"
    SKIPPED: ClassVar[str] = "second_skipped"

    cap: float = SECOND_CAP  #: most attempts banked
    counts: dict[str, int] = field(default_factory=lambda: {
        "second_tried": 0, "second_kept": 0, "second_skipped": 0})

    def runs(self) -> bool:
        """True if a second order may run now (the bank holds one attempt); else the skip
        is counted. O(1)."""
        return self.allows(1.0)

    def done(self, kept: bool) -> None:
        """A second order ran: counted; one attempt debited unless its re-pack was
        ``kept``. O(1)."""
        self.counts["second_tried"] += 1
        if kept:
            self.counts["second_kept"] += 1
        else:
            self.bank -= 1.0
