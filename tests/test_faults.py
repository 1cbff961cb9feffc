"""The fault-injection suite: one fault at a time injected into real training on Ray.

For each fault: no accepted job lost or journaled twice, every admitted job completes,
training lost at most back to the latest checkpoint, and infrastructure faults never counted
as strikes against a job. The scenarios live in :mod:`ray_cluster.service.faults` (the benchmark
``benchmarks/bench_faults.py`` runs the same ones and tabulates time to resume). Runtime and
service scenarios share the session's Ray (tests/conftest.py); the operator scenarios run
``psched serve`` as a subprocess from a fresh environment (no ``RAY_*`` variable), with its
own embedded Ray and token authentication on. A node lost mid-slot is in
tests/test_service_faults.py.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import sqlite3
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.faults]

ray = pytest.importorskip("ray")

from service_jobs import job_toml  # noqa: E402

from ray_cluster.runtime import infrastructure_failure  # noqa: E402
from ray_cluster.service import (  # noqa: E402
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    ServiceConfig,
    faults,
    service_actor,
)
from ray_cluster.service.journal import check_journal  # noqa: E402
from ray_cluster.workloads.jobspec import spec_to_json  # noqa: E402

SLOT_S = 1.5
TAU_S = 0.004  # declared seconds per mini-batch of the tiny jobs (their plans' work)



def _wait_over(work: Path, ids: list[str], timeout_s: float) -> None:
    """Wait until every job of ``ids`` is over, as ``psched status`` says: first on the
    journal (a file read, every 0.5 s; a ``psched status`` process per poll would take a core
    of the two from the service under test), then through the CLI once it is over there."""
    db, end = work / "journal.db", time.time() + timeout_s
    while time.time() < end:
        try:
            out = faults.journal_outcome(db, ids, "")
            with sqlite3.connect(db) as con:
                decided = con.execute("SELECT COUNT(DISTINCT job_id) FROM decisions "
                                      "WHERE kind = 'arrival'").fetchone()[0]
        except sqlite3.Error:
            out, decided = None, 0
        if out is not None and decided == len(ids) and out.completed == out.admitted:
            break
        time.sleep(0.5)
    faults.wait_jobs_over(lambda: faults.cli_status(work), 60)


def _assert_clean(out: faults.FaultOutcome) -> None:
    assert out.lost == 0 and out.duplicated == 0, out
    assert out.admitted >= 1 and out.completed == out.admitted, out
    assert out.strikes == 0, out


# -- classification, no Ray needed ----------------------------------------------------------
def test_infrastructure_errors_are_told_apart_from_the_workloads_own():
    died = ray.exceptions.ActorDiedError()
    wrapped = ray.exceptions.RayTaskError("train", "Traceback ...", died)
    assert infrastructure_failure(died)
    assert infrastructure_failure(wrapped)  # a worker's task failed because a shard died
    assert infrastructure_failure(ray.exceptions.ObjectLostError("00" * 28, "", ""))
    own = ray.exceptions.RayTaskError("train", "Traceback ...", ValueError("bad hparams"))
    assert not infrastructure_failure(own)
    assert not infrastructure_failure(ValueError("x"))


# -- one job's runtime ------------------------------------------------------------------------
def test_a_killed_worker_is_replaced_without_a_strike_or_a_rollback(ray_session, tmp_path):
    out = faults.worker_kill(tmp_path)
    _assert_clean(out)
    assert out.notes == "rollbacks 0"


def test_three_shard_kills_in_one_slot_roll_back_to_the_latest_checkpoint_and_never_strike(
        ray_session, tmp_path):
    out = faults.shard_kills(tmp_path, kills=3)
    _assert_clean(out)  # before: three kills were three strikes and the job was dropped
    assert out.notes == "rollbacks 3, each to the latest checkpoint: True"
    assert len(out.resume_s) == 3


# -- the service on the session Ray -----------------------------------------------------------
def _actor(tmp_path: Path, cfg: ServiceConfig, head: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cluster = faults.one_server_cluster(cfg.slot_seconds)
    return service_actor().options(
        name=SERVICE_NAME, namespace=SERVICE_NAMESPACE, lifetime="detached",
        scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False),
    ).remote(str(tmp_path), cfg.to_json(), cluster.to_dict(), {"0": head, "1": head})


def _stop(actor) -> None:
    with contextlib.suppress(ray.exceptions.RayError):
        ray.get(actor.stop.remote(), timeout=120)
    ray.kill(actor, no_restart=True)
    for _ in range(50):
        try:
            ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)
        except ValueError:
            return
        time.sleep(0.2)


def _head_raylet_pid(ray_session) -> int:
    from ray._private import ray_constants

    procs = ray_session.cluster.head_node.all_processes[ray_constants.PROCESS_TYPE_RAYLET]
    return int(procs[0].process.pid)


def _named():
    return ray.get_actor(SERVICE_NAME, namespace=SERVICE_NAMESPACE)


def test_the_service_actor_killed_by_sigkill_resumes_from_the_journal(ray_session, tmp_path):
    specs = [faults.small_spec(f"a{i}", minibatches=600, tau_s=TAU_S) for i in range(3)]
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=80, history=tuple(specs))
    actor = _actor(tmp_path, cfg, ray_session.node_ids["head"])
    db = tmp_path / "journal.db"
    try:
        acked = [s.job_id for s in specs
                 if "error" not in ray.get(actor.submit.remote(spec_to_json(s)))]
        while faults.slots_journaled(db) < 2:
            time.sleep(0.2)
        faults.kill_service_actor_process(_head_raylet_pid(ray_session))
        faults.wait_jobs_over(lambda: ray.get(_named().status.remote(), timeout=30), 200)
    finally:
        _stop(_named())
    _assert_clean(faults.journal_outcome(db, acked, "service actor kill -9"))


def test_a_burst_of_200_submissions_survives_two_writer_kills(ray_session, tmp_path):
    """The journal's writer (the service actor) is killed twice during 200 submissions:
    every acknowledged job is journaled once, decided once, and every admitted one completes.
    Fixed prices admit only the valuable few, so the run stays short."""
    specs = [faults.small_spec(f"b{i:03d}", minibatches=200, tau_s=TAU_S,
                               value=40.0 if i % 50 == 7 else 0.05) for i in range(200)]
    cfg = ServiceConfig(slot_seconds=SLOT_S, horizon=80, prices=(2.0, 0.5, 2.0, 0.5))
    actor = _actor(tmp_path, cfg, ray_session.node_ids["head"])
    db = tmp_path / "journal.db"
    try:
        acked, _ = faults.submit_burst(
            _named, specs, kill_at=(60, 140),
            kill=lambda: ray.kill(_named(), no_restart=False))
        faults.wait_jobs_over(lambda: ray.get(_named().status.remote(), timeout=30), 200)
    finally:
        _stop(actor)
    out = faults.journal_outcome(db, acked, "writer kill x2 in a burst")
    assert out.accepted == 200
    _assert_clean(out)
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- psched serve as an operator runs it ------------------------------------------------------
def _job_files(folder: Path, ids: list[str], m: int) -> list[str]:
    out = []
    for job_id in ids:
        f = folder / f"{job_id}.toml"
        f.write_text(job_toml(job_id=job_id, minibatches=m, tau_s=TAU_S, target=8))
        out.append(str(f))
    return out


def _listening_ports(root_pid: int, name: str) -> list[int]:
    import psutil

    ports: set[int] = set()
    for p in faults._actor_processes(root_pid, name):
        with contextlib.suppress(psutil.Error):
            ports |= {c.laddr.port for c in p.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN}
    return sorted(ports)


def _held_elsewhere(port: int, root_pid: int) -> bool:
    """Whether ``port`` is listened on by a process outside ``root_pid``'s tree (e.g. the test
    session's own Ray: every Ray's dashboard agent asks for the fixed port 52365, and only the
    first one started gets it; the others run without the job API's HTTP server)."""
    import psutil

    ours = {root_pid} | {p.pid for p in psutil.Process(root_pid).children(recursive=True)}
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid not in ours
               for c in psutil.net_connections(kind="inet"))


