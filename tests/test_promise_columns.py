"""The promise and waste columns of every table (``summary.json``, the printed comparison,
``jobs.csv``), on a hand-made run whose figures are known: a promise kept, one missed by a
late completion, one re-stated in time, one re-stated too late, an admitted job unfinished,
one dropped, and a rejected job."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from psched.core.model import Job
from psched.core.records import JobRecord, RunResult
from psched.results.job_rows import JOBS_COLUMNS, job_rows
from psched.results.metrics import PROMISE_KEYS, SUMMARY_KEYS, summarize
from psched.results.summary import build_summary
from psched.runs.runner import print_table
from psched.traces.synth import oasis_paper_cluster, oasis_paper_jobs


def _run() -> RunResult:
    specs, _ = oasis_paper_jobs(7, seed=0, slots=40)
    jobs = [Job(spec=s, work=10, window=40) for s in specs]
    recs = [
        # kept: promised 12, done in 12
        JobRecord(job=jobs[0], admitted=True, done=10.0, completion=12, promised=12),
        # missed: promised 12, done in 14
        JobRecord(job=jobs[1], admitted=True, done=10.0, completion=14, promised=12),
        # re-stated at slot 10 from 12 to 15 (before 12), done in 15: kept
        JobRecord(job=jobs[2], admitted=True, done=10.0, completion=15, promised=15,
                  restated=[(10, 12, 15)]),
        # re-stated at slot 13, after the slot it replaced (12): missed
        JobRecord(job=jobs[3], admitted=True, done=10.0, completion=15, promised=15,
                  restated=[(13, 12, 15)], background=2.0),
        # admitted, unfinished at the end: 6.5 worker-slots wasted, its promise missed
        JobRecord(job=jobs[4], admitted=True, done=6.5, promised=20),
        # admitted, then dropped by the service: 3 worker-slots wasted
        JobRecord(job=jobs[5], admitted=True, done=3.0, reason="cancelled"),
        JobRecord(job=jobs[6], reason="cannot_fit"),
    ]
    return RunResult(policy="hand", cluster=oasis_paper_cluster(seed=0), horizon=40,
                     records={r.job.job_id: r for r in recs}, allocations=[],
                     usage=np.zeros((2, 5)), decision_ms=[1.0], report={})


def test_a_late_completion_is_missed_and_unfinished_work_is_wasted():
    s = summarize(_run())
    assert set(PROMISE_KEYS) <= set(SUMMARY_KEYS) <= set(s)
    got = {k: s[k] for k in PROMISE_KEYS}
    assert got == {"promised": 5, "kept": 2, "restated": 2, "missed": 3, "dropped": 1,
                   "wasted_ws": pytest.approx(9.5), "background_ws": pytest.approx(2.0)}
    assert (s["admitted"], s["completed"], s["unfinished"]) == (6, 4, 2)


def test_the_printed_table_shows_the_promise_and_waste_columns():
    summary = build_summary({"n_jobs": 7, "horizon": 40, "slot_seconds": 3600.0,
                             "worker_servers": 1, "ps_servers": 1}, {"hand": _run()})
    buf = io.StringIO()
    print_table(summary, file=buf)
    header, row = buf.getvalue().splitlines()[1].split(), buf.getvalue().splitlines()[2].split()
    cols = dict(zip(header, row, strict=True))
    assert header[-6:] == ["promised", "kept", "restated", "missed", "wasted_ws",
                           "background_ws"]
    assert [cols[k] for k in header[-6:]] == ["5", "2", "2", "3", "9.5", "2.0"]


def test_jobs_csv_ends_with_the_restatements_speed_background_and_eta():
    assert JOBS_COLUMNS[-7:] == ("restated", "speed", "speed_sd", "background", "eta_start",
                                 "eta_finish", "waits")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(JOBS_COLUMNS)
    w.writerows(job_rows(_run()))
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert rows[3]["restated"] == "13:12>15" and rows[3]["background"] == "2.0"
    assert rows[0]["restated"] == "" and float(rows[0]["speed"]) == 1.0



def test_the_report_table_shows_the_promise_and_waste_columns():
    import re

    from psched.results.report import render_report
    from psched.results.report_data import run_in_memory

    run = _run()
    summary = build_summary({"n_jobs": 7, "horizon": 40, "slot_seconds": 3600.0,
                             "worker_servers": 1, "ps_servers": 1}, {"hand": run})
    page = render_report(run_in_memory(summary, run.cluster, {"hand": run}))
    table = re.search(r"<table id=summary>(.*?)</table>", page).group(1)  # type: ignore[union-attr]
    got = dict(zip(re.findall(r"<th>([^<]*)</th>", table),
                   re.findall(r"<td>([^<]*)</td>", table), strict=True))
    assert [got[k] for k in ("promised", "kept", "re-stated", "missed")] == ["5", "2", "2", "3"]
    assert got["wasted (worker-slots)"] == "9.5" and got["background (worker-slots)"] == "2.0"
