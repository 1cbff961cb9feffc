"""Sweep speed-up: the same cells one after another vs. as tasks on Ray, in one run.

Default: 24 cells = 3 policies (fifo, drf, oasis) x 2 seeds x 2 load factors x 2 cluster
sizes, on ElasticFlow ``augmented/cluster10.csv`` (260 jobs). Both runs write to fresh
folders and the rows of both are checked equal (all but ``wall_s`` and ``ray_node``). The
Ray run's wall time includes starting and stopping Ray; the table gives start-up, cells and
stop separately beside the total, and the load average before and after each run.

    python benchmarks/sweep.py [--trace FILE] [--jobs N] [--num-cpus 2]
    python benchmarks/sweep.py --philly 80000 --jobs 20000 --policies fifo,srtf,drf,optimus \
        --seeds 0,1 --loads 1 --scales 1 --num-cpus 2      # 8 cells of a Philly-scale trace
    python benchmarks/sweep.py ... --two-node               # Ray = a local two-node cluster
    nice -n -10 python benchmarks/sweep.py --philly 80000 --jobs 30000 \
        --policies fifo,srtf,drf,optimus --seeds 0,1,2 --loads 1,2 --scales 1 --num-cpus 2
                                   # 24 cells: the quiet figure (BENCHMARKS.md section 12)

The synthetic philly trace is ``native``: every seed runs the same jobs, so both runs map them
once (``psched.runs.sweep_spec.jobs_key``); the seeds still differ in the policies' draws.

``--two-node`` starts a Ray cluster with the ``ray`` command line, as on several machines:
``ray start --head --block`` (``--num-cpus`` / 2 CPUs) and ``ray start --address HEAD --block``
(the other half) as a second node on this machine, in a private temp folder and on free ports,
then runs the sweep with ``address=HEAD``; both ``ray start`` processes are stopped by their
process ids at the end (never ``ray stop``, which would stop every Ray on the machine). Start-up
then means starting both nodes, and the rows record which node ran each cell.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from psched.runs.sweep import run_sweep

#: Row fields that differ between two runs of the same cell (when and where it ran).
from psched.runs.sweep_spec import SweepSpec, cells_of

#: Row fields that differ between two runs of the same cell (when and where it ran).
TIMING_KEYS = ("wall_s", "cpu_s", "ray_node", "start_unix_s", "end_unix_s")

DEFAULT_TRACE = os.path.join(os.path.dirname(__file__), "..", "traces",
                             "elasticflow", "augmented", "cluster10.csv")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_ports() -> list[str]:
    """Ray start options putting every port of one node on a free port (no clash with another
    Ray on this machine; the dashboard agent's fixed default 52365 especially)."""
    names = ("--node-manager-port", "--object-manager-port", "--dashboard-agent-grpc-port",
             "--dashboard-agent-listen-port", "--metrics-export-port", "--runtime-env-agent-port")
    ports = _free_ports(len(names) + 1)
    lo = 20000 + (ports[-1] % 20000)
    return [f"{k}={p}" for k, p in zip(names, ports, strict=False)] + [
        f"--min-worker-port={lo}", f"--max-worker-port={lo + 200}"]


@contextmanager
def two_node_cluster(num_cpus: int) -> Iterator[str]:
    """A local Ray cluster started with ``ray start``: a head and a second node; yields the
    head's address. Stops both by process id."""
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    temp = tempfile.mkdtemp(prefix="psched_sweep_ray_")
    port = _free_ports(1)[0]
    head_cpus = max(1, num_cpus // 2)
    # a cluster started with ray start asks for Ray's token (~/.ray/auth_token); a driver
    # joining it by address must say so
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    env = {**os.environ, "RAY_worker_niceness": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    procs: list[subprocess.Popen[bytes]] = []
    from ray._private.services import get_node_ip_address

    address = f"{get_node_ip_address()}:{port}"
    try:
        procs.append(subprocess.Popen(
            [ray_bin, "start", "--head", "--block", f"--port={port}",
             f"--num-cpus={head_cpus}", "--num-gpus=0", "--include-dashboard=false",
             f"--temp-dir={temp}", "--object-store-memory=200000000",
             f"--ray-client-server-port={_free_ports(1)[0]}", *_node_ports()],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_nodes(address, 1, env)
        procs.append(subprocess.Popen(
            [ray_bin, "start", "--block", f"--address={address}",
             f"--num-cpus={max(1, num_cpus - head_cpus)}", "--num-gpus=0",
             "--object-store-memory=200000000", *_node_ports()],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_nodes(address, 2, env)
        yield address
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_nodes(address: str, n: int, env: dict[str, str]) -> None:
    probe = ("import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False); "
             "print(sum(1 for x in ray.nodes() if x['Alive']))")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-c", probe, address], capture_output=True,
                             text=True, env=env, check=False)
        if out.returncode == 0 and int(out.stdout.split()[-1]) >= n:
            return
        time.sleep(1)
    raise RuntimeError(f"the local Ray cluster at {address} did not reach {n} nodes")


def _ray_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's children: Ray's workers, the driver's forked cell
    (``forked``) and the rest (GCS, raylet, agents, log monitor...: ``system``)."""
    import psutil

    me = psutil.Process()
    own = me.cmdline()
    out = {"workers": 0.0, "system": 0.0, "forked": 0.0}
    for proc in me.children(recursive=True):
        try:
            cpu = proc.cpu_times()
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        line = " ".join(cmd)
        kind = ("workers" if ("default_worker" in line or line.startswith("ray::")) else
                "forked" if cmd == own else "system")
        out[kind] += cpu.user + cpu.system
    return out


def _embedded(spec: SweepSpec, out: str, num_cpus: int, t: dict[str, float],
              pin: bool = True, ship: bool | None = None) -> list[dict]:
    """The sweep on the embedded Ray ``run_sweep`` starts and stops, with the CPU time of
    Ray's own processes and of its workers between the first and the last finished cell."""
    snaps: list[dict[str, float]] = []
    c0 = _cpu_s()
    rows = run_sweep(spec, out, parallel=True, num_cpus=num_cpus, timings=t,
                     on_cell=lambda row: snaps.append(_ray_cpu()), pin_cores=pin,
                     ship_jobs=ship)
    if len(snaps) >= 2:
        t["system_cpu_s"] = snaps[-1]["system"] - snaps[0]["system"]
        t["worker_cpu_s"] = snaps[-1]["workers"] - snaps[0]["workers"]
    if snaps:  # the children's CPU when the last cell ended (Ray's stop not counted)
        t["children_cpu_s"] = sum(snaps[-1].values())
        t.update({f"{k}_end_cpu_s": v for k, v in snaps[-1].items()})
    t["driver_cpu_s"] = _cpu_s() - c0
    return rows


def _cpu_s() -> float:
    """CPU seconds so far of this process (all its threads)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _most_at_once(rows: list[dict]) -> int:
    """The most cells whose simulations overlapped in time (from their start/end stamps)."""
    events = sorted([(r["start_unix_s"], 1) for r in rows if "start_unix_s" in r]
                    + [(r["end_unix_s"], -1) for r in rows if "end_unix_s" in r])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def _per_cell(serial: list[dict], ray_rows: list[dict], t0: float) -> None:
    """Each cell's wall and CPU seconds (its thread's) serially and on Ray, where it ran and
    when it started and ended on Ray (seconds after the Ray run started, ``t0``, a Unix time):
    a cell slower on Ray by CPU ran slower, by wall only waited (for a core or the interpreter
    lock); the tail is how long the last cell ran after every other had ended."""
    if not all("cpu_s" in r for r in serial + ray_rows):
        return
    print("| cell | serial wall / CPU s | Ray wall / CPU s | Ray / serial CPU | where | "
          "Ray start s | Ray end s |")
    print("|---|---|---|---:|---|---:|---:|")
    for s, r in zip(serial, ray_rows, strict=True):
        where = "driver" if r.get("ray_node") == "driver" else "Ray worker"
        print(f"| {s['policy']} s{s['seed']} l{s['load']:g} c{s['scale']:g} | "
              f"{s['wall_s']:.1f} / {s['cpu_s']:.1f} | {r['wall_s']:.1f} / {r['cpu_s']:.1f} | "
              f"{r['cpu_s'] / max(s['cpu_s'], 1e-9):.2f} | {where} | "
              f"{r.get('start_unix_s', t0) - t0:.1f} | {r.get('end_unix_s', t0) - t0:.1f} |")
    print(f"| sum | {sum(r['wall_s'] for r in serial):.1f} / "
          f"{sum(r['cpu_s'] for r in serial):.1f} | {sum(r['wall_s'] for r in ray_rows):.1f} / "
          f"{sum(r['cpu_s'] for r in ray_rows):.1f} | "
          f"{sum(r['cpu_s'] for r in ray_rows) / sum(r['cpu_s'] for r in serial):.2f} | | | |")
    ends = sorted(r["end_unix_s"] for r in ray_rows if "end_unix_s" in r)
    if len(ends) >= 2:
        print(f"tail (the last cell alone after every other ended): {ends[-1] - ends[-2]:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--policies", default="fifo,drf,oasis")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--loads", default="1,2")
    ap.add_argument("--scales", default="0.5,1")
    ap.add_argument("--num-cpus", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--philly", type=int, metavar="N",
                    help="use the synthetic philly trace of N jobs (seed 0) as --trace")
    ap.add_argument("--two-node", action="store_true",
                    help="run the Ray part on a local two-node cluster started with ray start")
    ap.add_argument("--no-pin", action="store_true",
                    help="embedded Ray: do not pin each cell to its own core")
    ap.add_argument("--ray-first", action="store_true",
                    help="run the Ray part before the serial one")
    ap.add_argument("--ship", action="store_true",
                    help="embedded Ray: the driver maps every seed and ships the jobs through "
                         "the object store instead of each worker mapping "
                         "the seeds it meets")
    args = ap.parse_args()
    if args.philly:
        args.trace = os.path.join(tempfile.gettempdir(), f"psched_philly_{args.philly}_s0.csv")
        if not os.path.exists(args.trace):
            from psched.runs.runner import synth_trace

            synth_trace(scenario="philly", jobs=args.philly, seed=0, slots=1,
                        slot_seconds=3600.0, options={}, out=args.trace)
    spec = SweepSpec(trace=(args.trace,), jobs=args.jobs,
                     policies=tuple(args.policies.split(",")),
                     seeds=tuple(int(s) for s in args.seeds.split(",")),
                     loads=tuple(float(x) for x in args.loads.split(",")),
                     scales=tuple(float(x) for x in args.scales.split(",")))
    n = len(cells_of(spec))
    runs: dict[str, dict] = {}
    order = ("ray", "serial") if args.ray_first else ("serial", "ray")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in order:
            t: dict[str, float] = {}
            before = _load()
            t0 = time.perf_counter()
            t["t0_unix"] = time.time()
            c0 = _cpu_s()
            if kind == "serial":
                rows = run_sweep(spec, os.path.join(tmp, kind), parallel=False, timings=t)
            elif args.two_node:
                with two_node_cluster(args.num_cpus) as address:
                    t["cluster_start_s"] = time.perf_counter() - t0
                    rows = run_sweep(spec, os.path.join(tmp, kind), parallel=True,
                                     address=address, timings=t)
                    t1 = time.perf_counter()
                t["cluster_stop_s"] = time.perf_counter() - t1
            else:
                rows = _embedded(spec, os.path.join(tmp, kind), args.num_cpus, t,
                                 not args.no_pin, True if args.ship else None)
            t["total_s"] = time.perf_counter() - t0
            t["cpu_s"] = _cpu_s() - c0 + t.get("children_cpu_s", 0.0)
            runs[kind] = {"rows": rows, "t": t, "load": f"{before}–{_load()}"}

    def strip(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]

    serial, ray_run = runs["serial"], runs["ray"]
    same = strip(serial["rows"]) == strip(ray_run["rows"])
    rt = ray_run["t"]
    start = rt.get("cluster_start_s", 0.0) + rt.get("ray_start_s", 0.0)
    node_ids = {r.get("ray_node") for r in ray_run["rows"]}
    nodes = f"{len(node_ids - {'driver'})}" + (" + driver" if "driver" in node_ids else "")
    where = "two nodes (ray start)" if args.two_node else "embedded Ray"
    print(f"| cells | serial s (load) | Ray total s (load), {where}, {args.num_cpus} CPUs | "
          "Ray start-up s | Ray cells s | Ray stop s | speed-up total | speed-up cells | "
          "sum of cell times serial / Ray s | nodes used | rows equal |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    print(f"| {n} | {serial['t']['total_s']:.1f} ({serial['load']}) | {rt['total_s']:.1f} "
          f"({ray_run['load']}) | {start:.1f} | {rt['cells_s']:.1f} | "
          f"{rt.get('ray_stop_s', 0.0) + rt.get('cluster_stop_s', 0.0):.1f} | "
          f"**{serial['t']['total_s'] / rt['total_s']:.2f}×** | "
          f"{serial['t']['total_s'] / rt['cells_s']:.2f}× | "
          f"{sum(r['wall_s'] for r in serial['rows']):.1f} / "
          f"{sum(r['wall_s'] for r in ray_run['rows']):.1f} | {nodes} | {same} |")
    by_policy: dict[str, float] = {}
    for r in serial["rows"]:
        by_policy[r["policy"]] = by_policy.get(r["policy"], 0.0) + r["wall_s"]
    if "system_cpu_s" in rt:
        print(f"Ray's own processes (GCS, raylet, agents) from the first to the last cell: "
              f"{rt['system_cpu_s']:.1f} CPU s; its workers: {rt['worker_cpu_s']:.1f} CPU s")
    print(f"Ray run: at most {_most_at_once(ray_run['rows'])} cells at once")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"CPU s of the whole run (this process, and on Ray its children when the last "
          f"cell ended: Ray's processes, workers, the forked cell): serial "
          f"{serial['t']['cpu_s']:.1f}, Ray {rt['cpu_s']:.1f} "
          f"({rt['cpu_s'] / serial['t']['cpu_s']:.2f}x); on {cores} cores the Ray run needs at "
          f"least {rt['cpu_s'] / max(cores or 1, 1):.1f} s: speed-up <= "
          f"{serial['t']['cpu_s'] / (rt['cpu_s'] / max(cores or 1, 1)):.2f}x against the "
          f"serial run's CPU")
    if "workers_end_cpu_s" in rt:
        print(f"Ray run CPU by process: driver {rt['driver_cpu_s']:.1f}, its forked cell "
              f"{rt['forked_end_cpu_s']:.1f}, Ray workers {rt['workers_end_cpu_s']:.1f} (cells "
              f"{sum(r['cpu_s'] for r in ray_run['rows'] if r.get('ray_node') != 'driver'):.1f}"
              f"), Ray's own processes {rt['system_end_cpu_s']:.1f}")
    _per_cell(serial["rows"], ray_run["rows"], rt["t0_unix"])
    print("serial time by policy: " + ", ".join(f"{k} {v:.1f} s" for k, v in by_policy.items()))


if __name__ == "__main__":
    main()
