"""Synthetic scenarios of ``oasis.md`` section 7: ``oasis-paper`` and the ``fig5`` instances.

Both are drawn with ``numpy.random.default_rng(seed)``: the same seed gives the same jobs and
cluster. Work is set through the fastest duration F (slots at full width N), so that
``spec.work(slot_seconds) == N * F`` exactly; ``traces/README.md`` states every choice.

References
----------
Y. Bao, Y. Peng, C. Wu, Z. Li, "Online Job Scheduling in Distributed Machine Learning
Clusters", IEEE INFOCOM 2018, section VI (the ranges), resolved by ``oasis.md`` section 7.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import cast

import numpy as np

from psched.core.errors import InputError
from psched.core.model import Cluster, JobSpec, Pool, Resources, Server, comm_seconds
from psched.core.utility import Utility
from psched.traces.synth_philly import philly_cluster, philly_jobs

__all__ = [
    "DEFAULT_MIX",
    "FIG4_MIX",
    "SCENARIOS",
    "TYPE_NAMES",
    "Summary",
    "SynthReport",
    "fig5_instance",
    "oasis_paper_cluster",
    "oasis_paper_jobs",
    "type_counts",
]

log = logging.getLogger(__name__)

#: Job types of the paper's evaluation, in the order of every mix.
TYPE_NAMES: tuple[str, ...] = ("insensitive", "sensitive", "critical")
#: Default mix: 10% insensitive (gamma2 = 0), 55% sensitive, 35% critical.
DEFAULT_MIX: tuple[float, float, float] = (0.10, 0.55, 0.35)
#: Fig. 4: 100 sensitive + 100 critical jobs.
FIG4_MIX: tuple[float, float, float] = (0.0, 0.5, 0.5)
_DECAY = ((0.0, 0.0), (0.01, 1.0), (4.0, 6.0))  # gamma2 range of each type

# oasis-paper servers: (GPU, CPU, memory GB); storage 1000 GB; bandwidth U[20, 50] Gbps.
_WORKER_TYPES = ((4.0, 32.0, 244.0), (8.0, 64.0, 488.0))
_PS_TYPES = ((0.0, 16.0, 30.0), (0.0, 36.0, 60.0))
_SERVERS_PER_POOL = 50
_BLOCK = 64  # (e, b) pairs drawn at a time by the rejection sampler
_MAX_DRAWS = 1_000_000  # per job; only a slot far shorter than the paper's can reach it
_GRAD_MB = (30.0, 575.0)
_WORKER_BW = (0.1, 5.0)


@dataclass(frozen=True, kw_only=True)
class Summary:
    """Five-number summary plus mean of a sample."""

    min: float  #: smallest value
    p25: float  #: 25th percentile
    median: float  #: 50th percentile
    mean: float  #: arithmetic mean
    p75: float  #: 75th percentile
    max: float  #: largest value

    @classmethod
    def of(cls, values: np.ndarray) -> Summary:
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            return cls(min=math.nan, p25=math.nan, median=math.nan, mean=math.nan,
                       p75=math.nan, max=math.nan)
        q = np.percentile(v, [25, 50, 75])
        return cls(min=float(v.min()), p25=float(q[0]), median=float(q[1]),
                   mean=float(v.mean()), p75=float(q[2]), max=float(v.max()))


@dataclass(frozen=True, kw_only=True)
class SynthReport:
    """What an ``oasis-paper`` draw produced (for ``params`` and the benchmark notes)."""

    n_jobs: int  #: jobs drawn
    slots: int  #: horizon T the scenario was drawn for
    arrival_slots: int  #: arrivals lie in slots 0..arrival_slots-1, i.e. [0, 2T/3)
    mix: tuple[float, float, float]  #: requested type fractions (insensitive, sensitive, critical)
    type_counts: Mapping[str, int]  #: jobs of each type
    draws: int  #: (e, b) pairs drawn by the rejection step, all jobs together
    acceptance_rate: float  #: n_jobs / draws
    tau_slots: Summary  #: tau, slots
    fastest: Summary  #: F, slots
    work: Summary  #: W = N F, worker-slots
    target: Summary  #: gamma3, slots
    gpu_slot_demand: float  #: sum over jobs of worker GPU x W, GPU-slots
    gpu_slot_capacity: float  #: worker GPUs of the oasis-paper cluster x arrival_slots
    gpu_load: float  #: demand / capacity

    def __str__(self) -> str:
        def row(name: str, s: Summary) -> str:
            return (f"  {name:<9} min {s.min:.4g}  p25 {s.p25:.4g}  median {s.median:.4g}  "
                    f"mean {s.mean:.4g}  p75 {s.p75:.4g}  max {s.max:.4g}")

        counts = ", ".join(f"{k} {v}" for k, v in self.type_counts.items())
        return "\n".join([
            f"{self.n_jobs} jobs, T = {self.slots}, arrivals in slots 0..{self.arrival_slots - 1}",
            f"  types: {counts}",
            f"  (e, b) draws {self.draws}, acceptance {self.acceptance_rate:.3f}",
            row("F", self.fastest), row("W", self.work), row("gamma3", self.target),
            row("tau_slot", self.tau_slots),
            f"  GPU-slots: demand {self.gpu_slot_demand:.0f} / capacity "
            f"{self.gpu_slot_capacity:.0f} = load {self.gpu_load:.2f}",
        ])

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict."""
        out = asdict(self)
        out["mix"] = list(self.mix)
        out["type_counts"] = dict(self.type_counts)
        return out


