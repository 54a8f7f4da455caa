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
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import shlex
import socket
import sys
from pathlib import Path
from typing import Optional

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
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
    where = "every interface" if host in ("0.0.0.0", "::", "") else host
    return (f"gymwatch serve: WARNING: listening on {where}, port {port}, without a login: anyone who "
            f"can reach it sees this run's logs and can drive the screen. Prefer the default "
            f"({DEFAULT_HOST}) and an SSH tunnel: ssh -L {port}:127.0.0.1:{port} <this host>")


def attach_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs for each browser tab: a read-only `gymwatch attach`."""
    cmd = [sys.executable, "-m", "gymwatch", "attach", str(Path(args.path).resolve()), "--on-quit", "leave"]
    if getattr(args, "logs", None):
        cmd += ["--logs", str(Path(args.logs).resolve())]
    if getattr(args, "poll", False):
        cmd.append("--poll")
    if getattr(args, "head", None):
        cmd += ["--head", args.head]
    if getattr(args, "no_notify", False):
        cmd.append("--no-notify")
    return " ".join(shlex.quote(c) for c in cmd)


def make_server(args: argparse.Namespace, public_url: Optional[str] = None):
    import aiohttp_jinja2
    import jinja2
    from textual_serve.server import Server

    class GymServer(Server):
        def __init__(self, *a, fixed_url: bool = False, **kw) -> None:
            super().__init__(*a, **kw)
            self.fixed_url = fixed_url

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

        async def on_startup(self, app) -> None:
            self.console.print(f"gymwatch serve: the live screen of {args.path} on "
                               f"http://{self.host}:{self.port}  (Ctrl+C stops serving; the run goes on)",
                               markup=False, highlight=False)

    name = Path(args.path).resolve().name
    return GymServer(attach_command(args), host=args.host, port=args.port, title=f"gymwatch {name}",
                     public_url=public_url, fixed_url=public_url is not None)


def serve(args: argparse.Namespace) -> int:
    from .core.layout import discover

    path = Path(args.path)
    if not path.is_dir():
        discover(args.path, getattr(args, "logs", None))     # a missing path or a non-run file: exit 3
    warning = exposure_warning(args.host, args.port)
    if warning:
        print(warning, file=sys.stderr)
    make_server(args, getattr(args, "public_url", None)).serve()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the live screen of a run in a web browser (for a cluster login node)",
                       description="Serve the live screen over HTTP (textual-serve). Loopback only by "
                                   "default; forward the port with ssh -L to watch from a laptop.")
    p.add_argument("path", help="a run dir (as for attach)")
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
    p.set_defaults(func=serve)
