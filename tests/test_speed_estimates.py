"""Each job's speed, learnt from measured progress (``psched.core.speed``): exact where
reality is the model, converging where it is not, and the same after a journal round trip."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psched.core.speed import (
    MIN_SPEED,
    PRIOR_LEAST,
    PRIOR_MOST,
    PRIOR_SLOTS,
    PRIOR_WEAK,
    SPREAD_NOISE,
    Z_PROMISE,
    SpeedBook,
)


@given(slots=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 64)),
                      max_size=60))
def test_progress_exactly_as_profiled_gives_speed_one_no_spread_and_no_slack(slots):
    book = SpeedBook()
    for job, workers in slots:
        book.observe(job, "", workers, float(workers))
    for job in ("a", "b", "c", "never-ran"):
        assert book.speed(job) == 1.0 and book.spread(job) == 0.0
        assert book.slack(job, "", 50.0) == 0
        assert book.cautious(job, "", 50.0) == 1.0
    assert book.exact("") and book.prior("") == (1.0, 0.0)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9, 1.3])
def test_a_constant_speed_is_found_and_the_prior_of_the_next_job_is_it(rate):
    book = SpeedBook()
    for _ in range(30):
        book.observe("j", "w", 4, 4 * rate)
    # the only job of its workload: its prior is the profile's word, with a weak weight
    assert book.speed("j", "w") == pytest.approx((PRIOR_WEAK * 1.0 + 30 * rate)
                                                 / (PRIOR_WEAK + 30))
    assert book.prior("w")[0] == pytest.approx(rate)  # the next job of the workload
    assert book.speed("next", "w") == pytest.approx(rate)
    assert book.prior("other") == (1.0, 0.0)  # another workload learns nothing from it


def test_the_prior_weighs_more_once_other_jobs_of_the_workload_were_measured():
    book = SpeedBook()
    book.observe("a", "w", 1, 0.5)
    assert book.speed("a", "w") == pytest.approx((PRIOR_WEAK * 1.0 + 0.5) / (PRIOR_WEAK + 1))
    book.observe("b", "w", 1, 0.5)
    # b's prior is a's measured speed, with the full weight
    assert book.speed("b", "w") == pytest.approx((PRIOR_SLOTS * 0.5 + 0.5) / (PRIOR_SLOTS + 1))


def test_a_job_that_made_no_progress_is_planned_slow_not_never():
    book = SpeedBook()
    for _ in range(50):
        book.observe("stuck", "w", 2, 0.0)
    assert book.speed("stuck", "w") == pytest.approx(MIN_SPEED, abs=0.02)
    assert book.speed("stuck", "w") >= MIN_SPEED


@settings(max_examples=60, deadline=None)
@given(ratios=st.lists(st.floats(0.05, 2.0), min_size=2, max_size=40),
       noise_slots=st.floats(1.0, 100.0))
def test_more_uncertainty_never_gives_less_slack_and_caution_stays_below_the_estimate(
        ratios, noise_slots):
    book = SpeedBook()
    for r in ratios:
        book.observe("j", "w", 1, r)
    s = book.speed("j", "w")
    assert MIN_SPEED <= book.cautious("j", "w", noise_slots) <= s
    assert book.slack("j", "w", noise_slots) >= 0
    assert book.slack("j", "w", 2 * noise_slots) >= book.slack("j", "w", noise_slots)


def test_start_up_loss_is_measured_against_the_speed():
    book = SpeedBook()
    for _ in range(10):
        book.observe("j", "w", 2, 1.6)  # steady: 0.8
    book.observe_start("j", "w", 2, 0.8)  # half of that
    assert book.startup("w") == pytest.approx(0.5, rel=0.05)
    assert book.startup("x") == 0.0


@pytest.mark.parametrize("cost", [0.0, 0.25, 0.5])
def test_a_job_that_starts_then_runs_on_tells_its_workloads_start_up_cost_after_two_slots(
        cost):
    book = SpeedBook()
    book.observe_start("j", "w", 4, 4 * 1.2 * (1.0 - cost))  # its first slot, a start
    assert book.startup("w") == 0.0  # one slot tells nothing apart
    book.observe("j", "w", 4, 4 * 1.2)  # then steady at 1.2
    assert book.startup("w") == pytest.approx(cost, abs=1e-12)
    book.observe("j", "w", 4, 4 * 1.2)  # a second steady slot measures no start again
    assert book.startup("w") == pytest.approx(cost, abs=1e-12)


@given(slots=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["u", "v"]),
                                st.integers(1, 8), st.floats(0.0, 10.0)), max_size=30))
def test_the_book_survives_a_journal_round_trip(slots):
    book = SpeedBook()
    for job, workload, workers, progress in slots:
        book.observe(job + workload, workload, workers, progress)
        book.observe_start(job + workload, workload, workers, progress)
    again = SpeedBook.from_json(book.to_json())
    for job in ("au", "av", "bu", "bv", "new"):
        for w in ("u", "v"):
            assert math.isclose(again.speed(job, w), book.speed(job, w), rel_tol=1e-12)
            assert math.isclose(again.spread(job, w), book.spread(job, w), rel_tol=1e-9,
                                abs_tol=1e-12)
        assert again.startup("u") == book.startup("u")
        assert again.efficiency("u") == book.efficiency("u")


def test_efficiency_is_what_the_restarts_measured_cost_and_one_without_a_cost():
    book = SpeedBook()
    book.observe_start("j", "w", 4, 4 * 0.5)  # a start losing half a slot
    book.observe("j", "w", 4, 4.0)
    book.observe("j", "w", 4, 4.0)
    book.observe("j", "w", 4, 4.0)  # 16 worker-slots run, 4 of them in a start
    assert book.startup("w") == pytest.approx(0.5)
    assert book.efficiency("w") == pytest.approx(1.0 - 0.5 * 4 / 16)
    for _ in range(4):
        book.observe_start("k", "v", 2, 2.0)  # restarts that cost nothing
        book.observe("k", "v", 2, 2.0)
    assert book.efficiency("v") == 1.0 and book.efficiency("unseen") == 1.0


def _measured(book: SpeedBook, job: str, ratios: list[float], workers: int = 4) -> None:
    for i, r in enumerate(ratios):
        (book.observe_start if i == 0 else book.observe)(job, "w", workers, r * workers)


def test_jobs_that_differ_and_run_steadily_are_known_by_their_own_slots_at_once():
    """The prior weighs the per-slot spread over the spread between jobs: with no per-slot
    noise one steady slot of a job tells its speed (the prior's pull stays under 1%)."""
    book = SpeedBook()
    for job, speed in (("a", 0.7), ("b", 1.0), ("c", 1.3)):
        _measured(book, job, [speed] * 5)
    _measured(book, "d", [0.8, 0.8])
    assert book.speed("d", "w") == pytest.approx(0.8, abs=0.01)


def test_jobs_alike_in_noisy_slots_lean_on_the_workload_more_than_a_few_slots():
    rng = random.Random(3)
    book = SpeedBook()
    for job in "abcdef":  # all at 1.0, each slot 10% off either way
        _measured(book, job, [1.0 + rng.choice((-0.1, 0.1)) for _ in range(6)])
    _measured(book, "g", [1.0, 1.1])  # one steady slot, 10% fast by chance
    # more than PRIOR_SLOTS' pull toward the workload's 1.0
    assert 1.0 < book.speed("g", "w") < (PRIOR_SLOTS * 1.0 + 1.1) / (PRIOR_SLOTS + 1)


@given(speeds=st.lists(st.floats(0.3, 2.0), min_size=3, max_size=8),
       noise=st.floats(0.0, 0.3), own=st.floats(0.3, 2.0))
def test_the_prior_weighs_between_its_least_and_its_most_slots(speeds, noise, own):
    book = SpeedBook()
    for i, s in enumerate(speeds):
        _measured(book, f"j{i}", [s, s * (1 + noise), s * (1 - noise)])
    _measured(book, "new", [own, own])  # one steady slot at ``own``
    mu0 = book.prior("w", exclude="new")[0]
    ends = [(k * mu0 + own) / (k + 1) for k in (PRIOR_LEAST, PRIOR_MOST)]
    assert min(ends) - 1e-9 <= book.speed("new", "w") <= max(ends) + 1e-9


@given(speeds=st.lists(st.floats(0.3, 2.0), min_size=1, max_size=6),
       noise=st.floats(0.0, 0.3), own=st.floats(0.3, 2.0))
def test_a_reservation_never_assumes_a_job_faster_than_its_own_slots_allow(speeds, noise,
                                                                          own):
    """The estimate leans on the workload's prior (a slow job's a hair fast); the speed a
    reservation of its work left assumes (``guarded``) is the estimate, but no more than its
    own steady slots' mean plus two standard errors."""
    book = SpeedBook()
    for i, s in enumerate(speeds):
        _measured(book, f"j{i}", [s, s * (1 + noise), s * (1 - noise)])
    _measured(book, "new", [own, own * (1 + noise), own * (1 - noise)])
    steady = [own * (1 + noise), own * (1 - noise)]  # its first slot is a start
    mine = sum(steady) / 2
    bound = mine + 2.0 * statistics.pstdev(steady) / math.sqrt(2)
    guarded, speed = book.guarded("new", "w"), book.speed("new", "w")
    assert guarded <= speed
    # rel 2e-6: a spread within SPREAD_NOISE (1e-6) of the mean is taken for rounding
    assert guarded == pytest.approx(min(speed, bound), rel=2e-6)


def test_a_slow_job_among_fast_ones_is_reserved_at_its_own_speed():
    book = SpeedBook()
    for job, speed in (("a", 1.0), ("b", 1.2), ("c", 1.4)):
        _measured(book, job, [speed] * 4)
    _measured(book, "slow", [0.6] * 4)
    assert book.speed("slow", "w") > 0.6
    assert book.guarded("slow", "w") == pytest.approx(0.6, rel=1e-12)


def test_a_reservation_assumes_the_profile_where_reality_is_the_model():
    book = SpeedBook()
    _measured(book, "a", [1.0, 1.0, 1.0])
    assert book.guarded("a", "w") == book.speed("a", "w") == 1.0
    assert book.guarded("unseen", "w") == 1.0


@settings(max_examples=60, deadline=None)
@given(speed=st.floats(0.3, 1.5), startup=st.floats(0.0, 0.6), jobs=st.integers(1, 6),
       slots=st.floats(1.0, 50.0))
def test_while_only_start_slots_were_measured_no_promise_assumes_more_than_they_showed(
        speed, startup, jobs, slots):
    """A start slot runs at the speed less the start-up cost; until a steady slot tells the
    two apart, the speed a promise assumes (``cautious``) is at most what the start slots
    showed, for the jobs that ran them and for the next job of their workload alike: never
    more than the real speed."""
    book = SpeedBook()
    shown = speed * (1.0 - startup)
    for i in range(jobs):
        book.observe_start(f"j{i}", "w", 4, 4 * shown)
    for job in [f"j{i}" for i in range(jobs)] + ["next"]:
        cautious = book.cautious(job, "w", slots)
        assert cautious <= shown * (1 + 1e-12) <= speed * (1 + 1e-12)


def test_a_start_slot_bounds_a_promise_only_until_the_speed_is_measured():
    book = SpeedBook()
    book.observe_start("a", "w", 2, 2 * 0.45)  # speed 0.9, half a slot of start-up
    assert book.start_bound("a", "w") == pytest.approx(0.45)
    assert book.start_bound("unseen", "w") == pytest.approx(0.45)
    assert book.cautious("a", "w", 3.0) == pytest.approx(0.45)
    book.observe("a", "w", 2, 2 * 0.9)  # a steady slot: speed and start-up told apart
    assert book.start_bound("a", "w") is None
    assert book.start_bound("unseen", "w") is None  # the workload's prior is measured
    assert book.startup("w") == pytest.approx(0.5)
    assert book.cautious("a", "w", 3.0) <= book.speed("a", "w")


def test_start_slots_as_profiled_bound_nothing():
    book = SpeedBook()
    book.observe_start("a", "w", 3, 3.0)
    assert book.start_bound("a", "w") is None
    assert book.start_bound("unseen", "w") is None
    assert book.cautious("a", "w", 5.0) == 1.0


@settings(max_examples=60, deadline=None)
@given(speeds=st.lists(st.floats(0.3, 1.5), min_size=1, max_size=8))
def test_a_job_not_yet_run_is_promised_its_workloads_start_speeds_less_their_spread(speeds):
    """Before any job of a workload has a measured speed, the next one's own speed is unseen:
    its promise assumes the start slots' mean less :data:`Z_PROMISE` of their spread (an
    unseen job may be as slow as the spread between the others allows), never more than the
    slowest of equal ones, and the mean itself where they all ran at one speed."""
    book = SpeedBook()
    for i, s in enumerate(speeds):
        book.observe_start(f"j{i}", "w", 2, 2 * s)
    mean, sd = statistics.fmean(speeds), statistics.pstdev(speeds)
    want = mean * math.exp(-Z_PROMISE * sd / mean) if sd > SPREAD_NOISE * mean else mean
    bound = book.start_bound("next", "w")
    if all(s == 1.0 for s in speeds):
        assert bound is None
    else:
        assert bound == pytest.approx(want, rel=1e-6)
        assert book.cautious("next", "w", 10.0) <= bound * (1 + 1e-12) <= mean * (1 + 1e-12)
