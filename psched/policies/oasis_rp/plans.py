"""The plans of ``oasis-rp`` as data: a schedule with its container groups kept as arrays,
a search result, the plans by job with their work left.

A plan maps absolute slots to allocations (:class:`psched.core.model.Alloc`). :class:`Schedule` is
such a mapping that keeps its container groups as arrays for the plan book
(:class:`~psched.policies.oasis_rp.book.PlanLedger`), since a plan is added and taken out many
times during re-packs; :class:`Plans` holds every admitted job's plan with its worker-slots.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from psched.core.model import Alloc

__all__ = ["Found", "Plans", "Schedule", "work_of"]


class Schedule(dict[int, Alloc]):
    """A schedule (slot -> allocation) that keeps its container groups as arrays for the
    ledger's :meth:`~psched.policies.oasis_rp.book.PlanLedger.add` and ``fits`` (a plan is added
    and taken out many times during re-packs); any change to the mapping drops them."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._groups: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._distinct: dict[str, bool] = {}
        #: per role, the ledger's pool positions of the groups' servers, with the position
        #: map they were read through (:meth:`positions`)
        self._pos: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if len(args) == 1 and not kwargs and isinstance(args[0], Schedule):
            self._groups.update(args[0]._groups)  # a copy: the same items, read-only arrays
            self._distinct.update(args[0]._distinct)

    def _preset(self, role: str, slots: np.ndarray, servers: np.ndarray,
                counts: np.ndarray) -> None:
        """Keep the container groups of ``role`` as built from arrays (each (slot, server)
        once, in slot then server order: what :meth:`groups` would build from the items)."""
        got = tuple(np.ascontiguousarray(a, dtype=np.int64) for a in (slots, servers, counts))
        for a in got:
            a.flags.writeable = False
        self._groups[role] = got  # type: ignore[assignment]
        self._distinct[role] = True
        self._pos.pop(role, None)

    def work(self, since: int = 0) -> int:
        """Worker-slots in slots ``>= since`` (as :func:`psched.policies.oasis_rp.book.work_of`)."""
        ts, _, cnt = self.groups("workers")
        return int(cnt[ts >= since].sum())

    def groups(self, role: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slot, server index, count) of every container group of ``role`` ("workers" or
        "ps"), in the order of the slots and pairs; read-only arrays. O(entries) once."""
        got = self._groups.get(role)
        if got is None:
            rows = [(t, h, c) for t, alloc in self.items() for h, c in getattr(alloc, role)]
            arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
            got = (arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy())
            for a in got:
                a.flags.writeable = False
            self._groups[role] = got
            keys = arr[:, 0] * (int(arr[:, 1].max(initial=0)) + 1) + arr[:, 1]
            self._distinct[role] = np.unique(keys).size == keys.size
        return got

    def positions(self, role: str, pos_map: np.ndarray) -> np.ndarray:
        """``pos_map`` read at the servers of :meth:`groups` ``(role)`` (the ledger's pool
        positions), kept until the mapping or ``pos_map`` changes. O(entries) once."""
        got = self._pos.get(role)
        if got is not None and got[0] is pos_map:
            return got[1]
        srv = self.groups(role)[1]
        pos = np.ascontiguousarray(pos_map[srv], dtype=np.int64)
        self._pos[role] = (pos_map, pos)
        return pos

    def distinct(self, role: str) -> bool:
        """Every (slot, server) pair of ``role`` appears once (as ``Alloc.of`` builds them),
        so a scatter-add needs no accumulation of repeats."""
        self.groups(role)
        return self._distinct[role]

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles carry the items only (each copy builds its own arrays)."""
        return (type(self), (dict(self),))

    def _changed(self) -> None:
        self._groups.clear()
        self._distinct.clear()
        self._pos.clear()

    def __setitem__(self, key: int, value: Alloc) -> None:
        self._changed()
        super().__setitem__(key, value)

    def __delitem__(self, key: int) -> None:
        self._changed()
        super().__delitem__(key)

    def pop(self, *args: Any) -> Any:
        if args and args[0] in self:  # one slot out (a boundary): its groups out, in order
            for role, (ts, srv, cnt) in list(self._groups.items()):
                if self._distinct[role]:
                    keep = ts != args[0]
                    self._preset(role, ts[keep], srv[keep], cnt[keep])
                else:
                    del self._groups[role], self._distinct[role]
                    self._pos.pop(role, None)
        return super().pop(*args)

    def popitem(self) -> tuple[int, Alloc]:
        self._changed()
        return super().popitem()

    def clear(self) -> None:
        self._changed()
        super().clear()

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().update(*args, **kwargs)

    def setdefault(self, *args: Any) -> Any:
        self._changed()
        return super().setdefault(*args)

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]
        self._changed()
        return super().__ior__(other)


@dataclass(frozen=True, kw_only=True)
class Found:
    """A search result: the schedule by absolute slot (empty if none) and its payoff."""

    payoff: float  #: best payoff in cost units (the floor if nothing beat it)
    schedule: dict[int, Alloc]  #: slot -> allocation; empty if nothing beat the floor

    @property
    def completion(self) -> int | None:
        """Last slot with workers, or None."""
        return max(self.schedule) if self.schedule else None




def work_of(schedule: Mapping[int, Alloc], since: int = 0) -> int:
    """Worker-slots a schedule does in slots ``>= since``. O(entries)."""
    if isinstance(schedule, Schedule):
        return schedule.work(since)
    return sum(a.n_workers for t, a in schedule.items() if t >= since)


class Plans(dict[str, dict[int, Alloc]]):
    """Plans by job, with each plan's worker-slots kept alongside (``left``)."""

    def __init__(self) -> None:
        super().__init__()
        self.left: dict[str, int] = {}  #: job -> worker-slots its plan does

    def __setitem__(self, key: str, value: dict[int, Alloc]) -> None:
        super().__setitem__(key, value)
        self.left[key] = work_of(value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.left.pop(key, None)

    def pop(self, key: str, *default: Any) -> Any:
        self.left.pop(key, None)
        return super().pop(key, *default)