def _post_job(port: int, entrypoint: str) -> int | None:
    """POST a job to Ray's job API on ``port`` without a token: the HTTP status (None if
    the port does not speak HTTP)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/job_agent/jobs/", method="POST",
        data=json.dumps({"entrypoint": entrypoint}).encode(),
        headers={"Content-Type": "application/json"})
    try:
        return int(urllib.request.urlopen(req, timeout=10).status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return None


def _listening_ips(root_pid: int, pid_file: Path) -> set[str]:
    """Every address a process of ``root_pid``'s tree or of ``pid_file`` (``ray.pids``: the
    embedded Ray's processes, some of which leave the tree) listens on."""
    import psutil

    procs = [psutil.Process(root_pid), *psutil.Process(root_pid).children(recursive=True)]
    for line in pid_file.read_text().splitlines():
        with contextlib.suppress(psutil.Error, ValueError, IndexError):
            procs.append(psutil.Process(int(line.split()[0])))
    ips: set[str] = set()
    for p in procs:
        with contextlib.suppress(psutil.Error):
            ips |= {c.laddr.ip for c in p.net_connections(kind="inet")
                    if c.status == psutil.CONN_LISTEN}
    return ips


def test_a_fresh_shell_submits_the_job_api_refuses_strangers_and_sigint_stops_serve(tmp_path):
    """``psched serve`` from a fresh environment: its embedded Ray listens on loopback only,
    the job API refuses a request without the token, SIGINT stops it cleanly."""
    work = tmp_path / "svc"
    work.mkdir()
    files = _job_files(tmp_path, ["f0"], m=300)
    pwned = tmp_path / "pwned.txt"
    with faults.serving(work, "--slot-seconds", str(SLOT_S), "--worker-cpus", "1",
                        "--policy", "oasis", "--history", files[0]) as proc:
        token = work / "auth_token"
        assert token.stat().st_mode & 0o777 == 0o600
        assert (work / "address").read_text().strip().startswith("127.0.0.1:")
        sub = faults.psched("submit", "--dir", str(work), *files)  # no RAY_* variable set
        assert sub.returncode == 0, sub.stderr
        assert "f0: arrival slot" in sub.stdout
        codes: list[int] = []
        job_api_elsewhere = False
        for _ in range(180):  # the agent's HTTP server may start late on a loaded machine
            codes += [c for port in _listening_ports(proc.pid, "ray::DashboardAgent")
                      if (c := _post_job(port, f"id > {pwned}")) is not None]
            if {401, 403} & set(codes):
                break
            if codes and _held_elsewhere(52365, proc.pid):
                job_api_elsewhere = True  # this Ray has no job API to refuse with: none to abuse
                break
            time.sleep(1.0)
        # the job agent answers 401 (no token): before, 200, and the command ran
        assert job_api_elsewhere or {401, 403} & set(codes), codes
        assert codes and not [c for c in codes if c < 400], codes  # no agent port accepted it
        ips = _listening_ips(proc.pid, work / "ray.pids")  # every Ray process is up by now
        assert ips and ips <= {"127.0.0.1", "::ffff:127.0.0.1", "::1"}, ips
        _wait_over(work, ["f0"], 150)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 130
    assert not pwned.exists()
    assert not (work / "address").exists()  # removed on a clean stop
    with sqlite3.connect(work / "journal.db") as con:
        assert con.execute("SELECT COUNT(*) FROM events WHERE kind = 'complete'"
                           ).fetchone()[0] == 1


