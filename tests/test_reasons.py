"""A verdict's reason names the root error, quoted whole from the line that holds it, and no report
format cuts it (the screen may wrap it)."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import CASES, CASES07
from gymwatch.core import upstream
from gymwatch.core.session import read_run
from gymwatch.report import to_json
from runbuilder import Run, rollout

RECORDED = CASES.parent
LONG = ("This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the "
        "messages, 1024 in the completion). Please reduce the length of the messages or completion.")


def cli_report(path, fmt):
    proc = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(path), "--format", fmt,
                           "--no-process-check"], capture_output=True, text=True, timeout=60)
    return proc.stdout, proc.returncode


@pytest.mark.parametrize("case", [CASES / "aborted_500", RECORDED / "gym-0.5-0.6-recorded" / "g051_abort_500",
                                  RECORDED / "gym-0.5-0.6-recorded" / "g060_every_trial_failed",
                                  CASES07 / "g07_run_failures_sidecar"], ids=lambda p: p.name)
def test_the_reason_quotes_the_model_servers_upstream_error_in_every_format(case):
    data = json.loads(cli_report(case, "json")[0])
    reason = data["reason"]
    assert '"stub forced failure"' in reason and "…" not in reason
    assert "got HTTP 500 from the model endpoint http://127.0.0.1:" in reason
    text, _ = cli_report(case, "text")
    assert text.splitlines()[0].endswith(reason)
    md, _ = cli_report(case, "md")
    assert f"**{reason.replace('|', chr(92) + '|').replace('`', chr(39))}**" in md
    junit, _ = cli_report(case, "junit")
    suite = ET.fromstring(junit).find("testsuite")
    messages = [el.get("message") for el in suite.iter() if el.tag in ("failure", "error")]
    if data["verdict"] == "collection_aborted":
        assert any(m.startswith(reason) for m in messages)
    assert "…" not in next(p.get("value") for p in suite.iter("property") if p.get("name") == "reason")


def abort_run(tmp_path, model_lines):
    """A 0.7 collection aborted on the agent's 500, the model server's own lines as given."""
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    run.ready_server("env_agent", 19251)
    run.server_log("env_agent", 'INFO:     127.0.0.1:5113 - "POST /run HTTP/1.1" 500 Internal Server Error')
    run.ready_server("policy_model", 18000)
    run.server_log("policy_model", *model_lines)
    run.lines("gym_eval_run.stderr.log", "Traceback (most recent call last):",
              "aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error', "
              "url='http://127.0.0.1:19251/run'")
    return to_json(read_run(str(tmp_path), check_processes=False).state)


def test_a_07_answer_on_the_line_after_upstream_request_failed(tmp_path):
    body = json.dumps({"object": "error", "message": LONG, "type": "BadRequestError", "param": None, "code": 400})
    data = abort_run(tmp_path, [
        "🚨 [upstream_request_failed] server=SimpleModelServer___policy_model method=POST "
        "url=http://10.0.0.7:8000/v1/responses status=400",
        f"Response content: {body}"])
    assert data["verdict"] == "collection_aborted"
    assert (f'upstream, policy_model got HTTP 400 from the model endpoint http://10.0.0.7:8000/v1/responses: '
            f'"{LONG}" (logs/policy_model.log:4)') in data["reason"]


def test_a_retry_line_whose_answer_gym_cut_says_so_and_keeps_all_it_has(tmp_path):
    cut = json.dumps({"error": {"message": LONG, "type": "invalid_request_error"}})[:200]
    data = abort_run(tmp_path, [f"[model_retry url=http://10.0.0.7:8000/v1/responses status=500 kind=server_error "
                                f"try=1 max_tries=3 error_msg={cut}]"])
    kept = LONG[: len(cut) - len('{"error": {"message": "')]
    assert f'"{kept}…"' in data["reason"]


def test_a_line_without_an_answer_is_quoted_whole(tmp_path):
    line = "ERROR:    Exception in ASGI application: " + "x" * 300
    data = abort_run(tmp_path, [line])
    assert f"upstream, policy_model logged `{line}` (logs/policy_model.log:4)" in data["reason"]


@pytest.mark.parametrize("answer,want", [
    ('{"error": {"message": "stub forced failure", "type": "server_error", "code": null}}', "stub forced failure"),
    ('{"object":"error","message":"no such model","type":"NotFoundError","code":404}', "no such model"),
    ('{"detail": "Not Found"}', "Not Found"),
    ('{"detail": [{"loc": ["body", "input"], "msg": "field required", "type": "missing"}]}', "field required"),
    ('{"error": "model is overloaded"}', "model is overloaded"),
    ('"Hit an exception in SimpleModelServer___policy_model calling an inner server: '
     'b\'{\\"error\\": {\\"message\\": \\"quota exceeded\\"}}\'"', "quota exceeded"),
    ("Internal Server Error", "Internal Server Error"),
    ("<html><body><h1>502 Bad Gateway</h1></body></html>", "<html><body><h1>502 Bad Gateway</h1></body></html>"),
    ('{"error": {"message": "rate limit reached for requests per min', "rate limit reached for requests per min…"),
])
def test_message_digs_out_the_innermost_message(answer, want):
    assert upstream.message(answer) == want


def test_a_relayed_answer_escaped_twice():
    line = ('(mcqa_simple_agent) Response content: "Hit an exception in SimpleAgent___mcqa_simple_agent calling an '
            'inner server: b\'\\"Hit an exception in SimpleModelServer___policy_model calling an inner server: '
            'b\\\\\'{\\\\\\\\\\"error\\\\\\\\\\": {\\\\\\\\\\"message\\\\\\\\\\": \\\\\\\\\\"stub forced failure\\\\\\\\\\"}}'
            '\\\\\'\\"\'"')
    assert upstream.message(upstream.answer(line)) == "stub forced failure"


def test_spinup_timeout_reason_keeps_the_servers_whole_last_line(tmp_path):
    last = "Downloading torch (800MiB) " + "from a mirror far away " * 10
    run = Run(tmp_path)
    run.server_log("policy_model", "Resolved 161 packages in 3s", last.strip())
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['policy_model']",
              "Timed out after 600s waiting for Gym servers to become ready: policy_model")
    data = to_json(read_run(str(tmp_path), check_processes=False).state)
    assert data["verdict"] == "startup_failed" and last.strip() in data["reason"]
