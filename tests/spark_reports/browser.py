"""A headless Chromium driven over the DevTools protocol, for the HTML reports' tests.

Debian's chromium-headless-shell (scripts/setup.sh installs it) started with
``--remote-debugging-port=0``; aiohttp (a floodgate dependency) speaks the
protocol's WebSocket. Enough to load a page, see its console errors and
network requests, run a script in it and move the mouse.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = next(
    (
        shutil.which(n)
        for n in ("chromium-headless-shell", "chromium", "google-chrome")
        if shutil.which(n)
    ),
    None,
)


class Page:
    def __init__(self, ws) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict] = []
        self.pending: dict[int, asyncio.Future] = {}
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)

    async def send(self, method: str, **params) -> dict:
        i = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        await self.ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, 60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def eval(self, expression: str):
        r = await self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                            awaitPromise=True)  # fmt: skip
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:60]}...: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 20.0):
        """Poll ``expression`` every 50 ms until it is truthy; its value."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            value = await self.eval(expression)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"not true within {timeout_s} s: {expression}")
            await asyncio.sleep(0.05)

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions seen so far."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:300])
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") == "error":
                out.append(json.dumps(p.get("args", []))[:300])
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", "")[:300])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]  # fmt: skip


async def open_page(url: str, check, width: int = 1300, height: int = 1000):
    """Run ``await check(page)`` on ``url`` loaded in a fresh headless Chromium."""
    import aiohttp

    profile = tempfile.mkdtemp(prefix="fg-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its renderers too: killed as one process group
    )  # fmt: skip
    try:
        port = await asyncio.wait_for(asyncio.to_thread(_devtools_port, proc), 30)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                target = next(t for t in await r.json() if t["type"] == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                for domain in ("Runtime", "Log", "Network", "Page"):
                    await page.send(f"{domain}.enable")
                await page.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                                deviceScaleFactor=1, mobile=False)  # fmt: skip
                await page.send("Page.navigate", url=url)
                await page.wait_for("document.readyState === 'complete'")
                result = await check(page)
                page.reader.cancel()
                return result
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # proc.kill() alone left renderers running
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(proc: subprocess.Popen) -> int:
    import threading

    for line in proc.stderr:
        m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if m:  # keep reading: a full pipe would stall the browser
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return int(m.group(1))
    raise RuntimeError("Chromium exited without a DevTools port")


def run(url: str | Path, check, **kwargs):
    url = url.as_uri() if isinstance(url, Path) else url
    return asyncio.run(open_page(url, check, **kwargs))
