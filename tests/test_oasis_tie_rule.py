"""The fast search, the literal DP and brute force pick the SAME schedule, not only the same
payoff (the tie rule of :mod:`psched.oasis.schedule`), so whole OASiS runs are identical.

Search level: every schedule returned on tiny instances equals brute force's pick under the
rule written over enumerated schedules; on small ones fast equals literal; on an idle cluster
with flat utility (every completion and every split ties) the rule is checked by hand.
Run level: ``oasis`` with ``method="fast"`` and ``method="literal"`` make every decision and
execute every allocation alike on Fig. 5 instances (several server counts and seeds).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oasis_cases import make_cluster, make_job, priced_inputs

from psched.core.records import RunResult
from psched.core.simulator import simulate
from psched.core.utility import Utility
from psched.oasis.brute import solve_brute
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, Ledger
from psched.oasis.literal import solve_literal
from psched.oasis.prices import fixed_params
from psched.oasis.schedule import Best, last_argmin
from psched.policies import make_policy
from psched.runs.ratio import instance_seed
from psched.traces.synth import fig5_instance

TINY = dict(servers=2, ps_servers=2, max_workers=3, max_work=5, slots=3)
SMALL = dict(servers=5, ps_servers=3, max_workers=8, max_work=30, slots=10)


def counts(best: Best) -> list[int] | None:
    return None if best.counts is None else [int(x) for x in best.counts]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inp=priced_inputs(**TINY), floor=st.sampled_from([-math.inf, 0.0]))
def test_fast_literal_and_brute_force_pick_the_same_schedule(inp: JobInputs,
                                                             floor: float) -> None:
    truth = counts(solve_brute(inp, floor=floor))
    assert counts(solve_fast(inp, floor=floor)) == truth
    assert counts(solve_literal(inp, floor=floor)) == truth


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inp=priced_inputs(**SMALL), floor=st.sampled_from([-math.inf, 0.0]))
def test_fast_and_literal_pick_the_same_schedule(inp: JobInputs, floor: float) -> None:
    assert counts(solve_fast(inp, floor=floor)) == counts(solve_literal(inp, floor=floor))


def flat_inputs(work: int, window: int, max_workers: int, servers: int = 2) -> JobInputs:
    """An idle cluster, flat prices, constant utility: every feasible schedule ties."""
    cluster = make_cluster([(4, 16, 16, 10)] * servers, [(8, 8, 10)] * servers)
    job = make_job(work=work, window=window, max_workers=max_workers,
                   utility=Utility(kind="constant", value=100.0))
    return Ledger(cluster, window, fixed_params(1.0, 1.0, 1.0, 1.0)).inputs(job)


@pytest.mark.parametrize(("work", "window", "n_max"), [(7, 5, 3), (9, 4, 3), (1, 6, 2),
                                                        (12, 6, 4), (5, 40, 2)])
def test_on_full_ties_the_earliest_completion_and_most_workers_late_win(
        work: int, window: int, n_max: int) -> None:
    """Flat prices: every schedule costs the same, so the rule alone decides. Earliest
    completion is ceil(W/N) - 1; the completion slot and the ones before it are full, the
    remainder lands in the first slot."""
    inp = flat_inputs(work, window, n_max)
    done = -(-work // n_max) - 1
    expect = [0] * window
    for i in range(done, -1, -1):
        expect[i] = min(n_max, work - sum(expect))
    for solve in (solve_fast, solve_literal):
        assert counts(solve(inp, floor=-math.inf)) == expect
    if window <= 4 and work <= 9:
        assert counts(solve_brute(inp, floor=-math.inf)) == expect


def test_last_argmin_keeps_the_largest_index_within_float_noise() -> None:
    assert last_argmin(np.array([3.0, 1.0, 1.0 + 1e-15, 2.0])) == 2
    assert last_argmin(np.array([1.0, 1.0 + 1e-6])) == 0
    assert last_argmin(np.array([math.inf, math.inf])) == 0


def run(n_servers: int, seed: int, method: str) -> RunResult:
    specs, cluster = fig5_instance(n_servers, seed=seed)
    return simulate(specs, cluster, make_policy("oasis", method=method, certificate=False), 10)


FIG5 = [(n, instance_seed(0, n, (1.0, 100.0), i)) for n in (3, 6, 9, 12) for i in range(6)]


@pytest.mark.parametrize(("n_servers", "seed"), FIG5)
def test_whole_oasis_runs_are_identical_with_fast_and_literal_search(n_servers: int,
                                                                      seed: int) -> None:
    """Every decision (admission, payoff, completion) and every executed allocation."""
    fast, lit = run(n_servers, seed, "fast"), run(n_servers, seed, "literal")
    assert list(fast.records) == list(lit.records)
    for jid, a in fast.records.items():
        b = lit.records[jid]
        assert (a.admitted, a.reason, a.first_slot, a.completion) == \
            (b.admitted, b.reason, b.first_slot, b.completion), jid
        assert (a.payoff is None) == (b.payoff is None)
        if a.payoff is not None:
            assert a.payoff == pytest.approx(b.payoff, rel=1e-9, abs=1e-12)
    assert sorted(fast.allocations) == sorted(lit.allocations)


def test_a_skipped_run_of_identical_slots_keeps_the_literal_choice() -> None:
    """Slots 0-3 equally busy, slot 4 idle (cheaper): the best schedule completes in slot 4
    with 2 workers there and its last worker in slot 3 -- a slot the fast search skips as a
    repeat of slot 2 (the tie rule puts the worker as late as possible)."""
    cluster = make_cluster([(4, 16, 16, 10)], [(8, 8, 10)])
    job = make_job(work=3, window=5, max_workers=2,
                   utility=Utility(kind="constant", value=100.0))
    ledger = Ledger(cluster, 5, fixed_params(10.0, 1.0, 10.0, 1.0))
    ledger.usage[0][0:4, 0, 0] = 1.0  # one GPU busy in slots 0-3
    inp = ledger.inputs(job)
    for solve in (solve_fast, solve_literal, solve_brute):
        assert counts(solve(inp, floor=-math.inf)) == [0, 0, 0, 1, 2]
