"""Two ``oasis-rp`` variants on one ElasticFlow cell, arrival by arrival: where they part.

Runs variants ``--a`` and ``--b`` (``oasis-rp[:opt=value...]``) on the cell of
``policy_table.py`` (``ef-<trace>``, mapping seed ``--map-seed``) and records, for every
arrival decision (``_arrive``: each job of a slot's batch, in the order it is decided), the
slot, whether the job's own search found a schedule (``found``) and its payoff, the share of
each pool's capacity booked in the job's window at that moment (mean over the window's
slots, the largest resource share per slot; read from the policy's ledger before the job
is searched), and the outcome. Prints:

* utility earned by jobs arriving in each stretch of ``--stretch`` slots, A against B;
* the jobs in time under B only (and under A only), each with both variants' records;
* how each variant's rejections split: no schedule in the window (``no room``) or a
  schedule whose payoff is not positive (``priced out``), and what a re-pack or bump did.

    python benchmarks/rp_diverge.py --trace ef-195job --a oasis-rp \\
        --b oasis-rp:defer=1 --show 12

An analysis script: it wraps the policy's private ``_arrive`` and ``_search_new`` to read
what they saw (decisions are unchanged: nothing extra is searched; checked by comparing the
run's utility with an unwrapped run).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import collections  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from bench_oasis_rp import parse_variant  # noqa: E402
from rivals_tables import load  # noqa: E402

from psched.model import Job  # noqa: E402
from psched.policies import make_policy  # noqa: E402
from psched.promises import broken_promises  # noqa: E402
from psched.simulator import RunResult, simulate  # noqa: E402

__all__ = ["Seen", "main", "traced_run"]


@dataclass(frozen=True, kw_only=True)
class Seen:
    """What one arrival decision saw and did."""

    t: int  #: slot of the decision
    found: bool  #: the job's own search (before any re-pack) found a schedule
    payoff: float  #: that search's payoff (scaled; -inf if none)
    booked_w: float  #: worker pool: mean booked share over the window's slots
    booked_ps: float  #: PS pool: the same
    admitted: bool  #: admitted now
    held: bool  #: held (a reservation, or kept for a later decision)


def _booked(book: Any, t0: int, t1: int) -> tuple[float, float]:
    """Mean over slots ``t0..t1`` of the largest resource share booked, per pool."""
    out = []
    for usage, cap in zip(book.usage, book.capacity, strict=True):
        total = cap.sum(axis=0)
        used = usage[t0:t1 + 1].sum(axis=1)
        share = np.where(total > 0, used / np.where(total > 0, total, 1), 0.0).max(axis=1)
        out.append(float(share.mean()) if share.size else 0.0)
    return out[0], out[1]


def traced_run(variant: str, specs: list, cluster: Any,
               horizon: int) -> tuple[RunResult, dict[str, list[Seen]]]:
    """Run ``variant`` with every arrival decision recorded (a job may be decided twice: a
    held job is decided again in a later slot)."""
    name, kw = parse_variant(variant)
    kw.setdefault("certificate", False)
    pol = make_policy(name, **kw)
    seen: dict[str, list[Seen]] = collections.defaultdict(list)
    first: dict[str, Any] = {}
    arrive = pol._arrive

    def arrive_traced(st: Any, job: Job, t: int) -> Any:
        if "search_new" not in vars(st):  # the run state's admission search, traced
            search = st.search_new

            def search_new(job: Job, t: int) -> Any:
                got = search(job, t)
                first.setdefault(job.job_id, got)
                return got

            st.search_new = search_new
        w, p = _booked(st.book, t, job.last_slot)
        first.pop(job.job_id, None)
        d = arrive(st, job, t)
        got = first.pop(job.job_id, None)
        seen[job.job_id].append(Seen(
            t=t, found=bool(got is not None and got.schedule),
            payoff=float(got.payoff) if got is not None else float("nan"), booked_w=w,
            booked_ps=p, admitted=d.admitted, held=d.hold))
        return d

    pol._arrive = arrive_traced
    res = simulate(specs, cluster, pol, horizon)
    assert broken_promises(res) == [], "broken promise"
    return res, seen


def _job_line(job: Job) -> str:
    return (f"N {job.max_workers:2d}, work {job.work:4d} worker-slots, fastest "
            f"{job.fastest:3d} slots, window {job.window:3d} (arrives {job.arrival}, last slot "
            f"{job.last_slot}), utility at fastest {job.utility_at(job.fastest):.1f}")


def _seen_line(label: str, res: RunResult, seen: list[Seen], jid: str) -> str:
    rec = res.records[jid]
    steps = "; ".join(
        f"slot {s.t}: {'found' if s.found else 'no room'} "
        f"(booked W {s.booked_w:.0%}, PS {s.booked_ps:.0%}) -> "
        f"{'admitted' if s.admitted else 'held' if s.held else 'rejected'}" for s in seen)
    end = (f"completed slot {rec.completion}, utility {rec.utility:.1f}"
           if rec.completion is not None else f"not run ({rec.reason or 'rejected'})")
    return f"    {label}: {steps or 'never decided'}; {end}"


def summary(label: str, res: RunResult, seen: dict[str, list[Seen]]) -> None:
    """How ``label``'s arrival decisions ended: admitted, held, no room, priced out."""
    c: collections.Counter[str] = collections.Counter()
    for s in (s for ss in seen.values() for s in ss):
        if s.admitted:
            c["admitted" if s.found else "admitted after a re-pack or bump"] += 1
        elif s.held:
            c["held (reservation or batch)"] += 1
        else:
            c["rejected: no room" if not s.found else "rejected: priced out"] += 1
    recs = res.records.values()
    print(f"{label}: utility {sum(r.utility for r in recs):,.1f}, in time "
          f"{sum(r.utility > 0 for r in recs)}, completed "
          f"{sum(r.completion is not None for r in recs)}; decisions: "
          + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + f"; report {_counters(res)}")


