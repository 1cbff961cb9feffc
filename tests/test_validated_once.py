"""A job is validated where it enters, once on each side: ``psched submit`` checks each file
once, the service's actor once (with the service's slot length and import rule), and the
service takes the :class:`~ray_cluster.workloads.jobspec.CheckedJob` without checking it again;
a bare spec handed to the service directly is checked there, once."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_journal import _cluster

import ray_cluster.workloads.jobspec as jobspec
from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor
from ray_cluster.service import SchedulerService, ServiceConfig
from ray_cluster.workloads.jobspec import (
    CheckedJob,
    load_jobspec_where,
    spec_to_json,
    submission_from_json,
)

JOB = Path(__file__).resolve().parent.parent / "examples" / "jobs" / "digits-a.toml"
SLOT_S = 30.0


@pytest.fixture()
def checks(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the one validator by this path's module."""
    count: Counter[str] = Counter()
    real = jobspec.validate_spec

    def counted(*a: Any, **k: Any) -> Any:
        count["validate_spec"] += 1
        return real(*a, **k)

    monkeypatch.setattr(jobspec, "validate_spec", counted)
    return count


def _service(tmp_path: Path) -> SchedulerService:
    cfg = ServiceConfig(policy="oasis-rp", slot_seconds=SLOT_S, horizon=50)
    return SchedulerService(tmp_path, config=cfg, cluster=_cluster(),
                            executor=SimulatedExecutor())


def test_a_submitted_job_is_validated_once_by_the_client_and_once_by_the_service(
        checks: Counter[str], tmp_path: Path) -> None:
    spec, where = load_jobspec_where(JOB)  # psched submit
    assert checks["validate_spec"] == 1
    svc = _service(tmp_path)
    job = submission_from_json(spec_to_json(spec), where=where, slot_seconds=SLOT_S)  # actor
    assert isinstance(job, CheckedJob) and job.spec == spec
    out = svc.submit(job)
    assert out["job_id"] == spec.job_id and checks["validate_spec"] == 2


def test_a_bare_spec_or_one_checked_for_another_service_is_checked_once_there(
        checks: Counter[str], tmp_path: Path) -> None:
    spec, _ = load_jobspec_where(JOB)
    svc = _service(tmp_path)
    svc.submit(spec)
    assert checks["validate_spec"] == 2
    other = CheckedJob(spec=dataclasses.replace(spec, job_id="b"), slot_seconds=SLOT_S * 2,
                       allow_import=False)
    svc.submit(other)
    assert checks["validate_spec"] == 3


def test_a_spec_too_long_for_the_service_slot_is_refused_where_it_enters() -> None:
    spec, where = load_jobspec_where(JOB)
    long = dataclasses.replace(spec, epochs=10**6)
    assert submission_from_json(spec_to_json(long)).spec == long  # no slot length: unchecked
    with pytest.raises(InputError, match=r"digits-a.toml:\d+: epochs: .* slots of 30 s"):
        submission_from_json(spec_to_json(long), where=where, slot_seconds=SLOT_S)
