"""The live page's cost to the scheduler, and ``psched submit``'s latency.

``boundary``: one service in this process (OASiS, the ``oasis-paper`` jobs and cluster, the
simulated executor, ``--slot-seconds`` wall slots), its HTTP server started, arrivals every
slot so the page's document is rebuilt at every change. The run goes ``--rounds`` times
through phases of ``--slots`` slots (in turn, so the machine's load drifts alike for each):
no client; ``--clients`` pages open (each long-polls ``/api/state`` as the page does); the
pages plus one client fetching ``/api/state`` and ``/`` as fast as it is answered (a worst
case: no page does that). The clients run in another process, as browsers do. Per slot the
service records its boundary time (:attr:`SchedulerService.boundary_ms`: the clock's tick to
the executor's start, plus the slot's end to its journaled record, lock waits included); the
figures are per phase kind, from the same run.

``submit``: ``psched serve`` started from a fresh environment (its own embedded Ray, token
authentication on), then ``--submits`` sequential ``psched submit`` calls, each a new process
as an operator runs it (through the service's HTTP door), and ``--ray-submits`` more with
``--address`` (through a Ray client, as before the door existed); wall time per call.

Usage::

    python benchmarks/bench_page.py boundary --slots 5 --rounds 10 --slot-seconds 2 --jobs 300
    python benchmarks/bench_page.py submit --submits 50 --ray-submits 10
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
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

#: The phases of ``boundary``, in order (each ``--slots`` slots), twice.
PHASES = ("off", "pages", "pages+hammer")


def _pct(a: list[float]) -> dict[str, float]:
    x = np.array(a)
    return {"n": len(a), "p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)),
            "mean": float(x.mean()), "max": float(x.max())}


def boundary(*, slots: int, clients: int, slot_seconds: float, jobs: int, rounds: int = 10,
             seed: int = 0) -> dict[str, Any]:
    from psched.core.errors import InputError
    from psched.core.executor import SimulatedExecutor
    from psched.traces.synth import SCENARIOS
    from ray_cluster.service import SchedulerService, ServiceConfig
    from ray_cluster.service.http import ServiceHTTP
    from ray_cluster.workloads.jobspec import spec_from_json

    jobs_fn, cluster_fn = SCENARIOS["oasis-paper"]
    specs, _ = jobs_fn(jobs, seed=seed, slots=300, slot_seconds=3600.0, options={})
    cluster = cluster_fn(seed=seed, slot_seconds=3600.0)
    specs = [dataclasses.replace(s, workload="softmax", hparams='{"dataset": "digits"}')
             for s in specs]
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
        per_slot = max(1, len(specs) // (len(PHASES) * slots * rounds))
        feed, refused = iter(specs), 0
        out: dict[str, list[float]] = {p: [] for p in PHASES}
        answered: dict[str, int] = dict.fromkeys(PHASES, 0)
        ctx = multiprocessing.get_context("spawn")
        for phase in PHASES * rounds:
            stop, count = ctx.Event(), ctx.Value("l", 0)
            procs = [] if phase == "off" else [ctx.Process(
                target=_clients, args=(url, token, clients, phase == "pages+hammer", stop,
                                       count))]
            for proc in procs:
                proc.start()
            start = len(svc.boundary_ms)
            while len(svc.boundary_ms) < start + slots:
                for _ in range(per_slot):
                    spec = next(feed, None)
                    if spec is None:
                        continue
                    try:
                        svc.submit(spec)
                    except InputError:  # more work than the wall slot holds
                        refused += 1
                time.sleep(slot_seconds / 2)  # the next arrivals come in the next slot
            out[phase] += list(svc.boundary_ms)[start:start + slots]
            stop.set()
            for proc in procs:
                proc.join(120)
            answered[phase] += int(count.value)
        page_doc = len(http.data.encode(http.data.build()))
        http.close()
        svc.close()
    return {"slot_seconds": slot_seconds, "jobs_submitted": len(specs),
            "jobs_refused_by_the_check": refused, "clients": clients,
            **{f"boundary_ms_{p}": _pct(out[p]) for p in PHASES},
            **{f"requests_answered_{p}": answered[p] for p in PHASES},
            "document_bytes": page_doc}


def _clients(url: str, token: str, pages: int, hammer: bool, stop: Any, count: Any) -> None:
    """In another process, as browsers are: ``pages`` long-polling pages, and with
    ``hammer`` one client fetching ``/api/state`` and ``/`` as fast as it is answered."""
    def get(path: str) -> bytes:
        req = urllib.request.Request(url + path, headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read()
        with count.get_lock():
            count.value += 1
        return bytes(body)

    def page() -> None:
        after = -1
        while not stop.is_set():
            after = json.loads(get(f"api/state?after={after}"))["changes"]

    def fast() -> None:
        while not stop.is_set():
            get("api/state")
            get("")

    threads = [threading.Thread(target=page, daemon=True) for _ in range(pages)]
    threads += [threading.Thread(target=fast, daemon=True)] if hammer else []
    for th in threads:
        th.start()
    stop.wait()


def _psched(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    from ray_cluster.service.faults import operator_env

    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "psched", *args], capture_output=True,
                         text=True, env=operator_env(), timeout=300, check=False)
    return time.perf_counter() - t0, out


def submit_latency(*, submits: int, ray_submits: int, split_calls: int = 10) -> dict[str, Any]:
    from ray_cluster.service import faults

    toml = (Path(__file__).resolve().parents[1] / "tests" / "test_page.py").read_text()
    template = toml.split('JOB_TOML = """\\\n', 1)[1].split('"""', 1)[0]
    with tempfile.TemporaryDirectory() as root_s:
        root = Path(root_s)
        work = root / "svc"
        work.mkdir()
        files = []
        for i in range(submits + ray_submits + split_calls + 1):
            f = root / f"s{i}.toml"
            f.write_text(template.format(id=f"s{i}", m=50))
            files.append(str(f))
        with faults.serving(work, "--slot-seconds", "5", "--worker-cpus", "1",
                            "--policy", "oasis", "--history", files[0]):
            _psched("submit", "--dir", str(work), files[0])  # warm: the first decision
            door, ray_path = [], []
            for f in files[1:submits + 1]:
                wall, out = _psched("submit", "--dir", str(work), f)
                assert out.returncode == 0, out.stderr
                door.append(wall)
            import os

            address = (work / "address").read_text().strip()
            os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(work / "auth_token"))
            for f in files[submits + 1 + split_calls:]:
                t0 = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "psched", "submit", "--dir",
                                      str(work), "--address", address, f], capture_output=True,
                                     text=True, timeout=300, check=False,
                                     env={k: v for k, v in os.environ.items()
                                          if not k.startswith("RAY_ADDRESS")})
                assert out.returncode == 0, out.stderr
                ray_path.append(time.perf_counter() - t0)
            split = _split(work, files[submits + 1:submits + 1 + split_calls])
    return {"submit_s_http": _pct(door), "submit_s_ray_client": _pct(ray_path), **split}


#: What ``psched submit`` imports and runs before its request (``cmd_submit``).
_CLIENT_PATH = ("import sys\nfrom psched.cli.main import build_parser\n"
                "a = build_parser('submit').parse_args(['submit', '--dir', sys.argv[1], "
                "sys.argv[2]])\nfrom psched.cli.connect import ServiceClient\n"
                "from psched.cli.jobs import _submissions\n"
                "from ray_cluster.workloads.jobspec import spec_to_json\n"
                "spec_to_json(_submissions(a, ServiceClient(a))[0][0])")


def _split(work: Path, files: list[str]) -> dict[str, Any]:
    """Where one call's time goes, medians over ``files``: Python's start alone; Python's
    start, the submit path's imports and the job file's parse and check; the HTTP request
    as the client times it and as the service's handler times it (``Server-Timing``), from
    ``psched -vv submit``'s own log line; and the whole call."""
    bare, client, request, handler, whole = [], [], [], [], []
    for f in files:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", _CLIENT_PATH, str(work), f], check=True)
        client.append(time.perf_counter() - t0)
        wall, out = _psched("-vv", "submit", "--dir", str(work), f)
        assert out.returncode == 0, out.stderr
        line = next(x for x in out.stderr.splitlines() if "api/submit: answered in" in x)
        request.append(float(line.split("answered in ")[1].split(" ms")[0]) / 1e3)
        handler.append(float(line.split("dur=")[1].rstrip(")")) / 1e3)
        whole.append(wall)
    med = {k: float(np.median(v)) for k, v in (("python_start_s", bare),
                                                ("python_imports_parse_check_s", client),
                                                ("request_s", request),
                                                ("service_handler_s", handler),
                                                ("whole_call_s", whole))}
    return {"split_calls": len(files), **{f"split_median_{k}": v for k, v in med.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("boundary")
    b.add_argument("--slots", type=int, default=5, help="slots per phase")
    b.add_argument("--rounds", type=int, default=10,
                   help="times the phases are gone through, in turn (the machine's load "
                        "drifts alike for every phase)")
    b.add_argument("--clients", type=int, default=4, help="pages open in the 'on' phases")
    b.add_argument("--slot-seconds", type=float, default=4.0,
                   help="wall slot (the scenario's largest jobs need 3.6 s or more)")
    b.add_argument("--jobs", type=int, default=200)
    s = sub.add_parser("submit")
    s.add_argument("--submits", type=int, default=50)
    s.add_argument("--ray-submits", type=int, default=10)
    args = p.parse_args()
    if args.what == "boundary":
        res = boundary(slots=args.slots, clients=args.clients, slot_seconds=args.slot_seconds,
                       jobs=args.jobs, rounds=args.rounds)
    else:
        res = submit_latency(submits=args.submits, ray_submits=args.ray_submits)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
