"""A digest of oasis-rp's whole-run decisions per cell, to compare two checkouts or options.

Per cell (``oasis-<n>:<seed>``, ``ef-<trace>``, ``fig5``: all its instances; the rows of
``benchmarks/bench_oasis_rp_levers.py``) one line: the SHA-256 of every allocation row and
every job's (admitted, promised, completion, reason), the utility and the CPU seconds. Run
it under two ``PYTHONPATH`` settings (or two ``--variant`` values) and ``diff`` the digests:
equal digests are equal runs.

    PYTHONPATH=/work/main python benchmarks/rp_decisions_hash.py > /tmp/old.txt
    PYTHONPATH=$PWD python benchmarks/rp_decisions_hash.py > /tmp/new.txt
    diff <(cut -d' ' -f1-3 /tmp/old.txt) <(cut -d' ' -f1-3 /tmp/new.txt)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_oasis_rp_levers import cell_inputs, instances, run_variant

DEFAULT_CELLS = ("oasis-100:0,oasis-100:1,oasis-200:0,oasis-200:1,oasis-300:0,oasis-300:1,"
                 "oasis-400:0,oasis-400:1,ef-cluster10,ef-195job")


def digest(variant: str, scenario: str, instance: str) -> tuple[str, float, float]:
    """SHA-256 of one run's decisions, its utility and CPU seconds."""
    res, cpu = run_variant(variant, *cell_inputs(scenario, instance))
    h = hashlib.sha256()
    h.update(repr(res.allocations).encode())
    for j, r in sorted(res.records.items()):
        h.update(repr((j, r.admitted, r.promised, r.completion, r.reason)).encode())
    return h.hexdigest()[:16], float(sum(r.utility for r in res.records.values())), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=DEFAULT_CELLS)
    ap.add_argument("--variant", default="oasis-rp")
    ap.add_argument("--fig5-per-cell", type=int, default=4)
    args = ap.parse_args()
    for cell in args.cells.split(","):
        scenario, _, seed = cell.partition(":")
        keys = (instances(scenario, [0], args.fig5_per_cell) if scenario == "fig5"
                else [seed or "0"])
        for key in keys:
            c0 = time.process_time()
            d, util, _ = digest(args.variant, scenario, key)
            print(f"{scenario}:{key} {d} {util:.4f} {time.process_time() - c0:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
