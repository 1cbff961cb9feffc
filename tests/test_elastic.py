"""Dynamic SGD learning-rate scale (exact sequences) and momentum SGD over shards."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_cluster.ps.elastic import LRScaleSchedule
from ray_cluster.ps.optim import (
    MomentumSGD,
    MomentumState,
    concat_states,
    shard_bounds,
    split_state,
)


def _seq(s: LRScaleSchedule, lo: int, hi: int) -> list[float]:
    return [s.scale(t) for t in range(lo, hi)]


def test_dynamic_ramps_linearly_over_eight_steps_from_one_to_sixteen() -> None:
    s = LRScaleSchedule(rule="dynamic", ramp_steps=8)
    s.on_resize(1, 16, step=100)
    assert _seq(s, 98, 110) == [1.0, 1.0, 1.0, 2.875, 4.75, 6.625, 8.5, 10.375, 12.25,
                                14.125, 16.0, 16.0]


def test_linear_rule_jumps_at_once_and_none_stays_at_one() -> None:
    lin, none = LRScaleSchedule(rule="linear"), LRScaleSchedule(rule="none")
    for s in (lin, none):
        s.on_resize(1, 32, step=5)
    assert _seq(lin, 3, 8) == [1.0, 1.0, 32.0, 32.0, 32.0]
    assert _seq(none, 0, 20) == [1.0] * 20


def test_scale_down_ramps_down_the_same_way() -> None:
    s = LRScaleSchedule(rule="dynamic", ramp_steps=4)
    s.on_resize(8, 4, step=0)
    assert _seq(s, 0, 6) == [1.0, 0.875, 0.75, 0.625, 0.5, 0.5]


def test_change_inside_a_ramp_restarts_from_the_current_scale() -> None:
    s = LRScaleSchedule(rule="dynamic", ramp_steps=8)
    s.on_resize(1, 16, step=0)
    assert s.scale(4) == 8.5
    s.on_resize(16, 32, step=4)          # target doubles, ramp restarts at 8.5
    assert _seq(s, 0, 14) == [1.0, 2.875, 4.75, 6.625, 8.5, 11.4375, 14.375, 17.3125, 20.25,
                              23.1875, 26.125, 29.0625, 32.0, 32.0]
    s.on_resize(32, 8, step=14)          # scale-down after the ramp: 32 -> 8
    assert _seq(s, 14, 16) == [32.0, 29.0]
    assert s.scale(100) == 8.0


def test_chained_changes_after_ramps_multiply_the_scale() -> None:
    s = LRScaleSchedule(rule="dynamic", ramp_steps=2)
    s.on_resize(2, 4, step=0)
    s.on_resize(4, 12, step=10)
    assert _seq(s, 0, 14) == [1.0, 1.5] + [2.0] * 9 + [4.0, 6.0, 6.0]


def test_buffer_factors_telescope_to_the_scale() -> None:
    s = LRScaleSchedule(rule="dynamic", ramp_steps=8)
    s.on_resize(1, 16, step=3)
    s.on_resize(16, 4, step=7)
    assert s.buffer_factor(0) == 1.0
    prod = math.prod(s.buffer_factor(t) for t in range(1, 40))
    assert prod == pytest.approx(s.scale(39)) and s.scale(39) == 4.0


def test_resize_before_the_last_change_or_bad_counts_are_refused() -> None:
    s = LRScaleSchedule()
    s.on_resize(1, 2, step=10)
    with pytest.raises(ValueError, match="before the last change"):
        s.on_resize(2, 4, step=9)
    with pytest.raises(ValueError, match=">= 1"):
        s.on_resize(0, 4, step=12)
    with pytest.raises(ValueError):
        LRScaleSchedule(rule="sqrt")


@st.composite
def _resizes(draw: st.DrawFn) -> list[tuple[int, int]]:
    steps = sorted(draw(st.lists(st.integers(0, 60), min_size=1, max_size=6)))
    workers = draw(st.lists(st.integers(1, 32), min_size=len(steps) + 1,
                            max_size=len(steps) + 1))
    return [*list(zip(steps, workers, strict=False)), (-1, workers[-1])]


@settings(max_examples=60, deadline=None)
@given(plan=_resizes(), ramp=st.integers(1, 10))
def test_dynamic_ends_at_the_linear_scale_and_stays_between_endpoints(
        plan: list[tuple[int, int]], ramp: int) -> None:
    dyn, lin = LRScaleSchedule("dynamic", ramp), LRScaleSchedule("linear", ramp)
    first = plan[0][1]
    cur = first
    for (step, _), (_, nxt) in itertools.pairwise(plan):
        for s in (dyn, lin):
            s.on_resize(cur, nxt, step)
        cur = nxt
    end = plan[-2][0] + ramp
    assert dyn.scale(end) == pytest.approx(cur / first)
    assert lin.scale(end) == pytest.approx(cur / first)
    ramps = dyn.ramps
    for i, r in enumerate(ramps):
        lo, hi = sorted((r.start, r.target))
        stop = r.step + ramp if i + 1 == len(ramps) else min(r.step + ramp, ramps[i + 1].step)
        for t in range(r.step, stop):
            assert lo - 1e-12 <= dyn.scale(t) <= hi + 1e-12
    assert LRScaleSchedule.from_dict(dyn.to_dict()) == dyn


# --------------------------------------------------------------------------- optimizer
def _run(opt: MomentumSGD, sched: LRScaleSchedule, steps: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    w = rng.normal(size=n).astype(np.float32)
    state = opt.init(n)
    for _ in range(steps):
        g = rng.normal(size=n).astype(np.float32)
        lr_scale, factor = sched.factors(state.step)
        w, state = opt.update(w, g, state, lr_scale=lr_scale, buffer_factor=factor)
    return w


@pytest.mark.parametrize("rule", ["dynamic", "linear", "none"])
@pytest.mark.parametrize("mu", [0.0, 0.9, 0.99])
def test_lr_inside_and_outside_the_buffer_give_the_same_iterates(rule: str, mu: float) -> None:
    sched = LRScaleSchedule(rule=rule, ramp_steps=8)
    sched.on_resize(1, 16, step=5)
    sched.on_resize(16, 4, step=9)
    out = _run(MomentumSGD(lr=0.01, momentum=mu), sched, 30, 50)
    ins = _run(MomentumSGD(lr=0.01, momentum=mu, lr_in_buffer=True), sched, 30, 50)
    np.testing.assert_allclose(ins, out, rtol=1e-4, atol=1e-5)


def test_one_update_follows_the_equations() -> None:
    w, g = np.array([1.0, 2.0], np.float32), np.array([0.5, -1.0], np.float32)
    st0 = MomentumState(buffer=np.array([1.0, 1.0], np.float32), step=3)
    w1, st1 = MomentumSGD(lr=0.5, momentum=0.5).update(w, g, st0, lr_scale=2.0)
    np.testing.assert_array_equal(st1.buffer, [1.0, -0.5])      # u = 0.5 * 1 + g
    np.testing.assert_array_equal(w1, [0.0, 2.5])                # w - 1.0 * u
    w2, st2 = MomentumSGD(lr=0.5, momentum=0.5, lr_in_buffer=True).update(
        w, g, st0, lr_scale=2.0, buffer_factor=2.0)
    np.testing.assert_array_equal(st2.buffer, [1.5, 0.0])      # v = 0.5*2*1 + 1.0*g
    np.testing.assert_array_equal(w2, [-0.5, 2.0])
    assert st1.step == st2.step == 4


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), shards=st.integers(1, 8), steps=st.integers(1, 5),
       inside=st.booleans(), seed=st.integers(0, 2**16))
def test_sharded_updates_concatenate_to_the_unsharded_update(n: int, shards: int, steps: int,
                                                             inside: bool, seed: int) -> None:
    shards = min(shards, n)
    opt = MomentumSGD(lr=0.1, momentum=0.9, lr_in_buffer=inside)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=n).astype(np.float32)
    state = MomentumState(buffer=rng.normal(size=n).astype(np.float32), step=2)
    bounds = shard_bounds(n, shards)
    parts, part_states = [w[a:b].copy() for a, b in bounds], split_state(state, bounds)
    assert concat_states(part_states).buffer.tolist() == state.buffer.tolist()
    for _ in range(steps):
        g = rng.normal(size=n).astype(np.float32)
        w, state = opt.update(w, g, state, lr_scale=3.0, buffer_factor=1.5)
        for i, (a, b) in enumerate(bounds):
            parts[i], part_states[i] = opt.update(parts[i], g[a:b], part_states[i],
                                                  lr_scale=3.0, buffer_factor=1.5)
    assert np.array_equal(np.concatenate(parts), w)
    merged = concat_states(part_states)
    assert np.array_equal(merged.buffer, state.buffer) and merged.step == state.step
    assert [b - a for a, b in bounds] == sorted((b - a for a, b in bounds), reverse=True)
    assert bounds[0][0] == 0 and bounds[-1][1] == n


def test_concat_refuses_shards_at_different_steps() -> None:
    a = MomentumState(buffer=np.zeros(2, np.float32), step=1)
    b = MomentumState(buffer=np.zeros(2, np.float32), step=2)
    with pytest.raises(ValueError, match="different steps"):
        concat_states([a, b])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 50), inside=st.booleans(), mu=st.sampled_from([0.0, 0.9, 0.99]),
       scale=st.floats(0.1, 8.0), factor=st.floats(0.5, 2.0), seed=st.integers(0, 99))
def test_in_place_update_is_bit_identical_to_the_pure_update(
        n: int, inside: bool, mu: float, scale: float, factor: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    opt = MomentumSGD(lr=0.05, momentum=mu, lr_in_buffer=inside)
    params = rng.standard_normal(n).astype(np.float32)
    state = MomentumState(buffer=rng.standard_normal(n).astype(np.float32), step=3)
    grad = rng.standard_normal(n).astype(np.float32)
    want_p, want_s = opt.update(params, grad, state, lr_scale=scale, buffer_factor=factor)
    p2, s2 = params.copy(), MomentumState(buffer=state.buffer.copy(), step=state.step)
    got_s = opt.update_inplace(p2, grad, s2, lr_scale=scale, buffer_factor=factor)
    assert np.array_equal(p2, want_p) and np.array_equal(got_s.buffer, want_s.buffer)
    assert got_s.step == want_s.step and got_s.buffer is s2.buffer
