"""Where oasis-rp's time goes at trace scale: a CPU histogram per call and, optionally, cProfile.

Runs ``oasis-rp[:opt=value...]`` on a trace of ``bench_oasis_rp_scale.py`` (``philly-<n>``,
``ef-<name>``) until ``--max-cpu-s`` (the run stops at the next arrival past it), timing every
``on_arrival``, ``admit_held`` (it decides a slot's arrivals) and ``plan`` call
in CPU ms; prints p50 / p99 / max per kind, the share of the 10 dearest calls, the policy's
counters, and with ``--profile`` the cProfile tables (cumulative and own time).

    python benchmarks/profile_rp_scale.py --trace ef-cluster04 --max-cpu-s 45 --profile
    python benchmarks/profile_rp_scale.py --trace ef-cluster04 --max-cpu-s 60 --profile \\
        --cpu-timer       # CPU seconds per function, not wall (a loaded machine)
    python benchmarks/profile_rp_scale.py --trace philly-80000 --max-cpu-s 30 \\
        --variant oasis-rp:effort_slots=100
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_oasis_rp import parse_variant
from bench_oasis_rp_scale import load

from psched.policies import make_policy
from psched.simulator import simulate


class _Stop(Exception):
    """The run used up its CPU budget."""


def timed(pol: Any, max_cpu_s: float, times: list[tuple[str, float]], seen: list[int]) -> Any:
    """``pol`` with its calls timed (CPU s) into ``times``; arrivals counted in ``seen``."""
    t0 = time.process_time()
    for kind, name in (("arrival", "on_arrival"), ("admit_held", "admit_held"),
                       ("plan", "plan")):
        inner = getattr(pol, name)

        def wrapped(*args: Any, _inner: Any = inner, _kind: str = kind) -> Any:
            if _kind == "arrival":
                if time.process_time() - t0 > max_cpu_s:
                    raise _Stop
                seen[0] += 1
            c = time.process_time()
            out = _inner(*args)
            times.append((_kind, time.process_time() - c))
            return out

        setattr(pol, name, wrapped)
    return pol


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="ef-cluster04")
    ap.add_argument("--variant", default="oasis-rp")
    ap.add_argument("--max-cpu-s", type=float, default=45.0)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--cpu-timer", action="store_true",
                    help="cProfile times CPU (time.process_time), not wall: for loaded machines")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    specs, cluster, horizon = load(args.trace, args.seed)
    name, kw = parse_variant(args.variant)
    kw.setdefault("certificate", False)
    times: list[tuple[str, float]] = []
    seen = [0]
    pol = timed(make_policy(name, **kw), args.max_cpu_s, times, seen)
    prof = None
    if args.profile:
        prof = cProfile.Profile(time.process_time) if args.cpu_timer else cProfile.Profile()
    c0 = time.process_time()
    if prof:
        prof.enable()
    try:
        simulate(specs, cluster, pol, horizon, seed=args.seed)
        done = True
    except _Stop:
        done = False
    if prof:
        prof.disable()
    print(f"{args.trace} {args.variant}: {seen[0]} arrivals, finished {done},"
          f" {time.process_time() - c0:.1f} CPU s")
    for kind in ("arrival", "admit_held", "plan"):
        x = np.array([c for k, c in times if k == kind])
        if x.size:
            p = np.percentile(x, [50, 99, 100]) * 1e3
            top = np.sort(x)[::-1][:10].sum() / max(x.sum(), 1e-12)
            print(f"{kind}: {x.size} calls, {x.sum():.1f} CPU s, p50 / p99 / max"
                  f" {p[0]:.1f} / {p[1]:.1f} / {p[2]:.1f} ms, 10 dearest {top:.0%}")
    print({k: v for k, v in pol.report().items() if isinstance(v, int) and v})
    if prof:
        st = pstats.Stats(prof)
        st.sort_stats("cumulative").print_stats(40)
        st.sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
