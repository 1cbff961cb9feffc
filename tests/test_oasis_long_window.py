"""Long windows (``oasis.md`` section 7: a window runs to the utility floor or the horizon).

The ledger prices one slot per run of identical slots and the search skips whole runs; both
must give exactly what pricing and searching every slot gives, and the search must stay
exact on a flat-utility job over a 2,500-slot horizon.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from oasis_cases import make_cluster, make_job, priced_inputs

from psched.core.model import Alloc
from psched.core.utility import Utility
from psched.oasis.fast import solve_fast
from psched.oasis.ledger import JobInputs, Ledger
from psched.oasis.literal import solve_literal
from psched.oasis.prices import fixed_params
from psched.oasis.schedule import placement_tables, slot_costs

SMALL = dict(servers=4, ps_servers=3, max_workers=6, max_work=24, slots=16)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(inp=priced_inputs(**SMALL))
def test_pricing_one_slot_per_run_equals_pricing_every_slot(inp: JobInputs) -> None:
    flat = dataclasses.replace(inp, runs=None)
    assert inp.runs is not None and inp.runs[0] == 0
    tab, tab_flat = placement_tables(inp), placement_tables(flat)
    for p in (0, 1):
        assert np.array_equal(tab.unit[p], tab_flat.unit[p])
        assert np.array_equal(tab.caps[p], tab_flat.caps[p])
    assert np.array_equal(slot_costs(inp), slot_costs(flat))
    a, b = solve_fast(inp, floor=-math.inf), solve_fast(flat, floor=-math.inf)
    assert a.payoff == b.payoff
    assert (a.counts is None) == (b.counts is None)
    if a.counts is not None:
        assert np.array_equal(a.counts, b.counts)


def test_ledger_runs_split_exactly_where_the_usage_changes() -> None:
    cluster = make_cluster([(4, 16, 16, 10)] * 2, [(8, 8, 10)])
    ledger = Ledger(cluster, 20, fixed_params(10.0, 1.0, 10.0, 1.0))
    ledger.usage[0][3:7, 1, 0] = 2.0
    ledger.usage[1][5, 0, 1] = 1.0
    assert ledger.runs(0, 20).tolist() == [0, 3, 5, 6, 7]
    assert ledger.runs(4, 9).tolist() == [0, 1, 2, 3]
    job = make_job(work=3, window=20, max_workers=2)
    inp = ledger.inputs(job)
    for p in (0, 1):
        assert np.array_equal(inp.workers.price if p == 0 else inp.ps.price,
                              ledger.scaled_prices(p, 0, 20))


def long_horizon(busy_until: int, horizon: int = 2500) -> tuple[Ledger, JobInputs]:
    """Two worker and two PS servers; a GPU taken on server 0 in slots 0..busy_until-1 and a
    scattered commitment at slots 2000-2004; a constant-utility job arriving in slot 0."""
    cluster = make_cluster([(4, 16, 16, 10)] * 2, [(8, 8, 10)] * 2)
    ledger = Ledger(cluster, horizon, fixed_params(50.0, 0.5, 50.0, 0.5))
    job = make_job(work=7, window=horizon, max_workers=3, ps=(1, 1, 2),
                   utility=Utility(kind="constant", value=100.0))
    busy = {t: Alloc.of({0: 2, 1: 1}, {cluster.servers.index(cluster.servers[2]): 1})
            for t in range(busy_until)}
    busy.update({t: Alloc.of({1: 3}, {}) for t in range(2000, 2005)})
    ledger.commit(make_job(work=1, window=horizon, max_workers=3, job_id="b"), busy)
    return ledger, ledger.inputs(job)


def test_a_flat_job_on_a_2500_slot_horizon_gets_the_literal_schedule() -> None:
    """Early slots busy (dear), the future idle (cheap): a job whose utility never decays
    waits for the cheap slots, far beyond the old cap of max(10 x fastest, 50) slots."""
    _, inp = long_horizon(busy_until=1500)
    assert inp.n_slots == 2500 and len(inp.runs) <= 6
    fast, lit = solve_fast(inp, floor=0.0), solve_literal(inp, floor=0.0)
    assert fast.counts is not None and lit.counts is not None
    assert math.isclose(fast.payoff, lit.payoff, rel_tol=1e-12)
    assert np.array_equal(fast.counts, lit.counts)
    assert fast.completion == 1502  # the first idle slots, 1500-1502 (2 + 2 + 3 workers)


def test_a_flat_job_on_an_idle_long_horizon_completes_as_early_as_possible() -> None:
    _, inp = long_horizon(busy_until=0)
    fast, lit = solve_fast(inp, floor=0.0), solve_literal(inp, floor=0.0)
    assert fast.counts is not None and np.array_equal(fast.counts, lit.counts)
    assert fast.completion == 2  # ceil(7 / 3) - 1: every completion ties in utility


class HighWaterLedger(Ledger):
    """Prices from a high-water mark of the usage, as a revisable-plan policy might."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.high = tuple(np.zeros_like(u) for u in self.usage)

    def price_usage(self) -> tuple[np.ndarray, ...]:
        return self.high


class OverridingLedger(Ledger):
    """Overrides scaled_prices itself (an older way to change the price source)."""

    def scaled_prices(self, pool: int, t0: int, t1: int) -> np.ndarray:
        return 2.0 * super().scaled_prices(pool, t0, t1)


def test_subclasses_choose_what_prices_follow_and_runs_respect_it() -> None:
    cluster = make_cluster([(4, 16, 16, 10)] * 2, [(8, 8, 10)])
    job = make_job(work=3, window=12, max_workers=2)
    high = HighWaterLedger(cluster, 12, fixed_params(10.0, 1.0, 10.0, 1.0))
    high.high[0][4:9, 0, 0] = 3.0  # priced as busy, though nothing is committed
    inp = high.inputs(job)
    assert inp.runs is not None and inp.runs.tolist() == [0, 4, 9]
    assert np.array_equal(inp.workers.price, high.scaled_prices(0, 0, 12))
    assert inp.workers.price[5, 0, 0] > inp.workers.price[0, 0, 0]
    assert np.array_equal(inp.workers.resid[5], high.capacity[0])  # capacity is all free
    over = OverridingLedger(cluster, 12, fixed_params(10.0, 1.0, 10.0, 1.0))
    inp2 = over.inputs(job)
    assert inp2.runs is None
    assert np.array_equal(inp2.ps.price, over.scaled_prices(1, 0, 12))
