"""argparse value types shared by every ``psched`` command: each rejects bad text with a message
that argparse prints as one line (exit code 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from psched.core import limits

if TYPE_CHECKING:
    from psched.core.reality import Reality

__all__ = [
    "PolicyOptionsHelp",
    "add_reality_args",
    "cpus_arg",
    "factor_arg",
    "jobs_arg",
    "key_value",
    "load_arg",
    "nonneg_float",
    "nonneg_int",
    "policy_options_help",
    "positive_float",
    "positive_int",
    "processes_arg",
    "reality_of",
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


class PolicyOptionsHelp(argparse.RawDescriptionHelpFormatter):
    """Help that ends with :func:`policy_options_help`, computed only when help is shown (a
    command's parser is built without importing a policy)."""

    def format_help(self) -> str:
        return super().format_help() + "\n" + policy_options_help() + "\n"


def policy_options_help(names: list[str] | None = None) -> str:
    """An epilog listing each policy's ``--policy-option`` names with their defaults (every
    registered policy unless ``names``), read from the factories' signatures."""
    import textwrap

    from psched.policies import available_policies
    from psched.policies.options import describe_options

    lines = ["policy options, NAME=DEFAULT (--policy-option NAME=VALUE, or POLICY:NAME=VALUE):"]
    for name in names or available_policies():
        lines += textwrap.wrap(describe_options(name) or "none", 96, initial_indent=f"  {name}: ",
                               subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines)


def add_reality_args(p: argparse.ArgumentParser) -> None:
    """``--rate``, ``--sigma-job``, ``--sigma-slot``, ``--startup``, ``--reality-seed``: the
    :class:`~psched.core.reality.Reality` the simulated jobs run in (default: the model)."""
    g = p.add_argument_group("reality (how jobs really run against their profile; default: "
                             "exactly as profiled)")
    g.add_argument("--rate", type=float, default=1.0, metavar="R",
                   help="every job's speed against its profile, (0, 10] (default 1)")
    g.add_argument("--sigma-job", type=float, default=0.0, metavar="S",
                   help="sigma of each job's lasting log-normal speed factor (median 1), "
                        "[0, 2] (default 0)")
    g.add_argument("--sigma-slot", type=float, default=0.0, metavar="S",
                   help="sigma of the log-normal noise of each job's slot, [0, 2] (default 0)")
    g.add_argument("--startup", type=float, default=0.0, metavar="F",
                   help="fraction of a slot a job loses when it starts, resumes or is "
                        "resized, [0, 1] (default 0)")
    g.add_argument("--reality-seed", type=seed_arg, default=0, metavar="N",
                   help="seed of the factors and the noise (default 0)")


def reality_of(args: argparse.Namespace) -> Reality:
    """The :class:`~psched.core.reality.Reality` of :func:`add_reality_args`' flags (raises
    :class:`~psched.core.errors.InputError`, one line naming the flag, when out of range)."""
    from psched.core.reality import Reality

    return Reality(rate=args.rate, sigma_job=args.sigma_job, sigma_slot=args.sigma_slot,
                   startup=args.startup, seed=args.reality_seed)
