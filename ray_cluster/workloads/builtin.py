"""Training workloads for the parameter-server runtime: one small protocol and built-ins.

A workload owns a data set and a model whose parameters are **one flat float32 vector**, so a
parameter server can shard it by slicing. Workers call :meth:`Workload.partition` once,
then draw batches and compute ``(loss, flat gradient)``; the job owner calls
:meth:`Workload.evaluate` on held-out data.

Built-ins (all on real data that ships with the install: scikit-learn's digits, the standard
library's source; nothing is downloaded):

``softmax``
    multinomial logistic regression in numpy.
``mlp``
    one-hidden-layer perceptron in numpy, manual back-propagation (checked against finite
    differences in the tests).
``torch-mlp``
    the same network in PyTorch (optional extra ``torch``, imported lazily, CUDA when present);
    see :mod:`ray_cluster.workloads.torch_mlp`.
``torch-cnn``
    a convolutional network on the digits, from 5 MB to 81 MB of parameters by its
    hyper-parameters (:mod:`ray_cluster.workloads.torch_cnn`).
``torch-lm``
    a byte-level transformer language model on the Python standard library's own source, read
    in a fixed order with its hash logged, from 2 MB to about 100 MB of parameters
    (:mod:`ray_cluster.workloads.torch_lm`; its text: :mod:`ray_cluster.workloads.corpus`).

The PyTorch workloads train on their ``device`` (``auto``: CUDA when present); a worker actor
replaces it by the device Ray assigned it (:mod:`ray_cluster.ps.devices`).

The digit workloads take ``dataset``:

``digits``
    scikit-learn's ``load_digits`` (1,797 8x8 grey images, 10 classes), pixels scaled to
    [0, 1], split 75 % / 25 % by ``split_seed``.
``digits-hard``
    the same split, made harder: every training image appears as ``copies`` (default 8)
    randomly translated copies (shift of -1, 0 or +1 pixel on each axis, zero fill) plus
    Gaussian pixel noise (``noise``, default 0.25 in [0, 1] units); the held-out images are
    corrupted the same way with an independent stream (2 copies each). Translations break the
    pixel alignment that makes digits almost linearly separable, and the noise lowers the
    signal-to-noise ratio, so the same model under the same budget reaches a clearly lower
    held-out accuracy: in ``benchmarks/dynamic_sgd.py`` the 64-unit MLP ends near 97 % on
    ``digits`` and near 83 % on ``digits-hard``; softmax regression, about 96 % on ``digits``,
    stays below about 50 % there (shifts defeat a linear model). The larger training set
    (about 10,800 images) also keeps big synchronous batches (32 workers) meaningful.
    (No larger data set ships inside an installed package here, and nothing can be
    downloaded; ``fetch_*`` data sets are not on disk.)

Workloads are frozen dataclasses of hyper-parameters only: they pickle in a few bytes (Ray
ships them to actors) and load their data lazily, cached once per process and on disk
(:func:`data_cache_dir`, an ``.npz`` per data set and parameters, written atomically), so a
new worker process reads a few megabytes instead of importing scikit-learn and rebuilding.

References
----------
.. [1] H. Lin et al., "Dynamic Mini-batch SGD for Elastic Distributed Training", 2019.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from psched.core.errors import InputError
from ray_cluster.workloads.data import (
    ArrayWorkload,
    Batch,
    Dataset,
    Partition,
    Workload,
    data_cache_dir,
    load_dataset,
)
from ray_cluster.workloads.hparams import DATASETS, HPARAMS, Param, check_hparams

__all__ = [
    "DATASETS",
    "HPARAMS",
    "MLP",
    "TORCH_WORKLOADS",
    "WORKLOADS",
    "Batch",
    "Dataset",
    "Param",
    "Partition",
    "SoftmaxRegression",
    "Workload",
    "available_workloads",
    "check_hparams",
    "data_cache_dir",
    "get_workload",
    "load_dataset",
]

log = logging.getLogger(__name__)

def _softmax_xent(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean cross-entropy, its gradient w.r.t. the logits, and the predicted classes."""
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    n = y.size
    loss = -float(logp[np.arange(n), y].mean())
    d = np.exp(logp)
    d[np.arange(n), y] -= 1.0
    return loss, d / n, logits.argmax(axis=1)


