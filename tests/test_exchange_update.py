"""The PS shard's in-place momentum update: both kernels, bit-identical to the pure update.

No Ray: :meth:`MomentumSGD.update_inplace` is what a shard runs on every push; with either
kernel (the fused Numba pass and the blocked NumPy one) it must give the same float32 bits as
:meth:`MomentumSGD.update` whatever the block size, the thread count and where the blocks and
runs fall.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_cluster.ps import optim
from ray_cluster.ps.optim import MomentumSGD, MomentumState

KERNELS = ["fused", "numpy"]


def _case(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, MomentumState]:
    rng = np.random.default_rng(seed)
    params = rng.standard_normal(n).astype(np.float32)
    grad = rng.standard_normal(n).astype(np.float32)
    return params, grad, MomentumState(buffer=rng.standard_normal(n).astype(np.float32), step=7)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), block=st.sampled_from([1, 3, 8, 64, 1 << 16]),
       threads=st.integers(1, 4), inside=st.booleans(), mu=st.sampled_from([0.0, 0.9, 0.99]),
       scale=st.floats(0.1, 8.0), factor=st.floats(0.5, 2.0), seed=st.integers(0, 99),
       read_only=st.booleans(), kernel=st.sampled_from(KERNELS))
def test_threaded_update_with_either_kernel_is_bit_identical_to_the_pure_update(
        n: int, block: int, threads: int, inside: bool, mu: float, scale: float,
        factor: float, seed: int, read_only: bool, kernel: str) -> None:
    opt = MomentumSGD(lr=0.05, momentum=mu, lr_in_buffer=inside)
    params, grad, state = _case(n, seed)
    want_p, want_s = opt.update(params, grad, state, lr_scale=scale, buffer_factor=factor)
    p2, s2 = params.copy(), MomentumState(buffer=state.buffer.copy(), step=state.step)
    grad.flags.writeable = not read_only  # as pushed: a read-only view of the object store
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optim, "BLOCK", block)  # small blocks: many blocks and runs per case
        got = opt.update_inplace(p2, grad, s2, lr_scale=scale, buffer_factor=factor,
                                 threads=threads, kernel=kernel)
    assert np.array_equal(p2, want_p) and np.array_equal(got.buffer, want_s.buffer)
    assert got.step == want_s.step == 8 and got.buffer is s2.buffer


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("inside", [False, True])
def test_update_of_many_default_blocks_matches_over_ten_steps(threads: int, inside: bool,
                                                              kernel: str) -> None:
    n = 5 * optim.BLOCK + 123  # uneven last block, runs that cut through blocks
    opt = MomentumSGD(lr=0.01, momentum=0.9, lr_in_buffer=inside)
    params, grad, state = _case(n, 1)
    p2, s2 = params.copy(), MomentumState(buffer=state.buffer.copy(), step=state.step)
    for k in range(10):
        scale, factor = 1.0 + 0.1 * k, 1.0 + 0.01 * k
        params, state = opt.update(params, grad, state, lr_scale=scale, buffer_factor=factor)
        s2 = opt.update_inplace(p2, grad, s2, lr_scale=scale, buffer_factor=factor,
                                threads=threads, kernel=kernel)
    assert np.array_equal(p2, params) and np.array_equal(s2.buffer, state.buffer)
    assert s2.step == state.step


@pytest.mark.parametrize("kernel", KERNELS)
def test_read_only_gradient_is_read_not_written(kernel: str) -> None:
    """A pushed gradient arrives as a read-only view of the object store."""
    opt = MomentumSGD(lr=0.1)
    params, grad, state = _case(1000, 2)
    before = grad.copy()
    grad.flags.writeable = False
    opt.update_inplace(params, grad, state, threads=2, kernel=kernel)
    assert np.array_equal(grad, before)


def test_auto_kernel_is_the_fused_one_once_loaded_and_never_waits_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = optim._fused_run
    monkeypatch.setattr(optim, "_fused_run", lambda *a: (calls.append(1), real(*a)))
    opt = MomentumSGD(lr=0.1)
    params, grad, state = _case(1000, 6)
    assert optim.fused_kernels() is not None  # numba is a dependency
    opt.update_inplace(params, grad, state)
    assert calls == [1]
    monkeypatch.setattr(optim, "_FUSED", None)  # as in a new process: nothing loaded yet
    monkeypatch.setattr(optim, "_FUSED_LOADER", None)
    opt.update_inplace(params, grad, state)
    assert calls == [1]  # NumPy blocks, and no loading started by the update itself
    assert optim._FUSED_LOADER is None


def test_background_load_starts_once_and_makes_the_kernels_ready(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(optim, "_FUSED", None)
    monkeypatch.setattr(optim, "_FUSED_LOADER", None)
    optim.load_fused_kernels_later()
    loader = optim._FUSED_LOADER
    assert loader is not None
    optim.load_fused_kernels_later()
    assert optim._FUSED_LOADER is loader  # one loader per process
    loader.join(timeout=120)
    assert optim.fused_kernels_ready() is not None


@pytest.mark.parametrize("inside", [False, True])
def test_without_numba_the_default_update_falls_back_to_numpy_blocks(
        inside: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(optim, "fused_kernels", lambda: None)
    monkeypatch.setattr(optim, "fused_kernels_ready", lambda: None)
    opt = MomentumSGD(lr=0.05, momentum=0.9, lr_in_buffer=inside)
    params, grad, state = _case(3 * optim.BLOCK, 4)
    want_p, want_s = opt.update(params, grad, state, lr_scale=2.0, buffer_factor=1.5)
    got = opt.update_inplace(params, grad, state, lr_scale=2.0, buffer_factor=1.5, threads=2)
    assert np.array_equal(params, want_p) and np.array_equal(got.buffer, want_s.buffer)
    with pytest.raises(RuntimeError, match="Numba"):
        opt.update_inplace(params, grad, state, kernel="fused")


def test_starting_a_loader_never_waits_for_an_import_in_progress(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard asks after every large update; the ask must not block on a running import."""
    import threading

    monkeypatch.setattr(optim, "_FUSED", None)
    monkeypatch.setattr(optim, "_FUSED_LOADER", None)
    with optim._FUSED_LOCK:  # as while a loader imports Numba
        for _ in range(2):  # the first starts a loader, the second sees it
            asker = threading.Thread(target=optim.load_fused_kernels_later)
            asker.start()
            asker.join(timeout=30)
            assert not asker.is_alive()
        loader = optim._FUSED_LOADER
        assert loader is not None and loader.is_alive()  # waiting for the lock, not the asker
    loader.join(timeout=120)
    assert optim.fused_kernels_ready() is not None


