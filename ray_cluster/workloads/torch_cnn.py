"""PyTorch workload: a convolutional network on the 8x8 digits (``torch-cnn``).

Optional extra (``pip install 'psched[torch]'``); imported only when a ``torch-cnn`` workload
is built. The data are the built-in digit sets (``digits``, ``digits-hard``:
:mod:`ray_cluster.workloads.builtin`), each image a ``1 x 8 x 8`` grey picture.

Network (``c`` = ``channels``, ``h`` = ``hidden``)::

    conv 3x3, 1 -> c, ReLU          8 x 8
    conv 3x3, c -> 2c, ReLU         8 x 8
    max-pool 2x2                    4 x 4
    conv 3x3, 2c -> 2c, ReLU        4 x 4
    linear 32c -> h, ReLU
    linear h -> 10                  logits, softmax cross-entropy

Parameters ``9c + c + 18c^2 + 2c + 36c^2 + 2c + 32ch + h + 10h + 10``: about 1.3 million
(5 MB) at the defaults ``c = 64, h = 512``, about 20 million (81 MB) at ``c = 256, h = 2048``.
Layout of the flat vector: each layer's weight (PyTorch's shape) then its bias, in the order
above. Convolutions pad by 1 (shapes kept). Weights He-uniform from a numpy generator, so the
same seed gives the same vector on CPU and CUDA; biases zero.

Parameters live as views of one flat tensor on the device
(:class:`~ray_cluster.workloads.torch_flat.FlatParams`); the device is the ``device``
hyper-parameter, which a worker actor replaces by the device Ray assigned it
(:mod:`ray_cluster.ps.devices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from psched.core.errors import InputError
from ray_cluster.workloads.data import ArrayWorkload, Batch
from ray_cluster.workloads.torch_flat import FlatModel, FlatParams, flat_params, torch_device

__all__ = ["TorchCNN"]

_SIDE = 8  # digits are 8 x 8


@dataclass(frozen=True, kw_only=True)
class TorchCNN(FlatModel, ArrayWorkload):
    """Three 3x3 convolutions and two linear layers on the digits (module docstring)."""

    name: ClassVar[str] = "torch-cnn"
    channels: int = 64          #: c: channels of the first convolution (the others 2c)
    hidden: int = 512           #: h: units of the hidden linear layer
    device: str = "auto"        #: "auto" (CUDA when available), "cpu", "cuda", "cuda:1", ...

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.channels < 1 or self.hidden < 1:
            raise InputError("channels and hidden must be >= 1", field="hparams")

    def _shapes(self) -> list[tuple[int, ...]]:
        c, h, k = self.channels, self.hidden, self.data.n_classes
        quarter = (_SIDE // 2) ** 2
        return [(c, 1, 3, 3), (c,), (2 * c, c, 3, 3), (2 * c,), (2 * c, 2 * c, 3, 3), (2 * c,),
                (h, 2 * c * quarter), (h,), (k, h), (k,)]

    @property
    def n_params(self) -> int:
        return sum(prod(s) for s in self._shapes())

    def init_params(self, seed: int) -> np.ndarray:
        """He-uniform weights (bound ``sqrt(6 / fan_in)``), zero biases."""
        rng = np.random.default_rng(seed)
        parts = []
        for s in self._shapes():
            if len(s) == 1:
                parts.append(np.zeros(s[0], dtype=np.float32))
            else:
                fan_in = prod(s[1:])
                lim = np.sqrt(6.0 / fan_in)
                parts.append(rng.uniform(-lim, lim, size=prod(s)).astype(np.float32))
        return np.concatenate(parts)

    def _flat(self, device: torch.device, dtype: torch.dtype = torch.float32) -> FlatParams:
        key = ("cnn", self.data.n_classes, self.channels, self.hidden)
        return flat_params(key, self._shapes(), device, dtype)

    @staticmethod
    def logits(ws: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The network on images ``x`` of shape ``(n, 1, 8, 8)``."""
        c1, b1, c2, b2, c3, b3, w4, b4, w5, b5 = ws
        z = F.relu(F.conv2d(x, c1, b1, padding=1))
        z = F.max_pool2d(F.relu(F.conv2d(z, c2, b2, padding=1)), 2)
        z = F.relu(F.conv2d(z, c3, b3, padding=1))
        return F.linear(F.relu(F.linear(z.flatten(1), w4, b4)), w5, b5)

    def _inputs(self, x: np.ndarray, fp: FlatParams) -> torch.Tensor:
        return torch.as_tensor(x, dtype=fp.dtype).reshape(-1, 1, _SIDE, _SIDE).to(fp.device)

    def _xent(self, ws: list[torch.Tensor], batch: Batch, fp: FlatParams) -> torch.Tensor:
        y = torch.as_tensor(batch.y, dtype=torch.int64).to(fp.device)
        return F.cross_entropy(self.logits(ws, self._inputs(batch.x, fp)), y)

    def _loss_acc(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        fp = self._flat(torch_device(self.device))
        with torch.no_grad():
            logits = self.logits(fp.load(params), self._inputs(x, fp))
            yt = torch.as_tensor(y, dtype=torch.int64).to(fp.device)
            loss = F.cross_entropy(logits, yt)
            acc = (logits.argmax(dim=1) == yt).float().mean()
        return float(loss.item()), float(acc.item())
