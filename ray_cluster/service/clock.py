"""Wall time of the live service: the clock its driver waits on, and the private folder it
keeps its journal in."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

__all__ = ["RealtimeClock", "private_folder"]


def private_folder(workdir: Path) -> None:
    """Make ``workdir`` (mode 0700) and its journal (0600) readable by the owner only, before
    the journal opens: SQLite gives its ``-wal`` and ``-shm`` files the journal's mode."""
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o700)
    path = workdir / "journal.db"
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for name in ("journal.db", "journal.db-wal", "journal.db-shm"):
        if (workdir / name).exists():
            (workdir / name).chmod(0o600)


class RealtimeClock:
    """Wall time: slot ``t`` begins ``t * slot_seconds`` after ``start``; ``stop`` cuts a
    wait short (the driver then stops). Holds no lock: the driver waits without its lock."""

    def __init__(self, slot_seconds: float, start: float, stop: threading.Event) -> None:
        self.slot_seconds, self.start, self._stop = slot_seconds, start, stop

    def wait_until(self, t: int) -> None:
        """Return once slot ``t`` has begun or a stop was asked for."""
        while not self._stop.is_set():
            delay = self.start + t * self.slot_seconds - time.time()
            if delay <= 0:
                return
            self._stop.wait(min(delay, 0.5))
