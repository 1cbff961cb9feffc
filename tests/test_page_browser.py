"""The live page in headless Chromium without Ray: a real service (simulated executor,
several slots run) behind its real HTTP door. Every legend entry is drawn in its series'
colour (distinct within a chart), no two texts of a chart overlap ("now: slot N" included),
and servers carry readable names (:func:`server_labels`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium, open_page

from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor
from psched.core.model import Cluster, Pool, Resources, Server
from psched.traces.synth import SCENARIOS
from ray_cluster.service import SchedulerService, ServiceConfig
from ray_cluster.service.http import ServiceHTTP
from ray_cluster.service.page import server_labels

needs_chromium = pytest.mark.skipif(chromium() is None,
                                    reason="no chromium (.ci/run installs it)")

#: Once the charts are drawn: per SVG, its texts' boxes and colours and its series' colours.
LOOK = """new Promise((resolve) => {
  const giveUp = Date.now() + 60000;
  const tick = () => {
    const svgs = [...document.querySelectorAll("#gantt svg, #util svg, #prices svg")];
    if (svgs.length < 5 && Date.now() < giveUp) { setTimeout(tick, 100); return; }
    resolve(svgs.map((svg) => ({
      id: svg.id,
      texts: [...svg.querySelectorAll("text")].map((t) => {
        const b = t.getBBox();
        return {text: t.textContent, cls: t.getAttribute("class") || "",
                fill: getComputedStyle(t).fill, box: [b.x, b.y, b.width, b.height]};
      }),
      series: Object.fromEntries([...svg.querySelectorAll("path.series")].map((p) =>
        [p.getAttribute("class").split(" ")[1], getComputedStyle(p).stroke])),
      servers: [...svg.querySelectorAll("text.server")].map((t) => t.firstChild.textContent),
    })));
  };
  tick();
})"""


class _NoWait:
    """A clock whose every slot has begun: the service runs its slots at once."""

    def wait_until(self, t: int) -> None:
        del t


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(40, seed=2, slots=60, slot_seconds=3600.0, options={})
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]
    work = tmp_path_factory.mktemp("page") / "svc"
    svc = SchedulerService(work, config=ServiceConfig(policy="oasis", slot_seconds=3600.0,
                                                      horizon=2000, history=tuple(specs)),
                           cluster=cluster_fn(seed=2, slot_seconds=3600.0),
                           executor=SimulatedExecutor())
    svc.clock = _NoWait()  # type: ignore[assignment]
    for t in range(12):
        for spec in specs[3 * t:3 * t + 3]:
            with contextlib.suppress(InputError):
                svc.submit(spec)
        svc.run_for(1)
    server = ServiceHTTP(svc, work, submit=lambda *_: {"error": "read-only here"})
    server.start()
    try:
        yield f"{server.url}?token={server.page_token}"
    finally:
        server.close()
        svc.close()


def _overlap(a: list[float], b: list[float]) -> bool:
    return (a[0] < b[0] + b[2] and b[0] < a[0] + a[2]
            and a[1] < b[1] + b[3] and b[1] < a[1] + a[3])


@needs_chromium
def test_legends_take_their_series_colours_and_no_texts_overlap(page_url: str) -> None:
    page = open_page(page_url, LOOK)
    assert page.errors == []
    charts: list[dict[str, Any]] = page.value
    lines = [c for c in charts if c["series"]]
    assert len(lines) == 4, [c["id"] for c in charts]  # usage and prices, two pools each
    for chart in lines:
        legend = {t["cls"].split()[1]: t["fill"] for t in chart["texts"]
                  if t["cls"].startswith("legend ")}
        assert legend and set(chart["series"]) <= set(legend), chart["id"]
        for res, colour in chart["series"].items():
            assert legend[res] == colour, (chart["id"], res)
        assert len(set(legend.values())) == len(legend), chart["id"]  # all distinct
    for chart in charts:
        texts = [t for t in chart["texts"] if t["text"] and t["box"][2] > 0]
        assert any(t["text"].startswith("now: slot") for t in texts), chart["id"]
        for i, a in enumerate(texts):
            for b in texts[i + 1:]:
                assert not _overlap(a["box"], b["box"]), (chart["id"], a["text"], b["text"])
    gantt = next(c for c in charts if c["servers"])
    assert all(name.endswith(("(worker)", "(PS)")) for name in gantt["servers"])


def test_a_server_standing_for_an_unnamed_ray_node_is_named_by_its_host() -> None:
    cap = Resources(cpu=4, memory_gb=8, bandwidth_gbps=10)
    ids = ["8607a5b8/w", "8607a5b8/ps", "c0ffee00/w", "c0ffee00/ps", "gpu-box"]
    pools = [Pool.WORKER, Pool.PS, Pool.WORKER, Pool.PS, Pool.WORKER]
    cluster = Cluster(servers=tuple(Server(server_id=i, pool=p, capacity=cap)
                                    for i, p in zip(ids, pools, strict=True)),
                      slot_seconds=30.0)
    node_of = {0: "8607a5b8" + "0" * 48, 1: "8607a5b8" + "0" * 48,
               2: "c0ffee00" + "1" * 48, 3: "c0ffee00" + "1" * 48, 4: "abcdef12" + "2" * 48}
    nodes = [{"NodeID": node_of[0], "NodeManagerHostname": "vm", "NodeName": "10.0.0.5"},
             {"NodeID": node_of[2], "NodeManagerHostname": "vm", "NodeName": "10.0.0.5"},
             {"NodeID": node_of[4], "NodeManagerHostname": "gpu", "NodeName": "10.0.0.9"}]
    assert server_labels(cluster, node_of, nodes) == [
        "vm worker", "vm PS", "vm#2 worker", "vm#2 PS", "gpu-box (worker)"]
    assert server_labels(cluster, None, []) == [
        "8607a5b8/w (worker)", "8607a5b8/ps (PS)", "c0ffee00/w (worker)", "c0ffee00/ps (PS)",
        "gpu-box (worker)"]
