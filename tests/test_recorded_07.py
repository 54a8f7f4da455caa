"""Real nemo-gym runs where something died, hung or was stopped (tests/fixtures/gym-0.7.0-recorded, and
gym-0.4.0-recorded/model_endpoint_died and start_interrupted): the report names what died, could not be
reached or stopped it, at the line that shows it."""

import os
import shutil
import time

import pytest

from conftest import FIXTURES, RECORDED070, json_report
from gymwatch.core.session import read_run
from gymwatch.core.verdict import verdict


def where(ev: dict) -> tuple[str, int]:
    return ev["file"], ev["line"]


def as_recorded(case: str, tmp_path, where=RECORDED070):
    """A copy of the recorded run with its files' times as the run left them (a checkout's are
    not): the rows were written before the death, the logs up to the end."""
    run = tmp_path / case
    shutil.copytree(where / case, run)
    end = time.time() - 3600
    for f in run.rglob("*"):
        if f.is_file():
            os.utime(f, (end, end - 200 if f.name == "rollouts.jsonl" else end))
    return run


@pytest.mark.parametrize("where_,case,port,first,last,elapsed", [
    (RECORDED070, "g070_model_endpoint_died", 38861, 91, 155, 225.7),
    (FIXTURES / "gym-0.4.0-recorded", "model_endpoint_died", 50895, 70, 134, 225.9)])
def test_a_model_endpoint_that_dies_mid_collection_is_named_as_what_stalled_it(tmp_path, where_, case, port, first,
                                                                               last, elapsed):
    rep, code = json_report(as_recorded(case, tmp_path, where_))
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["counts"] == {"pending": 0, "completed": 4, "failed": 0, "never_ran": 0, "missing": 6}
    assert f"before that, policy_model could not connect to the model endpoint http://127.0.0.1:{port}/v1/responses " \
           "(ClientOSError): 900 failed connections, one request retrying for 226s" in rep["reason"]
    assert where(rep["evidence"]) == ("gym_env_start.stdout.log", last)         # its last word on it
    model = next(s for s in rep["servers"] if s["name"] == "policy_model")
    [r] = model["retrying"]
    assert (r["error"], r["retry"], r["elapsed_s"], r["failures"]) == ("ClientOSError", 451, elapsed, 900)
    assert r["still_retrying"]
    assert where(r["first"]) == ("gym_env_start.stdout.log", first)
    missing = [t for t in rep["trials"] if t["status"] == "missing"]
    assert {where(t["cause"]) for t in missing} == {("gym_env_start.stdout.log", last)}


def test_while_it_hangs_the_collecting_verdict_says_what_it_waits_on(tmp_path):
    """The run as it looked while it hung: Gym's end lines not written yet, nothing known of its
    processes, its files fresh."""
    run = as_recorded("g070_model_endpoint_died", tmp_path)
    out = run / "gym_env_start.stdout.log"
    lines = out.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "retry=101 " in line)
    out.write_text("".join(lines[:cut + 1]))
    for name in ("gym_env_start.stderr.log", "gym_eval_run.stderr.log"):   # no shutdown yet
        f = run / name
        f.write_text("".join(x for x in f.read_text().splitlines(keepends=True) if "Shutting down" not in x
                             and "Finished server process" not in x and "shutdown" not in x))
    os.utime(run / "rollouts.jsonl", (time.time() - 60,) * 2)
    state = read_run(str(run), check_processes=False).state
    v = verdict(state)
    assert v.name == "collecting", v.reason
    assert "policy_model could not connect to the model endpoint" in v.reason
    assert "one request retrying for 50s" in v.reason
    assert (v.evidence.file, v.evidence.line) == ("gym_env_start.stdout.log", cut + 1)


