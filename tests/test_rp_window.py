"""The compiled window tables (run boundaries, container caps of both pools, the feasibility
count in one call: :func:`psched.policies.oasis_rp.search.window_tables`) are the numpy composition
(:func:`~psched.policies.oasis_rp.search.window_tables_reference`) exactly, on ledgers changed by
random plans added and taken out."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rp_search import SETTINGS, _ledgers

from psched.core.model import Job
from psched.policies.oasis_rp.book import PlanLedger
from psched.policies.oasis_rp.search import window_tables, window_tables_reference


@settings(SETTINGS, max_examples=40)
@given(case=_ledgers(), lo=st.integers(0, 13), length=st.integers(1, 14))
def test_compiled_window_tables_are_the_reference_composition(
        case: tuple[list[PlanLedger], Job, dict[str, int]], lo: int, length: int) -> None:
    (fast, ref), job, _ = case
    t0 = min(lo, fast.horizon - 1)
    t1 = min(fast.horizon, t0 + length)
    assert fast.window_caps(job, t0, t1, job.max_workers) is not None  # the compiled path
    got, got_fit = window_tables(fast, job, t0, t1)
    want, want_fit = window_tables_reference(ref, job, t0, t1)
    assert got_fit == want_fit
    assert np.array_equal(got.starts, want.starts)
    assert np.array_equal(got.row_of, want.row_of)
    for a, b in zip(got.caps, want.caps, strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    assert np.array_equal(got.ps_needed, want.ps_needed)
    for p, q in zip(got.pools, want.pools, strict=True):
        assert np.array_equal(p.servers, q.servers)
        assert np.array_equal(p.demand, q.demand) and np.array_equal(p.norm, q.norm)


def test_a_reference_ledger_takes_the_numpy_composition() -> None:
    from test_rp_search import make_cluster, make_job

    from psched.oasis.prices import fixed_params

    cluster = make_cluster([(2.0, 4.0, 8.0, 10.0)], [(4.0, 8.0, 10.0)])
    book = PlanLedger(cluster, 5, fixed_params(5.0, 0.01, 20.0, 0.01), fast=False)
    job = make_job(work=3, window=5, max_workers=2)
    assert book.window_caps(job, 0, 5, 2) is None
    tab, fit = window_tables(book, job, 0, 5)
    assert fit == window_tables_reference(book, job, 0, 5)[1]
    assert tab.n_slots == 5


@settings(SETTINGS, max_examples=30)
@given(case=_ledgers(), lo=st.integers(0, 13), length=st.integers(1, 14))
def test_prices_read_by_the_compiled_exponent_are_the_reference_prices_bit_for_bit(
        case: tuple[list[PlanLedger], Job, dict[str, int]], lo: int, length: int) -> None:
    from psched.policies.oasis_rp.search import priced_pools, priced_pools_reference

    (fast, _), job, _ = case
    t0 = min(lo, fast.horizon - 1)
    t1 = min(fast.horizon, t0 + length)
    tab, _ = window_tables(fast, job, t0, t1)
    for _ in range(2):  # the second time from the kept terms
        with pytest.MonkeyPatch.context() as mp:  # the compiled path, not price_of
            mp.setattr(PlanLedger, "price_of", _no_price_of)
            got = priced_pools(fast, tab)
        want = priced_pools_reference(fast, tab)
        for a, b in zip(got, want, strict=True):
            assert a.price.shape == b.price.shape and np.array_equal(a.price, b.price)
            assert a.price.dtype == b.price.dtype
            assert a.servers is b.servers and a.demand is b.demand and a.norm is b.norm


def _no_price_of(*args: object) -> None:
    raise AssertionError("price_rows fell back to price_of")
