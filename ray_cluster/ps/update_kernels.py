"""Fused single-pass momentum-SGD kernels for a PS shard's in-place update (Numba).

One pass over memory per update: each element of the parameters ``w``, the gradient ``g`` and
the momentum buffer ``u`` is read once and ``w``, ``u`` written once, with the arithmetic in
registers. NumPy needs one call per operation (four per cache-sized block, see
:meth:`ray_cluster.ps.optim.MomentumSGD.update_inplace`), and at 400 MB those calls cost as much
as the memory traffic (``benchmarks/exp_update_kernel.py``).

The operations and their order are exactly those of :meth:`MomentumSGD.update`, one float32
rounding per operation: Numba compiles without ``fastmath``, so LLVM neither contracts a
multiply and an add into one fused multiply-add nor reorders them, and the results are bit
for bit NumPy's (``tests/test_exchange_update.py`` checks it). The kernels release the GIL, so
the shard runs them on contiguous runs in several threads.

Compiled for C-contiguous float32 vectors (the gradient also read-only: it arrives zero-copy
from the object store) when this module is imported, and cached on disk next to it, so a new
shard process loads rather than compiles them. Import this module lazily (through
:func:`ray_cluster.ps.optim.fused_kernels`): importing Numba costs a process ~0.3 s.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

__all__ = ["lr_inside", "lr_outside"]

_VEC = types.Array(types.float32, 1, "C")
_SIGNATURES = [types.void(_VEC, grad, _VEC, types.float32, types.float32)
               for grad in (_VEC, types.Array(types.float32, 1, "C", readonly=True))]


@numba.njit(_SIGNATURES, nogil=True, cache=True)
def lr_outside(w: np.ndarray, g: np.ndarray, u: np.ndarray, mu: np.float32,
               eta: np.float32) -> None:  # pragma: no cover - compiled
    """``u = mu u + g; w = w - eta u``, element by element, in place."""
    for i in range(w.size):
        ui = u[i] * mu + g[i]
        u[i] = ui
        w[i] = w[i] - ui * eta


@numba.njit(_SIGNATURES, nogil=True, cache=True)
def lr_inside(w: np.ndarray, g: np.ndarray, u: np.ndarray, decay: np.float32,
              eta: np.float32) -> None:  # pragma: no cover - compiled
    """``u = decay u + eta g; w = w - u``, element by element, in place."""
    for i in range(w.size):
        ui = u[i] * decay + g[i] * eta
        u[i] = ui
        w[i] = w[i] - ui
