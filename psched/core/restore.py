"""Rebuilding the loop's state from a live service's journal
(:meth:`Restoring.restore`), a part of :class:`~psched.core.loop.SchedulerLoop`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from psched.core.model import Alloc, Job, SlotPlan
from psched.core.records import ActiveStatuses, LoopState

__all__ = ["Restoring"]


class Restoring:
    """:meth:`restore`, over the loop's state."""

    state: LoopState
    background: list[str]
    schedules: dict[str, dict[int, Alloc]]
    _statuses: ActiveStatuses

    record: Callable[[int, SlotPlan, Mapping[str, Job]], None]  #: the loop's
    expire_held: Callable[[int], list[str]]  #: the loop's (:class:`HeldAdmission`)

    def restore(self, *, slots: Iterable[tuple[int, SlotPlan]] = (),
                done: Mapping[str, float] | None = None,
                completed: Mapping[str, int] | None = None,
                dropped: Mapping[str, str] | None = None) -> None:
        """Rebuild the state of finished slots from a journal, after its decisions were
        re-applied with :meth:`admit` (and :meth:`replan`): the executed ``slots`` (slot,
        plan) in order, each job's work ``done``, ``completed`` jobs (their slot) and
        ``dropped`` ones (their reason). The next slot is the one after the last executed;
        held jobs whose window closed before it are rejected now (:meth:`expire_held`), as
        that slot's boundary would have."""
        st = self.state
        for t, plan in slots:
            self.record(t, plan, {j: st.records[j].job for j in plan})
            st.t = t + 1
            st.slots_run += 1
        for job_id, amount in (done or {}).items():
            st.records[job_id].done = amount
        for job_id, slot in (completed or {}).items():
            st.records[job_id].completion = slot
            if job_id in st.active:
                st.active.remove(job_id)
        for job_id, reason in (dropped or {}).items():
            st.records[job_id].reason = reason
            if job_id in st.active:
                st.active.remove(job_id)
        st.arrived.clear()
        st.completed_last = []
        self.background = [j for j in self.background if j in st.active]
        self.schedules = {j: sc for j, sc in self.schedules.items() if j in st.active}
        self.expire_held(st.t)
        self._statuses = ActiveStatuses()  # records changed wholesale: rebuild the View