def _counters(res: RunResult) -> str:
    keys = ("repack_tried", "repack_kept", "soft_reserved", "soft_bumps", "soft_dropped",
            "ahead_jobs", "ahead_moved", "pulled")
    return ", ".join(f"{k} {res.report.get(k, 0)}" for k in keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="ef-195job")
    ap.add_argument("--map-seed", type=int, default=0)
    ap.add_argument("--a", default="oasis-rp")
    ap.add_argument("--b", default="oasis-rp:defer=1")
    ap.add_argument("--stretch", type=int, default=20, help="arrival slots per utility row")
    ap.add_argument("--show", type=int, default=10, help="jobs listed per side")
    args = ap.parse_args()
    specs, cluster, horizon, desc = load(args.trace, args.map_seed)
    print(f"{desc}, mapping seed {args.map_seed}; load {os.getloadavg()[0]:.2f}")
    (ra, sa), (rb, sb) = (traced_run(v, specs, cluster, horizon) for v in (args.a, args.b))
    summary(f"A {args.a}", ra, sa)
    summary(f"B {args.b}", rb, sb)
    print(f"utility by arrival slot (A / B / A - B), {args.stretch} slots a row:")
    for lo in range(0, horizon, args.stretch):
        ua = sum(r.utility for r in ra.records.values()
                 if lo <= r.job.arrival < lo + args.stretch)
        ub = sum(r.utility for r in rb.records.values()
                 if lo <= r.job.arrival < lo + args.stretch)
        if ua or ub:
            print(f"  {lo:3d}-{lo + args.stretch - 1:3d}: {ua:8.1f} / {ub:8.1f} / {ua - ub:+8.1f}")
    order = sorted(ra.records, key=lambda j: (ra.records[j].job.arrival, j))
    for title, mine, other in (("in time under B only", rb, ra), ("in time under A only", ra, rb)):
        ids = [j for j in order if mine.records[j].utility > 0 == other.records[j].utility]
        print(f"{title}: {len(ids)} jobs, {sum(mine.records[j].utility for j in ids):,.1f}")
        for j in ids[: args.show]:
            print(f"  {j}: {_job_line(ra.records[j].job)}")
            print(_seen_line("A", ra, sa.get(j, []), j))
            print(_seen_line("B", rb, sb.get(j, []), j))
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
