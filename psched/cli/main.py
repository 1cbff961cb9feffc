"""psched: online scheduling of parameter-server training jobs (OASiS and rivals) on a cluster.

The command line is thin: it parses, calls the library, shows results.

Bad input of any kind ends with one line on stderr and exit code 2, never a traceback;
an interrupt (Ctrl-C) ends with exit code 130 and nothing written.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from psched.cli.argtypes import (
    add_reality_args,
    factor_arg,
    jobs_arg,
    key_value,
    load_arg,
    policy_options_help,
    reality_of,
    seed_arg,
    slot_seconds_arg,
    slots_arg,
)
from psched.core.errors import InputError

__all__ = ["main"]

log = logging.getLogger("psched")

#: Modules adding commands, with the commands each adds: each has ``register(commands,
#: trace_actions)`` taking the sub-parser collections of ``psched`` and ``psched trace``;
#: handlers are set with ``set_defaults(func=...)``, take the parsed namespace and return the
#: exit code. ``psched COMMAND`` imports only the modules adding COMMAND (``submit`` imports
#: no policy, no numpy: ``tests/test_client_imports.py``).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "psched.cli.trace": ("trace", "sweep"),
    "psched.cli.ratio": ("ratio",),
    "psched.cli.service": ("serve", "stop", "submit", "status", "cancel", "logs", "page",
                                "run"),
}
#: The commands this module adds itself.
OWN_COMMANDS: tuple[str, ...] = ("simulate", "report", "trace")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"psched: error: {message} (see '{self.prog} --help')\n")


def _simulate_epilog() -> str:
    from psched.results.summary import COLUMN_LEGEND

    width = max(len(c) for c, _ in COLUMN_LEGEND)
    lines = [f"  {c:<{width}}  {text}" for c, text in COLUMN_LEGEND]
    return ("columns of the printed table:\n" + "\n".join(lines) + "\n\nwith --out DIR: "
            "summary.json, cluster.json, POLICY/jobs.csv, POLICY/allocations.csv, plots/ and "
            "report.html (open it in a browser; 'psched report DIR' rebuilds it)\n\n"
            + policy_options_help())


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help texts wrapped without breaking names at hyphens (``elastic-mip``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _choices(names: Sequence[str]) -> str:
    return ", ".join(names)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``psched``; with ``command``, of that command only (its modules alone
    are imported), unless no module adds it (then every command, for the usage message)."""
    from psched import __version__

    p = _Parser(prog="psched", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--version", action="version", version=f"psched {__version__}",
                   help="print the version and exit")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more logging (-v info, -vv debug)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    modules = [m for m, names in COMMAND_MODULES.items() if command in names]
    if not modules and command not in OWN_COMMANDS:
        modules = list(COMMAND_MODULES)  # no command, or an unknown one: all of them
    tsub = None
    if command in OWN_COMMANDS or any("trace" in COMMAND_MODULES[m] for m in modules):
        tsub = _add_own_commands(sub)
    for module in modules:
        importlib.import_module(module).register(sub, tsub)
    return p


