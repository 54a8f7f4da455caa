"""Real nemo-gym 0.5.1 and 0.6.0 runs (tests/fixtures/gym-0.5-0.6-recorded, no per-server logs: each
server's output is in Gym's captured stdout and stderr): the report says what the files show."""

import pytest

from conftest import RECORDED0506, json_report


def report(case: str) -> tuple[dict, int]:
    return json_report(RECORDED0506 / case)


def where(ev: dict) -> tuple[str, int]:
    return ev["file"], ev["line"]


@pytest.mark.parametrize("case,version", [("g051_ok", "0.5.1"), ("g060_ok_health_files", "0.6.0")])
def test_a_good_run_is_ok_on_three_servers(case, version):
    rep, code = report(case)
    assert (rep["verdict"], code) == ("ok", 0)
    assert rep["counts"]["completed"] == 10 and rep["total"] == 10
    assert {s["name"]: s["kind"] for s in rep["servers"]} == {
        "mcqa": "resources", "mcqa_simple_agent": "agent", "policy_model": "model"}
    assert all(s["became_ready"] and s["error_count"] == 0 for s in rep["servers"])
    assert rep["info"]["gym_version"] == version and "uv's package list" in rep["info"]["gym_version_basis"]


@pytest.mark.parametrize("case", ["g060_endpoint_never_answered", "g060_eval_input_not_found",
                                  "g060_every_trial_failed", "g060_stopped_mid_collection"])
def test_06_without_a_package_list_reads_as_06_from_its_quiet_servers(case):
    """A server's `Disabling a uvicorn access logging` (0.6+) is in Gym's stdout, its ready line in
    stderr: the sign counts whichever of the two files is read first."""
    rep, _ = report(case)
    assert rep["info"]["gym_version"] == "0.6"
    assert "access logging turned off (gym_env_start.stdout.log:11)" in rep["info"]["gym_version_basis"]


def test_gyms_health_check_beside_every_trial():
    rep, _ = report("g060_ok_health_files")
    assert {t["gym_health"]["verdict"] for t in rep["trials"]} == {"unobserved"}
    assert rep["gym_health"]["checked"] == 10 and rep["gym_health"]["unobserved"] == 10


def test_05_a_500_on_run_aborts_and_points_at_the_agent_and_the_model_upstream():
    rep, code = report("g051_abort_500")
    assert (rep["verdict"], code) == ("collection_aborted", 2)
    assert rep["counts"]["missing"] == 10               # 0.5 writes no failure row: Gym names none
    assert where(rep["evidence"]) == ("gym_env_start.stdout.log", 159)
    assert "POST /run HTTP/1.1\" 500" in rep["evidence"]["text"]
    assert rep["reason"] == ("the collector aborted: mcqa_simple_agent answered 500 on /run; upstream, policy_model "
                             "got HTTP 500 from the model endpoint http://127.0.0.1:38169/v1/responses: "
                             '"stub forced failure" (gym_env_start.stdout.log:150)')


def test_06_every_trial_failed_leads_with_the_failures_and_their_cause():
    rep, code = report("g060_every_trial_failed")
    assert (rep["verdict"], code) == ("collection_aborted", 2)
    assert rep["counts"]["failed"] == 10
    assert {(t["failure_class"], t["http_status"]) for t in rep["trials"]} == {("agent_run_error", 500)}
    assert rep["reason"].startswith("every one of the 10 trials failed (agent_run_error, HTTP 500); the first "
                                    "failure traces to gym_env_start.stdout.log:150: policy_model got HTTP 500 "
                                    "from the model endpoint http://127.0.0.1:45853/v1/responses: "
                                    '"stub forced failure"; then the collector died: '
                                    "RuntimeError: None of the 10 dispatched rollouts produced a result")
    assert where(rep["evidence"]) == ("gym_env_start.stdout.log", 150) and "stub forced failure" in rep["evidence"]["text"]
    assert ("gym_eval_run.stderr.log", 75) in [where(e) for e in rep["related"]]
    model = next(s for s in rep["servers"] if s["name"] == "policy_model")
    assert model["error_count"] == 30                   # its retries on stdout, though stderr says it shut down


@pytest.mark.parametrize("case", ["g051_endpoint_never_answered", "g060_endpoint_never_answered"])
def test_a_model_endpoint_that_never_answers_is_startup_failed_at_gyms_line(case):
    rep, code = report(case)
    assert (rep["verdict"], code) == ("startup_failed", 2)
    assert where(rep["evidence"]) == ("gym_env_start.stdout.log", 77)
    assert rep["evidence"]["text"] == "Error: 1 model endpoint(s) never answered within 15s:"
    endpoints = rep["parent"]["model_endpoints"]
    assert endpoints["limit"] == 15 and where(endpoints["waiting"]) == ("gym_env_start.stdout.log", 67)
    assert not rep["collector"]["started"] and all(s["became_ready"] for s in rep["servers"])


def test_06_silent_deaths_after_a_warm_venv_check_under_a_log_dir():
    """With +nemo_gym_log_dir the install step fails under pipefail even when uv only checked a warm
    venv (`Checked N packages`): both servers that install that way die without a word; Gym names
    only the first. mcqa (installed from its pyproject) was still starting when Gym gave up."""
    rep, code = report("g060_logdir_silent_deaths_warm")
    assert (rep["verdict"], code) == ("startup_failed", 2)
    assert where(rep["evidence"]) == ("logs/mcqa_simple_agent.log", 5)
    servers = {s["name"]: s for s in rep["servers"]}
    for name, line in (("mcqa_simple_agent", 5), ("policy_model", 5)):
        s = servers[name]
        assert s["state"] == "failed" and s["silent_death"], name
        assert where(s["evidence"]) == (f"logs/{name}.log", line)
        assert "right after its venv install (`Checked 3 packages in" in s["failure_reason"]
    assert servers["mcqa"]["state"] == "starting" and not servers["mcqa"]["silent_death"]


def test_06_a_collector_that_refuses_its_arguments_is_an_aborted_collection():
    """`gym eval run --input <missing file>`: Gym 0.6 prints `Error: ...` (wrapped over two lines)
    and exits 1 before any trial: not an incomplete run with "0 trials missing"."""
    rep, code = report("g060_eval_input_not_found")
    assert (rep["verdict"], code) == ("collection_aborted", 2)
    assert where(rep["evidence"]) == ("gym_eval_run.stdout.log", 2)
    assert rep["reason"] == ("the collector stopped on an error of its own: Error: Input file not found: "
                             "'/tmp/no-such-input.jsonl' (--input). Check the path is spelled correctly.")
    assert all(s["became_ready"] for s in rep["servers"]) and rep["total"] == 0


def test_06_a_run_stopped_mid_collection_is_incomplete_by_its_content():
    """`gym env start` stopped (SIGTERM) after 4 of 10 rows: it shut its servers down and printed
    `NeMo Gym finished!`. Without process facts (a copy, a login node) no row can come any more:
    incomplete at Gym's line, not "collecting, live by its files"."""
    rep, code = report("g060_stopped_mid_collection")
    assert (rep["verdict"], code) == ("incomplete", 1)
    assert rep["counts"]["completed"] == 4 and rep["counts"]["missing"] == 6
    assert "gym env start shut its servers down before the collection finished" in rep["reason"]
    assert rep["evidence"]["text"] == "NeMo Gym finished!"
    assert {s["state"] for s in rep["servers"]} == {"exited"}
    missing = [t for t in rep["trials"] if t["status"] == "missing"]
    assert {where(t["evidence"]) for t in missing} == {where(rep["evidence"])}      # what ended them
