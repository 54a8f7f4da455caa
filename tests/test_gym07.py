"""Gym 0.5-0.7 output gymwatch reads (docs/gym-formats.md): launch lines, venv locks, the spin-up
limit, the model-endpoint wait, collector lines that name failed trials, attempts, Gym's health files."""

import itertools
import json
import os
import time

import pytest

from gymwatch.core import gymversion
from gymwatch.core.model import Evidence, RunState
from gymwatch.core.reducer import Reducer
from gymwatch.core.session import read_run
from gymwatch.report import to_json
from runbuilder import Run, rollout

ROW = '{"_ng_rollout_index": %d, "_ng_task_index": %d, "agent_name": "agent"}'


def report(root):
    state = read_run(str(root), check_processes=False).state
    return to_json(state), state


def sidecar(task, rollout_=0, status=500, **extra):
    return {"_ng_failure_class": "agent_run_error", "_ng_failure_type": "ClientResponseError",
            "_ng_failure_message": f"{status}, message='Internal Server Error', url='http://127.0.0.1:19251/run'",
            "_ng_failure_http_status": status, "_ng_task_index": task, "_ng_rollout_index": rollout_,
            "agent_ref": {"name": "env_agent"}, **extra}


def finished_env(run, n=2):
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up",
              f"All {n} / {n} servers ready! Polling every 60s")


# --- startup -------------------------------------------------------------------------------
def test_launch_lines_name_servers_and_their_kind_before_any_output(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log",
              "Starting `mcqa` from venv /w/resources_servers/mcqa/.venv",
              "Starting `mcqa_simple_agent` from venv /w/responses_api_agents/simple_agent/.venv",
              "Starting `mcqa_environment_server` from venv /w/environment_servers/legacy_agent/.venv",
              "Starting `policy_model` from venv /w/responses_api_models/openai_model/.venv",
              "Waiting for head server to spin up", "Waiting for servers to spin up")
    data, state = report(tmp_path)
    kinds = {s["name"]: s["kind"] for s in data["servers"]}
    assert kinds == {"mcqa": "resources", "mcqa_simple_agent": "agent", "mcqa_environment_server": "environment",
                     "policy_model": "model"}
    assert all(s["state"] == "pending" and s["phase"].startswith("launched") for s in data["servers"])
    assert data["verdict"] == "starting"
    assert data["info"]["gym_version"] == "0.7+"
    assert data["parent"]["spinup_limit"] == 600        # Gym 0.7's default
    assert data["parent"]["spinup_started"]["line"] == 6


def test_venv_lock_wait_is_a_phase_of_the_waiting_server(tmp_path):
    run = Run(tmp_path)
    venv = "/w/responses_api_agents/simple_agent/.venv"
    run.lines("gym_env_start.stdout.log", f"Starting `agent_a` from venv {venv}",
              f"Starting `agent_b` from venv /real{venv}", "Waiting for servers to spin up")
    run.server_log("agent_a", "Using CPython 3.13.15 interpreter at: /usr/bin/python3.13",
                   f"Creating virtual environment at: {venv}", "Resolved 12 packages in 1s")
    run.server_log("agent_b", f"Waiting for virtual environment setup: /real{venv}", prefix=False)
    _, state = report(tmp_path)
    b = state.servers["agent_b"]
    assert b.state == "installing" and b.phase == "waiting for agent_a's venv setup"
    assert state.servers["agent_a"].phase == "installing venv: 12 packages"


def test_venv_lock_line_in_merged_output_marks_the_servers_not_started_yet(tmp_path):
    run = Run(tmp_path)
    venv = "/w/environment_servers/legacy_agent/.venv"
    run.lines("gym_env_start.stdout.log", f"Starting `a_environment_server` from venv {venv}",
              f"Starting `b_environment_server` from venv {venv}", "Waiting for servers to spin up",
              f"Waiting for virtual environment setup: {venv}",
              f"(a_environment_server) Creating virtual environment at: {venv}")
    _, state = report(tmp_path)
    assert state.servers["b_environment_server"].phase == "waiting for a_environment_server's venv setup"
    assert state.servers["a_environment_server"].phase == "creating venv"


