"""--head: loopback-only probes of Gym's head server, folded into the board."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gymwatch.tui import head
from tuihelpers import fixture_app, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_head(instances, seen=None) -> ThreadingHTTPServer:
    """A stand-in head server: `/server_instances` answers `instances(its port)`, all else 404."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if seen is not None:
                seen.append(self.path)
            ok = self.path == "/server_instances"
            body = json.dumps(instances(self.server.server_address[1])).encode() if ok else b"nope"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def head_server():
    seen: list[str] = []
    dead = free_port()
    srv = serve_head(lambda port: [
        {"name": "mcqa", "process_name": "mcqa", "host": "127.0.0.1", "port": port,
         "url": f"http://127.0.0.1:{port}", "server_type": "resources_servers"},
        {"name": "policy_model", "process_name": "policy_model", "host": "127.0.0.1",
         "port": dead, "url": f"http://127.0.0.1:{dead}"},
        {"name": "far", "process_name": "far", "url": "http://10.1.2.3:80"},
    ], seen)
    yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    srv.shutdown()
    srv.server_close()


def test_probe_reads_instances_and_asks_each_server(head_server):
    url, seen = head_server
    p = head.probe(url)
    assert not p.error
    assert p.answers == {"mcqa": True, "policy_model": False}
    assert p.detail["mcqa"] == "GET / → HTTP 404"          # any HTTP answer means up
    assert p.detail["policy_model"] == "GET / → refused"
    assert p.detail["far"].startswith("not loopback")
    assert "/global_config_dict_yaml" not in seen and set(seen) == {"/server_instances", "/"}


def test_non_loopback_head_is_refused():
    assert not head.is_loopback("http://example.com:11000")
    assert head.is_loopback("http://localhost:11000") and head.is_loopback("http://[::1]:1")
    assert head.probe("http://192.0.2.1:11000").error.startswith("head server:")


async def test_board_shows_probe_results(head_server):
    url, _ = head_server
    app = fixture_app("startup_failed", head=url)
    async with app.run_test(size=(160, 40)) as pilot:
        assert await wait_for(pilot, lambda: "mcqa" in app.board.probe.detail)
        assert await wait_for(pilot, lambda: "HTTP 404" in app.board.get_cell("mcqa", "why").plain)
        why = app.board.get_cell("policy_model", "why").plain
        assert why.endswith(" · GET / → refused") and len(why) > len(" · GET / → refused")   # its phase first


def _head_with(pid: int) -> ThreadingHTTPServer:
    return serve_head(lambda port: [{"name": "mcqa", "process_name": "mcqa", "pid": pid,
                                     "url": f"http://127.0.0.1:{port}"}])


def test_a_head_whose_servers_run_elsewhere_is_another_runs(monkeypatch):
    """A launched run's head port may still be held by an earlier run: its servers' processes
    lack this run's marker, so what that head says is not taken as this run's servers."""
    import os
    import subprocess
    import sys
    monkeypatch.delenv("GYMWATCH_RUN_ID", raising=False)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, "GYMWATCH_RUN_ID": "run-a"})
    try:
        for pid, run_id, foreign in ((os.getpid(), "run-a", True), (child.pid, "run-a", False),
                                     (child.pid, "run-b", True), (os.getpid(), "", False)):
            srv = _head_with(pid)
            try:
                p = head.probe(f"http://127.0.0.1:{srv.server_address[1]}", run_id)
            finally:
                srv.shutdown()
                srv.server_close()
            assert ("belongs to another run" in p.error) == foreign, (pid, run_id, p.error)
            assert (p.answers == {}) == foreign
    finally:
        child.kill()
        child.wait()