def test_an_agent_killed_mid_collection_is_the_cause_of_the_abort(tmp_path):
    rep, code = json_report(as_recorded("g070_agent_killed", tmp_path))
    assert (rep["verdict"], code) == ("collection_aborted", 2)
    assert rep["counts"]["completed"] == 4 and rep["counts"]["failed"] == 2 and rep["counts"]["missing"] == 4
    assert rep["reason"].startswith("mcqa_simple_agent died while trials ran, without an error of its own "
                                    "(killed? out of memory?); then the collector aborted: "
                                    "mcqa_environment_server answered 500 on /run")
    assert where(rep["evidence"]) == ("gym_env_start.stderr.log", 188)
    assert "finished unexpectedly" in rep["evidence"]["text"]
    related = [where(e) for e in rep["related"]]
    assert related[0] == ("gym_env_start.stdout.log", 99)      # the environment server could not reach it
    assert ("gym_eval_run.stderr.log", 71) in related           # the collector's ClientResponseError
    agent = next(s for s in rep["servers"] if s["name"] == "mcqa_simple_agent")
    assert agent["state"] == "failed" and where(agent["evidence"]) == ("gym_env_start.stderr.log", 188)
    assert agent["failure_reason"] == ("died after it was ready, without an error of its own (killed? out of "
                                       "memory?); Gym: RuntimeError: Process `mcqa_simple_agent` finished unexpectedly!")
    env = next(s for s in rep["servers"] if s["name"] == "mcqa_environment_server")
    assert [r["url"] for r in env["retrying"]] == ["http://127.0.0.1:11914/run"]
    failed = [t for t in rep["trials"] if t["status"] == "failed"]
    assert {where(t["cause"]) for t in failed} == {("gym_env_start.stderr.log", 188)}


def test_a_collector_stopped_by_ctrl_c_is_incomplete_not_aborted(tmp_path):
    """Its traceback ends with a bare `KeyboardInterrupt`: the user stopped it, nothing failed."""
    rep, code = json_report(as_recorded("g070_collector_interrupted", tmp_path))
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["reason"] == ("the collector ended without `Finished rollout collection!` (it was interrupted: "
                             "Ctrl-C, or SIGINT); 6 trials missing")
    assert rep["evidence"]["text"] == "KeyboardInterrupt" and rep["evidence"]["file"] == "gym_eval_run.stderr.log"
    missing = [t for t in rep["trials"] if t["status"] == "missing"]
    assert len(missing) == 6 and {t["cause"]["text"] for t in missing} == {"KeyboardInterrupt"}


def test_a_start_stopped_by_ctrl_c_is_incomplete_and_its_servers_stopped_not_dead(tmp_path):
    """Each server's output ends at its venv step, as the 0.4-0.6 silent death does; but Gym said it
    was stopping them (`Sending interrupt signals to servers...`): stopped, not dead, and no failure."""
    rep, code = json_report(as_recorded("g070_start_interrupted", tmp_path))
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["reason"] == ("gym env start was interrupted (Ctrl-C, or SIGINT) before every server was ready (still "
                             "waiting for mcqa, mcqa_simple_agent, mcqa_environment_server, policy_model); it "
                             "stopped its servers")
    assert rep["evidence"]["text"] == "KeyboardInterrupt" and rep["evidence"]["file"] == "gym_env_start.stderr.log"
    assert [e["text"] for e in rep["related"]][1] == "Sending interrupt signals to servers..."
    assert rep["parent"]["interrupt"] == rep["evidence"] and rep["parent"]["stopping"] == rep["related"][1]
    assert {(s["state"], s["phase"], s["silent_death"]) for s in rep["servers"]} == {
        ("exited", "stopped by Gym before it was ready", False)}


def test_gym_env_start_stopped_mid_collection_is_the_story_not_the_500_it_caused(tmp_path):
    """Ctrl-C in gym env start's terminal: it stops its servers, whose open /runs answer 500, and the
    collector aborts. Nothing upstream explains the 500: the stop does."""
    rep, code = json_report(as_recorded("g070_env_interrupted_mid_collection", tmp_path))
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["reason"] == ("gym env start shut its servers down while trials ran (it was stopped: Ctrl-C, or a "
                             "signal); then the collector aborted: mcqa_environment_server answered 500 on /run")
    assert rep["evidence"]["text"] == "Sending interrupt signals to servers..."
    assert "ClientResponseError: 500" in rep["related"][0]["text"]


def test_trials_failed_by_gyms_stop_trace_to_the_stop_not_to_an_agent_line(tmp_path):
    """Their /runs were cut by the stop (answered 500 as the servers shut down): the stop explains
    them, not whatever the agent printed last (nothing ties that to them)."""
    rep, _ = json_report(as_recorded("g070_env_interrupted_mid_collection", tmp_path))
    failed = [t for t in rep["trials"] if t["status"] == "failed"]
    assert len(failed) == 2
    for t in failed:
        assert t["cause"]["text"] == "Sending interrupt signals to servers..."
        assert [e["text"] for e in t["cause_chain"]][-1] == "Sending interrupt signals to servers..."
        assert not any("uvicorn access logging" in e["text"] for e in t["cause_chain"])