def test_kernels_that_fail_to_load_leave_the_numpy_kernel(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Not only a missing Numba: a broken one, or no writable cache, must not fail a shard."""
    import builtins
    import sys

    real_import = builtins.__import__

    def failing(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "ray_cluster.ps" and args[2] and "update_kernels" in args[2]:
            raise RuntimeError("cannot cache function 'lr_outside': no locator available")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(optim, "_FUSED", None)
    monkeypatch.delitem(sys.modules, "ray_cluster.ps.update_kernels", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing)
    assert optim.fused_kernels() is None
    assert "no fused momentum update (RuntimeError" in caplog.text
    opt = MomentumSGD(lr=0.05)
    params, grad, state = _case(500, 7)
    want_p, _ = opt.update(params, grad, state)
    opt.update_inplace(params, grad, state, threads=2)
    assert np.array_equal(params, want_p)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_update_of_non_float32_params_uses_numpy_blocks_and_matches(dtype: type) -> None:
    """The fused kernel is float32 only; other vectors take the NumPy kernel under "auto"."""
    opt = MomentumSGD(lr=0.05, momentum=0.9)
    params, grad, state = _case(1000, 5)
    params = params.astype(dtype)
    p2, s2 = params.copy(), MomentumState(buffer=state.buffer.copy(), step=state.step)
    opt.update_inplace(params, grad, state, threads=2)
    opt.update_inplace(p2, grad, s2, threads=2, kernel="numpy")
    assert np.array_equal(params, p2) and np.array_equal(state.buffer, s2.buffer)
    with pytest.raises(ValueError, match="contiguous float32"):
        opt.update_inplace(params, grad, state, kernel="fused")


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
    with pytest.raises(ValueError, match="kernel"):
        opt.update_inplace(params, grad, state, kernel="cuda")
