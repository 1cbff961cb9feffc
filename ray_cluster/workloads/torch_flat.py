"""One flat parameter vector on a PyTorch device: what the PyTorch workloads share.

A workload's parameters travel as one flat float32 numpy vector (the parameter server shards
it by slicing). :class:`FlatParams` keeps them on the training device as **views of one flat
tensor**, in the workload's layout order, and gives each view a ``.grad`` that is a view of
one flat gradient tensor: a backward pass accumulates every gradient in place into that
vector (no concatenation), so a step moves exactly two vectors across the bus: the
parameters host -> device and the gradient device -> host.

On CUDA both transfers go through page-locked (pinned) host memory: the parameters are copied
into a pinned buffer kept for the process and sent asynchronously; the gradient is copied
into a fresh pinned block (PyTorch's caching host allocator hands back the block of an
earlier step once its array is released) and returned as a numpy view of it, which the
worker's push then serialises into the object store. On CPU the parameters are copied once
into the flat tensor and the gradient is a fresh tensor returned as a numpy view, no copy.

The model of a given layout and device is built once per process (:func:`flat_params`), so
a workload pickles as its hyper-parameters only. :class:`FlatModel` is what such a workload
derives from its layout and its loss: its gradient (on its device, or in float64 on the CPU
for finite-difference checks) and its float64 loss.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np
import torch

from ray_cluster.workloads.data import Batch

__all__ = ["FlatModel", "FlatParams", "flat_params", "torch_device"]

_CACHE: dict[tuple[Any, ...], FlatParams] = {}


def torch_device(name: str) -> torch.device:
    """The device a workload's ``device`` hyper-parameter names: ``"auto"`` is the first
    visible CUDA device when CUDA is available, else the CPU; any other name is taken as is
    (``"cpu"``, ``"cuda"``, ``"cuda:1"``)."""
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class FlatParams:
    """Parameters of ``shapes`` as views of one flat tensor on ``device`` (module docstring).

    Parameters
    ----------
    shapes
        The shape of each parameter tensor, in the flat vector's order.
    device
        Where the model trains.
    dtype
        ``torch.float32`` for training; ``torch.float64`` (CPU) for finite-difference checks.
    """

    def __init__(self, shapes: Sequence[tuple[int, ...]], device: torch.device,
                 dtype: torch.dtype = torch.float32) -> None:
        self.shapes = [tuple(s) for s in shapes]
        self.device = device
        self.dtype = dtype
        self.size = sum(prod(s) for s in self.shapes)
        self.np_dtype = np.float32 if dtype == torch.float32 else np.float64
        self.flat = torch.zeros(self.size, dtype=dtype, device=device)
        self.grad = torch.zeros(self.size, dtype=dtype, device=device)
        self.tensors: list[torch.Tensor] = []
        at = 0
        for s in self.shapes:
            k = prod(s)
            leaf = self.flat[at:at + k].view(s)  # a view of a tensor without grad: a leaf
            leaf.requires_grad_(True)
            self.tensors.append(leaf)
            at += k
        self._bind_grad()
        pinned = device.type == "cuda"
        self._up = torch.empty(self.size, dtype=dtype, pin_memory=True) if pinned else None

    def _bind_grad(self) -> None:
        """Make each parameter's ``.grad`` a view of :attr:`grad` (backward adds in place)."""
        at = 0
        for leaf, s in zip(self.tensors, self.shapes, strict=True):
            k = prod(s)
            leaf.grad = self.grad[at:at + k].view(s)
            at += k

    def load(self, params: np.ndarray) -> list[torch.Tensor]:
        """Copy the flat vector ``params`` onto the device; returns the parameter tensors.

        Raises
        ------
        ValueError
            If ``params`` has not :attr:`size` elements.
        """
        p = np.asarray(params)
        if p.shape != (self.size,):
            raise ValueError(f"expected {self.size} parameters, got shape {p.shape}")
        with torch.no_grad():
            if self._up is None:
                self.flat.numpy()[:] = p  # one copy (a pulled vector is read-only)
            else:
                self._up.numpy()[:] = p  # into pinned memory, then sent asynchronously
                self.flat.copy_(self._up, non_blocking=True)
        return self.tensors

    def zero_grad(self) -> None:
        """Start a backward pass: on CPU a fresh gradient vector (the last one was handed
        out), on CUDA the device's vector zeroed."""
        if self.device.type == "cpu":
            self.grad = torch.zeros(self.size, dtype=self.dtype)
            self._bind_grad()
        else:
            self.grad.zero_()

    def grad_numpy(self) -> np.ndarray:
        """The gradient of the last backward pass as a numpy vector of its own."""
        if self.device.type == "cpu":
            return self.grad.numpy()
        host = torch.empty(self.size, dtype=self.dtype, pin_memory=True)
        host.copy_(self.grad, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return host.numpy()


def flat_params(key: tuple[Any, ...], shapes: Sequence[tuple[int, ...]], device: torch.device,
                dtype: torch.dtype = torch.float32) -> FlatParams:
    """The process's :class:`FlatParams` for a layout (``key`` names it) on ``device``."""
    full = (*key, str(device), str(dtype))
    fp = _CACHE.get(full)
    if fp is None:
        fp = _CACHE[full] = FlatParams(shapes, device, dtype)
    return fp


class FlatModel(ABC):
    """Gradient and loss of a PyTorch workload on one flat vector, from the two methods it
    defines: :meth:`_flat` (its :class:`FlatParams` on a device) and :meth:`_xent` (its mean
    cross-entropy on a batch). The workload's ``device`` field names its training device."""

    device: str  #: the workload's ``device`` hyper-parameter (:func:`torch_device`)

    @abstractmethod
    def _flat(self, device: torch.device, dtype: torch.dtype = torch.float32) -> FlatParams:
        """The process's :class:`FlatParams` of this workload's layout on ``device``."""

    @abstractmethod
    def _xent(self, ws: list[torch.Tensor], batch: Batch, fp: FlatParams) -> torch.Tensor:
        """Mean cross-entropy on ``batch`` of the parameters ``ws`` (views of ``fp``)."""

    def _step(self, params: np.ndarray, batch: Batch, fp: FlatParams) -> tuple[float, np.ndarray]:
        ws = fp.load(params)
        fp.zero_grad()
        loss = self._xent(ws, batch, fp)
        loss.backward()  # type: ignore[no-untyped-call]
        return float(loss.item()), fp.grad_numpy()

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        """Loss on ``batch`` and its gradient, a float32 vector, computed on the device."""
        return self._step(params, batch, self._flat(torch_device(self.device)))

    def gradient_float64(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        """:meth:`gradient` in float64 on the CPU (for finite-difference checks)."""
        return self._step(params, batch, self._flat(torch.device("cpu"), torch.float64))

    def loss(self, params: np.ndarray, batch: Batch) -> float:
        """Mean cross-entropy on ``batch``, float64 on the CPU."""
        fp = self._flat(torch.device("cpu"), torch.float64)
        with torch.no_grad():
            return float(self._xent(fp.load(params), batch, fp))