def _add_own_commands(sub: Any) -> Any:
    """Add ``simulate``, ``report`` and ``trace synth``; return the sub-parsers of
    ``psched trace``."""
    from psched.policies import available_policies
    from psched.traces.detect import FORMATS

    s = sub.add_parser("simulate", help="replay a trace or scenario through policies",
                       epilog=_simulate_epilog(), formatter_class=_HelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", metavar="FILE",
                     help="a job trace in any supported format (see traces/README.md)")
    src.add_argument("--scenario", metavar="NAME", help="a synthetic scenario, e.g. oasis-paper")
    s.add_argument("--jobs", type=jobs_arg, help="jobs to generate (scenario) or keep "
                   "(the first N of a trace)")
    s.add_argument("--format", default="auto", metavar="FORMAT",
                   help="trace format: auto (default: detected from the header or layout) or "
                        f"one of {_choices(list(FORMATS))}")
    s.add_argument("--cluster", metavar="FILE", help="cluster file (TOML or JSON); default: "
                   "the scenario's, or one sized to the trace at --load")
    s.add_argument("--policies", default="all", metavar="NAMES",
                   help="comma-separated policy names, or all (default); choices: "
                        f"{_choices(available_policies())}")
    s.add_argument("--policy-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of the policies that take NAME (repeatable; "
                        "POLICY:NAME=VALUE for one policy; listed below)")
    s.add_argument("--slots", type=slots_arg, help="horizon T in slots")
    s.add_argument("--slot-seconds", type=slot_seconds_arg, help="slot length in seconds")
    s.add_argument("--seed", type=seed_arg, default=0, help="seed of every random choice")
    s.add_argument("--load", type=load_arg, default=0.8,
                   help="target load when sizing the default cluster for a trace (default 0.8)")
    s.add_argument("--scenario-opt", type=key_value, action="append", default=[],
                   metavar="K=V", help="scenario option (repeatable)")
    s.add_argument("--max-window", type=slots_arg,
                   help="cap on a job's window in slots, for experiments (default: none; a "
                        "window ends where the utility falls below 1e-6 of its maximum or at "
                        "the horizon)")
    s.add_argument("--price-estimate-factor", type=factor_arg, default=1.0,
                   help="OASiS: scale the price upper bound U by this factor (default 1)")
    s.add_argument("--history", metavar="FILE",
                   help="OASiS: estimate U and L from this history trace instead of hindsight")
    s.add_argument("--out", metavar="DIR",
                   help="write summary, per-job files, plots and report.html here; a new or "
                        "empty folder (checked before any work; an existing file or another "
                        "folder is never touched)")
    s.add_argument("--overwrite", action="store_true",
                   help="let --out replace an earlier psched output (only that)")
    s.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    s.add_argument("--bound", choices=("lp",), help="also compute an upper bound on any "
                   "schedule's utility: 'lp' = pooled LP relaxation of (1)-(13), in summary.json")
    s.add_argument("--no-check", action="store_true",
                   help="skip the independent plan checker (faster; not recommended)")
    add_reality_args(s)
    s.set_defaults(func=_cmd_simulate)

    rp = sub.add_parser("report", help="(re)build DIR/report.html from an --out folder")
    rp.add_argument("dir", metavar="DIR", help="a folder written by 'psched simulate --out'")
    rp.set_defaults(func=_cmd_report)

    tr = sub.add_parser("trace", help="make and handle traces")
    tsub = tr.add_subparsers(dest="trace_command", metavar="ACTION", parser_class=_Parser)
    tsub.required = True
    sy = tsub.add_parser("synth", help="generate a synthetic trace")
    sy.add_argument("--scenario", default="oasis-paper", help="scenario name")
    sy.add_argument("--jobs", type=jobs_arg, required=True, help="number of jobs")
    sy.add_argument("--seed", type=seed_arg, default=0, help="seed")
    sy.add_argument("--slots", type=slots_arg, default=300, help="horizon T (default 300)")
    sy.add_argument("--slot-seconds", type=slot_seconds_arg, default=3600.0,
                    help="slot length in seconds (default 3600)")
    sy.add_argument("--scenario-opt", type=key_value, action="append", default=[],
                    metavar="K=V", help="scenario option (repeatable)")
    sy.add_argument("--out", metavar="FILE", required=True, help="trace file to write")
    sy.add_argument("--cluster-out", metavar="FILE", help="also write the scenario's cluster")
    sy.set_defaults(func=_cmd_trace_synth)
    return tsub


def _cmd_simulate(args: argparse.Namespace) -> int:
    from psched.runs.runner import SimulateRequest, print_table, run_simulation

    req = SimulateRequest(
        trace=args.trace, scenario=args.scenario, jobs=args.jobs, format=args.format,
        cluster=args.cluster, policies=args.policies,
        policy_options=tuple(args.policy_option), slots=args.slots,
        slot_seconds=args.slot_seconds, seed=args.seed, load=args.load,
        scenario_opt=tuple(args.scenario_opt), max_window=args.max_window,
        price_estimate_factor=args.price_estimate_factor, history=args.history,
        out=args.out, overwrite=args.overwrite, plots=not args.no_plots,
        check=not args.no_check, bound=args.bound, reality=reality_of(args),
    )
    summary, _ = run_simulation(req, command=["psched", *args.argv])
    print_table(summary, file=sys.stdout)
    b = summary["params"].get("upper_bound")
    if b:
        print(f"# upper bound ({b['kind']}, {b['status']}): {b['bound']:.1f} "
              f"({b['solve_s']:.1f} s)", file=sys.stdout)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from psched.results.output import is_psched_output
    from psched.results.report import write_report

    if not is_psched_output(args.dir) or not Path(args.dir, "cluster.json").is_file():
        raise InputError("not a folder written by 'psched simulate --out'", path=args.dir,
                         field="DIR")
    try:
        print(write_report(args.dir))
    except (KeyError, ValueError) as err:  # a file edited or truncated since psched wrote it
        raise InputError(f"cannot read the output files: {err!r}", path=args.dir,
                         field="DIR") from None
    return 0


def _cmd_trace_synth(args: argparse.Namespace) -> int:
    from psched.runs.runner import synth_trace

    print(synth_trace(scenario=args.scenario, jobs=args.jobs, seed=args.seed, slots=args.slots,
                      slot_seconds=args.slot_seconds, options=dict(args.scenario_opt),
                      out=args.out, cluster_out=args.cluster_out))
    return 0


def _fail(message: str) -> int:
    print(f"psched: error: {message}", file=sys.stderr)
    return 2


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush has nowhere to fail."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _show_warning(message: Warning | str, category: type[Warning], *_a: Any,
                  **_k: Any) -> None:
    print(f"psched: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``psched`` and ``python -m psched``; returns the exit code."""
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(next((a for a in given if not a.startswith("-")), None))
    args = parser.parse_args(given)
    args.argv = given
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    func: Any = args.func
    warnings.showwarning = _show_warning
    try:
        return int(func(args))
    except InputError as err:
        return _fail(str(err))
    except BrokenPipeError:  # the reader left early (``psched status | head -3``): quietly
        _drop_stdout()
        return 141  # as a process ended by SIGPIPE
    except OSError as err:
        return _fail(f"{err.filename or ''}: {err.strerror or err}")
    except KeyboardInterrupt:
        print("psched: interrupted; nothing written", file=sys.stderr)
        return 130
