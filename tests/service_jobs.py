"""What the service and fault suites share: the slot length they run at, the job spec they
submit (as a :class:`JobSpec`, or as the text of a job file), and the measured speed of its
workload (the ``tau`` fixture in ``conftest.py``).
``from service_jobs import SLOT_S, job_spec, job_toml``."""

from __future__ import annotations

from psched.core.model import JobSpec, Resources
from psched.core.utility import Utility

__all__ = ["SLOT_S", "job_spec", "job_toml", "measured_tau"]

#: Slot length of the live-service tests, seconds.
SLOT_S = 1.5


def job_spec(job_id: str, *, n: int = 1, m: int = 100, tau_s: float = 0.01,
             gpu: float = 0.0) -> JobSpec:
    """A small softmax job on digits: ``n`` workers at most, ``m`` mini-batches per epoch."""
    return JobSpec(job_id=job_id, arrival=0, epochs=1, max_workers=n, minibatches=m,
                   tau_s=tau_s, grad_mb=0.003, tau_includes_comm=True,
                   worker_demand=Resources(gpu=gpu, cpu=1, memory_gb=1, bandwidth_gbps=1),
                   ps_demand=Resources(cpu=1, memory_gb=1, bandwidth_gbps=1),
                   utility=Utility(kind="sigmoid", value=10, decay=0.3, target=8),
                   workload="softmax", hparams='{"dataset": "digits"}')


def job_toml(*, job_id: str | None = None, partitions: int = 1, minibatches: int,
             tau_s: float | None = 0.004, value: float = 10, decay: float = 0.3,
             target: int = 12) -> str:
    """The job file of a small softmax job on digits (one CPU, 1 GB, 1 Gbps per worker and per
    PS), as ``psched submit`` reads it: no ``id`` line when ``job_id`` is None (the file's
    name gives it), no ``tau_s`` line when ``tau_s`` is None (the service profiles the job)."""
    head = f'id = "{job_id}"\n' if job_id is not None else ""
    tau = f"tau_s = {tau_s!r}\n" if tau_s is not None else ""
    return f"""{head}workload = "softmax"
epochs = 1
partitions = {partitions}
minibatches = {minibatches}
grad_mb = 0.003
{tau}
[hparams]
dataset = "digits"

[worker]
cpu = 1
memory_gb = 1
bandwidth_gbps = 1

[ps]
cpu = 1
memory_gb = 1
bandwidth_gbps = 1

[utility]
kind = "sigmoid"
value = {value}
decay = {decay}
target = {target}
"""


def measured_tau() -> float:
    """Seconds per mini-batch of :func:`job_spec`'s workload on this machine (needs Ray)."""
    from psched.core.model import resolve_job
    from ray_cluster.runtime import RuntimeConfig
    from ray_cluster.runtime.executor import profile_seconds_per_batch, training_job

    return profile_seconds_per_batch(training_job(resolve_job(job_spec("probe"), SLOT_S, 10)),
                                     RuntimeConfig(), steps=20)
