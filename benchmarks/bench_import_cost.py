"""CPU cost of starting psched: ``import psched``, importing the policies, ``psched --help``,
and the first exact search of ``oasis-rp`` (where numba is imported and loads its compiled
code since :mod:`psched.core.lazy_numba`), each in a fresh interpreter.

Each command runs ``--repeat`` times in a new ``python`` process; the figure is the median
CPU time (user + system) of the child process (``resource.getrusage(RUSAGE_CHILDREN)``),
so other load on a shared machine inflates it little. With ``--baseline ROOT`` the same
commands run with ``PYTHONPATH=ROOT`` (another checkout, e.g. one before the change) in the
same run, alternating with this tree's, and the ratio baseline / this tree is printed.

    python benchmarks/bench_import_cost.py [--repeat 7] [--baseline /path/to/old/checkout]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: name -> the code a fresh interpreter runs
COMMANDS: dict[str, list[str]] = {
    "import psched": ["-c", "import psched"],
    "import psched.policies": ["-c", "import psched.policies"],
    "psched --help": ["-m", "psched", "--help"],
    "policies + first search": ["-c", (
        "import numpy as np\n"
        "from psched.policies.oasis_rp.kernels import greedy_costs_compiled\n"
        "greedy_costs_compiled(np.ones((2, 2)), np.ones((2, 2), dtype=np.int64), 2)")],
}


def cpu_s(root: Path, args: list[str]) -> float:
    """CPU seconds (user + system) of one fresh ``python args`` with ``PYTHONPATH=root``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], cwd=root, env={"PYTHONPATH": str(root), "PATH": ""},
                   check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout to time in the same run (PYTHONPATH)")
    args = ap.parse_args(argv)
    roots = {"this": ROOT} if args.baseline is None else {"this": ROOT,
                                                          "baseline": args.baseline.resolve()}
    cpu_s(ROOT, COMMANDS["import psched"])  # warm the disk caches (bytecode, numba's)
    head = f"{'command':<26}" + "".join(f"{k + ' CPU s':>17}" for k in roots)
    print(head + (f"{'ratio':>8}" if len(roots) > 1 else ""))
    for name, cmd in COMMANDS.items():
        times: dict[str, list[float]] = {k: [] for k in roots}
        for _ in range(args.repeat):
            for k, root in roots.items():  # alternating: the same load for both
                times[k].append(cpu_s(root, cmd))
        med = {k: statistics.median(v) for k, v in times.items()}
        line = f"{name:<26}" + "".join(f"{med[k]:>17.3f}" for k in roots)
        if len(roots) > 1:
            line += f"{med['baseline'] / med['this']:>8.2f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