@pytest.mark.parametrize("limit, shown", [("60", 60.0), ("90.5", 90.5), ("0", None)])
def test_spinup_limit_from_the_run_config(tmp_path, limit, shown):
    run = Run(tmp_path)
    run.write("hydra/env_start/.hydra/config.yaml", f"server_spinup_timeout_seconds: {limit}\n")
    run.lines("gym_env_start.stdout.log", "Starting `env` from venv /w/resources_servers/env/.venv",
              "Waiting for servers to spin up")
    data, _ = report(tmp_path)
    assert data["parent"]["spinup_limit"] == shown


def test_no_spinup_limit_before_gym_07(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "Waiting for head server to spin up", "Waiting for servers to spin up",
              "0 / 1 servers ready. Waiting for servers to spin up: ['env']")
    run.server_log("env", 'INFO:     127.0.0.1:5 - "GET / HTTP/1.1" 404 Not Found')
    data, _ = report(tmp_path)
    assert data["parent"]["spinup_limit"] is None
    assert data["info"]["gym_version"] == "0.4-0.5"


def test_spinup_timeout_with_a_fractional_limit_names_the_server_and_what_it_did(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    run.server_log("policy_model", "Resolved 161 packages in 3s", "Downloading torch (800MiB)")
    run.lines("gym_env_start.stdout.log", "1 / 2 servers ready. Waiting for servers to spin up: ['policy_model']")
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):",
              "RuntimeError: Timed out after 90.5s waiting for Gym servers to become ready: policy_model")
    data, _ = report(tmp_path)
    assert data["verdict"] == "startup_failed"
    assert data["reason"].startswith("Gym's 90.5s spin-up limit ran out waiting for policy_model")
    assert "installing venv: 161 packages" in data["reason"]
    assert (data["evidence"]["file"], data["evidence"]["line"]) == ("logs/policy_model.log", 2)


# --- the model-endpoint wait ---------------------------------------------------------------
ENDPOINT = "http://127.0.0.1:18997/v1"


