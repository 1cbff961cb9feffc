"""``psched ratio``: the competitive-ratio study of the paper's Fig. 5 setting.

Per instance: every online policy's utility, OASiS's dual certificate, the offline optimum
(MILP) and the LP bound, as a table on stdout; with ``--out DIR`` also ``ratio.csv``,
``summary.json`` and the figures of :mod:`psched.runs.ratio_plots`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from psched.core.errors import InputError
from psched.core.limits import MAX_DEFAULT_SERVERS, MAX_SERVER_SLOTS, shown

__all__ = ["parse_priorities", "parse_servers", "register"]


def parse_servers(text: str) -> list[int]:
    """``"3,6,9,12"`` -> ``[3, 6, 9, 12]``; each at least 2."""
    out = []
    for part in text.split(","):
        try:
            n = int(part)
        except ValueError:
            raise InputError(f"expected integers >= 2 separated by commas, got {text!r}",
                             path="--servers", field="servers") from None
        if not 2 <= n <= MAX_DEFAULT_SERVERS:
            raise InputError(f"a server count must be in [2, {MAX_DEFAULT_SERVERS}], got "
                             f"{shown(n)}", path="--servers", field="servers")
        out.append(n)
    return out


def parse_priorities(text: str) -> list[tuple[float, float]]:
    """``"1:100,25:100"`` -> ``[(1, 100), (25, 100)]``; ``0 <= lo <= hi``."""
    out = []
    for part in text.split(","):
        lo_s, sep, hi_s = part.partition(":")
        try:
            lo, hi = float(lo_s), float(hi_s)
        except ValueError:
            lo = hi = float("nan")
        if not sep or not (0 <= lo <= hi < float("inf")):
            raise InputError(f"expected LO:HI ranges with 0 <= LO <= HI, got {part!r}",
                             path="--priorities", field="priorities")
        out.append((lo, hi))
    return out


def _factors(text: str) -> list[float]:
    out = []
    for part in filter(None, text.split(",")):
        try:
            f = float(part)
        except ValueError:
            f = float("nan")
        if not (0 < f < float("inf")):
            raise InputError(f"expected positive factors, got {part!r}", path="--factors",
                             field="factors")
        out.append(f)
    return out


def register(commands: Any, trace_actions: Any) -> None:
    """Add ``psched ratio`` to the ``psched`` sub-commands."""
    from psched.cli.argtypes import jobs_arg, positive_float, seed_arg, slots_arg

    r = commands.add_parser("ratio", help="competitive ratio: online policies vs offline OPT")
    r.add_argument("--instances", type=jobs_arg, default=10,
                   help="instances per server count and priority range (default 10)")
    r.add_argument("--jobs", type=jobs_arg, default=10, help="jobs per instance (10)")
    r.add_argument("--slots", type=slots_arg, default=10, help="horizon T (default 10)")
    r.add_argument("--servers", default="3,6,9,12", help="server counts (default 3,6,9,12)")
    r.add_argument("--priorities", default="1:100",
                   help="priority ranges LO:HI, comma-separated (default 1:100)")
    r.add_argument("--factors", default="", help="also run OASiS with U scaled by these")
    r.add_argument("--policies", default="all", help="comma-separated names, or 'all'")
    r.add_argument("--time-limit", type=positive_float, default=60.0,
                   help="MILP time limit per instance, seconds (default 60)")
    r.add_argument("--seed", type=seed_arg, default=0, help="seed of the study")
    r.add_argument("--out", metavar="DIR", help="write ratio.csv, summary.json and figures "
                   "(a new or empty folder; checked before any work)")
    r.add_argument("--overwrite", action="store_true",
                   help="let --out replace an earlier psched output (only that)")
    r.set_defaults(func=_cmd_ratio)


def _policies(text: str) -> list[str] | None:
    from psched.policies import available_policies

    if text == "all":
        return None
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in available_policies()]
    if unknown or not names:
        raise InputError(f"unknown policy {unknown or text!r}; available: "
                         f"{', '.join(available_policies())}", path="--policies",
                         field="policies")
    return names


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def _cmd_ratio(args: argparse.Namespace) -> int:
    from psched.results.output import check_out
    from psched.runs.ratio import RatioRow, ratio_study, summarise

    if args.out:
        check_out(args.out, overwrite=args.overwrite)

    servers, prios = parse_servers(args.servers), parse_priorities(args.priorities)
    size = args.jobs * args.slots * max(servers)
    if size > MAX_SERVER_SLOTS:  # the offline MILP has a variable per job, slot and server
        raise InputError(f"jobs x slots x servers = {size:.3g} exceeds {MAX_SERVER_SLOTS:g} "
                         "(the offline MILP's size)", path="--jobs", field="jobs")
    factors, policies = _factors(args.factors), _policies(args.policies)
    header: list[str] = []
    widths: list[int] = []

    def show(row: RatioRow) -> None:
        cells = {"n": str(row.servers), "prio": f"{row.priority[0]:g}-{row.priority[1]:g}",
                 **{k: f"{v:.1f}" for k, v in row.utility.items()},
                 "cert": f"{row.certificate:.1f}", "opt": f"{row.opt:.1f}",
                 "lp": f"{row.lp:.1f}", "OPT/oasis": f"{row.ratio:.3f}",
                 "milp_s": f"{row.opt_s:.2f}", "status": row.opt_status}
        if not header:
            header.extend(cells)
            widths.extend(max(len(k), 8) for k in header)
            print(_line(header, widths), flush=True)
        print(_line([cells[k] for k in header], widths), flush=True)

    rows = ratio_study(args.instances, jobs=args.jobs, slots=args.slots, servers=servers,
                       priorities=prios, seed=args.seed, policies=policies,
                       estimate_factors=factors, time_limit=args.time_limit, progress=show)
    summary = summarise(rows)
    for key, block in summary.items():
        q = block["ratio"]
        print(f"# {key}: {block['instances']} instances, {block['proven_optimal']} proven "
              f"optimal; OPT/OASiS median {q['median']:.3f} p90 {q['p90']:.3f} max "
              f"{q['max']:.3f}; MILP max {block['opt_s']['max']:.2f} s", file=sys.stdout)
    if args.out:
        _write(args.out, rows, summary, vars(args))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _write(out: str, rows: Sequence[Any], summary: dict[str, Any],
           params: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from psched.results.output import atomic_dir, jsonable
    from psched.runs.ratio import write_csv
    from psched.runs.ratio_plots import save_all

    with atomic_dir(out, overwrite=bool(params.get("overwrite"))) as tmp:
        write_csv(rows, tmp / "ratio.csv")
        params = {k: v for k, v in params.items() if k != "func"}
        with open(tmp / "summary.json", "w") as fh:
            json.dump(jsonable({"params": params, "summary": summary}), fh, indent=2)
        save_all(rows, tmp)
