"""The own-usage unit prices with their per-job terms kept and the selection compiled
(:func:`psched.policies.oasis_rp.units.marginal_units_kept`) are
:func:`psched.policies.oasis_rp.own.marginal_units` bit for bit, the compiled selection is the
first ``limit`` columns of a stable sort, and the merge that prices units only as it reaches
them selects what the selection over every priced unit selects."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rp_search import SETTINGS, _ledgers

from psched.core.model import Job
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.search import priced_pools, window_tables
from psched.policies.oasis_rp.units import (
    marginal_units,
    marginal_units_kept,
    price_slope,
    select_rising_compiled,
    select_units_compiled,
    unit_prices_sum,
)


@settings(SETTINGS, max_examples=20)
@given(case=_ledgers(), extra=st.integers(0, 3))
def test_kept_marginal_units_are_marginal_units_bit_for_bit(
        case: tuple[list[PlanLedger], Job, dict[str, int]], extra: int) -> None:
    (fast, _), job, _ = case
    tab, _ = window_tables(fast, job, 0, fast.horizon)
    pools = priced_pools(fast, tab)
    limits = (job.max_workers + extra, int(tab.ps_needed[-1]) + extra)
    for _ in range(2):  # the second time from the kept terms
        for p in (0, 1):
            got = marginal_units_kept(fast, p, pools[p], tab.caps[p], limits[p])
            want = marginal_units(pools[p], tab.caps[p], price_slope(fast, p), limits[p])
            assert got.k == want.k
            pairs = [(got.order, want.order), (got.costs, want.costs)]
            if got.marg is not None:  # priced in full (units that do not rise in k)
                pairs.append((got.marg, want.marg))
            for a, b in pairs:
                assert a.shape == b.shape and np.array_equal(a, b)


@settings(SETTINGS, max_examples=60)
@given(rows=st.integers(1, 3), servers=st.integers(1, 5), k_max=st.integers(1, 4),
       limit=st.integers(0, 12), rising=st.booleans(), data=st.data())
def test_compiled_selection_is_the_head_of_a_stable_sort(rows: int, servers: int, k_max: int,
                                                         limit: int, rising: bool,
                                                         data: st.DataObject) -> None:
    """Few distinct prices (many ties) and caps that cut units off (``inf``); ``rising``:
    every server's units non-decreasing in ``k``, as own-usage prices are (the merge)."""
    raw = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]),
                                      min_size=rows * servers * k_max,
                                      max_size=rows * servers * k_max))).reshape(
        rows, servers, k_max)
    if rising:
        raw = np.sort(raw, axis=2)
    caps = np.array(data.draw(st.lists(st.integers(0, k_max + 1), min_size=rows * servers,
                                       max_size=rows * servers))).reshape(rows, servers)
    marg, order, costs = select_units_compiled(raw, caps, limit)
    want = np.where(np.arange(k_max)[None, None, :] < caps[:, :, None], raw, np.inf)
    assert np.array_equal(marg, want)
    flat = want.reshape(rows, -1)
    head = np.argsort(flat, axis=1, kind="stable")[:, :limit]
    assert np.array_equal(order, head)
    ranked = np.take_along_axis(flat, head, axis=1)
    total = np.full((rows, limit + 1), np.inf)
    total[:, 0] = 0.0
    total[:, 1:ranked.shape[1] + 1] = np.cumsum(ranked, axis=1)
    assert np.array_equal(costs, total)


@settings(SETTINGS, max_examples=80)
@given(rows=st.integers(1, 3), servers=st.integers(1, 5), k_max=st.integers(1, 4),
       resources=st.integers(1, 3), limit=st.integers(0, 12), data=st.data())
def test_lazy_merge_selects_what_the_full_selection_selects(
        rows: int, servers: int, k_max: int, resources: int, limit: int,
        data: st.DataObject) -> None:
    """Few distinct weights and growth terms (many equal units, ties by position), growth
    non-decreasing in ``k`` as ``exp`` of rising exponents is, caps that cut units off: the
    same order and costs as pricing every unit and selecting among them."""
    vals = st.sampled_from([0.0, 0.5, 1.0, 2.0])
    pw = np.array(data.draw(st.lists(vals, min_size=rows * servers * resources,
                                     max_size=rows * servers * resources))).reshape(
        rows, servers, resources)
    steps = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 1.0]),
                                        min_size=k_max * servers * resources,
                                        max_size=k_max * servers * resources))).reshape(
        k_max, servers, resources)
    grow = 1.0 + np.cumsum(steps, axis=0)
    caps = np.array(data.draw(st.lists(st.integers(0, k_max + 1), min_size=rows * servers,
                                       max_size=rows * servers))).reshape(rows, servers)
    _, want_order, want_costs = select_units_compiled(unit_prices_sum(pw, grow), caps, limit)
    order, costs = select_rising_compiled(pw, grow, caps, limit)
    assert np.array_equal(order, want_order)
    assert np.array_equal(costs, want_costs)
