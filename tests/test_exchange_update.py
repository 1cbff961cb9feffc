"""The PS shard's in-place momentum update: blocked and threaded, bit-identical to the pure one.

No Ray: :meth:`MomentumSGD.update_inplace` is what a shard runs on every push; it must give the
same float32 bits as :meth:`MomentumSGD.update` whatever the block size, the thread count and
where the blocks and runs fall.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_cluster import optim
from ray_cluster.optim import MomentumSGD, MomentumState


def _case(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, MomentumState]:
    rng = np.random.default_rng(seed)
    params = rng.standard_normal(n).astype(np.float32)
    grad = rng.standard_normal(n).astype(np.float32)
    return params, grad, MomentumState(buffer=rng.standard_normal(n).astype(np.float32), step=7)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), block=st.sampled_from([1, 3, 8, 64, 1 << 16]),
       threads=st.integers(1, 4), inside=st.booleans(), mu=st.sampled_from([0.0, 0.9, 0.99]),
       scale=st.floats(0.1, 8.0), factor=st.floats(0.5, 2.0), seed=st.integers(0, 99))
def test_blocked_threaded_update_is_bit_identical_to_the_pure_update(
        n: int, block: int, threads: int, inside: bool, mu: float, scale: float,
        factor: float, seed: int) -> None:
    opt = MomentumSGD(lr=0.05, momentum=mu, lr_in_buffer=inside)
    params, grad, state = _case(n, seed)
    want_p, want_s = opt.update(params, grad, state, lr_scale=scale, buffer_factor=factor)
    p2, s2 = params.copy(), MomentumState(buffer=state.buffer.copy(), step=state.step)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optim, "BLOCK", block)  # small blocks: many blocks and runs per case
        got = opt.update_inplace(p2, grad, s2, lr_scale=scale, buffer_factor=factor,
                                 threads=threads)
    assert np.array_equal(p2, want_p) and np.array_equal(got.buffer, want_s.buffer)
    assert got.step == want_s.step == 8 and got.buffer is s2.buffer


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("inside", [False, True])
def test_update_of_many_default_blocks_matches_over_ten_steps(threads: int, inside: bool) -> None:
    n = 5 * optim.BLOCK + 123  # uneven last block, runs that cut through blocks
    opt = MomentumSGD(lr=0.01, momentum=0.9, lr_in_buffer=inside)
    params, grad, state = _case(n, 1)
    p2, s2 = params.copy(), MomentumState(buffer=state.buffer.copy(), step=state.step)
    for k in range(10):
        scale, factor = 1.0 + 0.1 * k, 1.0 + 0.01 * k
        params, state = opt.update(params, grad, state, lr_scale=scale, buffer_factor=factor)
        s2 = opt.update_inplace(p2, grad, s2, lr_scale=scale, buffer_factor=factor,
                                threads=threads)
    assert np.array_equal(p2, params) and np.array_equal(s2.buffer, state.buffer)
    assert s2.step == state.step


def test_read_only_gradient_is_read_not_written() -> None:
    """A pushed gradient arrives as a read-only view of the object store."""
    opt = MomentumSGD(lr=0.1)
    params, grad, state = _case(1000, 2)
    before = grad.copy()
    grad.flags.writeable = False
    opt.update_inplace(params, grad, state, threads=2)
    assert np.array_equal(grad, before)


def test_in_place_update_refuses_bad_shapes_and_thread_counts() -> None:
    opt = MomentumSGD(lr=0.1)
    params, grad, state = _case(6, 3)
    with pytest.raises(ValueError, match="shapes differ"):
        opt.update_inplace(params, grad[:5], state)
    with pytest.raises(ValueError, match="threads"):
        opt.update_inplace(params, grad, state, threads=0)
    flat = MomentumState(buffer=state.buffer.reshape(2, 3), step=0)
    with pytest.raises(ValueError, match="flat vectors"):
        opt.update_inplace(params.reshape(2, 3), grad.reshape(2, 3), flat)
