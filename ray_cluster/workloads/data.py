"""The data side of the built-in workloads: the data sets (digits, and its corrupted copies
``digits-hard``), cached in memory and on disk, their partitions and mini-batches, the
:class:`Workload` protocol, and the data handling shared by the numpy workloads
(:mod:`ray_cluster.workloads.builtin`) and the torch one
(:mod:`ray_cluster.workloads.torch_mlp`)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from psched.core.errors import InputError
from ray_cluster.workloads.hparams import DATASETS

__all__ = ["DATASETS", "ArrayWorkload", "Batch", "Dataset", "Partition", "Workload",
           "data_cache_dir", "load_dataset"]

log = logging.getLogger("ray_cluster.workloads.builtin")


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

    x: np.ndarray               #: inputs, shape ``(n, d)`` (a sequence model: ``(n, T)`` tokens)
    y: np.ndarray               #: integer class labels, shape ``(n,)`` (or ``(n, T)``)

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


@dataclass(frozen=True, kw_only=True)
class ArrayWorkload:
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
