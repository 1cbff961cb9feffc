"""A page opened in headless Chromium over the DevTools protocol (a tiny client on aiohttp's
websocket): console messages and uncaught exceptions, a JavaScript expression's value, and a
full-page screenshot. Used by ``tests/test_report_browser.py``, ``tests/test_page.py`` and
``benchmarks/report_screenshots.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PageRun", "chromium", "open_page"]


def chromium() -> str | None:
    """The Chromium executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass(kw_only=True)
class PageRun:
    """What the browser saw."""

    console: list[tuple[str, str]] = field(default_factory=list)  #: (level, text)
    exceptions: list[str] = field(default_factory=list)  #: uncaught exceptions
    failed_requests: list[str] = field(default_factory=list)  #: network failures
    requests: list[str] = field(default_factory=list)  #: every URL requested
    value: Any = None  #: the expression's value
    screenshot: bytes = b""  #: PNG of the full page

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed requests."""
        return ([t for lvl, t in self.console if lvl in ("error", "assert")]
                + self.exceptions + self.failed_requests)


class _Session:
    def __init__(self, ws: Any, run: PageRun) -> None:
        self.ws, self.run, self.next_id = ws, run, 0
        self.pending: dict[int, asyncio.Future[Any]] = {}

    async def call(self, method: str, **params: Any) -> Any:
        self.next_id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method,
                                           "params": params}))
        return await fut

    async def pump(self, loaded: asyncio.Event) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                fut = self.pending.pop(data["id"])
                if "error" in data:
                    fut.set_exception(RuntimeError(str(data["error"])))
                else:
                    fut.set_result(data.get("result"))
                continue
            self._event(data.get("method", ""), data.get("params", {}), loaded)

    def _event(self, method: str, p: dict[str, Any], loaded: asyncio.Event) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            self.run.console.append((p["type"], text))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.run.exceptions.append(d.get("exception", {}).get("description", d["text"]))
        elif method == "Log.entryAdded":
            e = p["entry"]
            self.run.console.append((e["level"], e["text"]))
        elif method == "Network.requestWillBeSent":
            self.run.requests.append(p["request"]["url"])
        elif method == "Network.loadingFailed":
            self.run.failed_requests.append(f"{p.get('errorText')}: {p.get('requestId')}")
        elif method == "Page.loadEventFired":
            loaded.set()


async def _drive(ws_url: str, url: str, expression: str, width: int) -> PageRun:
    import aiohttp

    run = PageRun()
    async with aiohttp.ClientSession() as http, http.ws_connect(ws_url, max_msg_size=0) as ws:
        s = _Session(ws, run)
        loaded = asyncio.Event()
        pump = asyncio.create_task(s.pump(loaded))
        target = await s.call("Target.createTarget", url="about:blank")
        attached = await s.call("Target.attachToTarget", targetId=target["targetId"],
                                flatten=True)
        sid = attached["sessionId"]

        async def page(method: str, **params: Any) -> Any:
            s.next_id += 1
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            s.pending[s.next_id] = fut
            await ws.send_str(json.dumps({"id": s.next_id, "method": method,
                                          "params": params, "sessionId": sid}))
            return await fut

        for domain in ("Page", "Runtime", "Log", "Network"):
            await page(f"{domain}.enable")
        await page("Emulation.setDeviceMetricsOverride", width=width, height=900,
                   deviceScaleFactor=1, mobile=False)
        await page("Page.navigate", url=url)
        await asyncio.wait_for(loaded.wait(), 60)
        await asyncio.sleep(0.2)  # let late console messages arrive (not a stand-in for work)
        res = await page("Runtime.evaluate", expression=expression, returnByValue=True,
                         awaitPromise=True)
        run.value = res["result"].get("value")
        shot = await page("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        run.screenshot = base64.b64decode(shot["data"])
        pump.cancel()
    return run


def open_page(target: Path | str, expression: str = "null", *, width: int = 1280,
              timeout_s: float = 120.0) -> PageRun:
    """Open ``target`` (a file, or a URL) in a fresh headless Chromium, evaluate
    ``expression`` after the load event (awaited if it is a promise), take a full-page
    screenshot. The browser makes no request of its own (no background networking)."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("no chromium on PATH")
    # ignore_cleanup_errors: Chromium's helper processes outlive the browser by a moment and
    # may still write into the profile while it is removed ("Directory not empty", seen
    # once in CI); what is left of a temporary profile is harmless
    with tempfile.TemporaryDirectory(prefix="psched-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "--no-first-run",
             "--disable-quic", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            ws_url = None
            for line in proc.stderr:
                m = re.search(r"DevTools listening on (ws://\S+)", line)
                if m:
                    ws_url = m.group(1)
                    break
            if ws_url is None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            drain = threading.Thread(target=proc.stderr.read, daemon=True)  # never block it
            drain.start()
            return asyncio.run(asyncio.wait_for(
                _drive(ws_url, target if isinstance(target, str) else target.resolve().as_uri(),
                       expression, width), timeout_s))
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
