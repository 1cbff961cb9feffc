"""Momentum SGD over flat parameter vectors and their shards, in both forms of [1]_.

LR outside the buffer (PyTorch's form)::

    u_{t+1} = mu u_t + g_t;          w_{t+1} = w_t - eta s_t u_{t+1}

LR inside the buffer (Caffe / MXNet form), with the momentum compensation of Dynamic SGD::

    v_{t+1} = mu c_t v_t + eta s_t g_t;   w_{t+1} = w_t - v_{t+1}

where ``s_t`` is the learning-rate scale and ``c_t = s_t / s_{t-1}`` the buffer factor, both
from :class:`ray_cluster.ps.elastic.LRScaleSchedule` (``schedule.factors(state.step)``). With the
compensation, ``v_t = eta s_{t-1} u_t`` and the two forms give the same iterates.

Every operation is element-wise, so a parameter server may cut the vector into contiguous
shards (:func:`shard_bounds`), update each with its slice of the state (:func:`split_state`),
and put them back (:func:`concat_states`): the result equals the unsharded update bit for bit.
State is ``(buffer, step)``: a float32 vector and the number of updates applied.

References
----------
.. [1] H. Lin et al., "Dynamic Mini-batch SGD for Elastic Distributed Training", 2019.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BLOCK", "FUSED_MIN_ELEMENTS", "MomentumSGD", "MomentumState", "concat_states",
           "fused_kernels", "fused_kernels_ready", "load_fused_kernels_later", "shard_bounds",
           "split_state"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, eq=False)  # arrays: compare by identity
class MomentumState:
    """Optimizer state of one vector or one shard; plain arrays, so it checkpoints as is."""

    buffer: np.ndarray          #: u_t (LR outside) or v_t (LR inside), float32, params' shape
    step: int                   #: updates applied so far (t)


@dataclass(frozen=True, kw_only=True)
class MomentumSGD:
    """Heavy-ball momentum SGD; O(n) time and memory per update of n parameters."""

    lr: float                   #: base learning rate eta (scale 1)
    momentum: float = 0.9       #: mu, in [0, 1)
    lr_in_buffer: bool = False  #: True: v = mu v + eta g (LR inside); False: LR outside

    def __post_init__(self) -> None:
        if not self.lr > 0 or not 0 <= self.momentum < 1:
            raise ValueError(f"need lr > 0 and 0 <= momentum < 1, got {self.lr}, "
                             f"{self.momentum}")

    def init(self, n_params: int) -> MomentumState:
        """Zero buffer at step 0."""
        return MomentumState(buffer=np.zeros(n_params, dtype=np.float32), step=0)

    def update(self, params: np.ndarray, grad: np.ndarray, state: MomentumState, *,
               lr_scale: float = 1.0,
               buffer_factor: float = 1.0) -> tuple[np.ndarray, MomentumState]:
        """One update; returns new ``(params, state)`` and leaves the inputs untouched.

        Parameters
        ----------
        params, grad
            float32 vectors (or shards) of one shape.
        state
            the state of the same vector or shard.
        lr_scale
            ``s_t``: the learning rate used is ``lr * lr_scale``.
        buffer_factor
            ``c_t = s_t / s_{t-1}``: multiplies the buffer before the update in the LR-inside
            form; ignored in the LR-outside form, where the buffer is left alone.
        """
        if params.shape != grad.shape or params.shape != state.buffer.shape:
            raise ValueError(f"shapes differ: params {params.shape}, grad {grad.shape}, "
                             f"buffer {state.buffer.shape}")
        mu = np.float32(self.momentum)
        eta = np.float32(self.lr * lr_scale)
        g = grad.astype(np.float32, copy=False)
        if self.lr_in_buffer:
            buf = (mu * np.float32(buffer_factor)) * state.buffer + eta * g
            new = params - buf
        else:
            buf = mu * state.buffer + g
            new = params - eta * buf
        return new.astype(np.float32, copy=False), MomentumState(buffer=buf, step=state.step + 1)

    def update_inplace(self, params: np.ndarray, grad: np.ndarray, state: MomentumState, *,
                       lr_scale: float = 1.0, buffer_factor: float = 1.0,
                       threads: int = 1, kernel: str = "auto") -> MomentumState:
        """:meth:`update` writing into ``params`` and ``state.buffer`` (no new vectors).

        The same arithmetic in the same float32 order, element by element, so the result is
        bit-identical to :meth:`update`; a PS shard runs it on every push. Two kernels:

        ``"fused"``
            one compiled pass over memory (:mod:`ray_cluster.ps.update_kernels`, Numba): each
            vector is read once (``params``, ``grad``, ``buffer``) and written once
            (``params``, ``buffer``), the arithmetic in registers. Needs float32 vectors.
        ``"numpy"``
            the vectors cut into blocks of :data:`BLOCK` elements and the four NumPy
            operations run on one block while it is in the core's cache: the same memory
            traffic, plus a NumPy call per operation and block (at 400 MB, about as costly as
            the traffic: ``benchmarks/exp_update_kernel.py``).

        Parameters
        ----------
        params, grad, state
            as in :meth:`update`; ``params`` and ``state.buffer`` must be writeable.
        lr_scale, buffer_factor
            as in :meth:`update`.
        threads
            the vectors are split into this many contiguous runs, each updated by a thread of
            a pool shared by the process (both kernels release the GIL). Every element still
            sees the same operations, so the result does not depend on it.
        kernel
            ``"auto"`` (the default): ``"fused"`` if its kernels are loaded already
            (:func:`fused_kernels` or :func:`load_fused_kernels_later`; never waits for them)
            and the vectors are contiguous float32, else ``"numpy"``. ``"fused"`` loads the
            kernels if need be and raises :class:`RuntimeError` without Numba.

        Returns
        -------
        MomentumState
            the state after the update, holding ``state.buffer`` itself.

        Notes
        -----
        O(n) time; O(:data:`BLOCK`) extra memory per thread with the NumPy kernel, none with
        the fused one.
        """
        if params.shape != grad.shape or params.shape != state.buffer.shape:
            raise ValueError(f"shapes differ: params {params.shape}, grad {grad.shape}, "
                             f"buffer {state.buffer.shape}")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if params.ndim != 1:
            raise ValueError(f"the in-place update takes flat vectors, got shape {params.shape}")
        if kernel not in ("auto", "fused", "numpy"):
            raise ValueError(f"kernel must be 'auto', 'fused' or 'numpy', got {kernel!r}")
        w, buf = params, state.buffer
        g = np.ascontiguousarray(grad, dtype=np.float32)
        mu = np.float32(self.momentum)
        eta = np.float32(self.lr * lr_scale)
        decay = mu * np.float32(buffer_factor)  # the LR-inside form's buffer multiplier
        if kernel == "fused":
            fused = fused_kernels()
            if fused is None:
                raise RuntimeError("the fused update kernel needs Numba (pip install numba)")
        else:
            fused = fused_kernels_ready() if kernel == "auto" else None
        if fused is not None and not all(a.dtype == np.float32 and a.flags.c_contiguous
                                         for a in (w, buf)):
            if kernel == "fused":
                raise ValueError("the fused update kernel takes contiguous float32 vectors")
            fused = None
        if fused is not None:
            fn, a = (fused.lr_inside, decay) if self.lr_in_buffer else (fused.lr_outside, mu)
            run = functools.partial(_fused_run, fn, w, g, buf, a, eta)
        else:
            run = functools.partial(self._update_run, w, g, buf, mu, eta, decay)
        n = w.size
        runs = min(threads, max(1, n // (2 * BLOCK)))  # no thread for less than two blocks
        if runs == 1:
            run(0, n)
        else:
            pool = _pool(runs)
            for job in [pool.submit(run, lo, hi) for lo, hi in shard_bounds(n, runs)]:
                job.result()
        return MomentumState(buffer=state.buffer, step=state.step + 1)

    def _update_run(self, w: np.ndarray, g: np.ndarray, buf: np.ndarray, mu: np.float32,
                    eta: np.float32, decay: np.float32, lo: int, hi: int) -> None:
        """The NumPy kernel on elements ``[lo, hi)``, block by block (one thread)."""
        tmp = np.empty(min(BLOCK, hi - lo), dtype=np.float32)
        for a in range(lo, hi, BLOCK):
            b = min(a + BLOCK, hi)
            u, p, gg, t = buf[a:b], w[a:b], g[a:b], tmp[:b - a]
            if self.lr_in_buffer:
                np.multiply(u, decay, out=u)
                np.multiply(gg, eta, out=t)
                np.add(u, t, out=u)
                np.subtract(p, u, out=p)
            else:
                np.multiply(u, mu, out=u)
                np.add(u, gg, out=u)
                np.multiply(u, eta, out=t)
                np.subtract(p, t, out=p)


def _fused_run(fn: Any, w: np.ndarray, g: np.ndarray, buf: np.ndarray, a: np.float32,
               eta: np.float32, lo: int, hi: int) -> None:
    """The fused kernel ``fn`` on elements ``[lo, hi)`` (one thread, GIL released)."""
    fn(w[lo:hi], g[lo:hi], buf[lo:hi], a, eta)


#: Vectors of at least this many elements are worth the fused kernel's one-off cost in a new
#: process (importing Numba and loading the compiled kernels, ~0.5 s of CPU): a PS shard of
#: such a job loads it in ``warm()``, or in the background after its first update of such a
#: slice (:func:`load_fused_kernels_later`).
FUSED_MIN_ELEMENTS = 1 << 20

_FUSED: Any = None  # the kernels module once imported; False: they failed to load
_FUSED_LOCK = threading.Lock()  # held while importing them
_FUSED_LOADER: threading.Thread | None = None
_LOADER_LOCK = threading.Lock()  # never held while importing: starting a loader never waits


def fused_kernels() -> Any:
    """:mod:`ray_cluster.ps.update_kernels`, imported (its kernels loaded from the on-disk cache,
    or compiled) on first use, waiting for it; None when that fails (logged once): Numba
    missing or broken, no writable cache folder, a compiler error. The NumPy kernel then runs,
    to the same bits, so an accelerator that cannot load never fails a shard."""
    global _FUSED
    if _FUSED is None:
        with _FUSED_LOCK:
            if _FUSED is None:
                try:
                    from ray_cluster.ps import update_kernels
                except Exception as err:  # any failure means: no accelerator, not a dead shard
                    log.warning("no fused momentum update (%s: %s): NumPy blocks instead",
                                type(err).__name__, err)
                    _FUSED = False
                else:
                    _FUSED = update_kernels
    return _FUSED or None


def fused_kernels_ready() -> Any:
    """The kernels if already loaded, else None; never waits (what ``kernel="auto"`` uses)."""
    return _FUSED or None


def load_fused_kernels_later() -> None:
    """Load the fused kernels in a background thread, once per process, without waiting (a PS
    shard of a large job does, so that no update waits ~0.5 s for Numba: until they are
    loaded, ``kernel="auto"`` updates with NumPy blocks, to the same bits)."""
    global _FUSED_LOADER
    with _LOADER_LOCK:
        if _FUSED is not None or _FUSED_LOADER is not None:
            return
        _FUSED_LOADER = threading.Thread(target=fused_kernels, name="load-update-kernels",
                                         daemon=True)
        _FUSED_LOADER.start()


#: Elements per block of the NumPy kernel of :meth:`MomentumSGD.update_inplace`: three float32
#: blocks (256 KiB each) stay in a core's L2 cache while the four operations run over them.
BLOCK = 1 << 16

_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(threads: int) -> ThreadPoolExecutor:
    """The process's pool of ``threads`` update threads (created on first use)."""
    if threads not in _POOLS:
        _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="momentum-update")
    return _POOLS[threads]


def shard_bounds(n_params: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` ranges, sizes differing by at most one (first ones larger).

    >>> shard_bounds(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    """
    if n_shards < 1 or n_params < n_shards:
        raise ValueError(f"cannot cut {n_params} parameters into {n_shards} shards")
    q, r = divmod(n_params, n_shards)
    cuts = [0]
    for i in range(n_shards):
        cuts.append(cuts[-1] + q + (i < r))
    return list(itertools.pairwise(cuts))


def split_state(state: MomentumState, bounds: Sequence[tuple[int, int]]) -> list[MomentumState]:
    """The state of each shard ``[start, stop)``; buffers are copies."""
    return [MomentumState(buffer=state.buffer[a:b].copy(), step=state.step) for a, b in bounds]


def concat_states(states: Sequence[MomentumState]) -> MomentumState:
    """Inverse of :func:`split_state` over contiguous shards in order; steps must agree."""
    if not states:
        raise ValueError("no states to concatenate")
    steps = {s.step for s in states}
    if len(steps) != 1:
        raise ValueError(f"shards are at different steps: {sorted(steps)}")
    return MomentumState(buffer=np.concatenate([s.buffer for s in states]), step=steps.pop())
