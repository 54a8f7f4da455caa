"""Scenarios the fixtures do not cover, built from the formats in docs/gym-formats.md."""

import json
from pathlib import Path

from gymwatch.core.session import RunSession, read_run
from gymwatch.core.verdict import verdict
from gymwatch.report import to_json
from runbuilder import Run, rollout


def report(root):
    state = read_run(str(root), check_processes=False).state
    return to_json(state), state


def test_silent_death_after_installed_packages(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up",
              "0 / 2 servers ready. Waiting for servers to spin up: ['env', 'env_agent']")
    run.ready_server("env", 15000)
    run.server_log("env_agent", "Using CPython 3.13.0 interpreter at: /usr/bin/python3.13",
                   "Creating virtual environment at: /w/responses_api_agents/simple_agent/.venv",
                   "Resolved 3 packages in 10ms", "Installed 3 packages in 5ms")
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):",
              '  File "env.py", line 299, in poll', "RuntimeError: Process `env_agent` finished unexpectedly!")
    data, _ = report(tmp_path)
    assert data["verdict"] == "startup_failed"
    agent = next(s for s in data["servers"] if s["name"] == "env_agent")
    assert agent["state"] == "failed" and agent["silent_death"] and agent["kind"] == "agent"
    assert "pipefail" in agent["failure_reason"] and "+nemo_gym_log_dir" in agent["failure_reason"]
    assert data["evidence"] == {"file": "logs/env_agent.log", "line": 4, "text": "(env_agent) Installed 3 packages in 5ms"}