def test_serve_outlives_its_actor_killed_then_killed_and_restarted_loses_nothing(tmp_path):
    """``kill -9`` of the service actor (Ray restarts it; ``serve`` waits for it), then of
    ``serve`` itself (a restart reaps the old Ray's orphans and resumes from the journal);
    ``psched stop`` ends it."""
    import psutil

    work = tmp_path / "svc"
    work.mkdir()
    ids = ["d0", "d1"]
    files = _job_files(tmp_path, ids, m=700)
    args = ("--slot-seconds", str(SLOT_S), "--worker-cpus", "1", "--history", files[0],
            "--checkpoint-every", "0.5", "--policy", "oasis")
    proc = faults.start_serve(work, *args)
    try:
        assert faults.psched("submit", "--dir", str(work), *files).returncode == 0
        while faults.slots_journaled(work / "journal.db") < 2:
            time.sleep(0.2)
        faults.kill_service_actor_process(proc.pid)
        done = faults.slots_journaled(work / "journal.db")
        while faults.slots_journaled(work / "journal.db") < done + 2:  # it goes on
            assert proc.poll() is None, "serve died with its actor"
            time.sleep(0.2)
        ray_pids = [int(line.split()[0]) for line in
                    (work / "ray.pids").read_text().splitlines()]
        proc.send_signal(signal.SIGKILL)  # the driver dies, its embedded Ray with it
        proc.wait(30)
        _wait_unreachable((work / "address").read_text().strip(), 60)  # Ray notices
        st = faults.psched("status", "--dir", str(work), timeout_s=60)  # stale: one line
        assert st.returncode != 0 and len(st.stderr.strip().splitlines()) == 1, st.stderr
        proc = faults.start_serve(work, *args)  # reaps the old Ray's orphans, resumes
        assert not [p for p in ray_pids if psutil.pid_exists(p)
                    and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        _wait_over(work, ids, 200)
        stop = faults.psched("stop", "--dir", str(work), timeout_s=200)
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_clean(faults.journal_outcome(work / "journal.db", ids, "driver kill + restart"))
    assert not (work / "serve.pid").exists() and not (work / "ray.pids").exists()


def _wait_unreachable(address: str, timeout_s: float) -> None:
    """Until nothing answers at ``address``: a killed driver's Ray processes see their
    parent gone within seconds, and till then its Ray may still answer."""
    from psched.cli.connect import _reachable

    deadline = time.monotonic() + timeout_s
    while _reachable(address, 1.0) is None:
        assert time.monotonic() < deadline, f"Ray at {address} outlived its driver"
        time.sleep(0.2)


# -- the journal -------------------------------------------------------------------------------
def _garbage_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[4096:] = os.urandom(len(data) - 4096)  # header intact, pages garbage
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["empty", "garbage header", "garbage pages"])
def test_a_journal_that_cannot_be_trusted_stops_serve_in_one_line(tmp_path, damage):
    from ray_cluster.service.journal import Journal

    work = tmp_path / "svc"
    j = Journal(work / "journal.db")
    j.set_meta({"config": {"policy": "fifo"}})
    for i in range(300):
        j.event(f"j{i}", i, "complete", "x" * 200)
    j.close()
    (work / "ckpt" / "j0").mkdir(parents=True)
    db = work / "journal.db"
    if damage == "empty":
        db.write_bytes(b"")
    elif damage == "garbage header":
        db.write_bytes(os.urandom(db.stat().st_size))
    else:
        _garbage_pages(db)
    out = faults.psched("serve", "--dir", str(work), "--policy", "fifo", timeout_s=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(db) in lines[0] and "--fresh" in lines[0], out.stderr
    assert not (work / "address").exists()  # no Ray was started
    moved = check_journal(work, fresh=True)  # what --fresh does before starting
    assert moved is not None and "moved aside" in moved
    assert not db.exists() and not (work / "ckpt").exists()
    assert check_journal(work) is None


def test_checkpoint_every_reaches_the_service_config_and_each_jobs_runtime(tmp_path):
    from psched.cli.main import build_parser
    from psched.cli.service import _config
    from ray_cluster.runtime.types import RuntimeConfig

    args = build_parser().parse_args(["serve", "--policy", "fifo", "--checkpoint-every", "7.5"])
    cfg = _config(args)
    assert cfg.runtime["checkpoint_every_s"] == 7.5
    assert ServiceConfig.from_json(cfg.to_json()).runtime == cfg.runtime  # journaled as is
    assert RuntimeConfig(**dict(cfg.runtime)).checkpoint_every_s == 7.5
    bad = faults.psched("serve", "--dir", str(tmp_path), "--checkpoint-every", "0")
    assert bad.returncode == 2 and "--checkpoint-every" in bad.stderr
