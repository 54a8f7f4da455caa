"""Record what a real Ray dashboard's state API answers, before and after a node dies.

    /tmp/gymwatch-gymvenv-0.7.0/bin/python scripts/record_ray_state.py [--out DIR]

Run with the Python of Gym 0.7.0's venv (Gym depends on Ray; `.ci/install_gym.sh 0.7.0`). It starts
a private two-node Ray on this machine (`ray.cluster_utils.Cluster`: a head with its dashboard on
a free loopback port, and a worker node with a `worker` resource), under its own RAY_TMPDIR, and
puts on it what a model server spanning nodes has: a placement group of two bundles, one
`RayWorkerWrapper` actor in each bundle (vLLM's tensor-parallel workers), and a named actor on the
worker node. Then it GETs `/api/v0/nodes`, `/api/v0/actors` and `/api/v0/placement_groups`
(`?limit=1000&detail=1`) into OUT/alive/, removes the worker node (its raylet is killed, as when a
node is lost), waits until the head says it is DEAD and writes the same into OUT/dead_node/.
The cluster is shut down at the end (every process it started, by pid).

Lock: /tmp/realgym.lock (real Gym and Ray runs on this machine take it), unless --no-lock (the
caller holds it).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import ray
from ray.cluster_utils import Cluster
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "fixtures" / "ray-2.60-state"
ENDPOINTS = {"nodes": "/api/v0/nodes", "actors": "/api/v0/actors", "placement_groups": "/api/v0/placement_groups"}
QUERY = "?limit=1000&detail=1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def gym_lock(take: bool):
    if not take:
        yield
        return
    with open("/tmp/realgym.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.load(resp)


def record(base: str, out: Path) -> dict[str, dict]:
    out.mkdir(parents=True, exist_ok=True)
    answers = {}
    for name, path in ENDPOINTS.items():
        answers[name] = get(base + path + QUERY)
        (out / f"{name}.json").write_text(json.dumps(answers[name], indent=1, sort_keys=True) + "\n")
    return answers


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(1)


@ray.remote(num_cpus=0)
class RayWorkerWrapper:
    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=0, resources={"worker": 1})
class ModelServer:
    def ping(self) -> str:
        return "pong"


def pg_state(base: str) -> str:
    return get(base + "/api/v0/placement_groups")["data"]["result"]["result"][0]["state"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--no-lock", action="store_true", help="the caller holds /tmp/realgym.lock")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="gwrayrec-", dir="/tmp")     # Ray's socket paths must stay short
    os.environ["RAY_TMPDIR"] = tmp
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    dash = free_port()
    with gym_lock(not args.no_lock):
        cluster = Cluster(initialize_head=True, head_node_args=dict(
            num_cpus=2, include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=dash,
            gcs_server_port=free_port()))
        try:
            worker = cluster.add_node(num_cpus=2, resources={"worker": 2})
            ray.init(address=cluster.address)
            base = f"http://127.0.0.1:{dash}"
            wait_for(lambda: len(get(base + "/api/v0/nodes")["data"]["result"]["result"]) == 2, 120,
                     "both nodes in the dashboard")

            pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD", name="policy_tp")
            ray.get(pg.ready(), timeout=120)
            workers = [RayWorkerWrapper.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=i)).remote() for i in range(2)]
            ray.get([w.node.remote() for w in workers], timeout=120)
            server = ModelServer.options(name="policy_model", lifetime="detached").remote()
            ray.get(server.ping.remote(), timeout=120)
            record(base, args.out / "alive")
            dead_id = worker.node_id
            cluster.remove_node(worker, allow_graceful=False)

            def head_says_dead() -> bool:
                nodes = get(base + "/api/v0/nodes")["data"]["result"]["result"]
                return any(n["node_id"] == dead_id and n["state"] == "DEAD" for n in nodes)
            wait_for(head_says_dead, 180, "the head to call the worker node DEAD")
            # the actors die with the node; the placement group cannot be spread over one node
            wait_for(lambda: pg_state(base) != "CREATED", 60, "the placement group to be rescheduled")
            record(base, args.out / "dead_node")
            (args.out / "README.md").write_text(README.format(dead=dead_id, version=ray.__version__))
        finally:
            with contextlib.suppress(Exception):
                ray.shutdown()
            cluster.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"recorded into {args.out}")
    return 0


README = """# Ray {version}'s dashboard state API, recorded

By `scripts/record_ray_state.py` on a private two-node Ray on one machine (`ray.cluster_utils.Cluster`):
a head with the dashboard, and a worker node; a placement group `policy_tp` of two bundles
(`STRICT_SPREAD`: one on each node), a `RayWorkerWrapper` actor in each (as vLLM's tensor-parallel workers), and a named
detached actor `policy_model` (class `ModelServer`) on the worker node.

- `alive/`: `GET /api/v0/nodes`, `/api/v0/actors`, `/api/v0/placement_groups` with
  `?limit=1000&detail=1`, every node alive.
- `dead_node/`: the same after the worker node's raylet was killed (`remove_node(allow_graceful=False)`):
  node `{dead}` is DEAD, the actors on it are DEAD (`death_cause`: NODE_DIED), and the placement
  group waits to be placed again (it needs two nodes).
"""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