def test_model_endpoint_wait_is_a_stage_after_all_servers_are_ready(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    finished_env(run, 1)
    run.lines("gym_env_start.stdout.log", f"Waiting for 1 model endpoint(s) to answer: {ENDPOINT} (policy_base_url)",
              "If an inference server is still loading weights this is expected. Waiting up to 600s...",
              "  still waiting, 30s elapsed")
    data, _ = report(tmp_path)
    assert data["verdict"] == "starting"
    assert "waiting for the model endpoint" in data["reason"] and ENDPOINT in data["reason"]
    assert "30s of Gym's 600s limit" in data["reason"]
    e = data["parent"]["model_endpoints"]
    assert (e["urls"], e["limit"], e["elapsed"], e["answered"]) == ([f"{ENDPOINT} (policy_base_url)"], 600, 30, None)
    run.lines("gym_env_start.stdout.log", "All model endpoints are answering after 51s.")
    data, _ = report(tmp_path)
    assert data["reason"] == "all 1 servers ready; no collection started yet (live by its files)"


def test_model_endpoint_never_answered_is_startup_failed_at_gyms_line(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    finished_env(run, 1)
    run.lines("gym_env_start.stdout.log",
              f"Waiting for 1 model endpoint(s) to answer: {ENDPOINT} (policy_base_url)",
              "If an inference server is still loading weights this is expected. Waiting up to 20s...",
              "Sending interrupt signals to servers...", "Waiting for processes to finish...", "NeMo Gym finished!",
              "Error: 1 model endpoint(s) never answered within 20s:",
              f"  - {ENDPOINT}/a/very/long/path/that/rich/wrapped (from",    # rich wraps at 80 columns
              "`policy_base_url`)", "",
              "Nothing accepted a connection there. The server was never started, is still starting up, or the URL",
              "  - Check the config key named beside each URL. Verify with `curl -i <base_url>/models` for a")
    data, _ = report(tmp_path)
    assert (data["verdict"], data["exit_code"]) == ("startup_failed", 2)
    assert data["evidence"]["line"] == 8 and data["evidence"]["text"].startswith("Error: 1 model endpoint(s)")
    assert data["parent"]["model_endpoints"]["urls"] == [f"{ENDPOINT} (policy_base_url)",
                                                        f"{ENDPOINT}/a/very/long/path/that/rich/wrapped"]
    assert "never answered within 20s" in data["reason"]
    assert data["servers"][0]["state"] == "exited"


# --- collection ----------------------------------------------------------------------------
def test_lines_that_name_a_failed_trial_make_it_failed_not_missing(tmp_path):
    run = Run(tmp_path)
    run.expect(3)
    run.rows("", rollout(0))
    run.lines("gym_eval_run.stdout.log", f"[rollout_collection] /run failed status=500 row={ROW % (0, 1)}")
    run.lines("gym_eval_run.stderr.log",
              "Collecting rollouts:   0%|   | 0/3 [00:00<?, ?it/s]Traceback (most recent call last):",
              "aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error', "
              "url='http://127.0.0.1:19251/run'")
    data, _ = report(tmp_path)
    statuses = {t["task_index"]: t["status"] for t in data["trials"]}
    assert statuses == {0: "completed", 1: "failed", 2: "missing"}
    failed = data["trials"][1]
    assert failed["http_status"] == 500 and failed["evidence"]["file"] == "gym_eval_run.stdout.log"
    assert data["verdict"] == "collection_aborted"     # the traceback starts after a tqdm segment


def test_aborted_whatever_the_exit_status(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.lines("gym_eval_run.stderr.log", "Traceback (most recent call last):", "RuntimeError: boom")
    state = read_run(str(tmp_path), check_processes=False).state
    state.collector.exit_code = -11          # SIGSEGV at interpreter exit, after the traceback
    from gymwatch.core.verdict import verdict
    assert verdict(state).name == "collection_aborted"


@pytest.mark.parametrize("last,verdict_", [("KeyboardInterrupt", "incomplete"),
                                           ("KeyboardInterrupt: stop", "collection_aborted"),
                                           ("RuntimeError: boom", "collection_aborted")])
def test_a_traceback_ending_in_a_bare_keyboard_interrupt_is_a_stop_not_an_abort(tmp_path, last, verdict_):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    run.lines("gym_eval_run.stderr.log", "Collecting rollouts:  50%|#   | 1/2 [00:01<00:01]Traceback (most recent call last):",
              '  File "runners.py", line 124, in run', last)
    from gymwatch.core.verdict import verdict
    state = read_run(str(tmp_path), check_processes=False).state
    v = verdict(state)
    assert v.name == verdict_
    if verdict_ == "incomplete":
        assert "(it was interrupted: Ctrl-C, or SIGINT); 1 trials missing" in v.reason and v.evidence.line == 3


def test_failure_sidecar_finished_run_is_some_failed_with_class_status_and_line(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    run.lines("gym_eval_run.stdout.log", "route_failures_to_sidecar is on: a failed agent /run becomes a sidecar row",
              f"[rollout_collection] /run failed status=500 row={ROW % (0, 1)}",
              f"🚨 [rollout_collection] rollout dropped from the score: row={ROW % (0, 1)} class=agent_run_error "
              "error=500, message='Internal Server Error', url='http://127.0.0.1:19251/run'")
    run.rows("_failures", sidecar(1))
    run.finish()
    data, _ = report(tmp_path)
    assert (data["verdict"], data["exit_code"]) == ("some_failed", 1)
    t = data["trials"][1]
    assert (t["status"], t["failure_class"], t["http_status"]) == ("failed", "agent_run_error", 500)
    assert t["evidence"] == {"file": "rollouts_failures.jsonl", "line": 1, "text": ""}
    assert t["named_at"]["line"] == 2 and t["attempts"] == []


def test_sidecar_row_with_no_reward_and_no_response(tmp_path):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("_failures", {"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_failure_class": "agent_request_failed"})
    run.finish()
    data, _ = report(tmp_path)
    assert data["trials"][0]["status"] == "failed" and data["malformed"]["count"] == 0


def test_failure_then_success_is_one_trial_with_both_attempts(tmp_path):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("_failures", sidecar(0, status=502, _ng_failure_class="agent_request_failed"))
    run.rows("", rollout(0))                    # a resumed run got it
    run.finish()
    data, _ = report(tmp_path)
    [t] = data["trials"]
    assert t["status"] == "completed" and data["verdict"] == "ok"
    assert [(a["status"], a["http_status"]) for a in t["attempts"]] == [("failed", 502), ("completed", None)]


def _observations():
    ev = [Evidence("gym_eval_run.stdout.log", 3, f"[rollout_collection] /run failed status=500 row={ROW % (0, 0)}"),
          Evidence("gym_eval_run.stdout.log", 4, f"🚨 [rollout_collection] rollout dropped from the score: "
                   f"row={ROW % (0, 0)} class=agent_run_error error=500, message='x'")]
    failure = json.dumps(sidecar(0, _ng_failure_http_status=None)).encode()
    retry_failure = json.dumps(sidecar(0, _ng_attempt_index=1, _ng_failure_class="timeout_exceeded")).encode()
    success = json.dumps(rollout(0, _ng_attempt_index=2)).encode()
    return [
        lambda r: r.stream_line("eval", ev[0].file, ev[0].line, ev[0].text),
        lambda r: r.stream_line("eval", ev[1].file, ev[1].line, ev[1].text),
        lambda r: r.failure_row("rollouts_failures.jsonl", 1, failure),
        lambda r: r.failure_row("rollouts_failures.jsonl", 2, retry_failure),
        lambda r: r.rollout_row("rollouts.jsonl", 1, success),
    ]


@pytest.mark.parametrize("upto", [3, 4, 5])
def test_attempts_do_not_depend_on_the_order_files_are_read(upto):
    results = set()
    for order in itertools.permutations(_observations()[:upto]):
        state = RunState(root="/r")
        r = Reducer(state)
        r.stream_line("eval", "gym_eval_run.stdout.log", 1, "Querying with 2 concurrent requests")
        for feed in order:
            feed(r)
        t = state.trials[(0, 0)]
        from gymwatch.core import attempts
        results.add((t.status, t.attempt_index, t.failure_class, t.http_status, t.evidence, t.named_at,
                     tuple((a.attempt_index, a.status, a.failure_class, a.http_status, a.evidence)
                           for a in attempts.attempts(t))))
    assert len(results) == 1, results
    status, attempt, cls, http, *_ = results.pop()
    if upto == 3:
        assert (status, cls, http) == ("failed", "agent_run_error", 500)   # the row, its status from the line
    if upto == 5:
        assert (status, attempt) == ("completed", 2)


# --- Gym's health check ----------------------------------------------------------------------
def test_health_files_beside_our_status(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0), rollout(1, ran=False, reward=0.0))
    run.finish()
    run.lines("rollout_verdicts.jsonl",
              '{"_ng_task_index":0,"_ng_rollout_index":0,"verdict":"unobserved","findings":[],"unobserved":["x"]}',
              '{"_ng_task_index":1,"_ng_rollout_index":0,"verdict":"unobserved","findings":[],"unobserved":["x"]}')
    run.write("quality_summary.json", json.dumps({"run": {"verdicts": {"healthy": 0, "unhealthy": 0,
                                                                        "unobserved": 2}}}))
    run.lines("gym_eval_run.stdout.log", "Rollout health: 2 checked, 0 healthy, 0 unhealthy, 2 unobserved")
    data, _ = report(tmp_path)
    assert data["gym_health"]["unobserved"] == 2 and data["gym_health"]["disagreements"] == 1
    assert data["gym_health"]["evidence"]["file"] == "quality_summary.json"
    never = data["trials"][1]
    assert never["status"] == "never_ran" and never["gym_health"]["verdict"] == "unobserved"
    assert "never called" in never["gym_health"]["disagrees"]
    assert data["trials"][0]["gym_health"]["disagrees"] is None


@pytest.mark.parametrize("verdicts, summary", [
    ('{"_ng_task_index":0,"_ng_rollout_index":0,"verdict":"unhea', '{"run": {"verdicts": {"healthy": 1'),
    ('[1, 2]\n{"_ng_task_index": "0", "verdict": "healthy"}\n{"_ng_task_index":0,"_ng_rollout_index":0,'
     '"verdict":"great"}', '{"run": []}'),
])
def test_broken_health_files_are_listed_never_a_traceback(tmp_path, verdicts, summary):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("", rollout(0))
    run.finish()
    run.write("rollout_verdicts.jsonl", verdicts)
    run.write("quality_summary.json", summary)
    run.lines("gym_eval_run.stdout.log", "Rollout health: 1 checked, 1 healthy, 0 unhealthy, 0 unobserved")
    data, _ = report(tmp_path)
    assert data["verdict"] == "ok"
    files = {m["file"] for m in data["malformed"]["lines"]}
    assert "quality_summary.json" in files
    assert data["gym_health"]["healthy"] == 1       # Gym's own line still gives its totals


def test_an_earlier_runs_aggregate_and_health_files_do_not_finish_this_one(tmp_path):
    run = Run(tmp_path)
    old = run.write("rollouts_aggregate_metrics.json", "[]")
    summary = run.write("quality_summary.json", '{"run": {"verdicts": {"healthy": 3}}}')
    stale = time.time() - 3600
    for p in (old, summary):
        os.utime(p, (stale, stale))
    run.expect(2)
    run.rows("", rollout(0))
    data, _ = report(tmp_path)
    assert data["verdict"] == "collecting" and data["counts"]["pending"] == 1
    assert data["gym_health"] is None
    assert any("older than this run's inputs" in n for n in data["notes"])


# --- the version ---------------------------------------------------------------------------
def test_gym_version_exact_from_uvs_package_list(tmp_path):
    run = Run(tmp_path)
    run.server_log("env", "Installed 161 packages in 2s", " + nemo-gym==0.6.0", " + zipp==3.0")
    data, _ = report(tmp_path)
    assert data["info"]["gym_version"] == "0.6.0" and "logs/env.log:2" in data["info"]["gym_version_basis"]


def test_gym_version_from_the_installed_gym_beside_the_config_paths(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.13" / "site-packages"
    (site / "nemo_gym-0.5.1.dist-info").mkdir(parents=True)
    run = Run(tmp_path / "run")
    run.write("hydra/env_start/.hydra/config.yaml",
              f"config_paths:\n- {site}/resources_servers/mcqa/configs/mcqa.yaml\n")
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up")
    data, state = report(tmp_path / "run")
    assert data["info"]["gym_version"] == "0.5.1"
    assert gymversion.spinup_limit(state) is None


def test_silent_death_after_uvs_package_list(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 2 servers ready. Waiting for servers to spin up: ['env', 'agent']")
    run.ready_server("env", 15000)
    run.server_log("agent", "Creating virtual environment at: /w/responses_api_agents/simple_agent/.venv",
                   "Resolved 3 packages in 10ms", "Installed 3 packages in 5ms", " + aiohttp==3.13.0",
                   " + yarl==1.25.1")
    run.lines("gym_env_start.stderr.log", "RuntimeError: Process `agent` finished unexpectedly!")
    data, _ = report(tmp_path)
    agent = next(s for s in data["servers"] if s["name"] == "agent")
    assert agent["silent_death"] and agent["evidence"]["line"] == 3
    assert "Installed 3 packages" in agent["failure_reason"]


def test_servers_gym_stopped_mid_install_are_stopped_not_silent_deaths(tmp_path):
    """0.7 stops every server after a failed start (and any version on Ctrl-C): one still at its
    install step ends there, stopped by Gym, not dead of the 0.4-0.6 pipefail bug."""
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up",
              "0 / 3 servers ready. Waiting for servers to spin up: ['env', 'agent', 'model']")
    run.server_log("env", "Traceback (most recent call last):", "ImportError: no module named x")
    run.server_log("agent", "Using Python 3.13.15 environment at: /w/responses_api_agents/simple_agent/.venv",
                   "Checked 3 packages in 57ms")
    run.server_log("model", "Creating virtual environment at: /w/responses_api_models/openai_model/.venv",
                   "Resolved 3 packages in 10ms", "Installed 3 packages in 5ms", " + aiohttp==3.13.0")
    run.lines("gym_env_start.stdout.log", "Sending interrupt signals to servers...", "Waiting for processes to finish...",
              "NeMo Gym finished!")
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):",
              "RuntimeError: Process `env` finished unexpectedly!")
    data, _ = report(tmp_path)
    servers = {s["name"]: (s["state"], s["phase"], s["silent_death"]) for s in data["servers"]}
    assert servers["env"][0] == "failed"
    assert servers["agent"] == servers["model"] == ("exited", "stopped by Gym before it was ready", False)
    assert data["verdict"] == "startup_failed" and data["reason"].startswith("server env failed: ImportError")


def test_no_silent_death_claimed_without_the_servers_own_log(tmp_path):
    """The pipefail bug needs +nemo_gym_log_dir, which gives each server its own log: output that
    ends at the install step in Gym's captured streams only is a death, not that bug."""
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['agent']",
              "(agent) Creating virtual environment at: /w/responses_api_agents/simple_agent/.venv",
              "(agent) Resolved 3 packages in 10ms", "(agent) Installed 3 packages in 5ms", "(agent)  + yarl==1.25.1")
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):",
              "RuntimeError: Process `agent` finished unexpectedly!")
    data, _ = report(tmp_path)
    agent = next(s for s in data["servers"] if s["name"] == "agent")
    assert agent["state"] == "failed" and not agent["silent_death"]
    assert agent["failure_reason"] == "Gym: RuntimeError: Process `agent` finished unexpectedly!"


