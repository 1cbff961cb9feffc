"""oasis-rp's two compiled kernels on the inputs of a real run: the recursion and the units.

Runs ``oasis-rp`` on the oasis-paper scenario (400 jobs, T = 300, certificate off) once,
recording the inputs of every exact recursion (``solve_compiled``) and of every own-usage unit
selection whose units rise in ``k`` (``select_rising_compiled``), then times each kernel
against its reference on the same inputs and checks they agree:

* the recursion: :func:`psched.policies.oasis_rp.dp.solve_compiled` against
  :func:`psched.oasis.fast.solve_fast` (numpy, the path ``oasis`` runs), the same payoff and
  schedule on every recorded search;
* one min-plus step, W = 307 and N = 52 (the mean work and size of the recorded searches):
  the compiled ``_step`` against :func:`psched.oasis.fast.minplus_step`;
* the units: the merge that prices a unit only when it reaches it
  (:func:`~psched.policies.oasis_rp.units.select_rising_compiled`) against pricing every unit
  and selecting among them (``select_units_compiled(unit_prices_sum(...))``), the same order
  and costs;
* where the recursion's work lies: on the first ``--prefix-sample`` recorded recursions, the
  share of the min-plus work (``sum (hi + 1)(k + 1)`` over the steps) at or before the optimum's
  completion slot. Work after it is all a tighter cut past the optimum could save.

    python benchmarks/bench_rp_kernels.py --seed 1
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import psched.policies.oasis_rp.own as own  # noqa: E402
import psched.policies.oasis_rp.units as units  # noqa: E402
from psched.core.simulator import simulate  # noqa: E402
from psched.oasis.fast import minplus_step, solve_fast  # noqa: E402
from psched.oasis.schedule import beats  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.policies.oasis_rp import dp  # noqa: E402
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs  # noqa: E402


def record(seed: int, jobs: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The inputs of every recursion and rising unit selection of one run."""
    searches: list[tuple[Any, ...]] = []
    selections: list[tuple[Any, ...]] = []
    solve, select = own.solve_compiled, units.select_rising_compiled

    def solve_rec(inp: Any, costs: np.ndarray, floor: float = 0.0,
                  row_of: np.ndarray | None = None) -> Any:
        searches.append((inp, costs.copy(), floor, None if row_of is None else row_of.copy()))
        return solve(inp, costs, floor, row_of=row_of)

    def select_rec(pw: np.ndarray, grow: np.ndarray, caps: np.ndarray, limit: int) -> Any:
        selections.append((pw.copy(), grow, caps.copy(), limit))
        return select(pw, grow, caps, limit)

    own.solve_compiled, units.select_rising_compiled = solve_rec, select_rec
    try:
        specs, _ = oasis_paper_jobs(jobs, seed=seed, slots=300)
        simulate(specs, oasis_paper_cluster(seed=seed),
                 make_policy("oasis-rp", certificate=False), 300)
    finally:
        own.solve_compiled, units.select_rising_compiled = solve, select
    return searches, selections


def _timed(fn: Any, items: list[tuple[Any, ...]]) -> tuple[float, list[Any]]:
    c0 = time.process_time()
    out = [fn(*a) for a in items]
    return time.process_time() - c0, out


