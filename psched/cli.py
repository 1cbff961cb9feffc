"""psched: online scheduling of parameter-server training jobs (OASiS and rivals) on a cluster.

The command line is thin: it parses, calls the library, shows results.

Bad input of any kind ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from psched.argtypes import key_value, nonneg_int, positive_float, positive_int
from psched.errors import InputError

__all__ = ["main"]

log = logging.getLogger("psched")

#: Modules adding commands: each has ``register(commands, trace_actions)`` taking the
#: sub-parser collections of ``psched`` and ``psched trace``; handlers are set with
#: ``set_defaults(func=...)``, take the parsed namespace and return the exit code.
COMMAND_MODULES: tuple[str, ...] = ("psched.commands_trace", "psched.commands_ratio",
                                     "psched.commands_service")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"psched: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="psched", description=(__doc__ or "").splitlines()[0])
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    s = sub.add_parser("simulate", help="replay a trace or scenario through policies")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE",
                     help="a job trace in any supported format (see traces/README.md)")
    src.add_argument("--scenario", metavar="NAME", help="a synthetic scenario, e.g. oasis-paper")
    s.add_argument("--jobs", type=positive_int, help="jobs to generate (scenario) or keep "
                   "(the first N of a trace)")
    s.add_argument("--format", default="auto",
                   help="trace format (default: auto, detected from the header or layout)")
    s.add_argument("--cluster", metavar="FILE", help="cluster file (TOML or JSON)")
    s.add_argument("--policies", default="all", help="comma-separated names, or 'all'")
    s.add_argument("--slots", type=positive_int, help="horizon T in slots")
    s.add_argument("--slot-seconds", type=positive_float, help="slot length in seconds")
    s.add_argument("--seed", type=nonneg_int, default=0, help="seed of every random choice")
    s.add_argument("--load", type=positive_float, default=0.8,
                   help="target load when sizing the default cluster for a trace (default 0.8)")
    s.add_argument("--scenario-opt", type=key_value, action="append", default=[],
                   metavar="K=V", help="scenario option (repeatable)")
    s.add_argument("--max-window", type=positive_int,
                   help="cap on a job's window in slots, for experiments (default: none; a "
                        "window ends where the utility falls below 1e-6 of its maximum or at "
                        "the horizon)")
    s.add_argument("--price-estimate-factor", type=positive_float, default=1.0,
                   help="OASiS: scale the price upper bound U by this factor (default 1)")
    s.add_argument("--history", metavar="FILE",
                   help="OASiS: estimate U and L from this history trace instead of hindsight")
    s.add_argument("--out", metavar="DIR", help="write summary, per-job files and plots here")
    s.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    s.add_argument("--no-check", action="store_true",
                   help="skip the independent plan checker (faster; not recommended)")
    s.set_defaults(func=_cmd_simulate)

    tr = sub.add_parser("trace", help="make and handle traces")
    tsub = tr.add_subparsers(dest="trace_command", metavar="ACTION", parser_class=_Parser)
    tsub.required = True
    sy = tsub.add_parser("synth", help="generate a synthetic trace")
    sy.add_argument("--scenario", default="oasis-paper", help="scenario name")
    sy.add_argument("--jobs", type=positive_int, required=True, help="number of jobs")
    sy.add_argument("--seed", type=nonneg_int, default=0, help="seed")
    sy.add_argument("--slots", type=positive_int, default=300, help="horizon T (default 300)")
    sy.add_argument("--slot-seconds", type=positive_float, default=3600.0,
                    help="slot length in seconds (default 3600)")
    sy.add_argument("--scenario-opt", type=key_value, action="append", default=[],
                    metavar="K=V", help="scenario option (repeatable)")
    sy.add_argument("--out", metavar="FILE", required=True, help="trace file to write")
    sy.add_argument("--cluster-out", metavar="FILE", help="also write the scenario's cluster")
    sy.set_defaults(func=_cmd_trace_synth)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub, tsub)
    return p


def _cmd_simulate(args: argparse.Namespace) -> int:
    from psched.runner import SimulateRequest, print_table, run_simulation

    req = SimulateRequest(
        trace=args.trace, scenario=args.scenario, jobs=args.jobs, format=args.format,
        cluster=args.cluster, policies=args.policies, slots=args.slots,
        slot_seconds=args.slot_seconds, seed=args.seed, load=args.load,
        scenario_opt=tuple(args.scenario_opt), max_window=args.max_window,
        price_estimate_factor=args.price_estimate_factor, history=args.history,
        out=args.out, plots=not args.no_plots, check=not args.no_check,
    )
    summary, _ = run_simulation(req)
    print_table(summary, file=sys.stdout)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _cmd_trace_synth(args: argparse.Namespace) -> int:
    from psched.runner import synth_trace

    print(synth_trace(scenario=args.scenario, jobs=args.jobs, seed=args.seed, slots=args.slots,
                      slot_seconds=args.slot_seconds, options=dict(args.scenario_opt),
                      out=args.out, cluster_out=args.cluster_out))
    return 0


def _fail(message: str) -> int:
    print(f"psched: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``psched`` and ``python -m psched``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    func: Any = args.func
    try:
        return int(func(args))
    except InputError as err:
        return _fail(str(err))
    except OSError as err:
        return _fail(f"{err.filename or ''}: {err.strerror or err}")
    except KeyboardInterrupt:
        return _fail("interrupted; nothing written")
