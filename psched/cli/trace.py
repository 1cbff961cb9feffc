"""CLI commands for public traces: ``trace inspect``, ``trace convert``, ``trace fetch`` and
``sweep``. Thin: parse, call :mod:`psched.traces` / :mod:`psched.runs.sweep`, print.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from psched.cli.argtypes import (
    add_reality_args,
    cpus_arg,
    factor_arg,
    jobs_arg,
    load_arg,
    nonneg_float,
    reality_of,
    seed_arg,
    slot_seconds_arg,
    slots_arg,
)
from psched.core.errors import InputError

__all__ = ["mapping_options", "register"]


def _list(kind: Any) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        return tuple(kind(t) for t in items)
    return parse


def _model_pair(text: str) -> tuple[str, str]:
    name, sep, model = text.partition("=")
    if not sep or not name.strip() or not model.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=MODEL, got {text!r}")
    return name.strip().lower(), model.strip().lower()


def _add_mapping(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mapping of public traces to jobs (traces/README.md)")
    g.add_argument("--format", default="auto", help="trace format, or auto (default)")
    g.add_argument("--slot-seconds", type=slot_seconds_arg, default=3600.0,
                   help="slot length in seconds (default 3600)")
    g.add_argument("--seed", type=seed_arg, default=0, help="seed of the mapping's draws")
    g.add_argument("--elastic", type=factor_arg, default=2.0,
                   help="max workers = ceil(ELASTIC x GPUs in the trace), capped by the work "
                        "(default 2)")
    g.add_argument("--all-statuses", action="store_true",
                   help="keep failed and killed jobs too, as they ran (default: completed "
                        "only); trace inspect counts the rows by status")
    g.add_argument("--window-start", type=nonneg_float, metavar="S",
                   help="keep jobs submitted at least S seconds after the first")
    g.add_argument("--window-end", type=nonneg_float, metavar="S",
                   help="keep jobs submitted less than S seconds after the first")
    g.add_argument("--vc", help="keep only this virtual cluster")
    g.add_argument("--utility", choices=("auto", "mix", "deadline"), default="auto",
                   help="auto: the trace's own utilities (value steps, deadlines, "
                        "best-effort) where it has them, else the paper's mix")
    g.add_argument("--model-map", type=_model_pair, action="append", default=[],
                   metavar="NAME=MODEL",
                   help="read the trace's model, job type or application NAME as MODEL (a "
                        "catalog model or step-table entry, traces/README.md); repeatable")


def mapping_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~psched.traces.mapping.MappingOptions` fields of parsed arguments."""
    return {"slot_seconds": args.slot_seconds, "seed": args.seed, "elastic": args.elastic,
            "statuses": "all" if args.all_statuses else "completed",
            "window_start_s": args.window_start, "window_end_s": args.window_end,
            "vc": args.vc, "utility": args.utility, "model_map": tuple(args.model_map)}


def _source(files: list[str]) -> Any:
    return files[0] if len(files) == 1 else files


