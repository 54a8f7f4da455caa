"""Optional probes of Gym's head server (`--head URL`): which servers answer HTTP.

Loopback only, short timeouts, plain urllib (run in a thread worker). Only
`/server_instances` and each server's `GET /` are ever requested; the head's
`/global_config_dict_yaml` holds API keys and is never touched.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from dataclasses import dataclass, field
from urllib.parse import urlparse

from ..core import procs

TIMEOUT = 1.5


class HeadError(Exception):
    pass


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _get(url: str) -> tuple[int, bytes]:
    if not is_loopback(url):
        raise HeadError(f"{url}: not a loopback address; gymwatch only probes 127.0.0.1/localhost")
    import urllib.error  # here, not at the top: part of the screen's start, for runs watched with --head only
    import urllib.request

    req = urllib.request.Request(url, headers={"User-Agent": "gymwatch"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never via a proxy
    try:
        with opener.open(req, timeout=TIMEOUT) as resp:
            return resp.status, resp.read(1 << 20)
    except urllib.error.HTTPError as exc:   # any HTTP answer means the server is up
        return exc.code, b""


def server_instances(head: str) -> list[dict]:
    status, data = _get(head.rstrip("/") + "/server_instances")
    if status != 200:
        raise HeadError(f"head server answered HTTP {status}")
    items = json.loads(data.decode("utf-8", "replace"))
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


@dataclass
class Probe:
    instances: list[dict] = field(default_factory=list)
    answers: dict[str, bool] = field(default_factory=dict)   # server -> answered GET / at all
    detail: dict[str, str] = field(default_factory=dict)     # server -> "HTTP 200" / "refused" / ...
    error: str = ""
    at: float = 0.0            # when it was asked (the screen's clock): what a server became since, it cannot say


def probe(head: str, run_id: str = "", at: float = 0.0) -> Probe:
    """Ask the head server for its servers, then `GET /` each (loopback only). `run_id`: the
    run gymwatch launched; a head whose servers all run elsewhere is another run's (a stale run
    still holding the port) and says nothing about this one. `at`: the time it is asked."""
    out = Probe(at=at)
    try:
        out.instances = server_instances(head)
    except (HeadError, OSError, ValueError) as exc:
        out.error = f"head server: {_why(exc)}"
        return out
    if out.instances and all(procs.runs_elsewhere(i.get("pid"), run_id) for i in out.instances):
        out.error = f"the head server at {head} belongs to another run"
        out.instances = []
        return out
    for item in out.instances:
        name = str(item.get("process_name") or item.get("name") or "?")
        url = item.get("url") or (f"http://{item.get('host')}:{item.get('port')}" if item.get("port") else "")
        if not url:
            out.detail[name] = "no url"
        elif not is_loopback(url):
            out.detail[name] = "not loopback: not probed"
        else:
            try:
                out.detail[name] = f"GET / → HTTP {_get(url.rstrip('/') + '/')[0]}"
                out.answers[name] = True
            except (HeadError, OSError) as exc:
                out.detail[name] = f"GET / → {_why(exc)}"
                out.answers[name] = False
    return out


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(reason, ConnectionRefusedError):
        return "refused"
    return str(reason)[:80]
