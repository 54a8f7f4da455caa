"""The Ray cluster as a source of run facts (`--ray URL`): its dashboard's answers through the
Reducer front (`ray_answer()`), kept in `RunState.ray`, and the servers they mark: a service step
or model server on a node Ray reports dead, a model server whose Ray actor died
(core/cluster/raymarks.py, core/reducer/raycluster.py); the feed that asks (core/rayfeed.py).
Answers are the recorded Ray 2.60 ones (tests/fixtures/ray-2.60-state), changed where a test says."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path

from gymwatch.core.cluster import ray
from gymwatch.core.cluster.ray import RayActor, RayNode, RayPlacementGroup, RayState
from gymwatch.core.cluster.raymarks import actor_owner, expand_nodelist, host_of, nodes_at
from gymwatch.core.model import FAILED, K_MODEL, READY, RunState
from gymwatch.core.rayfeed import RayFeed
from gymwatch.core.reducer import Reducer
from gymwatch.core.verdict import verdict
from submissions import grown, squeue_at
from test_reducer_jobs import reducer

STATE = Path(__file__).parent / "fixtures" / "ray-2.60-state"
ENDPOINTS = {"/api/v0/nodes": "nodes", "/api/v0/actors": "actors", "/api/v0/placement_groups": "placement_groups"}
URL = "http://head:8265"
ASKED = datetime(2026, 12, 6, 6, 32, 40)
HEARTBEATS = "Unexpected termination: health check failed due to missing too many heartbeats"


def answers(case: str, worker: dict | None = None) -> dict[str, bytes]:
    """The recorded answers; `worker`: fields of the worker node's row changed (the recording's two
    nodes share one machine's IP: a real cluster's have one each)."""
    out = {path: (STATE / case / f"{name}.json").read_bytes() for path, name in ENDPOINTS.items()}
    if worker:
        nodes = json.loads(out["/api/v0/nodes"])
        for row in nodes["data"]["result"]["result"]:
            if not row["is_head_node"]:
                row.update(worker)
        out["/api/v0/nodes"] = json.dumps(nodes).encode()
    return out


def recorded(case: str, worker: dict | None = None, url: str = URL) -> RayState:
    canned = answers(case, worker)
    return ray.read(url, opener=lambda u, _t: canned[u.split("?")[0][len(url):]])


# --- matching -------------------------------------------------------------------------------------

def test_slurm_s_node_list_in_names():
    assert expand_nodelist("gpu-[01-03,07],cpu1") == ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "cpu1"]
    assert expand_nodelist("vm") == ["vm"] and expand_nodelist("") == []
    assert expand_nodelist("n[8-10]-ib") == ["n8-ib", "n9-ib", "n10-ib"]


def test_the_host_a_server_s_url_names():
    assert host_of("http://GPU-02.cluster:8000/v1/models") == "gpu-02.cluster"
    assert host_of("http://0.0.0.0:29861") == "" and host_of("http://localhost:1/x") == ""
    assert host_of("127.0.0.1") == "" and host_of(None) == "" and host_of("gpu-03") == "gpu-03"


def test_a_node_matched_by_hostname_or_ip_case_and_domain_aside():
    state = RayState(url=URL, nodes=(RayNode("aa", "10.0.0.1", "10.0.0.1", "DEAD"),
                                     RayNode("bb", "10.0.0.2", "GPU-02.cluster", "ALIVE")))
    names = {"10.0.0.1": ["gpu-01.cluster.example"]}
    assert [n.node_id for n in nodes_at(state, "gpu-01", names)] == ["aa"]          # its resolved name, short
    assert [n.node_id for n in nodes_at(state, "GPU-01.cluster.example", names)] == ["aa"]
    assert [n.node_id for n in nodes_at(state, "10.0.0.1", {})] == ["aa"]          # its IP
    assert [n.node_id for n in nodes_at(state, "gpu-02", {})] == ["bb"]            # Ray's --node-name
    assert nodes_at(state, "gpu-01", {}) == [] and nodes_at(state, "10.0.0.10", names) == []


def test_an_actor_belongs_to_the_model_server_its_name_or_placement_group_names():
    """Gym's local vLLM model server: placement groups `<server>_dp_rank_<n>`, unnamed actors in them."""
    state = RayState(url=URL, placement_groups=(RayPlacementGroup("pg0", "policy_model_dp_rank_0", "CREATED"),
                                                RayPlacementGroup("pg1", "judge_dp_rank_0", "CREATED")))
    in_pg = RayActor("a1", "LocalVLLMModelActor", "", "DEAD", "n1", placement_group_id="pg0")
    named = RayActor("a2", "ModelServer", "Judge", "DEAD", "n1")
    stranger = RayActor("a3", "RayWorkerWrapper", "", "DEAD", "n1", placement_group_id="other")
    servers = ["policy", "policy_model", "judge"]
    assert actor_owner(in_pg, state, servers) == "policy_model"       # the longest name that fits
    assert actor_owner(named, state, servers) == "judge"
    assert actor_owner(stranger, state, servers) is None


# --- marking, through the Reducer front ---------------------------------------------------------

