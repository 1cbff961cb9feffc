"""PyTorch workload: the :class:`~ray_cluster.workloads.builtin.MLP` network written in torch.

Optional extra (``pip install 'psched[torch]'``, i.e. ``torch==2.13.0``); this module is
imported only when a ``torch-mlp`` workload is built. Parameters travel as one flat float32
numpy vector (the parameter server shards it by slicing); :meth:`TorchMLP.gradient` copies the
vector into the module, runs forward and backward on CUDA when available (else CPU), and
returns the flat gradient. The module itself is built lazily and cached per process, so the
workload pickles as its hyper-parameters only.

Layout of the flat vector (``torch.nn.utils.parameters_to_vector`` order): ``W1 (hidden, d)``,
``b1``, ``W2 (classes, hidden)``, ``b2`` — the transposes of the numpy MLP's weight blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from psched.core.errors import InputError
from ray_cluster.workloads.data import ArrayWorkload, Batch

__all__ = ["TorchMLP"]

_MODELS: dict[tuple[Any, ...], tuple[torch.nn.Module, torch.device]] = {}


@dataclass(frozen=True, kw_only=True)
class TorchMLP(ArrayWorkload):
    """One-hidden-layer ReLU perceptron in PyTorch; complexity as the numpy :class:`MLP`."""

    name: ClassVar[str] = "torch-mlp"
    hidden: int = 64            #: hidden units (>= 1)
    device: str = "auto"        #: "auto" (CUDA when available), "cpu", "cuda", "cuda:1", ...

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden < 1:
            raise InputError("hidden must be >= 1", field="hparams.hidden")

    def _model(self) -> tuple[torch.nn.Module, torch.device]:
        d, c = self.data.n_features, self.data.n_classes
        dev = self.device
        if dev == "auto":
            dev = "cuda" if torch.cuda.is_available() else "cpu"
        key = (d, self.hidden, c, dev)
        if key not in _MODELS:
            device = torch.device(dev)
            model = torch.nn.Sequential(torch.nn.Linear(d, self.hidden), torch.nn.ReLU(),
                                        torch.nn.Linear(self.hidden, c)).to(device)
            _MODELS[key] = (model, device)
        return _MODELS[key]

    @property
    def n_params(self) -> int:
        d, c, h = self.data.n_features, self.data.n_classes, self.hidden
        return h * d + h + c * h + c

    def init_params(self, seed: int) -> np.ndarray:
        """Glorot-uniform weights (numpy generator, so CPU and CUDA agree), zero biases."""
        rng = np.random.default_rng(seed)
        d, c, h = self.data.n_features, self.data.n_classes, self.hidden
        parts = []
        for fan_out, fan_in in ((h, d), (c, h)):
            lim = np.sqrt(6.0 / (fan_in + fan_out))
            parts += [rng.uniform(-lim, lim, size=fan_out * fan_in), np.zeros(fan_out)]
        return np.concatenate(parts).astype(np.float32)

    def _load(self, params: np.ndarray) -> tuple[torch.nn.Module, torch.device]:
        model, device = self._model()
        p = np.asarray(params, dtype=np.float32)
        if p.shape != (self.n_params,):
            raise ValueError(f"expected {self.n_params} parameters, got shape {p.shape}")
        torch.nn.utils.vector_to_parameters(torch.from_numpy(p).to(device), model.parameters())
        return model, device

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        model, device = self._load(params)
        model.zero_grad(set_to_none=False)
        x = torch.as_tensor(batch.x, dtype=torch.float32, device=device)
        y = torch.as_tensor(batch.y, dtype=torch.int64, device=device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])  # type: ignore[union-attr]
        return float(loss.item()), grad.detach().cpu().numpy().astype(np.float32)

    def _loss_acc(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        model, device = self._load(params)
        with torch.no_grad():
            logits = model(torch.as_tensor(x, dtype=torch.float32, device=device))
            yt = torch.as_tensor(y, dtype=torch.int64, device=device)
            loss = torch.nn.functional.cross_entropy(logits, yt)
            acc = (logits.argmax(dim=1) == yt).float().mean()
        return float(loss.item()), float(acc.item())
