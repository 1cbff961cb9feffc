"""The horizon of a trace run without ``--slots`` (``oasis.md`` section 7, "A job's window").

T = max over jobs of (arrival + min(utility-floor duration, max(10 * fastest, 50))): the old
window cap now only sizes the default horizon. Every job's window then extends to T where its
utility allows (:func:`psched.core.model.resolve_job`); no window is capped by default. Slots are
0..T-1. ``psched simulate``, ``psched run`` and ``psched ratio`` share this rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from psched.core.errors import InputError
from psched.core.model import (
    WINDOW_FASTEST_FACTOR,
    WINDOW_MIN_SLOTS,
    WINDOW_UTILITY_FLOOR,
    JobSpec,
    ceil_eps,
    window_length,
)

__all__ = ["MAX_HORIZON_SLOTS", "trace_horizon"]

#: Largest horizon this project will simulate; a trace needing more is refused as malformed
#: (a slot too short for its jobs) instead of exhausting memory.
MAX_HORIZON_SLOTS = 1_000_000


def trace_horizon(specs: Iterable[JobSpec], slot_seconds: float,
                  max_window: int | None = None) -> int:
    """Number of slots T a run of ``specs`` needs: max over jobs of (arrival + window).

    Parameters
    ----------
    specs : iterable of JobSpec
        The trace.
    slot_seconds : float
        Slot length, seconds (sets each job's work W and fastest duration ceil(W/N)).
    max_window : int, optional
        Explicit cap on every window, slots (an experiment option); it then sizes T in place
        of the default ``max(10 * fastest, 50)`` per job, which sizes T only and caps no
        window.

    Returns
    -------
    int
        T; 0 for an empty trace.

    Raises
    ------
    InputError
        If ``slot_seconds`` or ``max_window`` is not positive, or a job would need a horizon
        beyond :data:`MAX_HORIZON_SLOTS`.

    Notes
    -----
    O(sum of windows) time: each window is found by evaluating the utility on 1..cap.
    """
    if not (math.isfinite(slot_seconds) and slot_seconds > 0):
        raise InputError(f"must be a positive number, got {slot_seconds!r}",
                         field="slot_seconds")
    if max_window is not None and max_window < 1:
        raise InputError(f"must be >= 1, got {max_window!r}", field="max_window")
    horizon = 0
    for spec in specs:
        fastest = ceil_eps(spec.work(slot_seconds) / spec.max_workers)
        cap = max_window if max_window is not None else _default_cap(fastest)
        room = MAX_HORIZON_SLOTS - spec.arrival
        if room < 1:
            raise InputError(f"job {spec.job_id!r} arrives in slot {spec.arrival}, beyond the "
                             f"limit of {MAX_HORIZON_SLOTS} slots", field="arrival")
        window = window_length(spec, fastest, min(cap, room))
        if window == room and cap > room and not _utility_gone(spec, room):
            raise InputError(
                f"job {spec.job_id!r} (fastest duration {fastest} slots) needs a horizon beyond "
                f"{MAX_HORIZON_SLOTS} slots: use longer slots or a smaller maximum window",
                field="arrival")
        horizon = max(horizon, spec.arrival + window)
    return horizon


def _default_cap(fastest: int) -> int:
    """The default maximum window of a job whose fastest duration is ``fastest`` slots."""
    return max(WINDOW_FASTEST_FACTOR * fastest, WINDOW_MIN_SLOTS)


def _utility_gone(spec: JobSpec, duration: int) -> bool:
    """True when the utility at ``duration`` is below the window floor (the window ends)."""
    return bool(spec.utility(duration) < WINDOW_UTILITY_FLOOR * spec.utility(1))