def register(commands: Any, trace_actions: Any) -> None:
    """Add ``trace inspect|convert|fetch`` to ``trace_actions`` and ``sweep`` to ``commands``."""
    p = trace_actions.add_parser("inspect", help="summarise a trace (text and a PNG)")
    p.add_argument("trace", nargs="+", metavar="FILE",
                   help="trace file (Alibaba: a folder or the two tables)")
    p.add_argument("--png", metavar="FILE", help="also write the plots here")
    _add_mapping(p)
    p.set_defaults(func=_cmd_inspect)

    p = trace_actions.add_parser("convert", help="convert a public trace to the native format")
    p.add_argument("trace", nargs="+", metavar="FILE",
                   help="trace file (Alibaba: a folder or the two tables)")
    p.add_argument("--to", choices=("native",), default="native", help="output format")
    p.add_argument("--out", required=True, metavar="FILE", help="native trace to write")
    _add_mapping(p)
    p.set_defaults(func=_cmd_convert)

    p = trace_actions.add_parser("fetch", help="download a public trace (sha256-verified)")
    p.add_argument("name", nargs="?", help="trace name (--list shows them)")
    p.add_argument("--dest", default="traces/public", help="parent folder (default "
                   "traces/public); the trace lands in DEST/NAME/")
    p.add_argument("--list", action="store_true", help="list the known traces")
    p.add_argument("--url", action="append", help="another address per file (a mirror)")
    p.add_argument("--sha256", action="append", help="checksum per --url")
    p.set_defaults(func=_cmd_fetch)

    p = commands.add_parser("sweep", help="policies x seeds x loads x cluster sizes on Ray")
    p.add_argument("--trace", nargs="+", required=True, metavar="FILE",
                   help="trace file(s) in any supported format")
    p.add_argument("--jobs", type=jobs_arg, help="keep the first N jobs")
    p.add_argument("--format", default="auto", help="trace format, or auto (default)")
    p.add_argument("--slot-seconds", type=slot_seconds_arg, default=3600.0,
                   help="slot length in seconds (default 3600)")
    p.add_argument("--policies", type=_list(str), default=("fifo", "drf", "oasis"),
                   help="comma-separated policy names (default fifo,drf,oasis)")
    p.add_argument("--policy-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of the policies that take NAME (repeatable; "
                        "POLICY:NAME=VALUE for one policy; see 'psched simulate --help')")
    p.add_argument("--seeds", type=_list(seed_arg), default=(0,), help="e.g. 0,1,2")
    p.add_argument("--loads", type=_list(load_arg), default=(1.0,),
                   help="load factors: arrival times divided by these (e.g. 0.5,1,2)")
    p.add_argument("--cluster-scales", type=_list(factor_arg), default=(1.0,),
                   help="cluster sizes, times the default cluster of the trace (e.g. 0.5,1)")
    p.add_argument("--max-window", type=slots_arg,
                   help="cap on a job's window in slots (default: the utility floor)")
    p.add_argument("--out", required=True, metavar="DIR", help="results folder (resumable)")
    p.add_argument("--address", help="an existing Ray cluster (default: embedded local Ray)")
    p.add_argument("--num-cpus", type=cpus_arg, help="CPUs of the embedded Ray")
    p.add_argument("--serial", action="store_true", help="no Ray: cells one after another")
    p.add_argument("--no-check", action="store_true", help="skip the plan checker")
    add_reality_args(p)
    p.set_defaults(func=_cmd_sweep)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from psched.traces.inspect import format_stats, inspect_trace, plot_stats

    st = inspect_trace(_source(args.trace), args.format, **mapping_options(args))
    print(format_stats(st))
    if args.png:
        plot_stats(st, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from psched.traces.detect import load_with_report
    from psched.traces.native import write_trace

    specs, report, fmt = load_with_report(_source(args.trace), args.format,
                                          **mapping_options(args))
    write_trace(args.out, specs)
    print(f"{fmt}: {report}; wrote {len(specs)} jobs to {args.out}")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from psched.traces.fetch import fetch, list_sources

    if args.list or not args.name:
        print(list_sources())
        return 0
    files = fetch(args.name, args.dest, urls=args.url, sha256s=args.sha256)
    for f in files:
        print(f)
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    import contextlib
    import os
    import tempfile

    from psched.cli.connect import ensure_token, use_token
    from psched.runs.sweep import run_sweep
    from psched.runs.sweep_spec import SweepSpec, cells_of

    spec = SweepSpec(trace=tuple(args.trace), fmt=args.format, jobs=args.jobs,
                     slot_seconds=args.slot_seconds, policies=tuple(args.policies),
                     seeds=tuple(args.seeds), loads=tuple(args.loads),
                     scales=tuple(args.cluster_scales), max_window=args.max_window,
                     check=not args.no_check, policy_options=tuple(args.policy_option),
                     reality=reality_of(args))
    total = len(cells_of(spec))
    done = [0]

    def progress(row: dict[str, Any]) -> None:
        done[0] += 1
        print(f"[{done[0]}] {row['policy']} seed {row['seed']} load {row['load']:g} "
              f"scale {row['scale']:g}: utility {row['total_utility']:.1f} "
              f"({row['wall_s']:.1f} s)", file=sys.stderr, flush=True)

    if args.address and args.serial:
        raise InputError("--address and --serial exclude each other", path="--serial",
                         field="serial")
    with contextlib.ExitStack() as stack:
        if not (args.address or os.environ.get("RAY_ADDRESS")) and not args.serial:
            # the embedded Ray's token: private to this sweep, never Ray's ~/.ray default
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="psched-sweep-"))
            use_token(ensure_token(folder))
        rows = run_sweep(spec, args.out, parallel=not args.serial, address=args.address,
                         num_cpus=args.num_cpus, on_cell=progress)
    print(f"{total} cells ({done[0]} run now); wrote {args.out}/results.csv and "
          f"{args.out}/sweep_utility.png")
    del rows
    return 0
