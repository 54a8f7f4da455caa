"""Connections Gym could not make (`[request_retry ...]`, every Gym version: retried 0.5 s apart
without end, reported every 100 failures of a process) and servers that died while serving: what
stalled or ended a collection, named at the line that shows it."""

import os
import time

from gymwatch.core.session import read_run
from gymwatch.core.verdict import verdict
from gymwatch.report import render, to_json
from gymwatch.tui.board import why_text
from runbuilder import Run, rollout


def retry(url: str, retry_: int, elapsed: float, hits: int, error: str = "ClientOSError") -> str:
    return (f"[request_retry url={url} error={error} retry={retry_} elapsed_s={elapsed}] Hit {hits} global "
            f"`{error}` while querying {url}.")


def collecting(tmp_path) -> Run:
    run = Run(tmp_path)
    run.expect(3)
    run.ready_server("env_agent", 19251)
    run.ready_server("policy_model", 18000)
    run.lines("gym_env_start.stdout.log", "All 2 / 2 servers ready! Polling every 60s")
    run.lines("gym_eval_run.stderr.log", "Collecting rollouts:  33%|###  | 1/3 [00:02<00:04, ?it/s]")
    run.rows("", rollout(0))
    return run


def test_a_model_servers_retries_name_the_model_endpoint_while_collecting(tmp_path):
    run = collecting(tmp_path)
    run.server_log("policy_model", retry("http://10.0.0.7:8000/v1/responses", 51, 25.1, 100),
                   "We've run into this issue in two different scenarios previously:",
                   retry("http://10.0.0.7:8000/v1/responses", 101, 50.2, 200))
    state = read_run(str(tmp_path), check_processes=False).state
    v = verdict(state)
    assert v.name == "collecting"
    assert v.reason.endswith("; policy_model could not connect to the model endpoint http://10.0.0.7:8000/v1/responses "
                             "(ClientOSError): 200 failed connections, one request retrying for 50s (Gym retries "
                             "these without end)")
    assert (v.evidence.file, v.evidence.line) == ("logs/policy_model.log", 6)
    [r] = to_json(state)["servers"][1]["retrying"]
    assert (r["retry"], r["failures"], r["first"]["line"], r["last"]["line"]) == (101, 200, 4, 6)
    s = state.servers["policy_model"]
    shown = why_text(state, s, False, None)
    assert shown.plain.startswith("could not connect to the model endpoint") and shown.style == "yellow"


def test_the_collectors_own_retries_name_the_server_that_owns_the_port(tmp_path):
    run = collecting(tmp_path)
    run.lines("gym_eval_run.stdout.log", retry("http://127.0.0.1:19251/run", 7, 3.0, 100, "ServerDisconnectedError"))
    v = verdict(read_run(str(tmp_path), check_processes=False).state)
    assert "the collector could not connect to env_agent (http://127.0.0.1:19251/run) (ServerDisconnectedError): " \
           "100 failed connections, one request retrying for 3s" in v.reason
    assert v.evidence.file == "gym_eval_run.stdout.log"


def test_the_longest_retry_of_any_process_is_the_one_named(tmp_path):
    run = collecting(tmp_path)
    run.server_log("env_agent", retry("http://127.0.0.1:18000/v1/responses", 3, 1.5, 100))
    run.server_log("policy_model", retry("http://10.0.0.7:8000/v1/responses", 301, 150.0, 600))
    v = verdict(read_run(str(tmp_path), check_processes=False).state)
    assert "policy_model could not connect to the model endpoint" in v.reason and "env_agent" not in v.reason


def test_retries_that_passed_leave_a_finished_run_ok_but_are_listed_under_their_server(tmp_path):
    run = collecting(tmp_path)
    run.server_log("policy_model", retry("http://10.0.0.7:8000/v1/responses", 51, 25.1, 100))
    run.rows("", rollout(1), rollout(2))
    run.finish()
    state = read_run(str(tmp_path), check_processes=False).state
    v = verdict(state)
    assert (v.name, v.reason) == ("ok", "3 trials completed")
    text, _ = render(state, "text")
    assert "could not connect to the model endpoint http://10.0.0.7:8000/v1/responses (ClientOSError)" in text
    assert "see logs/policy_model.log:4" in text


def test_a_server_killed_while_serving_points_at_gyms_line_one_that_raised_at_its_own(tmp_path):
    run = collecting(tmp_path)
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):",
              "RuntimeError: Process `env_agent` finished unexpectedly!")
    run.lines("gym_eval_run.stderr.log", "Traceback (most recent call last):",
              "aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error', "
              "url='http://127.0.0.1:18000/v1/responses'")
    state = read_run(str(tmp_path), check_processes=False).state
    v = verdict(state)
    assert v.name == "collection_aborted"
    assert v.reason.startswith("env_agent died while trials ran, without an error of its own (killed? out of memory?); "
                               "then the collector aborted: policy_model answered 500")
    assert (v.evidence.file, v.evidence.line) == ("gym_env_start.stderr.log", 2)

    run.server_log("env_agent", "Traceback (most recent call last):", "MemoryError: cannot allocate")
    state = read_run(str(tmp_path), check_processes=False).state
    s = state.servers["env_agent"]
    assert (s.failure.file, s.failure_reason) == ("logs/env_agent.log", "MemoryError: cannot allocate")
    assert verdict(state).reason.startswith("env_agent died while trials ran: MemoryError: cannot allocate; then")


def test_a_row_written_after_the_retries_means_the_connection_came_back(tmp_path):
    """The lines carry no time; the files' last writes do: rows written after the log that holds the
    last retry report mean trials went on, so a collecting run is not said to wait on it."""
    run = collecting(tmp_path)
    log = run.server_log("policy_model", retry("http://10.0.0.7:8000/v1/responses", 51, 25.1, 100))
    now = time.time()
    os.utime(log, (now - 120, now - 120))
    rows = run.rows("", rollout(1))
    os.utime(rows, (now - 5, now - 5))
    state = read_run(str(tmp_path), check_processes=False).state
    v = verdict(state)
    assert (v.name, v.reason, v.evidence) == ("collecting", "2 of 3 trials recorded (live by its files)", None)
    assert why_text(state, state.servers["policy_model"], False, None).plain == ""     # the State column says ready
    assert to_json(state)["servers"][1]["retrying"][0]["still_retrying"] is False

    os.utime(log, (now, now))             # a report written after the last row: retrying again
    assert "policy_model could not connect" in verdict(read_run(str(tmp_path), check_processes=False).state).reason
