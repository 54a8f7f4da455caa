"""`gymwatch serve RUN [--port P] [--host H]`: the live screen in a web browser (textual-serve).

For a run on a cluster: start it on the login node, forward the port (`ssh -L 8000:127.0.0.1:8000
login-node`) and open http://127.0.0.1:8000. Each browser tab gets a screen of its own (a
`gymwatch attach` process, read-only: closing it never stops the run).

Loopback only by default: the page has no login, and whoever can reach it sees the run's logs and
can drive the screen. Binding anything else prints a warning first.

Two changes to textual-serve's page: the links in it follow the address the browser used (behind
an SSH tunnel or on 0.0.0.0 the server's own address is not the one the browser reaches), and its
font comes from textual-serve's own files instead of a font CDN a closed network cannot reach
(the page waits for a stylesheet link before it draws).

A tab's screen ends soon after its tab goes away, in any phase of its start, and when serve stops
(`TabScreen`; textual-serve only sent it a `quit` and read its output, which left a screen still
starting running for ever). A tab that goes silent (a closed laptop lid) is found by its
unanswered pings. What serve prints: its start message with addresses a person can open, and
errors; not a line per request.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Optional

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
SCREEN_DRIVER = "gymwatch.tui.webdriver:ServedDriver"
HEARTBEAT = 5.0      # seconds a tab may stay quiet before it is pinged; unanswered for half that: closed
STOP_GRACE = 3.0     # a screen told to leave ends itself within 2 s (tui/webdriver.py); then SIGTERM
KILL_GRACE = 2.0     # then SIGKILL
SHUTDOWN_GRACE = 5.0  # serve stopping: how long a tab's handler may take once its screen has ended
EVERY_INTERFACE = ("0.0.0.0", "::", "")
_FONT_LINK = re.compile(r'<link\s+rel="stylesheet"\s+href="https://fonts\.googleapis\.com[^"]*"\s*/>', re.S)
_LOCAL_FONT = """<style>
      @font-face { font-family: "Roboto Mono"; font-style: normal;
                   src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic;
                   src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf"); }
    </style>"""


def is_loopback(host: str) -> bool:
    """True when `host` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback
                       for info in socket.getaddrinfo(host, None))
        except (OSError, ValueError):
            return False


def exposure_warning(host: str, port: int) -> str:
    """What to say before listening beyond loopback ('' on loopback)."""
    if is_loopback(host):
        return ""
    where = "every interface" if host in EVERY_INTERFACE else host
    return (f"gymwatch serve: WARNING: listening on {where}, port {port}, without a login: anyone who "
            f"can reach it sees this run's logs and can drive the screen. Prefer the default "
            f"({DEFAULT_HOST}) and an SSH tunnel: ssh -L {port}:127.0.0.1:{port} <this host>")


def open_addresses(host: str, port: int) -> list[str]:
    """The URLs a person can open to reach a server listening on `host`: on every interface, this
    host's name and its loopback (http://0.0.0.0 reaches nothing from another machine)."""
    if host in EVERY_INTERFACE:
        loopback = "[::1]" if host == "::" else "127.0.0.1"
        return [f"http://{socket.gethostname()}:{port}", f"http://{loopback}:{port}"]
    return [f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"]


def attach_argv(args: argparse.Namespace) -> list[str]:
    """What serve runs for each browser tab: a read-only `gymwatch attach` (no shell between: a
    signal to it reaches the screen)."""
    where = str(Path(args.path).resolve()) if os.path.lexists(args.path) else args.path     # (a gym job id)
    cmd = [sys.executable, "-m", "gymwatch", "attach", where, "--on-quit", "leave"]
    if getattr(args, "logs", None):
        cmd += ["--logs", str(Path(args.logs).resolve())]
    if getattr(args, "poll", False):
        cmd.append("--poll")
    if getattr(args, "head", None):
        cmd += ["--head", args.head]
    if getattr(args, "no_notify", False):
        cmd.append("--no-notify")
    if getattr(args, "no_slurm", False):
        cmd.append("--no-slurm")
    if getattr(args, "ray", None):
        cmd += ["--ray", args.ray]
    return cmd


def attach_command(args: argparse.Namespace) -> str:
    """The same as one shell-quoted line (textual-serve names its command by it)."""
    return shlex.join(attach_argv(args))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _ended(process: asyncio.subprocess.Process, within: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), within)
        return True
    except asyncio.TimeoutError:
        return False


def tab_screen_class():
    """`TabScreen`, made on first use: textual-serve is imported only by `serve`."""
    from textual_serve.app_service import AppService

    class TabScreen(AppService):
        """One tab's screen: `gymwatch attach` in a session of its own (its group is its own and
        everything it starts), with ServedDriver, which leaves when its input ends or it is told to.
        `stop()` asks it to leave, closes its input, then SIGTERMs and SIGKILLs its group until it
        has ended, and reaps it; its output is read to the end, so it never waits on a full pipe."""

        def __init__(self, argv: list[str], **kwargs) -> None:
            super().__init__(shlex.join(argv), **kwargs)
            self.argv = argv
            self._ending: Optional[asyncio.Future] = None

        def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
            env = super()._build_environment(width=width, height=height)
            env["TEXTUAL_DRIVER"] = SCREEN_DRIVER
            return env

        async def _open_app_process(self, width: int = 80, height: int = 24):
            self._process = process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self._build_environment(width=width, height=height),
                start_new_session=True)
            self._stdin = process.stdin
            return process

        async def on_data(self, payload: bytes) -> None:
            try:
                await self.remote_write_bytes(payload)
            except (ConnectionError, RuntimeError):
                pass          # the tab is gone: the output is still read, for the screen to end

        async def run(self) -> None:
            await super().run()
            await self.remote_close()     # the screen ended without saying so (killed): close its tab

        async def stop(self) -> None:
            """End the screen (once, however many callers); returns when it has been reaped."""
            if self._ending is None:
                self._ending = asyncio.ensure_future(self._end())
            await asyncio.shield(self._ending)

        async def _end(self) -> None:
            process = self._process
            if process is None:
                return
            await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
            if process.returncode is None:
                try:       # not awaited: a screen not reading its input yet must not hold this up
                    self.stdin.write(self.encode_packet(b"M", b'{"type": "quit"}'))
                    self.stdin.close()        # its input ends: that alone makes it leave
                except (ConnectionError, RuntimeError):
                    pass
                if not await _ended(process, STOP_GRACE):
                    _signal_group(process.pid, signal.SIGTERM)
                    if not await _ended(process, KILL_GRACE):
                        _signal_group(process.pid, signal.SIGKILL)
                        await process.wait()
            _signal_group(process.pid, signal.SIGTERM)   # anything it started and left behind
            task, self._task = self._task, None
            if task is not None:
                try:
                    await asyncio.wait_for(task, KILL_GRACE)   # its last output (a tab gone silent: dropped)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    pass

    return TabScreen


