"""The live page's document without Ray or a browser: bounded in size however many jobs the
service holds, encoded in chunks to the same JSON, and never rebuilt while a slot boundary
is in progress (``ray_cluster/service/page.py``, ``SchedulerService.wait_quiet``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor
from psched.traces.synth import SCENARIOS
from ray_cluster.service import SchedulerService, ServiceConfig
from ray_cluster.service import page as page_module
from ray_cluster.service.page import JOBS_SHOWN, MAX_CELLS, PageData


class _NoWait:
    """A clock whose every slot has begun: the service runs slot after slot at once."""

    def wait_until(self, t: int) -> None:
        del t


def _busy_service(work: Path, jobs: int, slots: int) -> SchedulerService:
    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(jobs, seed=1, slots=300, slot_seconds=3600.0, options={})
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]
    svc = SchedulerService(work, config=ServiceConfig(policy="oasis", slot_seconds=3600.0,
                                                      horizon=10_000, history=tuple(specs)),
                           cluster=cluster_fn(seed=1, slot_seconds=3600.0),
                           executor=SimulatedExecutor())
    svc.clock = _NoWait()  # type: ignore[assignment]
    per_slot = max(1, jobs // slots)
    for t in range(slots):
        for spec in specs[t * per_slot:(t + 1) * per_slot]:
            with contextlib.suppress(InputError):  # more work than the horizon holds
                svc.submit(spec)
        svc.run_for(1)
    return svc


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerService]:
    svc = _busy_service(tmp_path_factory.mktemp("busy"), jobs=600, slots=60)
    yield svc
    svc.close()


def _data(svc: SchedulerService, **kwargs: Any) -> PageData:
    return PageData(svc, svc.workdir / "journal.db", **kwargs)


def test_the_document_per_poll_is_bounded_however_many_jobs(busy: SchedulerService) -> None:
    data = _data(busy)
    doc = data.build()
    body = data.encode(doc)
    assert sum(doc["counts"].values()) > JOBS_SHOWN  # more jobs than are listed
    assert len(doc["jobs"]) <= JOBS_SHOWN
    assert 0 < len(doc["cells"]) <= MAX_CELLS
    assert len(body) <= 250_000


def test_chunked_encoding_is_the_documents_json(busy: SchedulerService,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_module, "CHUNK", 7)
    data = _data(busy)
    doc = data.build()
    assert json.loads(data.encode(doc)) == json.loads(json.dumps(doc))


def test_a_crowded_window_narrows_to_whole_slots_around_the_current_one(
        busy: SchedulerService, monkeypatch: pytest.MonkeyPatch) -> None:
    full = _data(busy).build()
    cap = len(full["cells"]) // 3
    monkeypatch.setattr(page_module, "MAX_CELLS", cap)
    doc = _data(busy).build()
    lo, hi = doc["window"]
    t = doc["service"]["slot"]
    assert lo <= t < hi and len(doc["cells"]) <= cap
    kept = sorted(tuple(c[:1] + c[2:]) for c in doc["cells"])
    inside = sorted(tuple(c[:1] + c[2:]) for c in full["cells"] if lo <= c[0] < hi)
    assert kept == inside  # every cell of a kept slot, none of another
    names = [j["job_id"] for j in doc["jobs"]]
    for c in doc["cells"]:  # cells name the listed jobs
        assert doc["jobs"][c[1]]["job_id"] == names[c[1]]


def test_a_rebuild_waits_while_a_slot_boundary_is_in_progress(busy: SchedulerService) -> None:
    seen: list[bool] = []

    def pause() -> None:
        busy.wait_quiet(60)
        seen.append(busy.wait_quiet(0))

    data = _data(busy, pause=pause)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (data.encode(data.build()), done.set()))
    with busy._boundary():
        worker.start()
        assert not done.wait(0.5)  # held at its first step
        assert seen == []
    worker.join(120)
    assert done.is_set() and len(seen) > 5 and all(seen)
