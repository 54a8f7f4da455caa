"""`gymwatch report --ray URL` on a submitted run whose node Ray reports dead: the run's service step
on that node marked in every format (its reason, Ray's answer as evidence), and the Ray cluster's
own section, written from the run's state (RunState.ray). Ray's answers are the recorded Ray 2.60
ones served on loopback (tests/test_cluster_ray.py's fake dashboard); Slurm is a fake on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fakeslurm import FakeSlurm
from submissions import final_poll, grown
from test_cluster_ray import dashboard
from test_ray_marks import HEARTBEATS, answers

WHY = f"its node vm (192.0.2.3) is dead in Ray: {HEARTBEATS}"


def report(root, url: str, fake: FakeSlurm, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymwatch", "report", str(root / "mcqa"), "--ray", url, *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **fake.env})


def running_on_vm(tmp_path, monkeypatch):
    """completed at 20 s: job 101 running on node vm, its service `policy` healthy."""
    root = grown("completed", 20.0, tmp_path)
    fake = FakeSlurm(tmp_path, monkeypatch)
    job = final_poll("completed").jobs["101"]
    fake.job("101", "RUNNING", work_dir=job.work_dir, name=job.name or "gym-mcqa")
    data = fake.load()
    data["jobs"]["101"].update(elapsed="0:19", nodelist="vm")
    fake.save(data)
    return root, fake


def test_a_service_step_on_a_dead_node_in_every_format(tmp_path, monkeypatch):
    root, fake = running_on_vm(tmp_path, monkeypatch)
    with dashboard(answers("dead_node", {"node_ip": "192.0.2.3", "node_name": "vm"})) as (url, _):
        as_json = report(root, url, fake, "--format", "json")
        text = report(root, url, fake)
        md = report(root, url, fake, "--format", "md")
    data = json.loads(as_json.stdout)
    policy = next(s for s in data["servers"] if s["name"] == "policy")
    assert (policy["state"], policy["failure_reason"], policy["ray"]) == ("failed", WHY, WHY)
    assert policy["evidence"]["file"] == f"{url}/api/v0/nodes" and policy["evidence"]["line"] == 2
    assert policy["evidence"]["text"] == f"node vm (192.0.2.3) DEAD: {HEARTBEATS}"
    assert all(s["ray"] is None for s in data["servers"] if s["name"] != "policy")
    # the `ray` key as before: after the trials, the cluster's facts
    assert list(data)[-2:] == ["trials", "ray"] and data["ray"]["url"] == url and data["ray"]["error"] == ""
    assert sorted(n["alive"] for n in data["ray"]["nodes"]) == [False, True]
    assert as_json.stderr == ""
    lines = text.stdout.splitlines()
    at = lines.index(next(ln for ln in lines if ln.lstrip().startswith("policy ")))
    assert lines[at + 1].strip() == f"why: {WHY}"
    assert lines[at + 2].strip() == f"see {url}/api/v0/nodes:2  node vm (192.0.2.3) DEAD: {HEARTBEATS}"
    assert f"Ray at {url}: 2 node(s), 1 dead; 3 actor(s), 1 placement group(s)" in lines
    assert f"  node vm ({data['ray']['nodes'][1]['node_id'][:12]}) DEAD: {HEARTBEATS}" in lines
    assert "\n## Ray cluster\n\n- Ray at " in md.stdout and "- node vm (" in md.stdout
    assert "| policy | service | failed |" in md.stdout and f"`{url}/api/v0/nodes:2`" in md.stdout


def test_without_ray_the_report_has_no_ray_key_nor_marks(tmp_path, monkeypatch):
    root, fake = running_on_vm(tmp_path, monkeypatch)
    res = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(root / "mcqa"), "--format", "json"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, **fake.env})
    data = json.loads(res.stdout)
    assert "ray" not in data and next(s for s in data["servers"] if s["name"] == "policy")["state"] == "ready"
