"""``psched trace fetch``: download a public trace, verify its sha256, unpack it.

Addresses and checksums are those of ``shared/traces/FORMATS.md``. Downloads go to a temporary
file beside the destination and are moved into place only once the checksum matches, so a
failed or tampered download leaves nothing behind. Archives (``.tar.gz``) are unpacked into
``DEST/NAME/`` refusing members that would land outside it. Traces without a stable direct
address (Helios, raw Philly) are not downloaded: :func:`fetch` says how to obtain them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from psched.core.errors import InputError

__all__ = ["SOURCES", "Part", "Source", "fetch", "list_sources"]

log = logging.getLogger(__name__)
_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Part:
    """One file to download."""

    url: str  #: address (http(s):// or file://)
    sha256: str  #: expected checksum, hex
    size: int | None = None  #: expected bytes, when published


@dataclass(frozen=True, kw_only=True)
class Source:
    """A public trace: its files, or how to get it when it has no direct address."""

    name: str  #: name for ``psched trace fetch NAME``
    fmt: str  #: ``--format`` to read it with
    parts: tuple[Part, ...] = ()  #: files to download; empty = no direct address
    how: str = ""  #: what to do instead (for sources without parts) or notes
    licence: str = ""  #: licence of the data


_EF = "https://github.com/microsoft/elasticflow-traces/raw/main/data/"
_PAI = "https://aliopentrace.oss-cn-beijing.aliyuncs.com/v2020GPUTraces/"
#: Every known public trace (``shared/traces/FORMATS.md``).
SOURCES: dict[str, Source] = {s.name: s for s in (
    Source(name="elasticflow", fmt="elasticflow", licence="MIT", parts=(Part(
        url=_EF + "elasticflow-traces.tar.gz", size=2_599_482,
        sha256="e9c20b73de61d2702aef086aebc995cbc432affbd0f09969cf30879c5d1a83c4"),)),
    Source(name="elasticflow-raw", fmt="elasticflow-raw", licence="MIT", parts=(Part(
        url=_EF + "raw-traces.tar.gz", size=1_943_846,
        sha256="67398e1a89245c50ae0881bf997e6cda0c95f9f47980af5bc56d67998965669f"),)),
    Source(name="philly-pollux", fmt="philly", licence="see petuum/adaptdl", parts=(Part(
        url="https://github.com/petuum/adaptdl/raw/c793c7089bd307462686339d29707925c461f9a9/"
            "simulator/traces/philly.csv", size=3_444_496,
        sha256="ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da"),)),
    Source(name="alibaba-pai-2020", fmt="alibaba", licence="see alibaba/clusterdata",
           how="checksums as published in alibaba/clusterdata's README", parts=(
               Part(url=_PAI + "pai_job_table.tar.gz", sha256="5aad7f7caac501136d14ed6a48e40"
                    "546f825d7b0617a3a4f337e2348fe0a6cb0"),
               Part(url=_PAI + "pai_task_table.tar.gz", sha256="cd1d6dc3215d2a8607ccf6b6dd952"
                    "b5db776df86926c73259fea7c1499ac40e5"))),
    Source(name="helios", fmt="helios", how=(
        "no stable direct address (Git LFS): clone github.com/S-Lab-System-Group/HeliosData "
        "with git-lfs installed (git lfs pull), then read data/<cluster>/cluster_log.csv "
        "with --format helios")),
    Source(name="philly", fmt="philly-json", how=(
        "no stable direct address (a download form): get trace-data.tar.gz via "
        "github.com/msr-fiddle/philly-traces (README), unpack it, then read "
        "cluster_job_log with --format philly-json")),
)}


def list_sources() -> str:
    """Per source: name, format and what fetch does, then each file's address, size and
    sha256 (or how to obtain a source without a direct address)."""
    lines = []
    for s in SOURCES.values():
        what = f"{len(s.parts)} file(s)" if s.parts else "manual"
        lines.append(f"{s.name:18s} --format {s.fmt:16s} {what}"
                     + (f"; licence: {s.licence}" if s.licence else ""))
        for part in s.parts:
            size = f"  {part.size:,} bytes" if part.size else ""
            lines.append(f"    {part.url}{size}\n    sha256 {part.sha256}")
        if s.how:
            lines.append(f"    {s.how}")
    return "\n".join(lines)


def fetch(name: str, dest: str | os.PathLike[str] = "traces/public", *,
          urls: Sequence[str] | None = None, sha256s: Sequence[str] | None = None,
          timeout_s: float = 60.0) -> list[Path]:
    """Download, verify and unpack the public trace ``name`` into ``dest/name/``.

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`.
    dest : path-like
        Parent folder; the trace lands in ``dest/name/``.
    urls, sha256s : sequence of str, optional
        Replace the addresses (a mirror, a ``file://`` URL) and, with them, the checksums
        (one per part; default: the published ones).
    timeout_s : float
        Network timeout per request.

    Returns
    -------
    list of Path
        The files now in ``dest/name/``.

    Raises
    ------
    InputError
        Unknown name, a source with no direct address (the message says how to get it), a
        failed download, a checksum mismatch, or an unsafe archive. Nothing is left behind.

    Notes
    -----
    O(bytes downloaded).
    """
    if name not in SOURCES:
        raise InputError(f"unknown trace {name!r}; known: {', '.join(SOURCES)}",
                         path="fetch", field="name")
    source = SOURCES[name]
    if not source.parts:
        raise InputError(f"{name}: {source.how}", path="fetch", field="name")
    parts = list(source.parts)
    if urls is not None:
        if len(urls) != len(parts):
            raise InputError(f"{name} has {len(parts)} file(s), got {len(urls)} --url",
                             path="fetch", field="url")
        shas = list(sha256s) if sha256s else [p.sha256 for p in parts]
        if len(shas) != len(parts):
            raise InputError(f"need {len(parts)} --sha256, got {len(shas)}", path="fetch",
                             field="sha256")
        parts = [Part(url=u, sha256=h) for u, h in zip(urls, shas, strict=True)]
    target = Path(dest) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{name}."))
    try:
        for part in parts:
            file = _download(part, staging, timeout_s)
            if file.name.endswith((".tar.gz", ".tgz", ".tar")):
                _unpack(file, staging)
                file.unlink()
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(p for p in target.rglob("*") if p.is_file())


def _download(part: Part, folder: Path, timeout_s: float) -> Path:
    name = part.url.rstrip("/").rsplit("/", 1)[-1] or "download"
    out = folder / name
    digest = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(part.url, timeout=timeout_s) as resp, out.open("wb") as fh:
            while chunk := resp.read(_CHUNK):
                digest.update(chunk)
                fh.write(chunk)
                size += len(chunk)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
        raise InputError(f"download failed: {reason}", path=part.url, field="url") from None
    if digest.hexdigest() != part.sha256.lower():
        raise InputError(f"sha256 mismatch: got {digest.hexdigest()}, expected {part.sha256} "
                         f"({size} bytes); nothing was kept", path=part.url, field="sha256")
    if part.size is not None and size != part.size:
        raise InputError(f"size {size} bytes, expected {part.size}", path=part.url,
                         field="size")
    log.info("fetched %s (%d bytes, sha256 ok)", part.url, size)
    return out


def _unpack(archive: Path, folder: Path) -> None:
    root = folder.resolve()
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for m in members:
                where = (root / m.name).resolve()
                if (not str(where).startswith(str(root) + os.sep) or m.issym() or m.islnk()
                        or m.isdev()):
                    raise InputError(f"unsafe archive member {m.name!r}", path=str(archive),
                                     field="archive")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(folder, members=members, filter="data")
            else:  # pragma: no cover - Python without extraction filters
                tar.extractall(folder, members=members)
    except tarfile.TarError as err:
        raise InputError(f"bad archive: {err}", path=str(archive), field="archive") from None