def gyms_death_report(run, name: str) -> int:
    """Append to gym env start's stderr the traceback Gym 0.7 ends with when its poll finds a server's
    process gone (`RuntimeError: Process `X` finished unexpectedly!`, as g070_agent_killed has it);
    the line number of that RuntimeError."""
    killed = (RECORDED070 / "g070_agent_killed" / "gym_env_start.stderr.log").read_text().splitlines()
    start = next(i for i, line in enumerate(killed) if line == "Traceback (most recent call last):")
    tail = [line.replace("mcqa_simple_agent", name) for line in killed[start:]]
    err = run / "gym_env_start.stderr.log"
    lines = err.read_text().splitlines() + tail
    err.write_text("\n".join(lines) + "\n")
    return len(lines)


def test_a_server_gym_calls_dead_after_it_shut_down_cleanly_on_ctrl_c_exited_with_the_run(tmp_path):
    """Ctrl-C reaches gym env start and its servers at once: a server can finish its clean uvicorn
    shutdown (`Shutting down` ... `Finished server process`) before Gym's poll sees its process gone
    and raises `Process X finished unexpectedly!`. That server exited with the run; the run's story
    stays the stop's."""
    run = as_recorded("g070_env_interrupted_mid_collection", tmp_path)
    died_at = gyms_death_report(run, "mcqa_simple_agent")
    rep, code = json_report(run)
    assert rep["parent"]["died"]["line"] == died_at         # Gym's words are read, and kept as Gym's
    agent = next(s for s in rep["servers"] if s["name"] == "mcqa_simple_agent")
    assert (agent["state"], agent["phase"], agent["failure_reason"]) == (
        "exited", "exited with the run (Ctrl-C, or a signal)", None)
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["reason"] == ("gym env start shut its servers down while trials ran (it was stopped: Ctrl-C, or a "
                             "signal); then the collector aborted: mcqa_environment_server answered 500 on /run")
    assert rep["evidence"]["text"] == "Sending interrupt signals to servers..."
    assert all("finished unexpectedly" not in (t["cause"] or {}).get("text", "") for t in rep["trials"])


def test_a_server_gym_calls_dead_with_no_clean_shutdown_of_its_own_still_died(tmp_path):
    """The same stop, but Gym names a server whose output shows no shutdown of its own (killed, out
    of memory): that one died, and its death is the story."""
    run = as_recorded("g070_env_interrupted_mid_collection", tmp_path)
    for name in ("gym_env_start.stderr.log", "gym_env_start.stdout.log"):
        f = run / name
        f.write_text("".join(x for x in f.read_text().splitlines(keepends=True) if not x.startswith("(mcqa) INFO:")))
    died_at = gyms_death_report(run, "mcqa")
    rep, code = json_report(run)
    mcqa = next(s for s in rep["servers"] if s["name"] == "mcqa")
    assert mcqa["state"] == "failed" and mcqa["failure_reason"].startswith("died after it was ready")
    assert (rep["verdict"], code) == ("collection_aborted", 2)
    assert rep["reason"].startswith("mcqa died while trials ran") and rep["evidence"]["line"] == died_at


def test_04_a_start_stopped_by_ctrl_c_leaves_its_servers_where_they_were(tmp_path):
    """0.4.0 does not stop its servers on Ctrl-C: they are left installing, nothing waits for them."""
    rep, code = json_report(as_recorded("start_interrupted", tmp_path, FIXTURES / "gym-0.4.0-recorded"))
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["reason"] == ("gym env start was interrupted (Ctrl-C, or SIGINT) before every server was ready (still "
                             "waiting for mcqa, mcqa_simple_agent, policy_model)")
    assert rep["evidence"]["text"] == "KeyboardInterrupt"
    assert all(s["state"] != "failed" and not s["silent_death"] for s in rep["servers"])
    assert {s["phase"] for s in rep["servers"]} == {"not up when gym env start ended: nothing waits for it any more"}
