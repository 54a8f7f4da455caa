"""Every recorded real Gym run gives the verdict, statuses and evidence its truth.json records."""

import json
import subprocess
import sys

import pytest

from conftest import CASES, CASES07, MCQA, json_report

TRUTH_VERDICT = {
    "ok": "ok", "some-never-ran": "some_never_ran", "collection-aborted": "collection_aborted",
    "startup-failed": "startup_failed", "no-agent-ran": "no_agent_ran", "incomplete": "incomplete",
    "some-failed": "some_failed",
}
EXIT = {"ok": 0, "some_never_ran": 1, "some_failed": 1, "incomplete": 1, "collection_aborted": 2,
        "startup_failed": 2, "no_agent_ran": 2}
CASE_PATHS = sorted(p for d in (CASES, CASES07) for p in d.iterdir() if (p / "truth.json").is_file())


report = json_report


@pytest.fixture(scope="module", params=CASE_PATHS, ids=lambda p: p.name)
def case(request):
    truth = json.loads((request.param / "truth.json").read_text())
    data, code = report(request.param)
    return truth, data, code


def test_verdict_and_exit_code(case):
    truth, data, code = case
    want = TRUTH_VERDICT[truth["run"]["verdict"]]
    assert data["verdict"] == want
    assert code == EXIT[want]


def test_trial_statuses_and_rows(case):
    truth, data, _ = case
    got = {(t["task_index"], t["rollout_index"]): t for t in data["trials"]}
    assert len(got) == len(truth["trials"])
    for t in truth["trials"]:
        mine = got[(t["task_index"], t["rollout_index"])]
        assert mine["status"] == t["status"], t
        if t.get("row"):
            assert mine["evidence"]["file"] == t["row"]["file"]
            assert mine["evidence"]["line"] == t["row"]["line"]
        if t["status"] == "completed":
            assert mine["reward"] == t["reward"]
        if t["status"] == "never_ran":
            assert mine["reward"] is None and mine["withheld_reward"] == t["reward"]
        if t.get("failure_class"):
            assert mine["failure_class"] == t["failure_class"]
        if t.get("failure_http_status"):
            assert mine["http_status"] == t["failure_http_status"]
        named = {(e["file"], e["line"]) for e in t.get("evidence") or []}
        if named:   # the collector line that named the failure
            where = mine["named_at"] or mine["evidence"]
            assert (where["file"], where["line"]) in named
    counts = {k: v for k, v in data["counts"].items() if v}
    assert counts == truth["run"]["trial_counts"]


def test_servers(case):
    truth, data, _ = case
    got = {s["name"]: s for s in data["servers"]}
    assert set(got) == {s["name"] for s in truth["servers"]}
    for s in truth["servers"]:
        mine = got[s["name"]]
        assert mine["became_ready"] == s["became_ready"], s["name"]
        if s["ready_evidence"]:
            assert mine["ready_evidence"]["file"] == s["ready_evidence"]["file"]
            assert mine["ready_evidence"]["line"] == s["ready_evidence"]["line"]
        if s.get("failure"):
            assert mine["state"] == "failed"
            causes = s["failure"]["cause_visible_at"]
            where = (mine["evidence"]["file"], mine["evidence"]["line"])
            if "0.7.0" in truth["gym_version"]:
                # what the server itself was doing when it failed: a line of its own output
                assert where in {(c["file"], c["line"]) for c in causes}
                assert mine["evidence"]["file"] == s["log_file"]
            else:
                assert where == (causes[0]["file"], causes[0]["line"])
        else:
            assert mine["state"] != "failed"
        if truth["run"]["servers_ready_line"]:
            assert mine["reported_ready_by_gym"] == s["reported_ready_by_gym"], s["name"]


def test_verdict_evidence_is_among_the_recorded_causes(case):
    truth, data, _ = case
    run = truth["run"]
    causes = run.get("cause_visible_at") or []
    for s in truth["servers"]:
        if s.get("failure"):
            causes += s["failure"]["cause_visible_at"]
    if not causes:
        return
    where = {(c["file"], c["line"]) for c in causes}
    ev = data["evidence"]
    assert (ev["file"], ev["line"]) in where
    if run["verdict"] == "collection-aborted":
        # the agent's /run 500 first, the model server's retries and the collector's error beside it
        assert ev["file"].endswith("_agent.log")
        related = {(e["file"], e["line"]) for e in data["related"]}
        assert any(f.endswith("policy_model.log") for f, _ in related & where)
        assert any(f.startswith("gym_eval_run.stderr") for f, _ in related & where)