def test_gym_07_startup_timeout(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    run.server_log("policy_model", "Resolved 161 packages in 3s", "Downloading torch (800MiB)")
    run.lines("gym_env_start.stdout.log",
              "0 / 2 servers ready. Waiting for servers to spin up: ['env', 'policy_model']",
              "1 / 2 servers ready. Waiting for servers to spin up: ['policy_model']",
              "Timed out after 600s waiting for Gym servers to become ready: policy_model")
    data, state = report(tmp_path)
    assert data["verdict"] == "startup_failed"
    pm = state.servers["policy_model"]
    assert pm.state == "failed" and pm.phase == "failed"
    assert data["evidence"]["file"] == "logs/policy_model.log"
    assert any(e["text"].startswith("Timed out") for e in data["related"])
    assert state.servers["env"].reported_ready_by_gym


def test_still_starting_is_exit_0_and_names_pending(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 2 servers ready. Waiting for servers to spin up: ['a', 'b']")
    run.server_log("a", "Resolved 12 packages in 1s", "Downloading numpy (15MiB)")
    state = RunSession.open(str(tmp_path), check_processes=False)
    state.poll()
    v = verdict(state.state)
    assert v.name == "starting" and v.exit_code == 0 and "a, b" in v.reason
    assert state.state.servers["a"].state == "installing" and state.state.servers["a"].packages == 12


def test_judge_failed_row_points_at_resources_server(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    run.server_log("env", "ERROR:    judge call failed: 401 Unauthorized")
    run.expect(2)
    run.rows("", rollout(0))
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed",
                           "error": "judge returned 401"})
    run.finish()
    data, state = report(tmp_path)
    t = next(t for t in data["trials"] if t["task_index"] == 1)
    assert (t["status"], t["failure_class"], t["message"]) == ("failed", "judge_failed", "judge returned 401")
    assert t["evidence"] == {"file": "rollouts_failures.jsonl", "line": 1, "text": ""}
    assert (t["cause"]["file"], t["cause"]["line"]) == ("logs/env.log", 4)
    # a finished run with failed trials is not "ok"
    assert data["verdict"] == "some_failed" and data["exit_code"] == 1


def test_attempts_are_one_trial_with_its_status_from_the_last(tmp_path):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("_failures", {"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_attempt_index": 0,
                           "_ng_failure_class": "transient"})
    run.rows("", rollout(0, _ng_attempt_index=1))
    run.finish()
    data, _ = report(tmp_path)
    [t] = data["trials"]
    assert (t["task_index"], t["rollout_index"], t["attempt_index"], t["status"]) == (0, 0, 1, "completed")
    assert [(a["attempt_index"], a["status"]) for a in t["attempts"]] == [(0, "failed"), (1, "completed")]
    assert t["attempts"][0]["failure_class"] == "transient"
    assert data["counts"]["missing"] == 0 and data["counts"]["pending"] == 0
    assert data["verdict"] == "ok"


def test_reused_log_dir_counts_only_the_latest_start(tmp_path):
    run = Run(tmp_path)
    run.server_log("env", "Creating virtual environment at: /w/resources_servers/env/.venv",
                   "Traceback (most recent call last):", "ValueError: old run broke",
                   "INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C to quit)",
                   "INFO:     Application shutdown complete.")
    run.server_log("env", "Creating virtual environment at: /w/resources_servers/env/.venv",
                   "INFO:     Uvicorn running on http://127.0.0.1:2 (Press CTRL+C to quit)")
    _, state = report(tmp_path)
    s = state.servers["env"]
    assert (s.state, s.port, s.error_count, s.kind) == ("ready", 2, 0, "resources")


def test_missing_trials_after_collector_died_without_traceback(tmp_path):
    run = Run(tmp_path)
    run.expect(3)
    run.rows("", rollout(0))
    run.lines("gym_eval_run.stdout.log", "Querying with 2 concurrent requests", "Examples left:",
              "1. env_agent: 2")
    state = RunSession.open(str(tmp_path), check_processes=False)
    state.state.collector.alive = False
    state.poll(final=True)
    v = verdict(state.state)
    assert v.name == "incomplete" and v.exit_code == 1
    assert v.evidence.file == "gym_eval_run.stdout.log" and v.evidence.line == 3
    assert sum(t.status == "missing" for t in state.state.trials.values()) == 2


def test_end_to_end_eval_stream_carries_readiness(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_eval_run.stdout.log",
              "0 / 1 servers ready. Waiting for servers to spin up: ['env']",
              "(env) INFO:     Uvicorn running on http://127.0.0.1:3 (Press CTRL+C to quit)",
              "All 1 / 1 servers ready! Polling every 60s",
              "Querying with 1 concurrent requests")
    _, state = report(tmp_path)
    assert state.servers["env"].state == "ready" and state.parent.all_ready is not None
    assert state.collector.started


def test_live_timings_with_a_clock(tmp_path):
    now = [90.0]
    run = Run(tmp_path)
    run.server_log("old", "Resolved 3 packages in 1s")       # already there: seen, but untimed
    s = RunSession.open(str(tmp_path), clock=lambda: now[0], check_processes=False)
    s.poll()
    assert s.state.servers["old"].first_seen is None and s.state.servers["old"].state_since is None
    now[0] = 100.0
    run.server_log("env", "Resolved 3 packages in 1s")
    s.poll()
    now[0] = 130.0
    run.server_log("env", "INFO:     Uvicorn running on http://127.0.0.1:4 (Press CTRL+C to quit)")
    ch = s.poll()
    srv = s.state.servers["env"]
    assert "env" in ch.servers and srv.state == "ready" and srv.ready_at - srv.first_seen == 30.0
    assert next(x for x in to_json(s.state)["servers"] if x["name"] == "env")["time_to_ready"] == 30.0
    assert srv.log_file == "logs/env.log"


def test_no_agent_ran_points_at_agent_log(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env_agent", 16000)
    run.server_log("env_agent", "ERROR:    Exception in ASGI application", "Traceback (most recent call last):")
    run.expect(2)
    run.rows("", rollout(0, ran=False, reward=0.0), rollout(1, ran=False, reward=0.0))
    run.finish()
    data, _ = report(tmp_path)
    assert data["verdict"] == "no_agent_ran" and data["exit_code"] == 2
    assert data["evidence"]["file"] == "logs/env_agent.log"
    assert all(t["reward"] is None and t["withheld_reward"] == 0.0 for t in data["trials"])


def test_malformed_lines_are_counted_and_listed(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0), "{broken", json.dumps(rollout(1, reward="1.0")))
    run.write("rollouts.jsonl", b"\xff\xfe garbage\n")
    run.write("rollouts.jsonl", b'{"_ng_task_index": 1, "trunc')
    run.finish()
    data, _ = report(tmp_path)
    lines = [(m["line"], m["reason"].split(" (")[0]) for m in data["malformed"]["lines"]]
    assert data["malformed"]["count"] == 4
    assert lines[0] == (2, "invalid JSON") and lines[1][0] == 3 and "reward is str" in lines[1][1]
    assert lines[2][0] == 4 and lines[3][0] == 5
    assert data["counts"]["completed"] == 2


def test_head_server_probe_marks_ready_and_maps_ports(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['env_agent']")
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.poll()
    ch = s.apply_probe([{"name": "simple_agent", "process_name": "env_agent", "server_type": "responses_api_agents",
                         "host": "127.0.0.1", "port": 12345, "pid": 7, "url": "http://127.0.0.1:12345"}],
                       {"env_agent": True})
    srv = s.state.servers["env_agent"]
    assert "env_agent" in ch.servers and srv.state == "ready" and srv.http_ok and srv.kind == "agent"
    assert s.state.port_owner[12345] == "env_agent"


def test_launched_run_exit_codes_from_status_files_and_manifest_reload(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    status = run.write("gym_eval_run.status.json", json.dumps({"pid": 999999, "returncode": -9}))
    manifest = {"version": 1, "run_id": "t1", "created": 1.0, "files": {"output": str(tmp_path / "rollouts.jsonl")},
                "processes": []}
    run.write("gymwatch-manifest.json", json.dumps(manifest), append=False)
    s = RunSession.open(str(tmp_path))
    s.refresh_processes()
    s.poll()
    assert s.state.collector.alive is None and verdict(s.state).name == "collecting"
    manifest["processes"].append({"role": "eval", "pid": 999999, "create_time": 1.0, "argv": ["gym", "eval", "run"],
                                  "stdout": str(tmp_path / "gym_eval_run.stdout.log"),
                                  "stderr": str(tmp_path / "gym_eval_run.stderr.log"), "status_file": str(status)})
    run.write("gymwatch-manifest.json", json.dumps(manifest) + "\n", append=False)
    s.refresh_processes()
    s.poll(final=True)
    v = verdict(s.state)
    assert s.state.collector.exit_code == -9 and s.state.collector.alive is False
    assert v.name == "incomplete" and "killed by signal 9" in v.reason
    assert s.state.info.commands == ["gym eval run"]


def test_env_only_run_stopped_before_ready_is_startup_failed(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['env']",
              "NeMo Gym finished!")
    data, _ = report(tmp_path)
    assert data["verdict"] == "startup_failed" and "env" in data["reason"]


def test_env_only_run_ready_and_stopped_without_collection(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['env']",
              "All 1 / 1 servers ready! Polling every 60s")
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.poll()
    assert verdict(s.state).name == "starting" and "ready; no collection" in verdict(s.state).reason
    run.lines("gym_env_start.stdout.log", "NeMo Gym finished!")
    s.poll()
    assert verdict(s.state).name == "incomplete"


def test_log_offsets_count_lines_like_the_tailer(tmp_path):
    from gymwatch.core.session import _count_lines

    p = tmp_path / "x.log"
    p.write_bytes(b"a\r\nb\rc\nd")
    assert _count_lines(p, 9) == 3 == len(b"a\r\nb\rc\n".decode().splitlines())
    assert _count_lines(p, 2) == 1 and _count_lines(p, 5) == 2 and _count_lines(p, 0) == 0
    p.write_bytes(b"a\rb\r")                                   # a \r at the very end counts too
    assert _count_lines(p, 4) == 2


def test_server_names_with_slashes_match_their_log_file(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['ns/env']",
              "(ns/env) INFO:     Uvicorn running on http://127.0.0.1:7 (Press CTRL+C to quit)")
    run.lines("logs/ns_env.log", "(ns/env) INFO:     Uvicorn running on http://127.0.0.1:7 (Press CTRL+C to quit)")
    data, state = report(tmp_path)
    assert list(state.servers) == ["ns/env"]
    s = state.servers["ns/env"]
    assert s.state == "ready" and s.ready_evidence.file == "logs/ns_env.log" and s.log_file == "logs/ns_env.log"


def test_server_times_survive_a_layout_change(tmp_path):
    now = [90.0]
    run = Run(tmp_path)
    run.write("gym_env_start.stdout.log", "")
    s = RunSession.open(str(tmp_path), clock=lambda: now[0], check_processes=False)
    s.poll()
    now[0] = 100.0
    run.lines("gym_env_start.stdout.log", "(env) Resolved 3 packages in 1s")
    s.poll()
    now[0] = 120.0
    run.lines("gym_env_start.stdout.log", "(env) INFO:     Uvicorn running on http://127.0.0.1:4 (Press CTRL+C to quit)")
    s.poll()
    now[0] = 130.0
    run.expect(1)                                   # the collector starts: the run's shape changes
    ch = s.poll(final=True)
    srv = s.state.servers["env"]
    assert ch.reset and s.layout.rollouts is not None
    assert (srv.first_seen, srv.ready_at) == (100.0, 120.0)


def test_head_server_port_in_use_is_the_evidence_not_the_traceback():
    """Recorded: gym env start's own head server could not bind its port. The first error line
    of Gym's own output explains the failed start; the traceback that follows is related."""
    run = Path(__file__).parent / "fixtures" / "gym-0.4.0-recorded" / "head_port_in_use"
    state = read_run(str(run), check_processes=False).state
    v = verdict(state)
    assert v.name == "startup_failed" and v.exit_code == 2
    assert (v.evidence.file, v.evidence.line) == ("gym_env_start.stderr.log", 6)
    assert "[Errno 98]" in v.reason and "address already in use" in v.reason
    assert [(e.file, e.line) for e in v.related] == [("gym_env_start.stderr.log", 9)]


def test_a_server_named_with_a_slash_is_one_server(tmp_path):
    """`<logs>/team_env.log` holds server `team/env`: its unprefixed first lines (venv setup, Ray)
    come before any `(team/env) ` prefix tells the name; they must not make a second server."""
    run = Run(tmp_path)
    run.lines("logs/team_env.log", "Using CPython 3.13.0 interpreter at: /usr/bin/python3",
              "Creating virtual environment at: /w/resources_servers/team/.venv",
              "Connecting to Ray cluster at specified address: 127.0.0.1:1")
    run.lines("logs/team_env.log", "(team/env) INFO:     Started server process [7]",
              "(team/env) INFO:     Uvicorn running on http://127.0.0.1:5 (Press CTRL+C to quit)")
    _, state = report(tmp_path)
    assert list(state.servers) == ["team/env"]
    s = state.servers["team/env"]
    assert (s.state, s.port, s.pid) == ("ready", 5, 7) and s.first_seen is None


def test_a_slash_name_known_first_takes_its_logs_unprefixed_lines(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log",
              "0 / 1 servers ready. Waiting for servers to spin up: ['team/env']")
    run.lines("logs/team_env.log", "Creating virtual environment at: /w/resources_servers/team/.venv",
              "(team/env) INFO:     Uvicorn running on http://127.0.0.1:5 (Press CTRL+C to quit)")
    _, state = report(tmp_path)
    assert list(state.servers) == ["team/env"] and state.servers["team/env"].state == "ready"


def test_ctrl_c_after_every_server_was_ready_is_a_stop_though_gym_calls_a_server_dead(tmp_path):
    """Ctrl-C reaches gym env start and its servers at once; a server's clean uvicorn shutdown can
    end before Gym's poll finds its process gone (`Process X finished unexpectedly!`). It exited
    with the run: the start was interrupted, nothing failed."""
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 2 servers ready. Waiting for servers to spin up: ['env', 'env_agent']")
    run.ready_server("env", 15000)
    run.ready_server("env_agent", 16000)
    run.lines("gym_env_start.stdout.log", "All 2 / 2 servers ready! Polling every 60s")
    for name in ("env_agent", "env"):
        run.server_log(name, "INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                       "INFO:     Application shutdown complete.", "INFO:     Finished server process [1]")
    run.lines("gym_env_start.stdout.log", "Sending interrupt signals to servers...", "Waiting for processes to finish...",
              "NeMo Gym finished!")
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):", '  File "env.py", line 619, in poll',
              "RuntimeError: Process `env_agent` finished unexpectedly!")
    data, _ = report(tmp_path)
    agent = next(s for s in data["servers"] if s["name"] == "env_agent")
    assert (agent["state"], agent["phase"], agent["failure_reason"]) == (
        "exited", "exited with the run (Ctrl-C, or a signal)", None)
    assert (data["verdict"], data["exit_code"]) == ("incomplete", 1)
    assert data["reason"] == ("gym env start was interrupted (Ctrl-C, or a signal) after every server was ready, "
                              "before any collection; it stopped its servers")
    assert data["evidence"]["text"] == "Sending interrupt signals to servers..."
    # the servers' logs read after Gym's report of the death: the same conclusions
    logs = {p: p.read_bytes() for p in (tmp_path / "logs").glob("*.log")}
    for p in logs:
        p.write_bytes(b"")
    session = RunSession.open(str(tmp_path), check_processes=False)
    session.poll()
    assert session.state.servers["env_agent"].state == "failed"      # all Gym's words say so far
    for p, data_ in logs.items():
        p.write_bytes(data_)
    session.poll(final=True)
    by_name = lambda servers: sorted(servers, key=lambda s: s["name"])    # noqa: E731
    assert by_name(to_json(session.state)["servers"]) == by_name(data["servers"])
    assert verdict(session.state).reason == data["reason"]


def never_ran_beside_a_failure(tmp_path, naming: bool = True) -> tuple[dict, object]:
    """One completed, one failed (its agent printed a traceback and answered 500), two never ran; the
    agent's last error names task 3's request, when `naming`."""
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    run.ready_server("env_agent", 16000)
    run.server_log("env_agent", "Traceback (most recent call last):",
                   "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected",
                   'INFO:     127.0.0.1:5000 - "POST /run HTTP/1.1" 500 Internal Server Error')
    if naming:
        run.server_log("env_agent", 'ERROR:    empty answer for row={"_ng_task_index": 3, "_ng_rollout_index": 0}')
    run.expect(4)
    run.rows("", rollout(0), rollout(2, ran=False, reward=0.0), rollout(3, ran=False, reward=0.0))
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, "agent_ref": {"name": "env_agent"},
                           "_ng_failure_class": "agent_run_error", "_ng_failure_message":
                           "POST http://127.0.0.1:16000/run returned 500: ServerDisconnectedError: Server disconnected"})
    run.finish()
    return report(tmp_path)