def test_a_service_step_on_a_node_ray_reports_dead_is_failed_with_ray_s_answer(tmp_path):
    """completed at 20 s: job 101 running on vm, its service `policy` healthy; then Ray says vm's
    node (192.0.2.3, which resolves to vm.cluster) is dead."""
    r = reducer(grown("completed", 20.0, tmp_path), squeue_at("completed", 20.0))
    assert r.state.servers["policy"].state == READY
    r.ray_answer(recorded("dead_node", {"node_ip": "192.0.2.3", "node_name": "192.0.2.3"}), ASKED,
                 {"192.0.2.3": ["VM.cluster"]})
    r.settle()
    s = r.state.servers["policy"]
    reason = f"its node VM.cluster (192.0.2.3) is dead in Ray: {HEARTBEATS}"
    assert (s.state, s.failure_reason, s.ray) == (FAILED, reason, reason)
    assert s.failure.file == f"{URL}/api/v0/nodes" and s.failure.line == 2
    assert s.failure.text == f"node 192.0.2.3 DEAD: {HEARTBEATS}" and s.failure.note == "Ray's answer at 06:32:40"
    assert r.state.ray is not None and r.state.ray_asked_at == ASKED
    v = verdict(r.state)
    assert "policy" in v.reason and s.failure in [v.evidence, *v.related]
    # settled again: the same mark, its time kept; the node back: no mark left behind
    since = s.state_since
    r.settle(now=99.0)
    assert (s.state, s.state_since) == (FAILED, since)
    r.ray_answer(recorded("alive", {"node_ip": "192.0.2.3"}), ASKED, {"192.0.2.3": ["vm"]})
    r.settle()
    assert (s.state, s.ray, s.failure) == (READY, "", None) and "policy" in r.take_changes().servers


def test_a_node_ray_knows_by_its_node_name_needs_no_lookup(tmp_path):
    r = reducer(grown("completed", 20.0, tmp_path), squeue_at("completed", 20.0))
    r.ray_answer(recorded("dead_node", {"node_ip": "192.0.2.3", "node_name": "vm"}), ASKED)
    r.settle()
    assert r.state.servers["policy"].failure_reason == f"its node vm (192.0.2.3) is dead in Ray: {HEARTBEATS}"


def test_a_node_alive_beside_its_dead_entry_or_unknown_to_ray_marks_nothing(tmp_path):
    r = reducer(grown("completed", 20.0, tmp_path), squeue_at("completed", 20.0))
    r.ray_answer(recorded("dead_node"), ASKED, {"192.0.2.2": ["vm"]})      # the recording: one IP, one alive
    r.settle()
    assert r.state.servers["policy"].state == READY
    r.ray_answer(recorded("dead_node", {"node_ip": "192.0.2.3"}), ASKED, {})   # 192.0.2.3 is not known as vm
    r.settle()
    assert r.state.servers["policy"].state == READY
    r.ray_answer(RayState(url=URL, error="cannot reach the Ray dashboard at http://head:8265: Connection refused"),
                 ASKED)
    r.settle()
    assert r.state.servers["policy"].state == READY and r.state.ray.error


def test_a_model_server_whose_actor_died_says_so_and_on_a_dead_node_names_it():
    r = Reducer(RunState(root="/run"))
    for name in ("policy_model", "judge_model"):
        s = r.server(name)
        s.kind, s.state = K_MODEL, READY
    state = recorded("dead_node", {"node_ip": "192.0.2.3", "node_name": "gpu-02"})
    judge = RayActor("j1", "LocalVLLMModelActor", "", "DEAD", state.nodes[0].node_id, placement_group_id="pgj",
                     death="The actor died unexpectedly before finishing this task.")
    state = RayState(url=state.url, nodes=state.nodes, actors=(*state.actors, judge),
                     placement_groups=(*state.placement_groups,
                                       RayPlacementGroup("pgj", "judge_model_dp_rank_0", "CREATED")))
    r.ray_answer(state, ASKED)
    r.settle()
    policy, judge_s = r.state.servers["policy_model"], r.state.servers["judge_model"]
    assert policy.state == FAILED and policy.failure_reason == (
        f"its node gpu-02 (192.0.2.3) is dead in Ray: {HEARTBEATS}")
    assert judge_s.state == FAILED and judge_s.failure_reason == (
        "its Ray actor LocalVLLMModelActor died: The actor died unexpectedly before finishing this task.")
    assert judge_s.failure.file == f"{URL}/api/v0/actors" and judge_s.failure.line == 4


def test_a_server_that_had_exited_is_not_marked():
    r = Reducer(RunState(root="/run"))
    s = r.server("policy_model")
    s.kind, s.state = K_MODEL, "exited"
    r.ray_answer(recorded("dead_node", {"node_ip": "192.0.2.3"}), ASKED)
    r.settle()
    assert (s.state, s.ray) == ("exited", "")


# --- the feed -------------------------------------------------------------------------------------

def test_the_feed_asks_once_for_a_report_and_in_the_background_for_a_screen():
    calls, release = [], threading.Event()

    def reader(url):
        calls.append(url)
        release.wait(5)
        return RayState(url=url, nodes=(RayNode("aa", "10.0.0.1", "10.0.0.1", "DEAD"),))

    release.set()
    once = RayFeed(URL, interval=None, reader=reader, resolve=lambda ip: ["gpu-01"], now=lambda: ASKED)
    a = once.answer()
    assert a is not None and a.number == 1 and a.names == {"10.0.0.1": ["gpu-01"]} and a.asked_at == ASKED
    assert once.answer() is a and len(calls) == 1
    release.clear()
    t = [0.0]
    live = RayFeed(URL, interval=10.0, reader=reader, resolve=lambda ip: [], clock=lambda: t[0])
    assert live.answer() is None            # asked in the background: the poll does not wait
    release.set()
    for _ in range(200):
        if live.answer() is not None:
            break
        threading.Event().wait(0.01)
    assert live.answer().number == 1 and len(calls) == 2
    t[0] = 10.0
    live.answer()
    for _ in range(200):
        if live.answer().number == 2:
            break
        threading.Event().wait(0.01)
    assert live.answer().number == 2