def test_ctrl_c_without_gyms_shutdown_leaves_installing_servers_not_dead(tmp_path):
    """0.4-0.6 do not stop their servers when the wait is interrupted: a server's log ending at its
    install step is where it was, not a death."""
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['agent']")
    run.server_log("agent", "Creating virtual environment at: /w/responses_api_agents/simple_agent/.venv",
                   "Resolved 3 packages in 10ms", "Installed 3 packages in 5ms", " + yarl==1.25.1")
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):", "KeyboardInterrupt")
    data, _ = report(tmp_path)
    agent = next(s for s in data["servers"] if s["name"] == "agent")
    assert agent["state"] != "failed" and not agent["silent_death"]
    assert data["verdict"] == "incomplete" and data["reason"].startswith("gym env start was interrupted")


@pytest.mark.parametrize("where", ["gym_env_start.stderr.log", "gym_eval_run.stderr.log"])
def test_only_gym_env_starts_own_keyboard_interrupt_is_an_interrupted_start(tmp_path, where):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up",
              "0 / 1 servers ready. Waiting for servers to spin up: ['env']")
    run.server_log("env", "Creating virtual environment at: /w/resources_servers/env/.venv")
    run.lines(where, "Traceback (most recent call last):", '  File "env.py", line 698, in wait_for_spinup',
              "KeyboardInterrupt")
    data, _ = report(tmp_path)
    if where.startswith("gym_env_start"):
        assert (data["verdict"], data["evidence"]["line"]) == ("incomplete", 3)
        assert data["reason"] == ("gym env start was interrupted (Ctrl-C, or SIGINT) before every server was "
                                  "ready (still waiting for env)")
    else:
        assert data["reason"].startswith("the collector ended without `Finished rollout collection!` (it was "
                                         "interrupted")       # the collector's own, not gym env start's


def test_model_retry_stop_is_an_error_line():
    from gymwatch.core.markers import find_marker
    assert find_marker("(policy_model) [model_retry_stop url=http://x/v1 status=401 error_msg=denied]") == "model_retry"
    assert find_marker("(agent) 🚨 [upstream_request_failed] server=A method=POST url=http://x status=500") \
        == "upstream_failed"
