"""Is this machine's parallelism limited by cores or by memory bandwidth?

Runs a pure-Python loop and a numpy pass over a 160 MB array, each alone on core 0 and then
as a pair pinned to cores 0 and 1, and prints the wall seconds. If the pair's times equal
the solo time, two cores compute in parallel; if the numpy pair is slower, the cores share
memory bandwidth (what limits the sweep's speed-up here, BENCHMARKS.md section 12).

    python benchmarks/bench_pairs.py
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["main"]

LOOP = ("import time\nt=time.perf_counter();s=0\nfor i in range(30_000_000): s+=i*i%7\n"
        "print(f'{time.perf_counter()-t:.2f}')")
NUMPY = ("import time, numpy as np\na=np.random.rand(20_000_000);t=time.perf_counter()\n"
         "for _ in range(20): a=a*1.0001+0.5\nprint(f'{time.perf_counter()-t:.2f}')")


def _run(code: str, cores: list[int]) -> list[str]:
    procs = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", code],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1",
                                   "OPENBLAS_NUM_THREADS": "1"}) for c in cores]
    return [p.communicate()[0].strip() for p in procs]


def main() -> None:
    for name, code in (("python loop", LOOP), ("numpy pass, 160 MB", NUMPY)):
        solo = _run(code, [0])
        pair = _run(code, [0, 1])
        print(f"{name}: alone {solo[0]} s; as a pair {' / '.join(pair)} s")


if __name__ == "__main__":
    main()
