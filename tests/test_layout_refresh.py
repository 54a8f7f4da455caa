"""RunLayout.refresh(): the one place a run's shape follows its files (a directory that becomes a
run, a logs/ dir, captured output and rows that appear, a launcher's manifest that grows, configs
that change), and the one answer to which logs belong to a server."""

from __future__ import annotations

import json

import pytest

from gymwatch.core.layout import ENV, LAUNCHED, MANIFEST_NAME, WAITING, NotARun, discover
from gymwatch.core.session import RunSession
from runbuilder import Run, rollout

ENV_LINES = ["0 / 1 servers ready. Waiting for servers to spin up: ['mcqa']",
             "(mcqa) INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C to quit)"]


def test_a_directory_not_a_run_yet_waits_and_becomes_one(tmp_path):
    with pytest.raises(NotARun):
        discover(tmp_path)
    lay = discover(tmp_path, wait=True)
    assert lay.kind == WAITING and "not a Gym run" in lay.waiting
    assert not lay.refresh().new
    Run(tmp_path).lines("gym_env_start.stdout.log", *ENV_LINES)
    seen = lay.refresh(whole=False)
    assert seen.new and seen.names and lay.kind == "gym_dir" and lay.waiting == ""
    assert [s.role for s in lay.streams] == [ENV]


def test_a_path_that_is_no_directory_is_not_waited_for(tmp_path):
    with pytest.raises(NotARun):
        discover(tmp_path / "nothing", wait=True)


def test_a_session_reads_the_run_a_waiting_directory_becomes(tmp_path):
    session = RunSession.open(str(tmp_path), wait=True, check_processes=False)
    first = session.poll()
    assert not first.reset and not first.files and session.layout.kind == WAITING
    Run(tmp_path).lines("gym_env_start.stdout.log", *ENV_LINES)
    changes = session.poll()
    assert changes.reset and session.state.servers["mcqa"].state == "ready"


def test_a_logs_dir_and_captured_output_that_appear_are_followed(tmp_path):
    run = Run(tmp_path)
    run.rows("", rollout(0))
    lay = discover(tmp_path)
    assert lay.logs_dir is None and lay.streams == []
    run.lines("logs/mcqa.log", "INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C to quit)")
    run.lines("gym_env_start.stdout.log", *ENV_LINES)
    seen = lay.refresh(whole=False)
    assert not seen.new and lay.logs_dir == tmp_path / "logs" and len(lay.streams) == 1
    assert lay.own_log("mcqa") == tmp_path / "logs" / "mcqa.log"


def test_rows_that_appear_make_another_run_to_read_afresh(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_eval_run.stdout.log", "Querying with 2 concurrent requests")
    lay = discover(tmp_path)
    assert lay.rollouts is None
    run.rows("", rollout(0))
    run.rows("_materialized_inputs", {"_ng_task_index": 0, "_ng_rollout_index": 0})
    assert not lay.refresh(whole=False).new
    assert lay.refresh().new and lay.rollouts == tmp_path / "rollouts.jsonl"


def test_a_launchers_manifest_that_grows_is_followed(tmp_path):
    out = tmp_path / "rollouts.jsonl"
    env = {"role": "env", "stdout": str(tmp_path / "gym_env_start.stdout.log")}
    manifest = {"run_id": "r", "processes": [env], "files": {}}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    lay = discover(tmp_path)
    lay.names_read()
    assert lay.kind == LAUNCHED and lay.rollouts is None and len(lay.streams) == 1
    manifest["processes"].append({"role": "eval", "stdout": str(tmp_path / "gym_eval_run.stdout.log")})
    manifest["files"]["output"] = str(out)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest) + " ")
    seen = lay.refresh()
    assert seen.names and not seen.new and lay.rollouts == out and len(lay.streams) == 2


def test_changed_configs_are_names_to_read_again(tmp_path):
    run = Run(tmp_path)
    run.rows("", rollout(0))
    lay = discover(tmp_path)
    lay.names_read()
    assert not lay.refresh().names
    run.lines(".hydra/config.yaml", "agent_name: env_agent")
    assert lay.refresh().names


def test_a_server_named_with_a_slash_has_its_log_by_its_stem(tmp_path):
    run = Run(tmp_path)
    run.lines("logs/ns_policy.log", "x")
    run.lines("gym_env_start.stdout.log", *ENV_LINES)
    run.lines("gym_env_start.stderr.log", "x")
    lay = discover(tmp_path)
    assert lay.own_log("ns/policy") == tmp_path / "logs" / "ns_policy.log" and lay.own_log("other") is None
    assert [s.path.name for s in lay.gym_output()] == ["gym_env_start.stderr.log", "gym_env_start.stdout.log"]
    assert [label for label, _ in lay.all_logs()] == ["ns_policy", "gym_env_start.stderr", "gym_env_start.stdout"]
