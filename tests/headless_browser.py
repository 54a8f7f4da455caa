"""A real headless browser (Debian's chromium) driven over the DevTools protocol: open a page, wait
until a condition holds in it, take a PNG screenshot. Used by tests/test_serve.py and by
scripts/make_screenshots.py for the `gymwatch serve` screenshot. Also a tab without a browser
(`Tab`: the page's websocket protocol), a relay that goes silent (`Lid`) and the processes
naming a run (`processes_naming`), for the tests of what `serve` starts and ends.

The network here is closed: chromium is started with everything that would reach out turned off
(background networking, component updates, sync, QUIC) and a fresh profile, else it hangs or
floods. `.ci/install_chromium.sh` installs it when missing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


@contextmanager
def serving(run: Path, *extra: str) -> Iterator[tuple[int, subprocess.Popen]]:
    """`gymwatch serve RUN [EXTRA...]` on a free loopback port, once it accepts connections: (port,
    process); what it prints is collected in `process.lines` (a thread reads it, so it never
    blocks on a full pipe). Stopped by its group id after."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "gymwatch", "serve", str(run), "--port", str(port), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "TEXTUAL_ANIMATIONS": "none", "COLUMNS": "80"})
    lines: list[str] = []
    proc.lines = lines          # type: ignore[attr-defined]
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    reader.join(5)
                    raise RuntimeError(f"gymwatch serve did not come up: {''.join(lines) or 'timeout'}") from None
                time.sleep(0.1)
        yield port, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        reader.join(5)


def processes_naming(text: str) -> list:
    """The live processes whose command line holds `text` (a run's unique path: every screen
    `serve` started for it, wherever they were re-parented), zombies left out."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and text in " ".join(p.info["cmdline"] or ()):
            found.append(p)
    return found


class Tab:
    """A browser tab's side of textual-serve's protocol, without a browser: the websocket the
    page opens (`/ws?width=W&height=H`), the JSON messages it sends (`resize`, `ping`, `stdin`)
    and the screen's bytes it receives."""

    def __init__(self, port: int, width: int = 133, height: int = 31) -> None:
        self.url = f"http://127.0.0.1:{port}/ws?width={width}&height={height}"
        self.size = (width, height)
        self.received = 0          # bytes of the screen so far
        self.text = ""             # the screen's output, decoded
        self._session = None
        self.ws = None

    async def open(self) -> "Tab":
        import aiohttp

        self._session = aiohttp.ClientSession()
        self.ws = await self._session.ws_connect(self.url, autoping=True)
        await self.resize(*self.size)            # what the page sends once its socket is open
        await self.send("ping", str(int(time.time() * 1000)))
        return self

    async def send(self, kind: str, data) -> None:
        await self.ws.send_str(json.dumps([kind, data]))

    async def resize(self, width: int, height: int) -> None:
        await self.send("resize", {"width": width, "height": height})

    async def read_until(self, text: str, timeout: float = 60) -> bool:
        """Take in the screen's output until `text` has been drawn (True) or the time is up."""
        import aiohttp

        deadline = time.monotonic() + timeout
        while text not in self.text:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                msg = await self.ws.receive(timeout=left)
            except asyncio.TimeoutError:
                return False
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.received += len(msg.data)
                self.text += msg.data.decode("utf-8", "replace")
            elif msg.type != aiohttp.WSMsgType.TEXT:
                return False
        return True

    async def pending_frame(self, wait: float = 0.05) -> bool:
        """Has any of the screen arrived (waiting at most `wait` seconds for it)?"""
        import aiohttp

        try:
            msg = await self.ws.receive(timeout=wait)
        except asyncio.TimeoutError:
            return self.received > 0
        if msg.type == aiohttp.WSMsgType.BINARY:
            self.received += len(msg.data)
        return self.received > 0

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._session is not None:
            await self._session.close()


class Lid:
    """A TCP relay between a tab and `serve` that can go silent, as a closed laptop lid or a
    suspended tunnel does: no FIN, no reset, nothing relayed either way any more."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.port = 0
        self.frozen = False
        self._server = None
        self._writers: list = []

    async def __aenter__(self) -> "Lid":
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        for w in self._writers:
            w.transport.abort()
        self._server.close()

    def close_lid(self) -> None:
        self.frozen = True

    async def _relay(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers += [writer, up_writer]

        async def pipe(src, dst) -> None:
            while not self.frozen:
                data = await src.read(65536)
                if not data or self.frozen:
                    break
                dst.write(data)
                await dst.drain()
            while True:              # silent: keep the socket open, read nothing, answer nothing
                await asyncio.sleep(3600)

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise RuntimeError("chromium is not installed: run `bash .ci/install_chromium.sh` (make test does)")
    return path


class Browser:
    """One chromium process with one page, for the life of a `with` block."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="gymwatch-chromium-")
        self.proc: Optional[subprocess.Popen] = None
        self._ws = None
        self._session = None
        self._id = 0

    async def __aenter__(self) -> "Browser":
        import aiohttp

        self.proc = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"chromium did not start (exit {self.proc.poll()})")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        pages: list = []
        while not pages:
            async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
                pages = [p for p in json.loads(await r.text()) if p.get("type") == "page"]
            if not pages:
                await asyncio.sleep(0.1)
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        await self.send("Page.enable")
        await self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                        deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)        # its own session: the renderers and GPU process too
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    async def send(self, method: str, **params) -> dict:
        self._id += 1
        my = self._id
        await self._ws.send_str(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads((await self._ws.receive(timeout=60)).data)
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def js(self, expression: str):
        res = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return res.get("result", {}).get("value")

    async def wait_js(self, expression: str, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.js(expression):
                return True
            await asyncio.sleep(0.2)
        return False

    async def screenshot(self) -> bytes:
        res = await self.send("Page.captureScreenshot", format="png")
        return base64.b64decode(res["data"])

    async def settled_screenshot(self, timeout: float = 30.0, quiet: float = 1.5) -> bytes:
        """A screenshot once the page has stopped changing for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        last, since = await self.screenshot(), time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(0.3)
            shot = await self.screenshot()
            if shot != last:
                last, since = shot, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows]


def colour_share(data: bytes, rgb: tuple[int, int, int], tolerance: int = 24) -> float:
    """The share of a PNG's pixels within `tolerance` of a colour."""
    width, height, rows = png_pixels(data)
    bpp = len(rows[0]) // width
    hits = 0
    for row in rows:
        for x in range(0, len(row), bpp):
            if all(abs(row[x + k] - rgb[k]) <= tolerance for k in range(3)):
                hits += 1
    return hits / (width * height)