@dataclass(frozen=True, kw_only=True)
class MLP(ArrayWorkload):
    """One-hidden-layer perceptron with softmax output, manual back-propagation in float64.

    Layout of the flat vector: ``W1 (d, hidden)``, ``b1``, ``W2 (hidden, classes)``, ``b2``.
    ``hidden = 0`` is multinomial logistic regression (``W (d, classes)``, ``b``).
    Complexity of :meth:`gradient`: O(n (d h + h c)) for a batch of n.
    """

    name: ClassVar[str] = "mlp"
    hidden: int = 64            #: hidden units (0: no hidden layer)
    activation: str = "relu"    #: "relu" or "tanh"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden < 0 or self.activation not in ("relu", "tanh"):
            raise InputError("hidden must be >= 0 and activation 'relu' or 'tanh'",
                             field="hparams")

    def _shapes(self) -> list[tuple[int, ...]]:
        d, c, h = self.data.n_features, self.data.n_classes, self.hidden
        return [(d, c), (c,)] if h == 0 else [(d, h), (h,), (h, c), (c,)]

    @property
    def n_params(self) -> int:
        return sum(int(np.prod(s)) for s in self._shapes())

    def _unflatten(self, params: np.ndarray) -> list[np.ndarray]:
        p = np.asarray(params, dtype=np.float64)
        if p.shape != (self.n_params,):
            raise ValueError(f"expected {self.n_params} parameters, got shape {p.shape}")
        out, at = [], 0
        for s in self._shapes():
            k = int(np.prod(s))
            out.append(p[at:at + k].reshape(s))
            at += k
        return out

    def init_params(self, seed: int) -> np.ndarray:
        """Glorot-uniform weights, zero biases."""
        rng = np.random.default_rng(seed)
        parts = []
        for s in self._shapes():
            if len(s) == 2:
                lim = np.sqrt(6.0 / (s[0] + s[1]))
                parts.append(rng.uniform(-lim, lim, size=s).ravel())
            else:
                parts.append(np.zeros(s))
        return np.concatenate(parts).astype(np.float32)

    def _forward(self, params: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, Any]:
        ws = self._unflatten(params)
        if self.hidden == 0:
            return x @ ws[0] + ws[1], (ws, None)
        z = x @ ws[0] + ws[1]
        a = np.maximum(z, 0.0) if self.activation == "relu" else np.tanh(z)
        return a @ ws[2] + ws[3], (ws, (z, a))

    def loss(self, params: np.ndarray, batch: Batch) -> float:
        """Mean cross-entropy on ``batch`` (float64, for finite-difference checks)."""
        logits, _ = self._forward(params, batch.x)
        return _softmax_xent(logits, batch.y)[0]

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        logits, (ws, hid) = self._forward(params, batch.x)
        loss, dl, _ = _softmax_xent(logits, batch.y)
        if hid is None:
            grads = [batch.x.T @ dl, dl.sum(axis=0)]
        else:
            z, a = hid
            da = dl @ ws[2].T
            dz = da * (z > 0) if self.activation == "relu" else da * (1.0 - a * a)
            grads = [batch.x.T @ dz, dz.sum(axis=0), a.T @ dl, dl.sum(axis=0)]
        return loss, np.concatenate([g.ravel() for g in grads]).astype(np.float32)

    def _loss_acc(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        logits, _ = self._forward(params, x)
        loss, _, pred = _softmax_xent(logits, y)
        return loss, float((pred == y).mean())


@dataclass(frozen=True, kw_only=True)
class SoftmaxRegression(MLP):
    """Multinomial logistic regression: :class:`MLP` without a hidden layer."""

    name: ClassVar[str] = "softmax"
    hidden: int = 0             #: always 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden != 0:
            raise InputError("softmax has no hidden layer", field="hparams.hidden")


# --------------------------------------------------------------------------- registry
#: The PyTorch workloads: name -> ``module:Class``, imported on first use (torch is an
#: optional extra, and these modules build on this one: an import here would make them
#: import each other).
TORCH_WORKLOADS: dict[str, str] = {
    "torch-mlp": "ray_cluster.workloads.torch_mlp:TorchMLP",
    "torch-cnn": "ray_cluster.workloads.torch_cnn:TorchCNN",
    "torch-lm": "ray_cluster.workloads.torch_lm:TorchLM",
}


def _torch_class(name: str) -> type:
    module, _, attr = TORCH_WORKLOADS[name].partition(":")
    cls: type = getattr(importlib.import_module(module), attr)
    return cls


WORKLOADS: dict[str, Any] = {"softmax": SoftmaxRegression, "mlp": MLP,
                             **dict.fromkeys(TORCH_WORKLOADS)}


def available_workloads() -> list[str]:
    """Names accepted by :func:`get_workload`."""
    return sorted(WORKLOADS)


def _resolve_import(path: str) -> type:
    module, _, attr = path.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise InputError(f"cannot import {path!r}: {err}", field="workload") from None
    return obj  # type: ignore[no-any-return]


def get_workload(name_or_import_path: str, hparams: dict[str, Any] | None = None,
                 allow_import: bool = False) -> Workload:
    """Build a workload by registered name, or by ``pkg.module:Class`` if ``allow_import``.

    Parameters
    ----------
    name_or_import_path
        a name from :func:`available_workloads`, or ``"pkg.module:Class"``.
    hparams
        keyword arguments of the workload's constructor.
    allow_import
        import paths run arbitrary code, so they are refused unless this is true.

    Raises
    ------
    InputError
        unknown name, refused or failed import, unknown hyper-parameter, object that is not
        a :class:`Workload`.
    """
    hparams = dict(hparams or {})
    check_hparams(name_or_import_path, hparams)
    if ":" in name_or_import_path:
        if not allow_import:
            raise InputError(f"import path {name_or_import_path!r} refused: user workloads "
                             "need allow_import=True", field="workload")
        cls = _resolve_import(name_or_import_path)
    elif name_or_import_path in TORCH_WORKLOADS:
        try:
            cls = _torch_class(name_or_import_path)
        except ImportError as err:
            raise InputError(f"workload {name_or_import_path!r} needs the torch extra: {err}",
                             field="workload") from None
    elif name_or_import_path in WORKLOADS:
        cls = WORKLOADS[name_or_import_path]
    else:
        raise InputError(f"unknown workload {name_or_import_path!r}; known: "
                         f"{', '.join(available_workloads())} or pkg.module:Class",
                         field="workload")
    if dataclasses.is_dataclass(cls):
        known = {f.name for f in dataclasses.fields(cls)}
        for key in hparams:
            if key not in known:
                raise InputError(f"unknown hyper-parameter {key!r}; known: "
                                 f"{', '.join(sorted(known))}", field=f"hparams.{key}")
    try:
        wl = cls(**hparams)
    except TypeError as err:
        raise InputError(f"bad hyper-parameters for {name_or_import_path!r}: {err}",
                         field="hparams") from None
    if not isinstance(wl, Workload):
        raise InputError(f"{name_or_import_path!r} does not implement Workload",
                         field="workload")
    return wl