def make_server(args: argparse.Namespace, public_url: Optional[str] = None):
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server, to_int

    TabScreen = tab_screen_class()

    class GymServer(Server):
        def __init__(self, *a, fixed_url: bool = False, **kw) -> None:
            super().__init__(*a, **kw)
            self.fixed_url = fixed_url
            self.tabs: dict = {}         # each open tab's websocket -> its TabScreen

        async def _make_app(self):
            app = await super()._make_app()
            source = (Path(self.templates_path) / "app_index.html").read_text(encoding="utf-8")
            page = _FONT_LINK.sub(_LOCAL_FONT, source)
            aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": page}))
            return app

        async def handle_index(self, request):
            if not self.fixed_url:     # the address the browser used: a tunnel's, a hostname's
                self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def handle_websocket(self, request):
            """textual-serve's, with a TabScreen for the tab, pings that find a silent tab, and the
            tab known to serve until its screen has ended."""
            websocket = web.WebSocketResponse(heartbeat=HEARTBEAT)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            await websocket.prepare(request)
            screen = TabScreen(attach_argv(args), write_bytes=websocket.send_bytes,
                               write_str=websocket.send_str, close=websocket.close,
                               download_manager=self.download_manager, debug=self.debug)
            self.tabs[websocket] = screen
            try:
                await screen.start(width, height)
                await self._process_messages(websocket, screen)
            except (asyncio.CancelledError, ConnectionError):
                pass
            finally:
                await screen.stop()
                self.tabs.pop(websocket, None)
                await websocket.close()
            return websocket

        async def on_shutdown(self, app) -> None:
            """serve stopping: every tab's screen ended and reaped, every tab closed."""
            await asyncio.gather(*(screen.stop() for screen in list(self.tabs.values())))
            await asyncio.gather(*(ws.close() for ws in list(self.tabs)), return_exceptions=True)

        async def on_startup(self, app) -> None:
            self.console.print(f"gymwatch serve: the live screen of {args.path} on "
                               f"{' and '.join(open_addresses(self.host, self.port))}  "
                               f"(Ctrl+C stops serving; the run goes on)",
                               markup=False, highlight=False, soft_wrap=True)

        def serve(self, debug: bool = False) -> None:
            """textual-serve's, without a log line per request, and SIGHUP (the terminal serve
            runs in closing) stopping it as SIGINT and SIGTERM do."""
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                        print=None, access_log=None, shutdown_timeout=SHUTDOWN_GRACE)

    name = Path(args.path).resolve().name
    return GymServer(attach_command(args), host=args.host, port=args.port, title=f"gymwatch {name}",
                     public_url=public_url, fixed_url=public_url is not None)


def serve(args: argparse.Namespace) -> int:
    from .core.target import resolve

    path = Path(args.path)
    if not path.is_dir():       # a missing path or a non-run file: exit 3 (each tab runs attach on it)
        resolve(args.path, getattr(args, "logs", None))
    warning = exposure_warning(args.host, args.port)
    if warning:
        print(warning, file=sys.stderr)
    make_server(args, getattr(args, "public_url", None)).serve()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the live screen of a run in a web browser (for a cluster login node)",
                       description="Serve the live screen over HTTP (textual-serve). Loopback only by "
                                   "default; forward the port with ssh -L to watch from a laptop. Each "
                                   "browser tab gets a read-only screen of its own, which ends when the tab "
                                   "closes or stops answering, and when serve stops (Ctrl+C, SIGTERM).")
    p.add_argument("path", help="a run dir, or a submission (as for attach)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}; anything else is reachable "
                        "from other machines, without a login: a warning is printed)")
    p.add_argument("--public-url", help="the URL browsers reach this server at, when a proxy rewrites it "
                                        "(default: the address each browser used)")
    p.add_argument("--logs", help="per-server log dir when not <run>/logs")
    p.add_argument("--poll", action="store_true", help="poll files instead of inotify (network filesystems)")
    p.add_argument("--head", help="Gym head server URL to probe")
    p.add_argument("--no-notify", action="store_true", help="no bell or desktop notification on stage changes")
    p.add_argument("--no-slurm", action="store_true",
                   help="a submission: do not ask Slurm about its jobs, read their states from their files alone")
    p.add_argument("--ray", metavar="URL", type=_ray_url,
                   help="the Ray dashboard of a run whose services span nodes (e.g. http://HEAD:8265), asked by "
                        "each tab's screen as by attach --ray")
    p.set_defaults(func=serve)


def _ray_url(text: str) -> str:
    from .core.cluster.ray import url_option  # (the Ray reader only when the option is given)

    return url_option(text)
