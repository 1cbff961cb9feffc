"""Consistent checkpoints of a sharded parameter server, on a (shared) directory.

A checkpoint is one *global version* of a job: every shard's slice of the flat parameter
vector and of its optimizer state, plus the job-wide counters (applied updates, mini-batches
trained, the learning-rate scale schedule). It is written in two phases so that a reader never
sees a half-written version:

1. each PS shard writes its own slice, ``<key>.<lo>-<hi>.npy`` for every array it owns, into a
   staging folder ``v<version>.tmp`` (shards write in parallel; data never passes through the
   driver);
2. the controller, once every shard has answered, writes ``meta.json`` and renames the staging
   folder to ``v<version>`` -- the rename is the commit.

Loading reads any index range ``[lo, hi)`` from the committed slices (memory-mapped), so a
checkpoint written by ``S`` shards restores onto ``S'`` shards unchanged (re-sharding on
restore). Only the newest ``keep`` committed versions are kept.

Layout::

    <root>/<job_id>/v00000012/meta.json
    <root>/<job_id>/v00000012/params.0-4096.npy
    <root>/<job_id>/v00000012/momentum.0-4096.npy
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from psched.core.errors import InputError

__all__ = ["CheckpointMeta", "CheckpointStore", "job_folder", "read_range", "write_slice"]

log = logging.getLogger(__name__)

_VERSION_DIR = re.compile(r"^v(\d{8})$")
_SLICE_FILE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)\.(?P<lo>\d+)-(?P<hi>\d+)\.npy$")


@dataclass(frozen=True, kw_only=True)
class CheckpointMeta:
    """The job-wide part of one checkpoint (``meta.json``)."""

    version: int  #: global version, increasing by one per checkpoint of the job
    n_params: int  #: length of the flat parameter vector
    keys: tuple[str, ...]  #: per-element arrays stored per slice ("params", optimizer state)
    step: int  #: updates applied (async: pushes; sync: averaged steps)
    batches: int  #: mini-batches whose gradients were applied
    n_workers: int  #: workers at the time of the checkpoint
    n_shards: int  #: shards that wrote it
    extra: Mapping[str, Any] = field(default_factory=dict)  #: schedule state, progress, ...

    def to_json(self) -> str:
        d = asdict(self)
        d["keys"] = list(self.keys)
        d["extra"] = dict(self.extra)
        return json.dumps(d, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CheckpointMeta:
        d = json.loads(text)
        d["keys"] = tuple(d["keys"])
        return cls(**d)


def write_slice(staging: str | os.PathLike[str], lo: int, hi: int,
                arrays: Mapping[str, np.ndarray]) -> None:
    """Write one shard's arrays (each of length ``hi - lo``) into a staging folder.

    Runs inside a PS shard actor. ``O(hi - lo)`` bytes written per array.
    """
    path = Path(staging)
    path.mkdir(parents=True, exist_ok=True)
    for key, arr in arrays.items():
        if arr.shape != (hi - lo,):
            raise ValueError(f"slice {key!r} has shape {arr.shape}, expected ({hi - lo},)")
        np.save(path / f"{key}.{lo}-{hi}.npy", np.ascontiguousarray(arr))


def read_range(folder: str | os.PathLike[str], key: str, lo: int, hi: int) -> np.ndarray:
    """Assemble ``key[lo:hi]`` from the slices of one committed version.

    Raises
    ------
    ValueError
        If the slices do not cover ``[lo, hi)``.
    """
    out = np.empty(hi - lo, dtype=np.float32)
    covered = 0
    for name in os.listdir(folder):
        m = _SLICE_FILE.match(name)
        if m is None or m["key"] != key:
            continue
        s_lo, s_hi = int(m["lo"]), int(m["hi"])
        a, b = max(lo, s_lo), min(hi, s_hi)
        if a >= b:
            continue
        src = np.load(Path(folder) / name, mmap_mode="r")
        out[a - lo:b - lo] = src[a - s_lo:b - s_lo]
        covered += b - a
    if covered != hi - lo:
        raise ValueError(f"{folder}: slices of {key!r} cover {covered} of [{lo}, {hi})")
    return out


def job_folder(root: str | os.PathLike[str], job_id: str) -> Path:
    """``root/job_id``, for a safe id (:func:`psched.core.limits.check_id`) only, and only if it
    resolves inside ``root`` (defence in depth: ids are checked at submit too).

    Raises
    ------
    InputError
        An unsafe id, or a folder that would lie outside ``root``.
    """
    from psched.core.limits import Where, check_id

    check_id(job_id, Where(path=str(root)))
    base = Path(root).resolve()
    folder = (base / job_id).resolve()
    if folder.parent != base:
        raise InputError(f"checkpoint folder {str(folder)[:200]!r} is outside {str(base)!r}",
                         path=str(root), field="job_id")
    return Path(root) / job_id


class CheckpointStore:
    """Committed checkpoint versions of one job under ``root/job_id``.

    Parameters
    ----------
    root
        The checkpoint directory (shared by every node that runs a shard).
    job_id
        The job; its versions live in ``root/job_id``.
    keep
        Committed versions to keep (older ones are deleted after each commit).
    """

    def __init__(self, root: str | os.PathLike[str], job_id: str, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.folder = job_folder(root, job_id)
        self.keep = keep
        self.folder.mkdir(parents=True, exist_ok=True)

    def versions(self) -> list[int]:
        """Committed versions, oldest first."""
        out = []
        for name in os.listdir(self.folder):
            m = _VERSION_DIR.match(name)
            if m and (self.folder / name / "meta.json").exists():
                out.append(int(m[1]))
        return sorted(out)

    def path(self, version: int) -> Path:
        return self.folder / f"v{version:08d}"

    def staging(self, version: int) -> Path:
        """A fresh staging folder for ``version`` (left-overs of a failed attempt removed)."""
        tmp = self.folder / f"v{version:08d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def commit(self, meta: CheckpointMeta) -> Path:
        """Write ``meta.json`` into the staging folder and rename it: the version is durable."""
        tmp = self.folder / f"v{meta.version:08d}.tmp"
        for key in meta.keys:  # every element of every array must be present
            _check_cover(tmp, key, meta.n_params)
        (tmp / "meta.json").write_text(meta.to_json())
        final = self.path(meta.version)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in self.versions()[:-self.keep]:
            shutil.rmtree(self.path(old), ignore_errors=True)
        log.debug("checkpoint %s v%d committed (step %d)", self.folder, meta.version, meta.step)
        return final

    def latest(self) -> CheckpointMeta | None:
        """The newest committed version's meta, or None."""
        vs = self.versions()
        if not vs:
            return None
        return CheckpointMeta.from_json((self.path(vs[-1]) / "meta.json").read_text())

    def load(self, meta: CheckpointMeta, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Every stored array's ``[lo, hi)`` slice in version ``meta.version``."""
        folder = self.path(meta.version)
        return {key: read_range(folder, key, lo, hi) for key in meta.keys}


def _check_cover(folder: Path, key: str, n: int) -> None:
    """Raise ValueError unless the slices of ``key`` in ``folder`` tile ``[0, n)`` exactly."""
    spans = []
    for name in os.listdir(folder):
        m = _SLICE_FILE.match(name)
        if m is not None and m["key"] == key:
            spans.append((int(m["lo"]), int(m["hi"])))
    spans.sort()
    pos = 0
    for lo, hi in spans:
        if lo != pos:
            raise ValueError(f"{folder}: slices of {key!r} leave a gap or overlap at {pos}")
        pos = hi
    if pos != n:
        raise ValueError(f"{folder}: slices of {key!r} end at {pos}, expected {n}")
