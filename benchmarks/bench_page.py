"""The live page's cost to the scheduler, and ``psched submit``'s latency.

``boundary``: one service in this process (OASiS, the ``oasis-paper`` jobs and cluster, the
simulated executor, ``--slot-seconds`` wall slots), its HTTP server started, arrivals every
slot so the page's document is rebuilt at every change. The run alternates phases of
``--slots`` slots without a client and with ``--clients`` pages open (each long-polls
``/api/state`` as the page does) plus one client fetching ``/api/state`` and ``/`` as fast
as it is answered (a worst case, no real page does that). Per slot the service records its
boundary time (:attr:`SchedulerService.boundary_ms`: the clock's tick to the executor's
start, plus the slot's end to its journaled record, lock waits included); the figures are
per phase kind, from the same run.

``submit``: ``psched serve`` started from a fresh environment (its own embedded Ray, token
authentication on), then ``--submits`` sequential ``psched submit`` calls, each a new process
as an operator runs it (through the service's HTTP door), and ``--ray-submits`` more with
``--address`` (through a Ray client, as before the door existed); wall time per call.

Usage::

    python benchmarks/bench_page.py boundary --slots 8 --clients 4
    python benchmarks/bench_page.py submit --submits 50 --ray-submits 10
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["boundary", "submit_latency"]


def _pct(a: list[float]) -> dict[str, float]:
    x = np.array(a)
    return {"n": len(a), "p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "mean": float(x.mean()), "max": float(x.max())}


def boundary(*, slots: int, clients: int, slot_seconds: float, jobs: int,
             seed: int = 0) -> dict[str, Any]:
    from psched.executor import SimulatedExecutor
    from psched.traces.synth import SCENARIOS
    from ray_cluster.journal import spec_from_json
    from ray_cluster.service import SchedulerService, ServiceConfig
    from ray_cluster.service.http import ServiceHTTP

    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(jobs, seed=seed, slots=300, slot_seconds=3600.0, options={})
    cluster = cluster_fn(seed=seed, slot_seconds=3600.0)
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]
    phases = ["off", "on", "off", "on"]
    with tempfile.TemporaryDirectory() as work:
        cfg = ServiceConfig(policy="oasis", slot_seconds=slot_seconds, horizon=10_000,
                            history=tuple(specs))
        svc = SchedulerService(work, config=cfg, cluster=cluster,
                               executor=SimulatedExecutor())
        http = ServiceHTTP(svc, work, port=0, submit=lambda text, arrival, where:
                           svc.submit(spec_from_json(text), arrival=arrival))
        url = http.start()
        token = (Path(work) / "page_token").read_text().strip()
        svc.start()
        stop = threading.Event()
        fetched = [0]

        def get(path: str) -> Any:
            req = urllib.request.Request(url + path, headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=60) as r:
                fetched[0] += 1
                return r.read()

        def page() -> None:  # as the page does: long-poll for the next document
            after = -1
            while not stop.is_set():
                after = json.loads(get(f"api/state?after={after}"))["changes"]

        def hammer() -> None:
            while not stop.is_set():
                get("api/state")
                get("")

        per_slot = max(1, len(specs) // (len(phases) * slots))
        feed = iter(specs)
        out: dict[str, list[float]] = {"off": [], "on": []}
        docs: dict[str, int] = {"off": 0, "on": 0}
        for phase in phases:
            threads = [threading.Thread(target=page, daemon=True) for _ in range(clients)]
            threads += [threading.Thread(target=hammer, daemon=True)]
            stop.clear()
            if phase == "on":
                for th in threads:
                    th.start()
            start = len(svc.boundary_ms)
            before = fetched[0]
            while len(svc.boundary_ms) < start + slots:
                for _ in range(per_slot):
                    spec = next(feed, None)
                    if spec is not None:
                        svc.submit(spec)
                time.sleep(slot_seconds / 2)  # the next arrivals come in the next slot
            out[phase] += list(svc.boundary_ms)[start:start + slots]
            docs[phase] += fetched[0] - before
            stop.set()
            if phase == "on":
                for th in threads:
                    th.join(120)
        page_doc = len(json.dumps(http.data.build()))
        http.close()
        svc.close()
    return {"slot_seconds": slot_seconds, "jobs_submitted": len(specs), "clients": clients,
            "boundary_ms_without_page": _pct(out["off"]),
            "boundary_ms_with_page": _pct(out["on"]),
            "requests_answered_with_page": docs["on"], "document_bytes": page_doc}


def _psched(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    from ray_cluster.faults import operator_env

    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "psched", *args], capture_output=True,
                         text=True, env=operator_env(), timeout=300, check=False)
    return time.perf_counter() - t0, out


def submit_latency(*, submits: int, ray_submits: int) -> dict[str, Any]:
    from ray_cluster import faults

    toml = (Path(__file__).resolve().parents[1] / "tests" / "test_page.py").read_text()
    template = toml.split('JOB_TOML = """\\\n', 1)[1].split('"""', 1)[0]
    with tempfile.TemporaryDirectory() as root_s:
        root = Path(root_s)
        work = root / "svc"
        work.mkdir()
        files = []
        for i in range(submits + ray_submits + 1):
            f = root / f"s{i}.toml"
            f.write_text(template.format(id=f"s{i}", m=50))
            files.append(str(f))
        with faults.serving(work, "--slot-seconds", "5", "--worker-cpus", "1",
                            "--history", files[0]):
            _psched("submit", "--dir", str(work), files[0])  # warm: the first decision
            door, ray_path = [], []
            for f in files[1:submits + 1]:
                wall, out = _psched("submit", "--dir", str(work), f)
                assert out.returncode == 0, out.stderr
                door.append(wall)
            import os

            address = (work / "address").read_text().strip()
            os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(work / "auth_token"))
            for f in files[submits + 1:]:
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "psched", "submit", "--dir",
                                      str(work), "--address", address, f], capture_output=True,
                                     text=True, timeout=300, check=False,
                                     env={k: v for k, v in os.environ.items()
                                          if not k.startswith("RAY_ADDRESS")})
                assert out.returncode == 0, out.stderr
                ray_path.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import psched.cli, ray_cluster.jobspec"],
                           check=True)
            imports = time.perf_counter() - t0
    return {"submit_s_http": _pct(door), "submit_s_ray_client": _pct(ray_path),
            "python_and_imports_s": imports}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("boundary")
    b.add_argument("--slots", type=int, default=8, help="slots per phase (4 phases)")
    b.add_argument("--clients", type=int, default=4, help="pages open in the 'on' phases")
    b.add_argument("--slot-seconds", type=float, default=3.0)
    b.add_argument("--jobs", type=int, default=200)
    s = sub.add_parser("submit")
    s.add_argument("--submits", type=int, default=50)
    s.add_argument("--ray-submits", type=int, default=10)
    args = p.parse_args()
    if args.what == "boundary":
        res = boundary(slots=args.slots, clients=args.clients, slot_seconds=args.slot_seconds,
                       jobs=args.jobs)
    else:
        res = submit_latency(submits=args.submits, ray_submits=args.ray_submits)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
