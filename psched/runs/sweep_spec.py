"""What a sweep is: :class:`SweepSpec` (policies x seeds x load factors x cluster sizes over
one trace or scenario), its cells (:func:`cells_of`), which seeds share their jobs
(:func:`jobs_key`), and the ``results.csv`` table and figure built from the finished cells."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from psched.core.errors import InputError
from psched.core.reality import Reality
from psched.runs.sweep_cell import SweepCell

__all__ = ["RESULT_COLUMNS", "SweepSpec", "cells_of", "check_spec", "jobs_key", "plot_utility",
           "results_csv", "seeds_share_jobs"]


#: Columns of ``results.csv``, in order.
RESULT_COLUMNS: tuple[str, ...] = (
    "policy", "seed", "load", "scale", "jobs", "horizon", "worker_servers", "total_utility",
    "admitted", "rejected", "completed", "unfinished", "jct_mean", "gpu_util", "wall_s",
    "promised", "kept", "restated", "missed", "wasted_ws", "background_ws",
)


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """What a sweep covers."""

    trace: tuple[str, ...]  #: trace file(s) (a folder or two files for Alibaba)
    fmt: str = "auto"  #: trace format
    jobs: int | None = None  #: keep the first N jobs by arrival
    slot_seconds: float = 3600.0  #: slot length, seconds
    policies: tuple[str, ...] = ("fifo", "drf", "oasis")  #: policy names
    seeds: tuple[int, ...] = (0,)  #: seeds (mapping draws and policies)
    loads: tuple[float, ...] = (1.0,)  #: load factors: arrival offsets divided by these
    scales: tuple[float, ...] = (1.0,)  #: cluster sizes, times the default cluster
    max_window: int | None = None  #: explicit cap on a job's window, slots (None: no cap)
    check: bool = True  #: run the independent plan checker
    #: ``NAME=VALUE`` / ``POLICY:NAME=VALUE`` (:func:`psched.policies.options.options_from_pairs`)
    policy_options: tuple[str, ...] = ()
    #: how every cell's jobs really run (:mod:`psched.core.reality`; a mapping of its fields
    #: is taken too); default: the model
    reality: Reality = field(default_factory=Reality)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reality", Reality.parse(self.reality))

    def digest(self) -> str:
        """A short hash of the spec (a results folder holds one sweep; a spec without policy
        options hashes as it did before they existed)."""
        d = asdict(self)
        if not d["policy_options"]:
            del d["policy_options"]
        if self.reality.exact:
            del d["reality"]
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def options_of(self, policy: str) -> dict[str, Any]:
        """The options ``policy`` gets from :attr:`policy_options`."""
        from psched.policies.options import options_from_pairs

        return options_from_pairs(self.policies, self.policy_options).get(policy, {})


def cells_of(spec: SweepSpec) -> list[SweepCell]:
    """Every cell of ``spec``, in a fixed order. O(product of the axes)."""
    return [SweepCell(policy=p, seed=s, load=ld, scale=c)
            for c, ld, s, p in product(spec.scales, spec.loads, spec.seeds, spec.policies)]


def check_spec(spec: SweepSpec) -> None:
    from psched.policies import available_policies

    known = available_policies()
    for p in spec.policies:
        if p not in known:
            raise InputError(f"unknown policy {p!r}; available: {', '.join(known)}",
                             path="--policies", field="policies")
    from psched.policies.options import checked_policy, options_from_pairs

    for name, options in options_from_pairs(spec.policies, spec.policy_options).items():
        checked_policy(name, options)  # a bad option: one line, before any work
    for name, values in (("loads", spec.loads), ("scales", spec.scales)):
        if not values or any(not (math.isfinite(v) and v > 0) for v in values):
            raise InputError(f"must be positive numbers, got {values!r}", path=f"--{name}",
                             field=name)
    if not spec.seeds or not spec.policies:
        raise InputError("a sweep needs at least one seed and one policy", field="sweep")


def seeds_share_jobs(spec: SweepSpec) -> bool:
    """Whether every seed's cells run the same jobs: the trace is ``native`` (given, or
    detected from its header), whose rows carry every job parameter, so the mapping seed is
    ignored (:func:`psched.traces.detect.load_with_report`); a public trace's mapping draws
    with the seed. O(reading the header).

    Raises
    ------
    InputError
        A trace whose format cannot be told.
    """
    from psched.traces.detect import detect_format

    paths = spec.trace[0] if len(spec.trace) == 1 else list(spec.trace)
    return (detect_format(paths) if spec.fmt == "auto" else spec.fmt) == "native"


def jobs_key(spec: SweepSpec, seed: int, shared: bool | None = None) -> int | None:
    """Which jobs a cell of ``seed`` runs: ``seed``, or None when every seed runs the same
    jobs (:func:`seeds_share_jobs`, or ``shared`` when the caller knows it). A sweep maps
    the jobs of each key once, serially and on Ray alike. O(1) given ``shared``."""
    return None if (seeds_share_jobs(spec) if shared is None else shared) else seed


def results_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=RESULT_COLUMNS, lineterminator="\n",
                       extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in RESULT_COLUMNS})
    return buf.getvalue()


def plot_utility(rows: Sequence[dict[str, Any]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    scales = sorted({r["scale"] for r in rows})
    fig, axes = plt.subplots(1, len(scales), figsize=(5 * len(scales), 3.8), squeeze=False)
    for ax, scale in zip(axes[0], scales, strict=True):
        for policy in sorted({r["policy"] for r in rows}):
            sel = [r for r in rows if r["scale"] == scale and r["policy"] == policy]
            loads = sorted({r["load"] for r in sel})
            mean = [np.mean([r["total_utility"] for r in sel if r["load"] == ld])
                    for ld in loads]
            ax.plot(loads, mean, marker="o", label=policy)
        ax.set(title=f"cluster x{scale:g}", xlabel="load factor",
               ylabel="total utility (mean over seeds)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
