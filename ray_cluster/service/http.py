"""The service's HTTP front: its live page, and the commands' own door, on 127.0.0.1 only.

:class:`ServiceHTTP` runs an aiohttp server in its own thread and event loop inside the
service's process. Reading never takes the service's lock for long: the page's document
(:class:`~ray_cluster.service.page.PageData`) is rebuilt and encoded in a worker thread only
when the service's change counter moved (checked every :data:`POLL_S` seconds), in small
steps that each first wait while a slot boundary is in progress
(:meth:`SchedulerService.wait_quiet`), so a boundary never shares the interpreter with more
than one step; a request arriving during a boundary is answered after it. Every client is
answered from that one encoded copy. ``GET
/api/state?after=N`` waits (up to :data:`LONG_POLL_S`) until the document is newer than
``N``, so the page updates as soon as the service changes.

Routes and who may use them (a token as ``Authorization: token T``, as ``?token=T``, or as
the cookie the page sets on its first load; anything else is answered 401):

====================  ======  ==================================================
``GET /``             read    the page (HTML, its script and style inline)
``GET /api/state``    read    the page's document
``GET /api/status``   read    :meth:`SchedulerService.status` (``psched status``)
``GET /api/logs/ID``  read    a job's journal lines (``psched logs``)
``POST /api/submit``  write   decide a job (``psched submit``); ``Server-Timing``: ms taken
``POST /api/cancel``  write   cancel a job (``psched cancel``)
====================  ======  ==================================================

*read* takes the page token (``page_token`` in the service folder) or the control token;
*write* only the control token (``control_token``). Both files are mode 0600; the server's
address is in ``page.json`` (0600), removed when it stops. A request without a ``Host`` header
is refused (400), and one whose ``Host`` is anything but a loopback name with this server's
port (``127.0.0.1:PORT``, ``localhost:PORT``) is refused (403): a page elsewhere cannot reach
it by DNS rebinding. Every answer forbids caching and framing, and the page's
Content-Security-Policy allows requests to its own origin only.

A bad request is answered with a 4xx status and ``{"error": "..."}``: 400 for a body that is
not the JSON expected (nested however deeply), 422 for a job the service refuses, 404 for a
job it does not know (``cancel``, ``logs``). A connection that sends no complete request for
:data:`IDLE_S` seconds (at its start or between requests) is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ray_cluster.service.core import SchedulerService
from ray_cluster.service.page import PageData

__all__ = ["ADDRESS_FILE", "CLOSE_S", "CONTROL_TOKEN", "IDLE_S", "LONG_POLL_S", "PAGE_TOKEN",
           "PAUSE_MAX_S", "POLL_S", "QUIET_POLL_S", "ServiceHTTP", "read_token", "write_private"]

log = logging.getLogger("ray_cluster.service")

ADDRESS_FILE = "page.json"  #: the server's address, in the service folder
PAGE_TOKEN = "page_token"  #: read access (the page), in the service folder
CONTROL_TOKEN = "control_token"  #: read and write access (the commands)
POLL_S = 0.2  #: how often the server looks at the service's change counter
LONG_POLL_S = 20.0  #: longest wait of ``GET /api/state?after=N``
#: seconds a connection may stay without a complete request (at its start, or after an
#: answer) before it is closed; the page asks again at once after each answer
IDLE_S = 10.0
#: seconds :meth:`ServiceHTTP.close` lets requests in flight finish (a page's long poll is then
#: cut short, not waited out)
CLOSE_S = 1.0
#: longest a rebuild of the page's document waits, at each step, for a slot boundary to end
PAUSE_MAX_S = 10.0
#: how often a request that came during a slot boundary looks whether it ended (it is
#: handled after it: the server's thread sleeps meanwhile instead of competing with the
#: boundary for the interpreter)
QUIET_POLL_S = 0.002
_LOOPBACK = ("127.0.0.1", "localhost")  #: the names of the one address the server binds
_STATIC = Path(__file__).with_name("page_static")

Submit = Callable[[str, "int | None", "dict[str, Any] | None"], dict[str, Any]]


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, readable by the owner only (0600)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def read_token(folder: Path, name: str) -> str:
    """The token ``folder/name``, created (0600, random) if missing."""
    path = folder / name
    if not path.exists():
        write_private(path, secrets.token_urlsafe(32))
    return path.read_text().strip()


class ServiceHTTP:
    """The server (module docstring). ``submit(spec_json, arrival, where)`` decides a job
    and returns the reply ``psched submit`` prints (an ``error`` key for a bad spec).

    Parameters
    ----------
    svc
        The running service.
    workdir
        The service folder: tokens, ``page.json``, the journal.
    submit
        How a submission is decided (the service actor's own ``submit``).
    port
        0: the port of an earlier server of this folder if free, else any free port.
    """

    def __init__(self, svc: SchedulerService, workdir: str | Path, *, submit: Submit,
                 port: int = 0) -> None:
        self.svc, self.workdir, self._submit = svc, Path(workdir), submit
        self.page_token = read_token(self.workdir, PAGE_TOKEN)
        self.control_token = read_token(self.workdir, CONTROL_TOKEN)
        self.port = port
        self.data = PageData(svc, self.workdir / "journal.db",
                             pause=lambda: svc.wait_quiet(PAUSE_MAX_S))
        self._doc: dict[str, Any] = {}
        self._body = b"{}"
        self._changes = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Any = None
        self._fresh: asyncio.Event | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="psched-http")
        self._thread: threading.Thread | None = None
        self._html = _page_html()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> str:
        """Serve on 127.0.0.1 in a thread; write ``page.json``; return the URL."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as err:  # reported to start(), which raises it
                failed.append(err)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            if self._watcher is not None:
                self._watcher.cancel()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="psched-http")
        self._thread.start()
        ready.wait(60)
        if failed:
            raise failed[0]
        write_private(self.workdir / ADDRESS_FILE,
                      json.dumps({"url": self.url, "port": self.port, "pid": os.getpid()}))
        log.info("page on %s", self.url)
        return self.url

    def close(self) -> None:
        """Stop serving; remove ``page.json`` (if it is still this server's)."""
        address = self.workdir / ADDRESS_FILE
        try:
            if json.loads(address.read_text()).get("pid") == os.getpid():
                address.unlink()
        except (OSError, ValueError):
            pass
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._pool.shutdown(wait=False)
        self.data.close()

    async def _serve(self) -> None:
        from aiohttp import web

        app = web.Application(middlewares=[self._guard], client_max_size=2**20)
        app.router.add_get("/", self._page)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/api/status", self._status)
        app.router.add_get("/api/logs/{job_id}", self._logs)
        app.router.add_post("/api/submit", self._post_submit)
        app.router.add_post("/api/cancel", self._post_cancel)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     keepalive_timeout=IDLE_S, shutdown_timeout=CLOSE_S)
        await self._runner.setup()
        self._fresh = asyncio.Event()
        await self._refresh()
        for port in dict.fromkeys((self.port or self._earlier_port(), self.port)):
            site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_address=True)
            try:
                await site.start()
            except OSError:
                if port == self.port:
                    raise
                continue
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            break
        self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def _earlier_port(self) -> int:
        try:
            return int(json.loads((self.workdir / ADDRESS_FILE).read_text())["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    # -- the page's document ------------------------------------------------------------------
    async def _watch(self) -> None:
        failed = -1
        while True:
            await asyncio.sleep(POLL_S)
            changes = self.svc.changes
            if changes not in (self._changes, failed):
                try:
                    await self._refresh()
                except Exception:  # the page must never stop the service: said once
                    failed = changes
                    log.exception("the page's document could not be rebuilt")

    async def _refresh(self) -> None:
        changes = self.svc.changes
        doc, body = await asyncio.get_running_loop().run_in_executor(self._pool, self._rebuild)
        self._doc, self._body = doc, body
        self._changes = changes
        assert self._fresh is not None
        self._fresh.set()
        self._fresh = asyncio.Event()

    def _rebuild(self) -> tuple[dict[str, Any], bytes]:
        doc = self.data.build()
        return doc, self.data.encode(doc)

    # -- access -------------------------------------------------------------------------------
    def _role(self, request: Any) -> str | None:
        """``write``, ``read`` or None for the token the request carries."""
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        token = (value.strip() if scheme.lower() in ("token", "bearer") else "") or \
            request.query.get("token", "")
        if token and _same(token, self.control_token):
            return "write"
        if _same(token or request.cookies.get(self._cookie, ""), self.page_token):
            return "read"  # the cookie never grants more than reading
        return None

    @property
    def _hosts(self) -> set[str]:
        """The ``Host`` values a request to this server may carry."""
        return {f"{name}:{self.port}" for name in _LOOPBACK} | (
            set(_LOOPBACK) if self.port == 80 else set())  # a browser omits port 80

    @property
    def _cookie(self) -> str:
        return f"psched_page_{self.port}"

    @staticmethod
    def _headers(response: Any) -> Any:
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        return response

    @property
    def _guard(self) -> Any:
        from aiohttp import web

        @web.middleware
        async def guard(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            host = request.headers.get("Host")
            if host is None:  # HTTP/1.0 may leave it out: the name cannot be checked
                return self._headers(_refused(400, "a Host header is needed"))
            if host.lower() not in self._hosts:
                return self._headers(_refused(403, "not this server's loopback address"))
            while not self.svc.wait_quiet(0):  # a slot boundary in progress: let it run
                await asyncio.sleep(QUIET_POLL_S)
            role = self._role(request)
            needs = "write" if request.method == "POST" else "read"
            if role is None or (needs == "write" and role != "write"):
                response = _refused(401, "a token is needed: see 'psched page --dir DIR'")
                response.headers["WWW-Authenticate"] = "token"
                return self._headers(response)
            return self._headers(await handler(request))

        return guard

    # -- handlers ----------------------------------------------------------------------------
    async def _page(self, request: Any) -> Any:
        from aiohttp import web

        nonce = secrets.token_urlsafe(16)
        response = web.Response(text=self._html.replace("{{nonce}}", nonce),
                                content_type="text/html")
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
        if _same(request.query.get("token", ""), self.page_token):
            response.set_cookie(self._cookie, request.query["token"], httponly=True,
                                samesite="Strict", path="/")
        return response

    async def _state(self, request: Any) -> Any:
        from aiohttp import web

        try:
            after = int(request.query.get("after", "-1"))
        except ValueError:
            return _refused(400, "after must be an integer")
        if after == self._doc.get("changes") and self._fresh is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._fresh.wait(), LONG_POLL_S)
        return web.Response(body=self._body, content_type="application/json")

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _status(self, _request: Any) -> Any:
        from aiohttp import web

        return web.json_response(await self._call(self.svc.status))

    async def _logs(self, request: Any) -> Any:
        from aiohttp import web

        job_id = request.match_info["job_id"]
        lines = await self._call(self.svc.logs, job_id)
        if not lines:
            return _refused(404, f"no job {job_id!r} in the journal")
        return web.json_response(lines)

    async def _post_submit(self, request: Any) -> Any:
        from aiohttp import web

        body = await _json_body(request, "spec")
        if body is None:
            return _refused(400, "expected a JSON object with 'spec'")
        spec, arrival, where = body["spec"], body.get("arrival"), body.get("where")
        t0 = time.perf_counter()
        out = await self._call(self._submit, spec, arrival, where)
        response = web.json_response(out, status=422 if "error" in out else 200)
        response.headers["Server-Timing"] = f"submit;dur={(time.perf_counter() - t0) * 1e3:.1f}"
        return response

    async def _post_cancel(self, request: Any) -> Any:
        from aiohttp import web

        body = await _json_body(request, "job_id")
        if body is None or not isinstance(body["job_id"], str):
            return _refused(400, "expected a JSON object with 'job_id' (text)")
        job_id = body["job_id"]
        if not await self._call(self.svc.cancel, job_id):
            return _refused(404, f"no active job {job_id!r}")
        return web.json_response(True)


async def _json_body(request: Any, key: str) -> dict[str, Any] | None:
    """The request's body if it is a JSON object with ``key``, else None (not JSON, not
    UTF-8, nested too deeply for the parser, or another shape)."""
    try:
        body = json.loads(await request.text())
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) and key in body else None


def _refused(status: int, message: str) -> Any:
    from aiohttp import web

    return web.json_response({"error": message}, status=status)


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _page_html() -> str:
    """The page: its HTML with its style and script inline (each tagged with the nonce)."""
    html = (_STATIC / "page.html").read_text(encoding="utf-8")
    return (html.replace("{{style}}", (_STATIC / "page.css").read_text(encoding="utf-8"))
            .replace("{{script}}", (_STATIC / "page.js").read_text(encoding="utf-8")))
