"""argparse value types shared by every ``psched`` command: each rejects bad text with a message
that argparse prints as one line (exit code 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["key_value", "nonneg_float", "nonneg_int", "positive_float", "positive_int"]


def _number(kind: Callable[[str], float], ok: Callable[[float], bool],
            what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (math.isfinite(v) and ok(v)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return v

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive integer")
nonneg_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0, "a positive number")
nonneg_float = _number(float, lambda v: v >= 0, "a number >= 0")


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(key, value)``, both stripped."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()
