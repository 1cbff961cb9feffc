"""The service's HTTP door under bad and hostile requests, without Ray: a real
:class:`SchedulerService` (simulated executor) behind a real :class:`ServiceHTTP` on
127.0.0.1, spoken to over raw sockets so that every header is the test's own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_jobs import job_toml

from psched.core.errors import InputError
from psched.core.executor import SimulatedExecutor
from psched.core.model import Cluster
from ray_cluster.service import SchedulerService, ServiceConfig
from ray_cluster.service import http as http_module
from ray_cluster.service.http import ServiceHTTP
from ray_cluster.workloads.jobspec import parse_jobspec, spec_to_json, submission_from_json

JOB = job_toml(minibatches=40)
DEEP = 200_000  #: nesting depth of the hostile bodies (far past the parser's recursion limit)


class Door:
    """The running door: its port and tokens, and a raw request."""

    def __init__(self, server: ServiceHTTP) -> None:
        self.port, self.folder = server.port, server.workdir
        self.read, self.write = server.page_token, server.control_token

    def ask(self, method: str, path: str, *, body: bytes = b"", token: str | None = "write",
            host: str | None = "default", version: str = "1.1") -> tuple[int, bytes]:
        """Status and body of one request on a fresh connection."""
        lines = [f"{method} {path} HTTP/{version}"]
        if host is not None:
            lines.append(f"Host: {f'127.0.0.1:{self.port}' if host == 'default' else host}")
        if token is not None:
            lines.append(f"Authorization: token {self.write if token == 'write' else self.read}")
        lines += [f"Content-Length: {len(body)}", "Content-Type: application/json",
                  "Connection: close"]
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
            s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, rest = answer.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), rest


def _cluster() -> Cluster:
    from psched.traces.synth import SCENARIOS

    return SCENARIOS["oasis-paper"][1](seed=1, slot_seconds=30.0)


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    work: Path = tmp_path_factory.mktemp("door")
    spec = parse_jobspec(JOB, path="j.toml", default_id="known")
    svc = SchedulerService(work, config=ServiceConfig(policy="oasis", slot_seconds=30.0,
                                                      horizon=200, history=(spec,)),
                           cluster=_cluster(), executor=SimulatedExecutor())

    def submit(text: str, arrival: int | None, where: dict[str, Any] | None) -> dict[str, Any]:
        try:  # what the service actor does with a submission (actor.py)
            return svc.submit(submission_from_json(text), arrival=arrival)
        except InputError as err:
            return {"error": str(err)}

    idle = http_module.IDLE_S
    http_module.IDLE_S = 1.0  # read when the server starts
    server = ServiceHTTP(svc, work, submit=submit)
    server.start()
    http_module.IDLE_S = idle
    svc.submit(spec)
    # the commands use the door while the service's Ray answers at ``address``: here, the
    # door's own port stands for it
    (work / "address").write_text(f"127.0.0.1:{server.port}\n")
    try:
        yield Door(server)
    finally:
        server.close()
        svc.close()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


BAD = {
    # name: (method, path, body, token, host, version, status)
    "nested-json-body": ("POST", "/api/submit", _nested(DEEP), "write", "default", "1.1", 400),
    "nested-json-in-spec-field": ("POST", "/api/submit",
                                  b'{"spec": ' + _nested(DEEP) + b"}", "write", "default",
                                  "1.1", 400),
    "nested-json-as-spec-text": ("POST", "/api/submit",
                                 json.dumps({"spec": "[" * DEEP + "]" * DEEP}).encode(),
                                 "write", "default", "1.1", 422),
    "nested-json-cancel": ("POST", "/api/cancel", _nested(DEEP), "write", "default", "1.1",
                           400),
    "not-json": ("POST", "/api/submit", b"spec=1", "write", "default", "1.1", 400),
    "not-utf8": ("POST", "/api/submit", b'{"spec": "\xff"}', "write", "default", "1.1", 400),
    "json-array": ("POST", "/api/submit", b"[1, 2]", "write", "default", "1.1", 400),
    "no-spec": ("POST", "/api/submit", b'{"job": 1}', "write", "default", "1.1", 400),
    "bad-spec": ("POST", "/api/submit", b'{"spec": "{\\"id\\": 1}"}', "write", "default",
                 "1.1", 422),
    "spec-submitted-before": ("POST", "/api/submit",
                              json.dumps({"spec": spec_to_json(parse_jobspec(
                                  JOB, path="j.toml", default_id="known"))}).encode(),
                              "write", "default", "1.1", 422),
    "cancel-unknown-job": ("POST", "/api/cancel", b'{"job_id": "digits-b"}', "write",
                           "default", "1.1", 404),
    "cancel-id-not-text": ("POST", "/api/cancel", b'{"job_id": 7}', "write", "default",
                           "1.1", 400),
    "logs-unknown-job": ("GET", "/api/logs/nobody", b"", "write", "default", "1.1", 404),
    "state-after-not-integer": ("GET", "/api/state?after=x", b"", "read", "default", "1.1",
                                400),
    "unknown-path": ("GET", "/api/nothing", b"", "write", "default", "1.1", 404),
    "get-on-a-post-route": ("GET", "/api/cancel", b"", "write", "default", "1.1", 405),
    "no-token": ("GET", "/api/status", b"", None, "default", "1.1", 401),
    "page-token-writes": ("POST", "/api/cancel", b'{"job_id": "known"}', "read", "default",
                          "1.1", 401),
    "host-userinfo-trick": ("GET", "/api/status", b"", "write", "127.0.0.1:80@evil", "1.1",
                            403),
    "host-with-port-then-evil": ("GET", "/api/status", b"", "write", "{port}@evil.example",
                                 "1.1", 403),
    "host-elsewhere": ("GET", "/api/status", b"", "write", "evil.example:{port}", "1.1", 403),
    "host-other-port": ("GET", "/api/status", b"", "write", "127.0.0.1:1", "1.1", 403),
    "http10-without-host": ("GET", "/api/status", b"", "write", None, "1.0", 400),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_a_bad_request_gets_its_4xx_status_never_a_200_or_500(door: Door, case: str) -> None:
    method, path, body, token, host, version, status = BAD[case]
    if host is not None and "{port}" in host:
        host = host.format(port=f"127.0.0.1:{door.port}")
    got, answer = door.ask(method, path, body=body, token=token, host=host, version=version)
    assert got == status, answer[:300]
    if case not in ("unknown-path", "get-on-a-post-route"):  # aiohttp's own answers
        message = json.loads(answer)["error"]
        assert isinstance(message, str) and message and "\n" not in message


def test_good_requests_are_answered_200(door: Door) -> None:
    assert door.ask("GET", "/api/status")[0] == 200
    assert door.ask("GET", "/api/status", host=f"localhost:{door.port}")[0] == 200
    assert door.ask("GET", "/api/status", version="1.0")[0] == 200  # with its Host
    status, body = door.ask("GET", "/api/logs/known", token="read")
    assert status == 200 and json.loads(body)
    assert door.ask("POST", "/api/cancel", body=b'{"job_id": "known"}') == (200, b"true")


def test_a_silent_connection_is_closed(door: Door) -> None:
    with socket.create_connection(("127.0.0.1", door.port), timeout=60) as s:
        assert s.recv(1) == b""  # closed by the server, not the 60-s timeout (that raises)


def test_a_half_sent_request_is_closed(door: Door) -> None:
    with socket.create_connection(("127.0.0.1", door.port), timeout=60) as s:
        s.sendall(f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{door.port}\r\n".encode())
        assert s.recv(1) == b""


@pytest.mark.parametrize("command", ["cancel", "logs"])
def test_an_unknown_job_is_one_line_naming_the_job_and_the_folder(
        door: Door, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from psched.cli.main import main

    assert main([command, "--dir", str(door.folder), "digits-b"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert "'digits-b'" in out.err and str(door.folder) in out.err
    assert "<input>" not in out.err and "HTTP" not in out.err


def _psched(*args: str, stdout: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "psched", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False)


def test_status_into_a_closed_pipe_exits_quietly(door: Door) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written (``| head -3`` done)
    try:
        out = _psched("status", "--dir", str(door.folder), stdout=write)
    finally:
        os.close(write)
    assert (out.returncode, out.stderr) == (141, "")


def test_status_watch_writes_no_screen_escapes_into_a_pipe(door: Door) -> None:
    out = _psched("status", "--watch", "--dir", str(door.folder), stdout=subprocess.PIPE)
    assert out.returncode == 0, out.stderr
    assert "known" in out.stdout and "\x1b" not in out.stdout


@pytest.mark.parametrize("done", [0.0, 1.0, 3.0])
def test_a_running_jobs_bar_moves_within_its_slot(done: float) -> None:
    from psched.cli.jobs import progress_bar

    job = {"work": 8, "done": done, "state": "running", "completion": None, "workers": 2}
    bars = [progress_bar(job, ran) for ran in (0.0, 0.25, 0.5, 1.0)]
    assert all(len(b) == 20 and b.count("#") == round(done / 8 * 20) for b in bars)
    moving = [b.count(">") for b in bars]
    assert moving == sorted(moving) and moving[0] == 0 < moving[-1]
    assert len(bars[-1].rstrip()) == round((done + 2) / 8 * 20)  # 2 workers: 2 of 8 a slot
    waiting = progress_bar({**job, "state": "waiting", "workers": 0}, 0.5)
    assert ">" not in waiting


def test_a_connection_left_idle_after_an_answer_is_closed(door: Door) -> None:
    with socket.create_connection(("127.0.0.1", door.port), timeout=60) as s:
        s.sendall(f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{door.port}\r\n"
                  f"Authorization: token {door.write}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        head, _, body = answer.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += s.recv(65536)
        assert head.startswith(b"HTTP/1.1 200") and json.loads(body)["jobs"]
        assert s.recv(1) == b""  # kept alive, then closed once idle
