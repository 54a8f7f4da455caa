"""The Ray dashboard's state API read with plain HTTP GETs (gymwatch/core/cluster/ray.py): the answers a
real Ray 2.60 gave (tests/fixtures/ray-2.60-state, scripts/record_ray_state.py), served by a fake
HTTP server on loopback, and the ways a dashboard can fail to answer."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from gymwatch.core.cluster import ray
from gymwatch.core.cluster.ray import RayNode, base_url, read, summary

STATE = Path(__file__).parent / "fixtures" / "ray-2.60-state"
ENDPOINTS = {"/api/v0/nodes": "nodes", "/api/v0/actors": "actors", "/api/v0/placement_groups": "placement_groups"}


class Dashboard(http.server.BaseHTTPRequestHandler):
    answers: dict[str, bytes] = {}
    status: int = 200
    delay: float = 0.0
    seen: list[str] = []

    def do_GET(self):   # noqa: N802
        type(self).seen.append(self.path)
        time.sleep(self.delay)
        body = self.answers.get(self.path.split("?")[0], b"")
        with contextlib.suppress(OSError):      # a client that gave up (the timeout test) is gone
            self.send_response(self.status if body else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def dashboard(answers: dict[str, bytes], status: int = 200, delay: float = 0.0):
    handler = type("Handler", (Dashboard,), dict(answers=answers, status=status, delay=delay, seen=[]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def recorded(case: str) -> dict[str, bytes]:
    return {path: (STATE / case / f"{name}.json").read_bytes() for path, name in ENDPOINTS.items()}


def test_a_live_cluster_read_over_http(tmp_path):
    with dashboard(recorded("alive")) as (url, handler):
        state = read(url)
    assert state.error == "" and state.notes == ()
    assert sorted(handler.seen) == sorted(f"{p}?limit=10000&detail=1" for p in ENDPOINTS)
    assert len(state.nodes) == 2 and all(n.alive and n.ip for n in state.nodes)
    assert sum(n.is_head for n in state.nodes) == 1
    by_class = sorted((a.class_name, a.name, a.state) for a in state.actors)
    assert by_class == [("ModelServer", "policy_model", "ALIVE"), ("RayWorkerWrapper", "", "ALIVE"),
                        ("RayWorkerWrapper", "", "ALIVE")]
    [pg] = state.placement_groups
    assert (pg.name, pg.state) == ("policy_tp", "CREATED") and len(set(pg.bundle_nodes)) == 2
    assert {a.placement_group_id for a in state.actors if a.class_name == "RayWorkerWrapper"} == {pg.placement_group_id}
    assert state.dead_nodes == () and summary(state)[0].endswith(
        "2 node(s), 0 dead; 3 actor(s), 1 placement group(s)")


def test_a_dead_node_its_actors_and_the_placement_group_it_held():
    with dashboard(recorded("dead_node")) as (url, _):
        state = read(url + "/")
    [dead] = state.dead_nodes
    assert not dead.is_head and dead.message == "Unexpected termination: health check failed due to missing too many heartbeats"
    on_it = state.actors_on(dead.node_id)
    assert {a.state for a in on_it} == {"DEAD"} and {a.name for a in on_it} == {"policy_model", ""}
    assert all(a.death.startswith("The actor died because its node has died.") for a in on_it)
    [pg] = state.placement_groups
    assert pg.state == "RESCHEDULING" and pg.bundle_nodes.count("") == 1
    text = summary(state)
    assert text[0].endswith("2 node(s), 1 dead; 3 actor(s), 1 placement group(s)")
    assert any(line.startswith(f"  node {dead.name} ({dead.node_id[:12]}) DEAD: Unexpected termination") for line in text)
    assert "  actor policy_model (ModelServer) DEAD on node " in "\n".join(text)
    assert "  placement group policy_tp RESCHEDULING: 1 of 2 bundle(s) not placed" in text


@pytest.mark.parametrize("given, base", [("http://head:8265", "http://head:8265"), ("head:8265/", "http://head:8265"),
                                         ("https://ray.example.org/dash/", "https://ray.example.org/dash")])
def test_the_dashboard_url(given, base):
    assert base_url(given) == base


@pytest.mark.parametrize("bad", ["ftp://head:8265", "http://", "http://head:port", ""])
def test_a_url_that_is_no_dashboard_url(bad):
    with pytest.raises(ValueError, match="not a Ray dashboard URL"):
        base_url(bad)
    assert read(bad).error.startswith("not a Ray dashboard URL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dashboard_that_is_not_there_or_not_ray_or_slow_is_one_line():
    port = free_port()
    assert read(f"http://127.0.0.1:{port}").error == (
        f"cannot reach the Ray dashboard at http://127.0.0.1:{port}: Connection refused")
    with dashboard({}) as (url, _):
        assert read(url).error == f"the Ray dashboard at {url} answered HTTP 404 to /api/v0/nodes " \
                                  "(a Ray older than 2.0 has no state API)"
    with dashboard({p: b"<html>hello</html>" for p in ENDPOINTS}) as (url, _):
        assert read(url).error == f"{url}/api/v0/nodes did not answer JSON: is it Ray's dashboard?"
    with dashboard({p: b'{"result": false, "msg": "Failed to query: GCS unavailable", "data": {}}'
                    for p in ENDPOINTS}) as (url, _):
        assert read(url).error == f"{url}/api/v0/nodes: Ray said: Failed to query: GCS unavailable"
    with dashboard(recorded("alive"), delay=2.0) as (url, _):
        t0 = time.monotonic()
        state = read(url, timeout=0.3)
        assert state.error == f"cannot reach the Ray dashboard at {url}: no answer in time"
        assert time.monotonic() - t0 < 1.5        # the first timeout ends the read


def test_an_answer_cut_by_ray_s_limit_says_so():
    answers = recorded("alive")
    nodes = json.loads(answers["/api/v0/nodes"])
    nodes["data"]["result"].update(total=12000, num_after_truncation=2,
                                   partial_failure_warning="Some nodes did not answer in time.\nmore")
    answers["/api/v0/nodes"] = json.dumps(nodes).encode()
    with dashboard(answers) as (url, _):
        state = read(url)
    assert state.notes == ("nodes: 2 of 12000 shown (Ray's limit)", "nodes: Some nodes did not answer in time.")
    assert summary(state)[-1] == "  note: nodes: Some nodes did not answer in time."


def test_rows_of_unexpected_shapes_are_read_tolerantly():
    rows, notes = ray.parse({"result": True, "data": {"result": {"result": [
        {"node_id": 7, "state": None}, "junk", {"actor_id": "a", "death_cause": "x", "pid": 0}]}}})
    assert len(rows) == 2 and notes == []
    assert ray._node(rows[0]) == RayNode("", "", "", "")
    actor = ray._actor(rows[1])
    assert actor.pid is None and actor.death == "" and actor.class_name == ""
    assert ray.parse([1, 2], "w") == "w: not an answer of Ray's state API"


# --- `gymwatch report --ray URL`

RUN = Path(__file__).parent / "fixtures" / "gym-0.4.0-mcqa" / "run_ok"


def report(*args: str):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "gymwatch", "report", str(RUN), *args], capture_output=True,
                          text=True, timeout=120)


def test_the_report_adds_the_ray_cluster_in_every_format():
    with dashboard(recorded("dead_node")) as (url, _):
        plain, as_json, md = report(), report("--ray", url, "--format", "json"), report("--ray", url, "--format", "md")
        text = report("--ray", url)
    assert text.returncode == plain.returncode and text.stdout.startswith(plain.stdout)
    added = text.stdout[len(plain.stdout):].splitlines()
    assert added[0] == "" and added[1].startswith(f"Ray at {url}: 2 node(s), 1 dead")
    assert "  placement group policy_tp RESCHEDULING: 1 of 2 bundle(s) not placed" in added
    data = json.loads(as_json.stdout)
    assert data["verdict"] and data["ray"]["url"] == url and data["ray"]["error"] == ""
    assert sorted(n["alive"] for n in data["ray"]["nodes"]) == [False, True]
    assert list(data)[-2:] == ["trials", "ray"]
    assert "\n## Ray cluster\n\n- Ray at " in md.stdout and "- placement group policy_tp RESCHEDULING" in md.stdout


def test_the_report_says_when_the_dashboard_cannot_be_read():
    port = free_port()
    res = report("--ray", f"127.0.0.1:{port}", "--format", "json")
    assert json.loads(res.stdout)["ray"]["error"].startswith("cannot reach the Ray dashboard")
    assert res.stderr.splitlines() == [f"gymwatch: cannot reach the Ray dashboard at http://127.0.0.1:{port}: "
                                       "Connection refused"]
    bad = report("--ray", "ftp://x")
    assert bad.returncode == 64 and "not a Ray dashboard URL" in bad.stderr