def oasis_paper_jobs(n_jobs: int, *, seed: int, slots: int = 300, slot_seconds: float = 3600.0,
                     options: Mapping[str, str] | None = None
                     ) -> tuple[list[JobSpec], SynthReport]:
    """Draw the ``oasis-paper`` scenario's jobs (``oasis.md`` section 7, word by word).

    Parameters
    ----------
    n_jobs : int
        Number of jobs (the paper: 100-400).
    seed : int
        Seed of ``numpy.random.default_rng``.
    slots : int
        Horizon T; arrivals lie in slots [0, 2T/3).
    slot_seconds : float
        Slot length; ``tau_s = tau_slots * slot_seconds``.
    options : mapping, optional
        ``--scenario-opt`` pairs: ``mix=I,S,C`` (type fractions summing to 1) or ``mix=fig4``.

    Returns
    -------
    (list of JobSpec, SynthReport)
        Jobs sorted by arrival (ids ``j000``... in that order) and what was drawn.

    Raises
    ------
    InputError
        Bad ``n_jobs``, ``slots``, ``slot_seconds`` or option; a slot so short that some
        job can never get tau >= 0.

    Notes
    -----
    Speed: F ~ U{1..10}; (e, b) ~ U[30, 575] MB x U[0.1, 5] Gbps redrawn until
    ``tau = F / (E M) - 2e/b >= 0`` (slots); then ``W = N F`` exactly. Type counts follow the
    mix by largest remainder, in random order. Arrivals: 80% i.i.d. from the diurnal density
    ``1 + 0.5 sin(2 pi t / 24)`` on [0, 2T/3), 20% on 10 distinct burst slots drawn from that
    density (each burst job on one of them uniformly). O(n_jobs / acceptance) time.
    """
    mix = _parse_options(options)
    _check_int("jobs", n_jobs, 1)
    _check_int("slots", slots, 1)
    if not (math.isfinite(slot_seconds) and slot_seconds > 0):
        raise InputError(f"must be a positive number, got {slot_seconds!r}",
                         field="slot_seconds")
    rng = np.random.default_rng(seed)
    n = n_jobs
    kinds = rng.permutation(np.repeat(np.arange(3), type_counts(n, mix)))
    epochs, chunks, minis = (rng.integers(50, 201, n), rng.integers(5, 101, n),
                             rng.integers(10, 101, n))
    ps_bw = rng.uniform(5.0, 20.0, n)
    w_gpu, w_cpu, w_mem, w_sto = (rng.integers(0, 5, n), rng.integers(1, 11, n),
                                  rng.integers(2, 33, n), rng.integers(5, 11, n))
    p_cpu, p_mem, p_sto = rng.integers(1, 11, n), rng.integers(2, 33, n), rng.integers(5, 11, n)
    fastest = rng.integers(1, 11, n)
    per_minibatch_s = fastest * slot_seconds / (epochs * minis)  # tau + 2e/b, seconds
    grad, w_bw, draws = _draw_comm(rng, per_minibatch_s, slot_seconds)
    tau_s = per_minibatch_s - _comm(grad, w_bw)
    value = rng.uniform(1.0, 100.0, n)
    decay = np.array([rng.uniform(*_DECAY[k]) if k else 0.0 for k in kinds])
    target = rng.integers(fastest, 16)
    arrivals = np.sort(_arrivals(rng, n, _arrival_slots(slots)))

    width = max(3, len(str(n - 1)))
    specs = []
    for i in range(n):
        spec = JobSpec(
            job_id=f"j{i:0{width}d}", arrival=int(arrivals[i]), epochs=int(epochs[i]),
            max_workers=int(chunks[i]), minibatches=int(minis[i]), tau_s=float(tau_s[i]),
            grad_mb=float(grad[i]),
            worker_demand=Resources(gpu=float(w_gpu[i]), cpu=float(w_cpu[i]),
                                    memory_gb=float(w_mem[i]), storage_gb=float(w_sto[i]),
                                    bandwidth_gbps=float(w_bw[i])),
            ps_demand=Resources(cpu=float(p_cpu[i]), memory_gb=float(p_mem[i]),
                                storage_gb=float(p_sto[i]), bandwidth_gbps=float(ps_bw[i])),
            utility=Utility(kind="sigmoid", value=float(value[i]), decay=float(decay[i]),
                            target=float(target[i])),
        )
        _check_work(spec, slot_seconds, int(chunks[i] * fastest[i]))
        specs.append(spec)
    work = chunks * fastest
    capacity = sum(t[0] for t in _WORKER_TYPES) * _SERVERS_PER_POOL / 2 * _arrival_slots(slots)
    demand = float(np.sum(w_gpu * work))
    report = SynthReport(
        n_jobs=n, slots=slots, arrival_slots=_arrival_slots(slots), mix=mix,
        type_counts={name: int(np.sum(kinds == k)) for k, name in enumerate(TYPE_NAMES)},
        draws=draws, acceptance_rate=n / draws, tau_slots=Summary.of(tau_s / slot_seconds),
        fastest=Summary.of(fastest), work=Summary.of(work), target=Summary.of(target),
        gpu_slot_demand=demand, gpu_slot_capacity=float(capacity),
        gpu_load=demand / capacity,
    )
    log.debug("oasis-paper: %d jobs, acceptance %.3f, GPU load %.2f", n,
              report.acceptance_rate, report.gpu_load)
    return specs, report