def test_gym_health_beside_our_status(case):
    truth, data, _ = case
    gym = truth["run"].get("gym_rollout_health")
    if not gym:
        assert data["gym_health"] is None
        return
    totals = data["gym_health"]
    assert {k: totals[k] for k in ("healthy", "unhealthy", "unobserved")} == gym["run_verdicts"]
    got = {(t["task_index"], t["rollout_index"]): t for t in data["trials"]}
    for row in gym["rollout_verdicts"]:
        mine = got[(row["task_index"], row["rollout_index"])]["gym_health"]
        assert mine["verdict"] == row["verdict"]
        assert (mine["evidence"]["file"], mine["evidence"]["line"]) == (gym["rollout_verdicts_file"], row["line"])
    # Gym's own check never replaces the never-ran rule: without observability it calls never-ran
    # trials `unobserved`, and gymwatch says they disagree
    for t in data["trials"]:
        h = t["gym_health"]
        if t["status"] == "never_ran" and h["verdict"] != "unhealthy":
            assert h["disagrees"]
        if t["status"] == "completed" and h["verdict"] != "unhealthy":
            assert not h["disagrees"]


def test_gym_version_from_the_run(case):
    truth, data, _ = case
    version = data["info"]["gym_version"]
    if "0.7.0" in truth["gym_version"]:
        assert version in ("0.7.0", "0.7+"), data["info"]["gym_version_basis"]
    elif version:
        assert version == "0.4.0" or version.startswith("0.4-"), data["info"]["gym_version_basis"]


def test_secrets_are_redacted_everywhere(case):
    _, data, _ = case
    assert "dummy" not in json.dumps(data["info"])


def test_text_report_reads_like_a_triage_note():
    proc = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(CASES / "aborted_500"),
                           "--no-process-check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    first = proc.stdout.splitlines()[0]
    assert first.startswith("COLLECTION ABORTED") and "mcqa_simple_agent" in first and "500" in first
    assert "see logs/mcqa_simple_agent.log:11" in proc.stdout
    assert "6 missing" in proc.stdout


def test_markdown_report():
    proc = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(CASES / "some_never_ran"),
                           "--format", "md", "--no-process-check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.startswith("# gymwatch report: SOME TRIALS NEVER RAN")
    assert "| never_ran | 4 |" in proc.stdout


def test_mcqa_run_ok_from_txt_captures():
    data, code = report(MCQA / "run_ok")
    assert (data["verdict"], code) == ("ok", 0)
    assert data["counts"]["completed"] == 10
    assert {s["name"] for s in data["servers"]} == {"mcqa", "mcqa_simple_agent", "policy_model"}


def test_mcqa_startup_failure_points_at_uv_error_in_own_log():
    data, code = report(MCQA / "startup_failure")
    assert (data["verdict"], code) == ("startup_failed", 2)
    assert data["evidence"]["file"] == "logs/policy_model.log"
    assert "error: Request failed" in data["evidence"]["text"]
    assert all(s["state"] == "failed" for s in data["servers"])


def test_mcqa_run_fail_without_server_logs():
    data, code = report(MCQA / "run_fail")
    assert (data["verdict"], code) == ("collection_aborted", 2)
    assert data["evidence"]["file"] == "gym_eval_run.stderr.txt"
    assert "ClientResponseError: 500" in data["evidence"]["text"]
    assert data["counts"]["missing"] == 2


def test_rollouts_file_path_is_a_run():
    data, code = report(CASES / "mixed_ok" / "rollouts.jsonl")
    assert data["verdict"] == "ok" and data["counts"]["completed"] == 10


def test_not_a_run_is_one_line_exit_3(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path) in lines[0] and "Traceback" not in proc.stderr


def test_missing_path_exit_3(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and "no such file" in proc.stderr
