"""Training workloads for the parameter-server runtime: one small protocol and built-ins.

A workload owns a data set and a model whose parameters are **one flat float32 vector**, so a
parameter server can shard it by slicing. Workers call :meth:`Workload.partition` once,
then draw batches and compute ``(loss, flat gradient)``; the job owner calls
:meth:`Workload.evaluate` on held-out data.

Built-ins (all on real data shipped inside scikit-learn, nothing is downloaded):

``softmax``
    multinomial logistic regression in numpy.
``mlp``
    one-hidden-layer perceptron in numpy, manual back-propagation (checked against finite
    differences in the tests).
``torch-mlp``
    the same network in PyTorch (optional extra ``torch``, imported lazily, CUDA when present);
    see :mod:`ray_cluster.torch_workload`.

Each takes ``dataset``:

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
import hashlib
import importlib
import io
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from psched.errors import InputError
from ray_cluster.hparams import DATASETS, HPARAMS, Param, check_hparams

__all__ = [
    "DATASETS",
    "HPARAMS",
    "MLP",
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

@dataclass(frozen=True, kw_only=True, eq=False)  # arrays: compare by identity
class Partition:
    """One worker's slice of the training set."""

    index: int                  #: which slice, ``0 <= index < n_partitions``
    n_partitions: int           #: how many slices the training set was cut into
    rows: np.ndarray            #: indices into the workload's training set (int64)

    def __len__(self) -> int:
        return int(self.rows.size)


@dataclass(frozen=True, kw_only=True, eq=False)  # arrays: compare by identity
class Batch:
    """A mini-batch of examples."""

    x: np.ndarray               #: inputs, shape ``(n, d)``
    y: np.ndarray               #: integer class labels, shape ``(n,)``

    def __len__(self) -> int:
        return int(self.y.size)


@runtime_checkable
class Workload(Protocol):
    """What the runtime needs from a training task; parameters are one flat float32 vector."""

    name: ClassVar[str]

    def init_params(self, seed: int) -> np.ndarray:
        """Initial flat float32 parameter vector; same seed, same vector."""
        ...

    def partition(self, n_partitions: int, index: int) -> Partition:
        """Slice ``index`` of ``n_partitions`` disjoint slices covering the training set."""
        ...

    def batches(self, part: Partition, batch_size: int,
                rng: np.random.Generator) -> Iterator[Batch]:
        """Endless stream of full batches from ``part``, reshuffled every pass."""
        ...

    def gradient(self, params: np.ndarray, batch: Batch) -> tuple[float, np.ndarray]:
        """Mean loss on ``batch`` and its flat float32 gradient."""
        ...

    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        """Held-out ``{"loss": ..., "accuracy": ...}``."""
        ...


# --------------------------------------------------------------------------- data
@dataclass(frozen=True, kw_only=True, eq=False)  # arrays: compare by identity
class Dataset:
    """A classification data set, split into train and held-out parts."""

    x_train: np.ndarray         #: float64 ``(n_train, d)``
    y_train: np.ndarray         #: int64 ``(n_train,)``
    x_test: np.ndarray          #: float64 ``(n_test, d)``
    y_test: np.ndarray          #: int64 ``(n_test,)``
    n_classes: int              #: number of classes

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


_DATA_CACHE: dict[tuple[Any, ...], Dataset] = {}


def _shift_noise(images: np.ndarray, copies: int, noise: float,
                 rng: np.random.Generator) -> np.ndarray:
    """``copies`` corrupted copies of each 8x8 image: random ±1 pixel shift, Gaussian noise."""
    n = images.shape[0]
    img = np.repeat(images.reshape(n, 8, 8), copies, axis=0)
    out = np.zeros_like(img)
    shifts = rng.integers(-1, 2, size=(img.shape[0], 2))
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            sel = (shifts[:, 0] == dy) & (shifts[:, 1] == dx)
            src = img[sel]
            dst = np.zeros_like(src)
            ys, yd = (slice(0, 8 - dy), slice(dy, 8)) if dy >= 0 else (slice(-dy, 8),
                                                                         slice(0, 8 + dy))
            xs, xd = (slice(0, 8 - dx), slice(dx, 8)) if dx >= 0 else (slice(-dx, 8),
                                                                         slice(0, 8 + dx))
            dst[:, yd, xd] = src[:, ys, xs]
            out[sel] = dst
    out += rng.normal(0.0, noise, size=out.shape)
    return out.reshape(n * copies, 64)


def load_dataset(name: str, *, split_seed: int = 0, copies: int = 8,
                 noise: float = 0.25) -> Dataset:
    """Load (once per process) a built-in data set; see the module docstring.

    Complexity: O(n d) the first time on a machine, then O(n d) to read the disk cache once per
    process, O(1) afterwards.
    """
    key = (name, split_seed) if name == "digits" else (name, split_seed, copies, noise)
    if key in _DATA_CACHE:
        return _DATA_CACHE[key]
    if name not in DATASETS:
        raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}",
                         field="dataset")
    cached = _read_disk_cache(key)
    if cached is not None:
        _DATA_CACHE[key] = cached
        return cached
    data = _build_dataset(name, split_seed, copies, noise)
    _write_disk_cache(key, data)
    _DATA_CACHE[key] = data
    return data


#: Bumped whenever :func:`_build_dataset` would build different arrays for the same key.
_DISK_FORMAT = 1


