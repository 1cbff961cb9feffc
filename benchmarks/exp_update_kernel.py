"""Is the shard's momentum update bound by arithmetic or by memory? (Both, with NumPy.)

Kept for its answer (``BENCHMARKS.md`` section 5): at 400 MB a runtime step is a raw round trip
plus the in-place momentum update (:meth:`MomentumSGD.update_inplace`). With NumPy the update
is four calls per cache-sized block; if those calls, not memory, bound it, one compiled pass
(the fused kernel, :mod:`ray_cluster.update_kernels`) is faster. This script measures, in one
process and without Ray, on vectors of ``--mb`` megabytes:

- memory bandwidth of a copy (``np.copyto``: one read and one write stream) on 1, 2 and 4
  threads (NumPy releases the GIL);
- the update with the NumPy kernel on 1, 2 and 4 threads, and its arithmetic alone (the same
  update on vectors small enough to stay in cache, scaled to the same element count);
- the update with the fused kernel on 1, 2 and 4 threads, after checking it bit-identical to
  the NumPy kernel on these vectors.

Bytes counted: a copy moves 2 x size (read, write), the update 5 x size
(read params, gradient, momentum; write params, momentum).

Usage::

    .venv/bin/python benchmarks/exp_update_kernel.py [--mb 400] [--reps 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ray_cluster.optim import MomentumSGD, MomentumState, shard_bounds

THREADS = (1, 2, 4)


def _median_s(f: Callable[[], object], reps: int) -> float:
    f()  # first touch of every page, and any compilation
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=400.0)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    n = int(args.mb * 2**20 / 4)
    size_gb = n * 4 / 1e9
    rng = np.random.default_rng(0)
    w = rng.standard_normal(n, dtype=np.float32)
    g = rng.standard_normal(n, dtype=np.float32)
    opt = MomentumSGD(lr=0.0137, momentum=0.9)
    state = opt.init(n)
    state.buffer[:] = rng.standard_normal(n, dtype=np.float32)
    dst = np.empty(n, dtype=np.float32)
    pool = ThreadPoolExecutor(max(THREADS))
    rows: list[tuple[str, int, float, float]] = []  # what, threads, seconds, bytes moved

    def on_threads(k: int, body: Callable[[int, int], object]) -> Callable[[], None]:
        return lambda: list(pool.map(lambda ab: body(*ab), shard_bounds(n, k)))

    for k in THREADS:
        rows.append(("copy (np.copyto)", k, _median_s(on_threads(
            k, lambda a, b: np.copyto(dst[a:b], w[a:b])), args.reps), 2 * size_gb))
    for k in THREADS:
        rows.append(("update, NumPy kernel", k, _median_s(
            lambda k=k: opt.update_inplace(w, g, state, threads=k, kernel="numpy"),
            args.reps), 5 * size_gb))
    small = 1 << 18  # 1 MiB per vector: all five stay in a core's L2
    ws, gs = w[:small].copy(), g[:small].copy()
    ss = opt.init(small)
    loops = max(1, n // small)
    in_cache = _median_s(lambda: [opt.update_inplace(ws, gs, ss, threads=1, kernel="numpy")
                                  for _ in range(loops)], max(3, args.reps // 2))
    rows.append(("update, NumPy kernel, in cache (arithmetic alone)", 1,
                 in_cache * n / (loops * small), 5 * size_gb))
    w1, s1 = w.copy(), MomentumState(buffer=state.buffer.copy(), step=0)
    w2, s2 = w.copy(), MomentumState(buffer=state.buffer.copy(), step=0)
    opt.update_inplace(w1, g, s1, threads=2, kernel="fused")
    opt.update_inplace(w2, g, s2, threads=2, kernel="numpy")
    same = np.array_equal(w1, w2) and np.array_equal(s1.buffer, s2.buffer)
    del w1, w2, s1, s2
    for k in THREADS:
        rows.append(("update, fused kernel (Numba)", k, _median_s(
            lambda k=k: opt.update_inplace(w, g, state, threads=k, kernel="fused"),
            args.reps), 5 * size_gb))

    print(f"### Update kernel and memory bandwidth ({args.mb:g} MB vectors, median of "
          f"{args.reps})\n")
    print("| what | threads | time | GB/s |")
    print("|---|---:|---:|---:|")
    for what, k, s, gb in rows:
        print(f"| {what} | {k} | {s * 1e3:.1f} ms | {gb / s:.1f} |")
    print(f"\nFused kernel bit-identical to the NumPy kernel on these vectors: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
