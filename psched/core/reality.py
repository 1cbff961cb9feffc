"""Reality in the simulator: jobs that do not run at their profiled speed.

The model says a job with ``n`` workers does ``n`` worker-slots of work per slot. Real machines
do not: a whole cluster may run slower or faster than profiled, each job has its own lasting
error (interference, a straggling node, a mis-measured ``tau``), every slot is noisy, and a
job pays actor start-up when it starts, resumes after a gap or has its allocation changed. A
:class:`Reality` names that error; :class:`RealityExecutor` carries plans out under it:

    progress(j, t) = R * F_j * N_{j,t} * n_workers * (1 - lost_{j,t})

* ``R`` -- :attr:`Reality.rate`, the same for every job;
* ``F_j = exp(sigma_job * z_j)`` -- the job's persistent factor, ``z_j`` standard normal: a
  log-normal with mean 0 in log space (median 1, so half the jobs run faster than profiled
  and half slower; its mean is ``exp(sigma_job**2 / 2)``);
* ``N_{j,t} = exp(sigma_slot * z_{j,t})`` -- the slot's noise, log-normal alike;
* ``lost_{j,t}`` -- :attr:`Reality.startup` when the job did not run in slot ``t - 1`` (it
  starts, or resumes after a gap), :attr:`Reality.resize` (by default the same) when it ran
  there with another allocation (resized or moved), else 0.

``z_j`` and ``z_{j,t}`` come from :func:`numpy.random.default_rng` seeded with
(:attr:`Reality.seed`, a stable hash of the job id[, ``t``]), so a job's progress depends on
neither the order of a plan nor which other jobs ran: the same seed gives the same reality
to every policy. :attr:`Reality.exact` (every field at its default) is the model itself,
and :meth:`Reality.executor` then gives the plain
:class:`~psched.core.executor.SimulatedExecutor`, so such runs are bit-equal to the model's.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from psched.core import limits
from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor, SlotReport
from psched.core.model import Alloc, Job, SlotPlan

__all__ = ["MAX_RATE", "MAX_SIGMA", "Reality", "RealityExecutor", "job_hash"]

#: Largest :attr:`Reality.rate` accepted.
MAX_RATE = 10.0
#: Largest :attr:`Reality.sigma_job` and :attr:`Reality.sigma_slot` accepted (a factor of
#: ``exp(2 * 3) ~ 400`` at three standard deviations is as far as a model can be wrong).
MAX_SIGMA = 2.0

#: Each number field's range: (low, low excluded, high).
_RANGES: dict[str, tuple[float, bool, float]] = {
    "rate": (0.0, True, MAX_RATE), "sigma_job": (0.0, False, MAX_SIGMA),
    "sigma_slot": (0.0, False, MAX_SIGMA), "startup": (0.0, False, 1.0),
    "resize": (0.0, False, 1.0)}

#: The command-line flag of each field, for messages.
_FLAGS = {"rate": "--rate", "sigma_job": "--sigma-job", "sigma_slot": "--sigma-slot",
          "startup": "--startup", "seed": "--reality-seed", "resize": "reality"}


@dataclass(frozen=True, kw_only=True)
class Reality:
    """How real progress departs from the model (see the module's formula).

    Raises :class:`~psched.core.errors.InputError` (one line, naming the flag) on a value
    out of range."""

    rate: float = 1.0  #: R: every job's speed against its profile (0.9: 10 % slower)
    sigma_job: float = 0.0  #: sigma of the persistent per-job log-normal factor (log space)
    sigma_slot: float = 0.0  #: sigma of the per-slot log-normal noise (log space)
    startup: float = 0.0  #: fraction of a slot lost on a start, a resume or a resize, [0, 1]
    seed: int = 0  #: seed of the factors and the noise
    #: fraction of a slot lost on a resize or a move alone, [0, 1]; None: ``startup``
    resize: float | None = None

    def __post_init__(self) -> None:
        for name, (low, open_low, high) in _RANGES.items():
            value = getattr(self, name)
            if name == "resize" and value is None:
                continue
            number = (not isinstance(value, bool) and isinstance(value, (int, float))
                      and math.isfinite(value))
            if not (number and (low < value if open_low else low <= value) and value <= high):
                want = f"{'(' if open_low else '['}{low:g}, {high:g}]"
                raise InputError(f"expected a number in {want}, got {value!r}",
                                 path=_FLAGS[name], field=name)
        if (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))
                or not 0 <= self.seed <= limits.MAX_SEED):
            raise InputError(f"expected an integer in [0, {limits.MAX_SEED}], got "
                             f"{self.seed!r}", path=_FLAGS["seed"], field="seed")

    @property
    def exact(self) -> bool:
        """True when reality is the model: rate 1, no factor, no noise, no start-up cost."""
        return (self.rate == 1.0 and self.sigma_job == 0.0 and self.sigma_slot == 0.0
                and self.startup == 0.0 and self.resize_cost == 0.0)

    @property
    def resize_cost(self) -> float:
        """Fraction of a slot lost on a resize or a move: :attr:`resize`, else
        :attr:`startup`."""
        return self.startup if self.resize is None else self.resize

    @classmethod
    def parse(cls, value: Reality | Mapping[str, Any] | str | None) -> Reality:
        """A :class:`Reality` from itself, a mapping of its fields, ``None`` (exact), or text
        ``"rate=0.9,sigma_job=0.1"`` (hyphens allowed in names: ``sigma-job``).

        Raises
        ------
        InputError
            An unknown field, a value that is not a number, or one out of range.
        """
        if value is None:
            return cls()
        if isinstance(value, Reality):
            return value
        if isinstance(value, str):
            pairs: dict[str, Any] = {}
            for part in (p.strip() for p in value.split(",")):
                if not part:
                    continue
                key, sep, text = part.partition("=")
                if not sep:
                    raise InputError(f"expected NAME=VALUE, got {part!r}", path="reality",
                                     field="reality")
                pairs[key.strip().replace("-", "_")] = text.strip()
            value = pairs
        known = {f.name for f in fields(cls)}
        out: dict[str, Any] = {}
        for key, raw in value.items():
            if key not in known:
                raise InputError(f"unknown field {key!r}; known: {', '.join(sorted(known))}",
                                 path="reality", field="reality")
            out[key] = _number(key, raw)
        return cls(**out)

    def executor(self) -> SimulatedExecutor:
        """The executor of this reality: the plain :class:`SimulatedExecutor` when exact."""
        return SimulatedExecutor() if self.exact else RealityExecutor(self)

    def to_dict(self) -> dict[str, float | int | None]:
        """The fields, for a run's ``params``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _number(key: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    if key == "resize" and raw.lower() in ("", "none"):
        return None
    try:
        return int(raw) if key == "seed" else float(raw)
    except ValueError:
        raise InputError(f"expected a number, got {raw!r}", path=_FLAGS.get(key, "reality"),
                         field=key) from None


def job_hash(job_id: str) -> int:
    """A stable 63-bit hash of a job id (the same in every process, unlike ``hash``)."""
    digest = hashlib.blake2b(job_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class RealityExecutor(SimulatedExecutor):
    """Progress under a :class:`Reality` (the module's formula); every other part of the
    :class:`~psched.core.executor.Executor` contract as the model has it.

    Per job it keeps the factor (drawn once) and the slot and allocation it last ran with.
    ``apply`` costs one generator per running job and slot when ``sigma_slot > 0``."""

    def __init__(self, reality: Reality) -> None:
        self.reality = reality
        self._factor: dict[str, float] = {}
        self._last: dict[str, tuple[int, Alloc]] = {}

    def true_speed(self, job_id: str) -> float:
        """``R * F_j``: the job's lasting speed against its profile (what an oracle knows)."""
        return self.reality.rate * self._job_factor(job_id)

    def _job_factor(self, job_id: str) -> float:
        f = self._factor.get(job_id)
        if f is None:
            sigma = self.reality.sigma_job
            z = 0.0 if sigma == 0 else _normal(self.reality.seed, job_hash(job_id))
            f = self._factor[job_id] = math.exp(sigma * z)
        return f

    def noise(self, job_id: str, t: int) -> float:
        """``N_{j,t}``: the noise of job ``job_id`` in slot ``t``."""
        sigma = self.reality.sigma_slot
        if sigma == 0:
            return 1.0
        return math.exp(sigma * _normal(self.reality.seed, job_hash(job_id), t))

    def lost(self, job_id: str, t: int, alloc: Alloc) -> float:
        """Fraction of slot ``t`` lost to start-up: on a start or a resume, and on a resize
        or a move (:attr:`Reality.resize_cost`)."""
        last = self._last.get(job_id)
        if last is None or last[0] != t - 1:
            return self.reality.startup
        return self.reality.resize_cost if last[1] != alloc else 0.0

    def as_modelled(self) -> bool:
        return self.reality.exact

    def apply(self, t: int, plan: SlotPlan, jobs: Mapping[str, Job]) -> SlotReport:
        if self.reality.exact:
            return super().apply(t, plan, jobs)
        progress: dict[str, float] = {}
        for job_id, alloc in plan.items():
            if not alloc.n_workers:
                continue
            progress[job_id] = (self.true_speed(job_id) * self.noise(job_id, t)
                                * alloc.n_workers * (1.0 - self.lost(job_id, t, alloc)))
            self._last[job_id] = (t, alloc)
        return SlotReport(slot=t, progress=progress)

    def release(self, job_id: str) -> None:
        self._last.pop(job_id, None)


def _normal(seed: int, key: int, t: int | None = None) -> float:
    """One standard normal draw for (seed, job key[, slot]); the first word keeps the job's
    factor stream apart from its slots' noise."""
    words = [0, int(seed), key] if t is None else [1, int(seed), key, int(t)]
    return float(np.random.default_rng(words).standard_normal())
