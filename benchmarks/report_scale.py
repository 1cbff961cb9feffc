"""Time and memory of ``report.html`` for a large run (the 15k-job case of issue 16).

    python benchmarks/report_scale.py --jobs 15000 --slots 2000

Simulates the oasis-paper scenario with ``--policies`` (default fifo; checker off) into a temporary
``--out`` folder, then rebuilds its report with ``psched report``'s function, measuring CPU
time (``time.process_time``) and peak memory (``ru_maxrss``) of the rebuild only, and prints
the allocation rows, the report's size and which Gantt mode (drawn / aggregated) it used.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from psched.results.report import write_report
from psched.runs.runner import SimulateRequest, run_simulation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=15000)
    ap.add_argument("--slots", type=int, default=2000)
    ap.add_argument("--policies", default="fifo")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        t0 = time.process_time()
        _, runs = run_simulation(SimulateRequest(
            scenario="oasis-paper", jobs=args.jobs, slots=args.slots, policies=args.policies,
            check=False, out=str(out), plots=False, progress=False))
        sim_s = time.process_time() - t0
        (out / "report.html").unlink()
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.process_time()
        path = write_report(out)
        rep_s = time.process_time() - t0
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        text = path.read_text()
        rows = {n: len(r.allocations) for n, r in runs.items()}
        print(f"jobs {args.jobs}, slots {args.slots}: allocation rows {rows}; simulate CPU "
              f"{sim_s:.1f} s; report CPU {rep_s:.1f} s, peak RSS {rss1 / 1024:.0f} MiB "
              f"(before the report {rss0 / 1024:.0f} MiB), report.html "
              f"{len(text) / 1e6:.1f} MB, aggregated Gantt charts: "
              f"{text.count('too many to draw one by one')}")


if __name__ == "__main__":
    main()