def data_cache_dir() -> Path:
    """Folder of the on-disk data-set cache: ``$PSCHED_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/psched`` (default ``~/.cache/psched``)."""
    env = os.environ.get("PSCHED_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "psched"


def _cache_file(key: tuple[Any, ...]) -> Path:
    text = json.dumps([_DISK_FORMAT, *key])
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return data_cache_dir() / f"{key[0]}-{digest}.npz"


def _read_disk_cache(key: tuple[Any, ...]) -> Dataset | None:
    """The data set built earlier by any process on this machine, or None.

    A worker process that finds it skips importing scikit-learn and rebuilding (the bulk of
    an actor's cold start). A damaged file is ignored (and rebuilt).
    """
    path = _cache_file(key)
    try:
        with np.load(path, allow_pickle=False) as z:
            return Dataset(x_train=z["x_train"], y_train=z["y_train"], x_test=z["x_test"],
                           y_test=z["y_test"], n_classes=int(z["n_classes"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as err:
        log.info("ignoring damaged data cache %s: %s", path, err)
        return None


def _write_disk_cache(key: tuple[Any, ...], data: Dataset) -> None:
    """Store ``data`` for other processes: a temporary file renamed into place (atomic)."""
    from psched.traces.native import atomic_write_bytes

    path = _cache_file(key)
    buf = io.BytesIO()
    np.savez(buf, x_train=data.x_train, y_train=data.y_train, x_test=data.x_test,
             y_test=data.y_test, n_classes=np.int64(data.n_classes))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, buf.getvalue())
    except OSError as err:  # a read-only home: every process builds its own copy
        log.info("cannot write data cache %s: %s", path, err)


def _build_dataset(name: str, split_seed: int, copies: int, noise: float) -> Dataset:
    from sklearn.datasets import load_digits  # lazy: keeps imports of this module light

    digits = load_digits()
    x = np.asarray(digits.data, dtype=np.float64) / 16.0
    y = np.asarray(digits.target, dtype=np.int64)
    order = np.random.default_rng(split_seed).permutation(y.size)
    n_test = round(0.25 * y.size)
    test, train = order[:n_test], order[n_test:]
    if name == "digits":
        data = Dataset(x_train=x[train], y_train=y[train], x_test=x[test], y_test=y[test],
                       n_classes=10)
    else:
        rng_train, rng_test = np.random.default_rng([split_seed, 1]).spawn(2)
        x_tr = _shift_noise(x[train], copies, noise, rng_train)
        y_tr = np.repeat(y[train], copies)
        perm = rng_train.permutation(y_tr.size)  # copies of one image not adjacent
        x_te = _shift_noise(x[test], 2, noise, rng_test)
        data = Dataset(x_train=x_tr[perm], y_train=y_tr[perm], x_test=x_te,
                       y_test=np.repeat(y[test], 2), n_classes=10)
    log.debug("built %s: %d train, %d held out", name, data.y_train.size, data.y_test.size)
    return data


# --------------------------------------------------------------------------- numpy models
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
class _ArrayWorkload:
    """Shared data handling of the numpy (and torch) workloads."""

    dataset: str = "digits"     #: one of :data:`DATASETS`
    split_seed: int = 0         #: seed of the train / held-out split (and of the corruption)
    copies: int = 8             #: ``digits-hard`` only: corrupted copies per training image
    noise: float = 0.25         #: ``digits-hard`` only: std of the pixel noise, [0, 1] units

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise InputError(f"unknown dataset {self.dataset!r}; known: {', '.join(DATASETS)}",
                             field="hparams.dataset")
        if self.copies < 1 or self.noise < 0:
            raise InputError("copies must be >= 1 and noise >= 0", field="hparams")

    @property
    def data(self) -> Dataset:
        return load_dataset(self.dataset, split_seed=self.split_seed, copies=self.copies,
                            noise=self.noise)

    def partition(self, n_partitions: int, index: int) -> Partition:
        """Strided slice ``index::n_partitions`` of the (already shuffled) training set."""
        n = self.data.y_train.size
        if not 1 <= n_partitions <= n or not 0 <= index < n_partitions:
            raise ValueError(f"partition {index} of {n_partitions} impossible with {n} rows")
        return Partition(index=index, n_partitions=n_partitions,
                         rows=np.arange(index, n, n_partitions, dtype=np.int64))

    def batches(self, part: Partition, batch_size: int,
                rng: np.random.Generator) -> Iterator[Batch]:
        """Endless full batches; each pass over ``part`` is a fresh permutation.

        A batch that crosses the end of a pass is completed from the next pass, so every
        batch has exactly ``batch_size`` rows. O(batch_size) per batch.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        data = self.data
        buf = np.empty(0, dtype=np.int64)
        while True:
            while buf.size < batch_size:
                buf = np.concatenate([buf, rng.permutation(part.rows)])
            take, buf = buf[:batch_size], buf[batch_size:]
            yield Batch(x=data.x_train[take], y=data.y_train[take])

    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        data = self.data
        loss, acc = self._loss_acc(params, data.x_test, data.y_test)
        return {"loss": loss, "accuracy": acc}

    def _loss_acc(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class MLP(_ArrayWorkload):
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
def _torch_mlp() -> type:
    # lazy, by name: torch is an optional extra, and ray_cluster.torch_workload builds on
    # this module (an import here would make the two import each other)
    cls: type = importlib.import_module("ray_cluster.torch_workload").TorchMLP
    return cls


WORKLOADS: dict[str, Any] = {"softmax": SoftmaxRegression, "mlp": MLP, "torch-mlp": _torch_mlp}


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
    elif name_or_import_path in WORKLOADS:
        cls = WORKLOADS[name_or_import_path]
        if cls is _torch_mlp:
            try:
                cls = _torch_mlp()
            except ImportError as err:
                raise InputError(f"workload 'torch-mlp' needs the torch extra: {err}",
                                 field="workload") from None
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
