"""``psched logs``: a job's journal lines in slot order, a job that finished early said so,
numbers rounded (a real service on the simulated executor, reality ahead of the model)."""

from __future__ import annotations

import re

from test_service_rules import _two_jobs_one_after_the_other


def test_logs_are_in_slot_order_name_an_early_finish_and_round_numbers(tmp_path):
    svc = _two_jobs_one_after_the_other(tmp_path, rate=3.0)
    svc.run_for(12)
    for job_id in ("j1", "j2"):
        lines = svc.logs(job_id)
        slots = [int(re.match(r"slot (\d+): ", line)[1]) for line in lines]
        assert slots == sorted(slots), lines
        assert not any("rejected" in line or "None" in line for line in lines), lines
        assert not re.search(r"\d\.\d{5}", "\n".join(lines)), lines  # rounded
    early = svc.logs("j1")
    assert any(line.endswith("finished early: the rest of its plan released")
               for line in early), early
    assert re.search(r"arrival: admitted, payoff [\d.]+, work \d+ worker-slots, planned "
                     r"slots \d+(-\d+)?", early[0]), early[0]
    assert any(" ran +" in line for line in early)


def test_the_pages_journal_says_finished_early_newest_first(tmp_path):
    from ray_cluster.service.page import PageData

    svc = _two_jobs_one_after_the_other(tmp_path, rate=3.0)
    svc.run_for(12)
    events = PageData(svc, svc.workdir / "journal.db").build()["events"]
    early = [e for e in events if e["kind"] == "finished early"]
    assert {e["job"] for e in early} == {"j1", "j2"}
    assert not any(e["kind"] == "release" for e in events)
    at = [float(e["at"]) for e in events]
    assert at == sorted(at, reverse=True)
