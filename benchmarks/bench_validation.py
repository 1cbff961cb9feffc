"""Cost of the one spec validator (psched/core/limits.py) when loading traces.

Loads a 100,000-row native trace (the demo trace's jobs repeated with fresh ids) and the
ElasticFlow cluster04 public trace (15,802 rows, mapped), each in a fresh process, alternating
between this tree and a baseline tree (default ``/work/main``, before the validator), and
reports the median CPU time (``time.process_time``) of each and the ratio. Same machine, same
run: the ratio is the figure to read.

    python benchmarks/bench_validation.py [--baseline /work/main] [--repeats 5]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CLUSTER04 = HERE / "traces" / "elasticflow" / "augmented" / "cluster04.csv"
_CHILD = """
import sys, time
from psched.traces import load_any
t0 = time.process_time()
specs = load_any(sys.argv[1])
print(time.process_time() - t0, len(specs))
"""


def native_trace(path: Path, rows: int) -> None:
    """``rows`` jobs: the demo trace's rows repeated with ids j0, j1, ..."""
    header, *body = list(csv.reader((HERE / "traces" / "demo_sim.csv").open()))
    with path.open("w", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(header)
        for i in range(rows):
            row = list(body[i % len(body)])
            row[0] = f"j{i}"
            out.writerow(row)


def cpu_seconds(tree: Path, trace: Path) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(trace)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="/work/main", help="tree without the validator")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        native = Path(tmp) / "native100k.csv"
        native_trace(native, 100_000)
        for name, trace in (("native 100k rows", native), ("cluster04 15,802 rows", CLUSTER04)):
            times: dict[str, list[float]] = {"baseline": [], "this": []}
            jobs = 0
            for _ in range(args.repeats):
                for label, tree in (("baseline", Path(args.baseline)), ("this", HERE)):
                    seconds, jobs = cpu_seconds(tree, trace)
                    times[label].append(seconds)
            base, this = (statistics.median(times[k]) for k in ("baseline", "this"))
            print(f"{name}: {jobs} jobs; baseline {base:.3f} s, with validator {this:.3f} s "
                  f"CPU (median of {args.repeats}); ratio {this / base:.2f}")


if __name__ == "__main__":
    main()
