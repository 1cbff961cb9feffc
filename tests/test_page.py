"""The service's live page, against a running ``psched serve`` started from a fresh shell
(no ``RAY_*`` variable, Ray's token authentication on): the page in real headless Chromium,
its tokens, its loopback-only socket, the folder's modes, and the commands' quiet output.
One service is shared by the whole module.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest
from browser import chromium, open_page
from service_jobs import job_toml

pytestmark = [pytest.mark.ray, pytest.mark.slow]

from ray_cluster.service import faults  # noqa: E402

SLOT_S = 2.0
needs_chromium = pytest.mark.skipif(chromium() is None,
                                    reason="no chromium (.ci/run installs it)")

#: Resolves once both jobs show a promise, then once one of them not done then shows "done":
#: with the slot the page showed at that moment.
WATCH = """new Promise((resolve) => {
  const rows = () => [...document.querySelectorAll("#jobs tbody tr")].map((r) => ({
    job: r.dataset.job, state: r.querySelector(".state").textContent,
    promise: r.querySelector(".promise").textContent}));
  const slot = () => Number(document.getElementById("slot").textContent);
  let first = null;
  const giveUp = Date.now() + 90000;
  const tick = () => {
    const now = rows();
    if (Date.now() > giveUp) { resolve({gaveUp: true, first, now, slot: slot()}); return; }
    if (!first) {
      if (now.length >= 2 && now.every((r) => r.promise !== "")) first = {rows: now, slot: slot()};
    } else {
      const done = now.find((r) => r.state === "done" &&
                                   first.rows.find((f) => f.job === r.job).state !== "done");
      if (done) {
        resolve({first, job: done.job, slot: slot(),
                 cells: document.querySelectorAll("#gantt-svg rect.cell").length,
                 marked: document.getElementById("now-label") !== null,
                 usage: document.querySelectorAll("#util svg path.series").length,
                 prices: document.querySelectorAll("#prices svg path.series").length,
                 events: document.querySelectorAll("#events tbody tr").length,
                 servers: [...document.querySelectorAll("#gantt-svg text.server")].map(
                   (t) => t.firstChild.textContent)});
        return;
      }
    }
    setTimeout(tick, 100);
  };
  tick();
})"""


def _jobs(folder: Path, minibatches: dict[str, int]) -> list[str]:
    out = []
    for job_id, m in minibatches.items():
        f = folder / f"{job_id}.toml"
        f.write_text(job_toml(job_id=job_id, minibatches=m))
        out.append(str(f))
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any, list[str]]]:
    """``psched serve`` in the background; two job files (each a few slots of work on one
    worker CPU, so the second waits for the first)."""
    root = tmp_path_factory.mktemp("page")
    work = root / "svc"
    files = _jobs(root, {"pa": 1500, "pb": 1500})
    with faults.serving(work, "--slot-seconds", str(SLOT_S), "--worker-cpus", "1",
                        "--policy", "oasis", "--history", files[0]) as proc:
        yield work, proc, files


def _url(work: Path) -> str:
    out = faults.psched("page", "--dir", str(work))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _get(url: str, *, token: str | None = None, method: str = "GET",
         host: str | None = None, body: Any = None) -> tuple[int, dict[str, str], bytes]:
    headers = {} if token is None else {"Authorization": f"token {token}"}
    if host is not None:
        headers["Host"] = host
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


@needs_chromium
def test_the_page_shows_both_jobs_with_promises_and_a_completion_within_two_slots(
        served: tuple[Path, Any, list[str]], tmp_path: Path) -> None:
    work, _, files = served
    sub = faults.psched("submit", "--dir", str(work), *files)
    assert sub.returncode == 0, sub.stderr
    promised = dict(re.findall(r"^(\w+): .*promised by slot (\d+)", sub.stdout, re.M))
    assert set(promised) == {"pa", "pb"}, sub.stdout
    url = _url(work)
    origin = url.split("?")[0]
    page = open_page(url, WATCH, timeout_s=150)
    assert page.errors == []
    assert page.requests and all(u.startswith(origin) for u in page.requests), page.requests
    got = page.value
    assert "gaveUp" not in got, got
    first = {r["job"]: r for r in got["first"]["rows"]}
    status = {j["job_id"]: j for j in faults.cli_status(work)["jobs"]}
    for j, stated in promised.items():  # as submitted, or re-stated since (the journal's)
        assert first[j]["promise"] == stated or (
            status[j]["restated"] and str(status[j]["first_promise"]) == stated), (j, first)
    # the job completed in slot c, so the service moved on to slot c + 1: the page said so
    # by then, and at the latest one slot later
    completion = {j["job_id"]: j["completion"] for j in faults.cli_status(work)["jobs"]}
    assert completion[got["job"]] + 1 <= got["slot"] <= completion[got["job"]] + 2, got
    assert got["cells"] > 0 and got["marked"] and got["events"] > 0
    assert got["usage"] > 0 and got["prices"] > 0  # oasis sets prices
    # the embedded node has no name of its own: its servers go by host and role
    assert sorted(n.rsplit(" ", 1)[1] for n in got["servers"]) == ["PS", "worker"], got
    assert not any(re.match(r"[0-9a-f]{8}/", n) for n in got["servers"]), got
    shot = tmp_path / "page.png"
    shot.write_bytes(page.screenshot)
    img = matplotlib.image.imread(shot)
    assert img.shape[1] == 1280 and img.shape[0] > 900


def test_the_page_and_its_data_refuse_requests_without_the_right_token(
        served: tuple[Path, Any, list[str]]) -> None:
    work, _, _ = served
    origin = _url(work).split("?")[0]
    page_token = (work / "page_token").read_text().strip()
    for path in ("", "api/state", "api/status", "api/logs/pa"):
        assert _get(origin + path)[0] == 401, path
        assert _get(origin + path, token="not-the-token")[0] == 401, path
        assert _get(origin + path, token=page_token)[0] == 200, path
    assert _get(origin + "?token=" + page_token)[0] == 200
    _, headers, _ = _get(origin, token=page_token)
    assert "connect-src 'self'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "no-store"
    # the page's token only reads; a page elsewhere cannot rebind its name to this port
    assert _get(origin + "api/cancel", token=page_token, method="POST",
                body={"job_id": "pa"})[0] == 401
    assert _get(origin + "api/state", token=page_token, host="evil.example:80")[0] == 403


def test_the_page_listens_on_loopback_only(served: tuple[Path, Any, list[str]]) -> None:
    import psutil

    work, proc, _ = served
    port = json.loads((work / "page.json").read_text())["port"]
    tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    bound: list[str] = []
    for p in tree:  # a child that exits meanwhile (a Ray worker) listens on nothing
        with contextlib.suppress(psutil.Error):
            bound += [c.laddr.ip for c in p.net_connections("inet")
                      if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert bound == ["127.0.0.1"]
    others = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs
              if a.family == socket.AF_INET and not a.address.startswith("127.")}
    for ip in others:
        with pytest.raises(OSError), socket.create_connection((ip, port), timeout=5):
            pass


def test_every_file_in_the_service_folder_is_the_owners_only(
        served: tuple[Path, Any, list[str]]) -> None:
    work, _, _ = served
    assert faults.psched("status", "--dir", str(work)).returncode == 0
    paths = [work, *work.rglob("*")]
    assert {p.name for p in paths} >= {"journal.db", "auth_token", "page_token",
                                       "control_token", "page.json", "address"}
    assert [(str(p), oct(p.stat().st_mode)) for p in paths if p.stat().st_mode & 0o077] == []


def test_status_submit_and_logs_print_only_pscheds_own_output(
        served: tuple[Path, Any, list[str]], tmp_path: Path) -> None:
    work, _, _ = served
    extra = _jobs(tmp_path, {"pq": 200})
    runs = [faults.psched("submit", "--dir", str(work), *extra),
            faults.psched("status", "--dir", str(work)),
            faults.psched("logs", "--dir", str(work), "pq")]
    for out in runs:
        assert out.returncode == 0, out.stderr
        assert out.stderr == "" and "INFO" not in out.stdout, out
    # through Ray (an explicit address): Ray's own lines go to the folder's log, not here
    address = (work / "address").read_text().strip()
    env = {**faults.operator_env(), "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(work / "auth_token")}
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "psched", "status", "--dir", str(work),
                          "--address", address], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "INFO" not in out.stderr + out.stdout and "pq" in out.stdout
    log = work / "psched.log"
    assert "Connecting to existing Ray cluster" in log.read_text()
    assert log.stat().st_mode & 0o077 == 0
    # serve itself: its own lines only, none of Ray's (``Started a local Ray instance``)
    served = (work.parent / f"{work.name}.serve.log").read_text()
    assert "psched service on 127.0.0.1:" in served
    assert "INFO" not in served and "Ray instance" not in served, served


def test_psched_page_on_a_folder_without_a_live_page_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "page.json").write_text(json.dumps({"url": f"http://127.0.0.1:{port}/",
                                                    "port": port}))
    (tmp_path / "page_token").write_text("t")
    for folder, says in ((tmp_path / "missing", "no such service folder"),
                         (tmp_path.parent, "no live page"),
                         (tmp_path, "the address is stale")):
        out = faults.psched("page", "--dir", str(folder))
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.count("\n") == 1 and says in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