def prefix_share(searches: list[tuple[Any, ...]]) -> float:
    """Share of the min-plus work at or before the optimum's completion slot: the loop of
    :func:`~psched.oasis.fast.solve_fast` replayed, each step's ``(hi + 1)(k + 1)`` counted."""
    before = after = 0
    for inp, costs, floor, _ in searches:
        best = solve_fast(inp, floor, costs=costs)
        last = -1 if best.counts is None else int(np.flatnonzero(best.counts).max())
        work = inp.job.work
        c_all = costs[:, : min(costs.shape[1], work + 1)]
        lb = dp.cost_lower_bound_compiled(c_all, work)
        if not np.isfinite(lb):
            continue
        util_after = np.maximum.accumulate(inp.util[::-1])[::-1]
        finite = np.isfinite(c_all)
        n_cap = np.where(finite.all(axis=1), c_all.shape[1], np.argmin(finite, axis=1)) - 1
        h = np.full(work + 1, np.inf)
        h[0] = 0.0
        reach, top, prev_c, changed = 0, floor, None, True
        for i in range(inp.n_slots):
            if not beats(util_after[i] - lb, top):
                break
            k = int(n_cap[i])
            if k <= 0:
                continue
            c = c_all[i, : k + 1]
            if prev_c is not None and np.array_equal(prev_c, c) and not changed:
                continue  # a stationary run: skipped, no work
            hi = min(work, reach + k)
            new, _ = minplus_step(h, c, hi)
            changed = not np.array_equal(new, h[: hi + 1])
            h[: hi + 1] = new
            reach, prev_c = hi, c
            if i <= last:
                before += (hi + 1) * (k + 1)
            else:
                after += (hi + 1) * (k + 1)
            if beats(float(inp.util[i]) - float(h[work]), top):
                top = float(inp.util[i]) - float(h[work])
    return before / max(before + after, 1)


def step_us(fn: Any, compiled: bool, work: int = 307, n: int = 52, reps: int = 20000) -> float:
    """Microseconds per min-plus step, ``work`` x ``n``."""
    rng = np.random.default_rng(0)
    h = np.sort(rng.random(work + 1)) * 100.0
    h[0] = 0.0
    c = np.sort(rng.random(n + 1)) * 10.0
    c[0] = 0.0
    bufs = [np.empty(work + 1) for _ in range(4)]
    arg = np.zeros(work + 1, dtype=np.int32)
    call = ((lambda: fn(h, c, n, work, bufs[0], arg, bufs[1], bufs[2], bufs[3])) if compiled
            else (lambda: fn(h, c, work)))
    call()
    c0 = time.perf_counter()
    for _ in range(reps):
        call()
    return (time.perf_counter() - c0) / reps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--prefix-sample", type=int, default=2000)
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    searches, selections = record(args.seed, args.jobs)
    # warm both paths (numba loads its cache on first use)
    dp.solve_compiled(*searches[0][:3], row_of=searches[0][3])
    fast_s, fast = _timed(lambda i, c, f, r: dp.solve_compiled(i, c, f, row_of=r), searches)
    ref_s, ref = _timed(lambda i, c, f, r: solve_fast(i, f, costs=c), searches)
    same = sum(a.payoff == b.payoff and ((a.counts is None and b.counts is None) or (
        a.counts is not None and b.counts is not None and np.array_equal(a.counts, b.counts)))
        for a, b in zip(fast, ref, strict=True))
    print(f"recursion, {len(searches)} recorded searches: compiled {fast_s:.2f} s, "
          f"solve_fast (numpy) {ref_s:.2f} s ({ref_s / fast_s:.1f}x); "
          f"the same payoff and schedule on {same} of {len(searches)}")
    print(f"one min-plus step, W = 307, N = 52: compiled {step_us(dp._step, True):.2f} us, "
          f"minplus_step (numpy) {step_us(minplus_step, False):.2f} us")

    def full(pw: np.ndarray, grow: np.ndarray, caps: np.ndarray, limit: int) -> Any:
        _, order, costs = units.select_units_compiled(units.unit_prices_sum(pw, grow), caps,
                                                      limit)
        return order, costs

    full(*selections[0])
    units.select_rising_compiled(*selections[0])
    lazy_s, lazy = _timed(units.select_rising_compiled, selections)
    full_s, every = _timed(full, selections)
    agree = sum(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                for a, b in zip(lazy, every, strict=True))
    print(f"units, {len(selections)} recorded selections: priced as the merge reaches them "
          f"{lazy_s:.2f} s, every unit priced {full_s:.2f} s ({full_s / lazy_s:.1f}x); "
          f"the same order and costs on {agree} of {len(selections)}")
    share = prefix_share(searches[: args.prefix_sample])
    print(f"recursion work at or before the optimum's completion slot, first "
          f"{min(args.prefix_sample, len(searches))} searches: {100 * share:.1f}%")


if __name__ == "__main__":
    main()