def oasis_paper_cluster(*, seed: int, slot_seconds: float = 3600.0) -> Cluster:
    """The ``oasis-paper`` cluster: 50 worker + 50 PS servers, half of each type.

    Worker servers ``w00..w24`` are (GPU 4, CPU 32, 244 GB), ``w25..w49`` (GPU 8, CPU 64,
    488 GB); PS servers ``p00..p24`` (CPU 16, 30 GB), ``p25..p49`` (CPU 36, 60 GB); all with
    storage 1000 GB and bandwidth U[20, 50] Gbps drawn with ``default_rng(seed)`` (workers
    first).
    """
    rng = np.random.default_rng(seed)
    servers = []
    for pool, types, prefix in ((Pool.WORKER, _WORKER_TYPES, "w"), (Pool.PS, _PS_TYPES, "p")):
        bandwidth = rng.uniform(20.0, 50.0, _SERVERS_PER_POOL)
        for h in range(_SERVERS_PER_POOL):
            gpu, cpu, mem = types[h * len(types) // _SERVERS_PER_POOL]
            servers.append(Server(server_id=f"{prefix}{h:02d}", pool=pool, capacity=Resources(
                gpu=gpu, cpu=cpu, memory_gb=mem, storage_gb=1000.0,
                bandwidth_gbps=float(bandwidth[h]))))
    return Cluster(servers=tuple(servers), slot_seconds=float(slot_seconds))


def type_counts(n: int, mix: tuple[float, float, float]) -> list[int]:
    """Jobs of each type for ``n`` jobs: ``floor(f n)`` plus largest remainders (ties: order)."""
    exact = [f * n for f in mix]
    counts = [math.floor(x + 1e-9) for x in exact]
    order = sorted(range(len(mix)), key=lambda k: -(exact[k] - counts[k]))
    for k in order[: n - sum(counts)]:
        counts[k] += 1
    return counts


def _draw_comm(rng: np.random.Generator, per_minibatch_s: np.ndarray, slot_seconds: float
               ) -> tuple[np.ndarray, np.ndarray, int]:
    """Redraw (e, b) per job until ``2e/b <= tau + 2e/b`` budget; return e, b, total draws."""
    least = comm_seconds(_GRAD_MB[0], _WORKER_BW[1])
    grad, bw = np.empty(per_minibatch_s.size), np.empty(per_minibatch_s.size)
    draws = 0
    for i, budget in enumerate(per_minibatch_s):
        if budget <= least:
            raise InputError(
                f"slot of {slot_seconds!r} s is too short: a mini-batch may take only "
                f"{budget:.3g} s but communication takes at least {least:.3g} s",
                field="slot_seconds")
        while True:
            e = rng.uniform(*_GRAD_MB, _BLOCK)
            b = rng.uniform(*_WORKER_BW, _BLOCK)
            ok = np.nonzero(_comm(e, b) <= budget)[0]
            if ok.size:
                draws += int(ok[0]) + 1
                grad[i], bw[i] = e[ok[0]], b[ok[0]]
                break
            draws += _BLOCK
            if draws > _MAX_DRAWS * (i + 1):
                raise InputError(f"slot of {slot_seconds!r} s is too short: no (e, b) found",
                                 field="slot_seconds")
    return grad, bw, draws


def _comm(grad_mb: np.ndarray, bandwidth_gbps: np.ndarray) -> np.ndarray:
    """:func:`psched.core.model.comm_seconds` on arrays (the same float operations, in order)."""
    return np.asarray(comm_seconds(cast(float, grad_mb), cast(float, bandwidth_gbps)))


def _arrival_slots(slots: int) -> int:
    """Integer slots t with t < 2T/3."""
    return (2 * slots + 2) // 3


def _arrivals(rng: np.random.Generator, n: int, window: int) -> np.ndarray:
    """80% diurnal i.i.d., 20% on 10 burst slots (section 7); unsorted."""
    t = np.arange(window)
    density = 1.0 + 0.5 * np.sin(2.0 * np.pi * t / 24.0)
    density /= density.sum()
    n_burst = round(0.2 * n)
    diurnal = rng.choice(window, size=n - n_burst, p=density)
    bursts = rng.choice(window, size=min(10, window), replace=False, p=density)
    burst = bursts[rng.integers(0, bursts.size, n_burst)]
    return np.concatenate([diurnal, burst]).astype(int)


def _check_work(spec: JobSpec, slot_seconds: float, expected: int) -> None:
    got = spec.work(slot_seconds)
    if got != expected:  # float noise beyond ceil_eps: a bug here, not bad input
        raise RuntimeError(f"{spec.job_id}: work {got} != N*F = {expected}")


def _check_int(field: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InputError(f"must be an integer >= {least}, got {value!r}", field=field)


def _parse_options(options: Mapping[str, str] | None) -> tuple[float, float, float]:
    mix = DEFAULT_MIX
    for key, raw in (options or {}).items():
        if key != "mix":
            raise InputError(f"unknown option {key!r} (known: mix)", path="--scenario-opt",
                             field=key)
        text = str(raw).strip().lower()
        if text == "fig4":
            mix = FIG4_MIX
            continue
        parts = text.split(",")
        try:
            values = tuple(float(p) for p in parts)
        except ValueError:
            values = ()
        if (len(values) != 3 or not all(math.isfinite(v) and v >= 0 for v in values)
                or abs(sum(values) - 1.0) > 1e-6):
            raise InputError(f"must be 'fig4' or three fractions I,S,C >= 0 summing to 1, got "
                             f"{raw!r}", path="--scenario-opt", field="mix")
        total = sum(values)
        mix = (values[0] / total, values[1] / total, values[2] / total)
    return mix


# fig5 instances ----------------------------------------------------------------------------

_FIG5_EPOCHS, _FIG5_MINIBATCHES, _FIG5_GRAD_MB = 10, 10, 100.0
_FIG5_PS_BW = 1.0  # B, Gbps; b = (b/B) * B
_FIG5_SERVER_BW = 25.0  # Gbps: more than 4 workers or 16 PS can use, so never binding
_FIG5_STORAGE = 100.0  # GB per server; jobs demand none
_FIG5_MAX_TRIES = 100_000


def fig5_instance(n_servers: int, *, seed: int, priority: tuple[float, float] = (1.0, 100.0),
                  n_jobs: int = 10, slots: int = 10) -> tuple[list[JobSpec], Cluster]:
    """A Fig. 5 instance (``oasis.md`` section 7, "The fig5 instances").

    ``ceil(n/2)`` worker servers (GPU 4, CPU 16, 64 GB) and ``floor(n/2)`` PS servers
    (CPU 16, 64 GB), all with storage 100 GB and 25 Gbps. Jobs: N ~ U{1..8}, F ~ U{1..4},
    W = N F; worker GPU U{1..2}, CPU U{1..4}, memory U{2..8}; PS CPU U{1..4}, memory U{2..8};
    storage demand 0; B = 1 Gbps and b = B x U[0.2, 1]; E = M = 10, e = 100 MB and
    ``tau_s = F slot / (E M) - 2e/b`` (>= 28 s), so W = N F exactly; arrival U{0..T//2};
    gamma3 U{F..T}; gamma1 U[priority]; gamma2 and type mix as ``oasis-paper``.
    N, F and GPU are redrawn together while sum(GPU x W) < 4 ceil(n/2) T (a trivial instance);
    the other fields are drawn afterwards, which leaves their distribution unchanged.

    Raises
    ------
    InputError
        ``n_servers < 2``, bad sizes or priority, or capacity no instance can reach.
    """
    _check_int("n_servers", n_servers, 2)
    _check_int("jobs", n_jobs, 1)
    _check_int("slots", slots, 1)
    lo, hi = priority
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi):
        raise InputError(f"must be 0 <= low <= high, got {priority!r}", field="priority")
    n_workers, n = -(-n_servers // 2), n_jobs
    capacity = 4 * n_workers * slots
    if 2 * 8 * 4 * n < capacity:
        raise InputError(f"{n} jobs can never fill {capacity} GPU-slots", field="n_servers")
    rng = np.random.default_rng(seed)
    tries = 0
    while True:
        tries += 1
        chunks, fastest, gpu = rng.integers(1, 9, n), rng.integers(1, 5, n), rng.integers(1, 3, n)
        if np.sum(gpu * chunks * fastest) >= capacity:
            break
        if tries >= _FIG5_MAX_TRIES:
            raise InputError(f"no instance reaching {capacity} GPU-slots in {tries} draws",
                             field="n_servers")
    log.debug("fig5: n=%d accepted after %d draws", n_servers, tries)
    kinds = rng.permutation(np.repeat(np.arange(3), type_counts(n, DEFAULT_MIX)))
    w_cpu, w_mem = rng.integers(1, 5, n), rng.integers(2, 9, n)
    p_cpu, p_mem = rng.integers(1, 5, n), rng.integers(2, 9, n)
    ratio = rng.uniform(0.2, 1.0, n)
    arrivals = np.sort(rng.integers(0, slots // 2 + 1, n))
    target = rng.integers(fastest, slots + 1)
    value = rng.uniform(lo, hi, n)
    decay = np.array([rng.uniform(*_DECAY[k]) if k else 0.0 for k in kinds])
    slot_seconds = 3600.0
    specs = []
    for i in range(n):
        b = float(ratio[i]) * _FIG5_PS_BW
        tau = (float(fastest[i]) * slot_seconds / (_FIG5_EPOCHS * _FIG5_MINIBATCHES)
               - comm_seconds(_FIG5_GRAD_MB, b))
        spec = JobSpec(
            job_id=f"j{i:02d}", arrival=int(arrivals[i]), epochs=_FIG5_EPOCHS,
            max_workers=int(chunks[i]), minibatches=_FIG5_MINIBATCHES, tau_s=tau,
            grad_mb=_FIG5_GRAD_MB,
            worker_demand=Resources(gpu=float(gpu[i]), cpu=float(w_cpu[i]),
                                    memory_gb=float(w_mem[i]), bandwidth_gbps=b),
            ps_demand=Resources(cpu=float(p_cpu[i]), memory_gb=float(p_mem[i]),
                                bandwidth_gbps=_FIG5_PS_BW),
            utility=Utility(kind="sigmoid", value=float(value[i]), decay=float(decay[i]),
                            target=float(target[i])),
        )
        _check_work(spec, slot_seconds, int(chunks[i] * fastest[i]))
        specs.append(spec)
    servers = [Server(server_id=f"w{h:02d}", pool=Pool.WORKER, capacity=Resources(
        gpu=4, cpu=16, memory_gb=64, storage_gb=_FIG5_STORAGE, bandwidth_gbps=_FIG5_SERVER_BW))
        for h in range(n_workers)]
    servers += [Server(server_id=f"p{k:02d}", pool=Pool.PS, capacity=Resources(
        cpu=16, memory_gb=64, storage_gb=_FIG5_STORAGE, bandwidth_gbps=_FIG5_SERVER_BW))
        for k in range(n_servers // 2)]
    return specs, Cluster(servers=tuple(servers), slot_seconds=slot_seconds)


#: Scenario name -> (jobs function, cluster function), for ``psched run --scenario`` and
#: ``psched trace synth``. A jobs function returns (jobs, report); a report with a
#: ``default_slots`` attribute sets the horizon of a run without ``--slots``.
SCENARIOS: dict[str, tuple[Callable[..., tuple[list[JobSpec], object]],
                           Callable[..., Cluster]]] = {
    "oasis-paper": (oasis_paper_jobs, oasis_paper_cluster),
    "philly": (philly_jobs, philly_cluster),
}
