"""Progress of a long run on stderr: a bar on a terminal, else one line every few seconds.

A run has phases (``fifo: slots``, ``oasis: dual certificate``...) and a count of slots done.
Without a terminal a daemon thread looks every ``interval_s`` seconds and prints the phase,
the count and the elapsed time when the phase or the count changed since the last line it
printed, or, when neither did, once every ``quiet_s`` seconds (so a log shows a long phase
that counts nothing, such as the certificate at the end of an OASiS run, is alive, without
the same line every few seconds); a run shorter than ``interval_s`` prints nothing.
:meth:`Progress.announce` prints a line at once (why a run pauses: kernels compiling).
"""

from __future__ import annotations

import threading
import time
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """Slots done out of ``total`` and the current phase, shown on ``stream``."""

    def __init__(self, total: int, stream: TextIO, *, interval_s: float = 5.0,
                 quiet_s: float = 60.0, tty: bool | None = None) -> None:
        self.total = max(1, int(total))
        self.done = 0
        self.phase_text = ""
        self.stream = stream
        self.interval_s = float(interval_s)
        self.quiet_s = float(quiet_s)
        self._shown: tuple[str, int] | None = None  # (phase, done) of the last line printed
        self._shown_at = 0.0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._bar: Any = None
        self._thread: threading.Thread | None = None
        is_tty = stream.isatty() if tty is None else tty
        if is_tty:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, unit="slot", file=stream, leave=False)
        else:
            self._thread = threading.Thread(target=self._run, name="psched-progress",
                                            daemon=True)
            self._thread.start()

    def phase(self, text: str) -> None:
        """Enter a phase, e.g. ``"oasis: slots"`` or ``"oasis: dual certificate"``."""
        self.phase_text = text
        if self._bar is not None:
            self._bar.set_description(text)

    def advance(self, n: int = 1) -> None:
        """``n`` more slots done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)

    def line(self) -> str:
        """The status line printed without a terminal."""
        pct = 100.0 * min(self.done, self.total) / self.total
        return (f"psched: {self.phase_text} [{self.done}/{self.total} slots, {pct:.0f}%, "
                f"{time.monotonic() - self._start:.0f} s]")

    def tick(self) -> None:
        """Print :meth:`line` now."""
        self._shown, self._shown_at = (self.phase_text, self.done), time.monotonic()
        print(self.line(), file=self.stream, flush=True)

    def announce(self, text: str) -> None:
        """Print ``psched: text`` at once, above the bar on a terminal."""
        if self._bar is not None:
            self._bar.write(f"psched: {text}", file=self.stream)
        else:
            print(f"psched: {text}", file=self.stream, flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if (self._shown != (self.phase_text, self.done)
                    or time.monotonic() - self._shown_at >= self.quiet_s):
                self.tick()

    def close(self) -> None:
        """Stop showing progress."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
