"""Real text that every Python installation carries: the standard library's own source.

The corpus of the ``torch-lm`` workload (:mod:`ray_cluster.workloads.torch_lm`), read the
same way on every machine:

1. the files are every ``*.py`` under the standard library's folder
   (``sysconfig.get_paths()["stdlib"]``), skipping the folders ``site-packages``,
   ``dist-packages`` and ``__pycache__``, ordered by their path relative to that folder
   (POSIX separators, compared as Python strings);
2. whole files are taken in that order while their bytes (each followed by one ``\\n``)
   add up to at most ``max_mb`` MB (10^6 bytes); at least one file is taken;
3. the taken files at positions 9, 19, 29, ... (every tenth) form the held-out text, the
   others the training text, each the concatenation of its files in order;
4. the tokens are the bytes (vocabulary 256): no tokenizer, nothing downloaded.

:attr:`Corpus.sha256` hashes the training text, then the held-out text; a job logs it (with
the Python version and the folder), so two runs on different installations show at once
whether they trained on the same text. Built once per process and size.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["HELD_OUT_EVERY", "Corpus", "load_corpus", "stdlib_files"]

log = logging.getLogger(__name__)

#: Every this-many-th taken file (the last of each run of ten) is held out.
HELD_OUT_EVERY = 10
_SKIP = frozenset({"site-packages", "dist-packages", "__pycache__"})
_CACHE: dict[float, Corpus] = {}


@dataclass(frozen=True, kw_only=True, eq=False)  # arrays: compare by identity
class Corpus:
    """The standard library's text as bytes, split into training and held-out parts."""

    train: np.ndarray           #: uint8 training text
    held_out: np.ndarray        #: uint8 held-out text
    files: int                  #: files taken
    root: str                   #: the standard library's folder
    sha256: str                 #: hex digest of the training then the held-out bytes

    def describe(self) -> str:
        """One line for a job's log: what was read and its hash."""
        return (f"stdlib corpus: {self.files} files of {self.root} (Python "
                f"{platform.python_version()}), {self.train.size:,} training + "
                f"{self.held_out.size:,} held-out bytes, sha256 {self.sha256[:16]}")


def stdlib_files(root: Path | None = None) -> list[str]:
    """Relative POSIX paths of the standard library's ``*.py`` files, in corpus order."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    out = []
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        rel = Path(folder).relative_to(base)
        out += [(rel / f).as_posix() for f in files if f.endswith(".py")]
    return sorted(out)


def load_corpus(max_mb: float, root: Path | None = None) -> Corpus:
    """The corpus of at most ``max_mb`` MB (module docstring), cached per process.

    Raises
    ------
    FileNotFoundError
        If the folder holds no ``*.py`` file.
    """
    if root is None and max_mb in _CACHE:
        return _CACHE[max_mb]
    base = Path(root or sysconfig.get_paths()["stdlib"])
    names = stdlib_files(base)
    if not names:
        raise FileNotFoundError(f"no *.py file under {base}")
    limit = int(max_mb * 1e6)
    train: list[bytes] = []
    held: list[bytes] = []
    total = 0
    for i, name in enumerate(names):
        text = (base / name).read_bytes() + b"\n"
        if i and total + len(text) > limit:
            break
        total += len(text)
        (held if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else train).append(text)
    train_b, held_b = b"".join(train), b"".join(held)
    digest = hashlib.sha256(train_b)
    digest.update(held_b)
    corpus = Corpus(train=np.frombuffer(train_b, dtype=np.uint8),
                    held_out=np.frombuffer(held_b, dtype=np.uint8),
                    files=len(train) + len(held), root=str(base), sha256=digest.hexdigest())
    log.info("%s", corpus.describe())
    if root is None:
        _CACHE[max_mb] = corpus
    return corpus