def chain_of(data: dict, key) -> list[tuple[str, int]]:
    t = next(t for t in data["trials"] if (t["task_index"], t["rollout_index"]) == key)
    return [(e["file"], e["line"]) for e in t["cause_chain"]]


def test_a_never_ran_trial_lists_no_line_of_another_trials_failure(tmp_path):
    """The agent's traceback while it served the failed trial says nothing of a never-ran one:
    nothing ties them. The never-ran trial's lines are its row, and a line that names its request."""
    data, state = never_ran_beside_a_failure(tmp_path)
    assert data["verdict"] == "some_never_ran"
    assert chain_of(data, (2, 0)) == [("rollouts.jsonl", 2)]
    assert next(t for t in data["trials"] if t["task_index"] == 2)["cause"] is None
    assert chain_of(data, (3, 0)) == [("rollouts.jsonl", 3), ("logs/env_agent.log", 7)]
    assert data["related"] == []       # the verdict's first never-ran trial: nothing beside its row
    # the failed trial's own failure ties it to the agent's 500 on its /run
    assert ("logs/env_agent.log", 6) in chain_of(data, (1, 0))


def test_when_no_request_the_agent_answered_had_output_its_errors_explain_every_never_ran(tmp_path):
    """An agent that answered every request with an empty output: its errors while serving apply to
    every trial."""
    run = Run(tmp_path)
    run.ready_server("env_agent", 16000)
    run.server_log("env_agent", "ERROR:    Exception in ASGI application")
    run.expect(3)
    run.rows("", rollout(0, ran=False, reward=0.0), rollout(1, ran=False, reward=0.0))
    run.rows("_failures", {"_ng_task_index": 2, "_ng_rollout_index": 0, "agent_ref": {"name": "env_agent"},
                           "_ng_failure_class": "agent_run_error"})
    run.finish()
    data, _ = report(tmp_path)
    assert chain_of(data, (0, 0)) == [("rollouts.jsonl", 1), ("logs/env_agent.log", 4)]
    assert chain_of(data, (1, 0)) == [("rollouts.jsonl", 2), ("logs/env_agent.log", 4)]


def test_a_failed_trial_nothing_explains_has_no_cause_but_its_row(tmp_path):
    """No server printed anything about its failure: its row is all there is (not the agent's last
    line, which nothing ties to it)."""
    run = Run(tmp_path)
    run.ready_server("env_agent", 16000)
    run.server_log("env_agent", "INFO:     Disabling a uvicorn access logging so that the logs aren't spammed")
    run.expect(2)
    run.rows("", rollout(0))
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, "agent_ref": {"name": "env_agent"},
                           "_ng_failure_class": "agent_run_error", "_ng_failure_message": "the agent gave up"})
    run.finish()
    data, _ = report(tmp_path)
    t = next(t for t in data["trials"] if t["status"] == "failed")
    assert t["cause"] is None and chain_of(data, (1, 0)) == [("rollouts_failures.jsonl", 1)]
