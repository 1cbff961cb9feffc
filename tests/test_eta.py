"""Every job still waiting or running has an expected start and finish under the plans as
they stand, and a reason it waits (``psched.core.eta``): the same answer in a run's
``jobs.csv`` as in the live service's ``status``."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from psched.core.arrivals import TraceArrivals
from psched.core.eta import WAITS_BACKGROUND, WAITS_ENDED, WAITS_HELD, WAITS_ROOM, eta
from psched.core.loop import SchedulerLoop
from psched.core.model import Alloc
from psched.core.reality import Reality
from psched.policies import make_policy
from psched.results.job_rows import JOBS_COLUMNS, job_rows
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs

ONE = Alloc.of({0: 1}, {1: 1})


def test_a_plan_gives_its_first_and_last_slot_and_a_running_job_starts_now():
    plan = {3: ONE, 5: ONE, 8: ONE, 1: ONE}  # slot 1 is past: ignored
    assert eta(2, plan) == eta(2, plan, running=False)
    got = eta(2, plan)
    assert (got.start, got.finish, got.waits) == (3, 8, "planned from slot 3")
    got = eta(2, plan, running=True)
    assert (got.start, got.finish, got.waits) == (2, 8, "")


@pytest.mark.parametrize(("kwargs", "waits"), [
    ({"held": True}, WAITS_HELD), ({"background": True}, WAITS_BACKGROUND), ({}, WAITS_ROOM)])
def test_a_job_without_a_plan_says_why_it_waits_and_promises_no_slot(kwargs, waits):
    got = eta(4, {4: ONE} if kwargs else None, **kwargs)
    assert (got.start, got.finish, got.waits) == (None, None, waits)


def _loop(policy: str, seed: int, reality: Reality | None = None,
          horizon: int = 60) -> SchedulerLoop:
    specs, _ = oasis_paper_jobs(30, seed=seed, slots=20)
    ex = None if reality is None else reality.executor()
    return SchedulerLoop(cluster=oasis_paper_cluster(seed=seed), policy=make_policy(policy),
                         horizon=horizon, arrivals=TraceArrivals(specs), known_jobs=specs,
                         executor=ex)


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp", "fifo"])
@pytest.mark.parametrize("seed", [0, 3])
def test_a_run_stopped_midway_gives_every_unfinished_job_its_eta_from_the_plans(policy, seed):
    loop = _loop(policy, seed)
    res = loop.run(until=12)
    st = loop.state
    unfinished = set(st.active) | set(st.held)
    assert set(res.etas) == unfinished and unfinished
    plans = (loop.caps.revises.current_plans() if loop.caps.revises is not None
             else loop.schedules)
    for job_id, e in res.etas.items():
        ahead = [s for s, a in plans.get(job_id, {}).items() if s >= 12 and a.n_workers]
        if job_id in st.held:
            assert e.waits == WAITS_HELD
        elif ahead:
            assert e.finish == max(ahead) and e.start is not None and 12 <= e.start <= e.finish
        else:
            assert (e.start, e.finish) == (None, None) and e.waits
    rows = list(csv.DictReader(io.StringIO(_csv(res))))
    by_id = {r["job_id"]: r for r in rows}
    for job_id, e in res.etas.items():
        row = by_id[job_id]
        assert row["eta_finish"] == ("" if e.finish is None else str(e.finish))
        assert row["waits"] == e.waits
    done = [r for r in rows if r["completion"]]
    assert all(r["eta_start"] == r["eta_finish"] == r["waits"] == "" for r in done)


def test_jobs_unfinished_when_a_run_reaches_its_horizon_say_the_run_ended():
    loop = _loop("fifo", 1, Reality(rate=0.5), horizon=24)  # half as fast, a short run
    res = loop.run()
    unfinished = [j for j, r in res.records.items() if r.admitted and r.completion is None]
    assert unfinished
    assert all(res.etas[j].waits == WAITS_ENDED for j in unfinished)


def _csv(res) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(JOBS_COLUMNS)
    w.writerows(job_rows(res))
    return buf.getvalue()


@pytest.mark.parametrize("policy", ["oasis", "oasis-rp"])
def test_the_live_status_and_the_runs_result_give_the_same_eta(tmp_path, policy):
    from psched.core.executor import SimulatedExecutor
    from ray_cluster.service import SchedulerService, ServiceConfig

    specs, _ = oasis_paper_jobs(30, seed=2, slots=20, slot_seconds=3600.0)
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]
    svc = SchedulerService(tmp_path, config=ServiceConfig(
        policy=policy, slot_seconds=3600.0, horizon=60, history=tuple(specs)),
        cluster=oasis_paper_cluster(seed=2, slot_seconds=3600.0),
        executor=SimulatedExecutor())
    svc.clock.wait_until = lambda t: None  # type: ignore[method-assign]
    try:
        while svc.loop.state.t < 12:
            for s in specs:
                if s.arrival == svc.loop.state.t:
                    svc.submit(s)
            svc.run_for(1)
        core = svc.loop.etas()
        live = {j["job_id"]: j for j in svc.status()["jobs"]}
        assert core
        for job_id, e in core.items():
            assert (live[job_id]["eta_start"], live[job_id]["eta_finish"],
                    live[job_id]["waits"]) == (e.start, e.finish, e.waits), job_id
    finally:
        svc.close()
