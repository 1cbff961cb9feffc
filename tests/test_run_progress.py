"""``psched run``'s progress: a real service (simulated executor, real-time slots of 0.2 s)
runs a small trace through :func:`run_trace`, and :class:`RunProgress` shows every slot that
ended once, in order, with each job's work growing until it is done."""

from __future__ import annotations

import io
import re
from pathlib import Path

from service_jobs import job_toml

from psched.cli.jobs import RunProgress
from psched.core.executor import SimulatedExecutor
from psched.traces.synth import SCENARIOS
from ray_cluster.service import ServiceConfig, run_trace
from ray_cluster.workloads.jobspec import parse_jobspec

SLOT_S = 0.2


def test_run_shows_each_ended_slot_once_with_the_jobs_work_growing(tmp_path: Path) -> None:
    specs = [parse_jobspec(job_toml(minibatches=m), path=f"{i}.toml", default_id=f"job{i}")
             for i, m in enumerate((150, 200))]
    cluster = SCENARIOS["oasis-paper"][1](seed=1, slot_seconds=SLOT_S)
    out = io.StringIO()
    result = run_trace(specs, tmp_path / "svc",
                       config=ServiceConfig(policy="oasis", slot_seconds=SLOT_S, horizon=40,
                                            history=tuple(specs)),
                       cluster=cluster, executor=SimulatedExecutor(), timeout_s=120,
                       on_status=RunProgress(out))
    text = out.getvalue()
    ended = [int(t) for t in re.findall(r"^slot (\d+) ended", text, re.M)]
    assert ended and ended == sorted(set(ended)), text
    last = max(r.completion or 0 for r in result.records.values())
    assert ended[-1] >= last
    for job_id, rec in result.records.items():
        done = [float(d) for d in re.findall(rf"^  {job_id} .*\] +([\d.]+)/", text, re.M)]
        assert done == sorted(done) and done[-1] == rec.job.work, (job_id, text)
