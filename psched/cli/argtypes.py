"""argparse value types shared by every ``psched`` command: each rejects bad text with a message
that argparse prints as one line (exit code 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from psched.core import limits

__all__ = [
    "cpus_arg",
    "factor_arg",
    "jobs_arg",
    "key_value",
    "load_arg",
    "nonneg_float",
    "nonneg_int",
    "positive_float",
    "positive_int",
    "processes_arg",
    "seed_arg",
    "slot_seconds_arg",
    "slots_arg",
]

#: Longest number text parsed (``int`` of a huge digit string is slow and pointless).
_MAX_NUMBER_CHARS = 100


def _number(kind: Callable[[str], float], ok: Callable[[float], bool],
            what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        shown = text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"
        try:
            if len(text) > _MAX_NUMBER_CHARS:
                raise ValueError(text)
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown!r}") from None
        if not (math.isfinite(v) and ok(v)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown!r}")
        return v

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive integer")
nonneg_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0, "a positive number")
nonneg_float = _number(float, lambda v: v >= 0, "a number >= 0")
#: ``--slots``, ``--horizon``, ``--max-window``: 1 .. MAX_HORIZON_SLOTS.
slots_arg = _number(int, lambda v: 1 <= v <= limits.MAX_HORIZON_SLOTS,
                    f"an integer in [1, {limits.MAX_HORIZON_SLOTS}]")
#: ``--jobs``, ``--instances``: 1 .. MAX_JOBS.
jobs_arg = _number(int, lambda v: 1 <= v <= limits.MAX_JOBS,
                   f"an integer in [1, {limits.MAX_JOBS}]")
#: ``--seed``, ``--seeds``: 0 .. 2**63 - 1.
seed_arg = _number(int, lambda v: 0 <= v <= limits.MAX_SEED,
                   f"an integer in [0, {limits.MAX_SEED}]")
#: ``--slot-seconds``: MIN_SLOT_SECONDS .. MAX_SLOT_SECONDS.
slot_seconds_arg = _number(float, lambda v: limits.MIN_SLOT_SECONDS <= v
                           <= limits.MAX_SLOT_SECONDS,
                           f"seconds in [{limits.MIN_SLOT_SECONDS:g}, "
                           f"{limits.MAX_SLOT_SECONDS:g}]")
#: ``--load``, ``--loads``: (0, MAX_LOAD].
load_arg = _number(float, lambda v: 0 < v <= limits.MAX_LOAD,
                   f"a number in (0, {limits.MAX_LOAD:g}]")
#: ``--price-estimate-factor``, ``--elastic``, ``--cluster-scales``: (0, 1e6].
factor_arg = _number(float, lambda v: 0 < v <= 1e6, "a number in (0, 1e6]")
#: ``--warm-processes``: processes per node, 0 .. 1024.
processes_arg = _number(int, lambda v: 0 <= v <= 1024, "an integer in [0, 1024]")
#: ``--num-cpus``: CPUs of an embedded Ray, 1 .. 4096.
cpus_arg = _number(int, lambda v: 1 <= v <= 4096, "an integer in [1, 4096]")


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(key, value)``, both stripped."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()
