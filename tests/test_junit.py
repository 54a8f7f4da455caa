"""`gymwatch report --format junit`: valid against the Ant JUnit schema CI systems read
(tests/schemas/junit-ant.xsd), one testcase per trial, failures with reason and evidence, the
run's own failure as an error, untrusted text escaped."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from conftest import CASES, CASES07
from gymwatch.core.session import read_run
from gymwatch.junit import iter_junit, xml_attr, xml_text

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).parent / "schemas" / "junit-ant.xsd"))
ALL_CASES = sorted(p for p in list(CASES.iterdir()) + list(CASES07.iterdir()) if p.is_dir())


def junit(run: Path) -> tuple[str, ET.Element]:
    xml = "".join(iter_junit(read_run(str(run), check_processes=False).state, hostname="ci-host"))
    SCHEMA.validate(xml)                        # raises with the path of the first violation
    return xml, ET.fromstring(xml)


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in root.iter("testcase")}


@pytest.mark.parametrize("run", ALL_CASES, ids=lambda p: p.name)
def test_every_recorded_run_is_valid_and_counts_match_the_json_report(run: Path):
    xml, root = junit(run)
    report = json.loads(subprocess.run([sys.executable, "-m", "gymwatch", "report", str(run), "--format", "json",
                                        "--no-process-check"], capture_output=True, text=True).stdout)
    suite = root.find("testsuite")
    c = report["counts"]
    run_error = report["verdict"] in ("startup_failed", "collection_aborted", "no_agent_ran")
    assert int(suite.get("tests")) == report["total"] + run_error
    assert int(suite.get("failures")) == c["failed"] + c["never_ran"] + c["missing"]
    assert int(suite.get("errors")) == c["pending"] + run_error
    trials = [tc for tc in root.iter("testcase") if tc.get("name").startswith("task ")]
    assert [tc.get("name") for tc in trials] == [f"task {t['task_index']} rollout {t['rollout_index']}"
                                                 for t in report["trials"]]
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == report["verdict"] and props["exit_code"] == str(report["exit_code"])


def test_never_ran_trials_are_failures_with_reason_and_evidence():
    _, root = junit(CASES / "some_never_ran")
    tc = cases(root)
    assert tc["task 0 rollout 0"].get("classname") == "mcqa.mcqa_simple_agent"
    assert list(tc["task 0 rollout 0"]) == []                               # completed: passes
    f = tc["task 1 rollout 0"].find("failure")
    assert f.get("type") == "never_ran"
    assert f.get("message").startswith("never ran: the model was never called")
    line = read_run(str(CASES / "some_never_ran"), check_processes=False).state.trials[(1, 0)].evidence.line
    assert f.get("message").endswith(f"(rollouts.jsonl:{line})")
    assert f"evidence: rollouts.jsonl:{line}" in f.text


def test_failed_trials_carry_class_http_status_and_the_row():
    _, root = junit(CASES07 / "g07_run_failures_sidecar")
    failed = [c.find("failure") for c in root.iter("testcase") if c.find("failure") is not None]
    assert len(failed) == 4
    f = failed[0]
    assert f.get("type") == "failed.agent_run_error"
    assert f.get("message").startswith("failed: agent_run_error HTTP 500: 500, message=")
    assert "_failures.jsonl:" in f.get("message")                          # the sidecar row's file:line
    assert "cause: logs/" in f.text                                        # and the log line behind it


def test_a_startup_failure_is_an_error_on_the_suite():
    _, root = junit(CASES / "startup_failed")
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "1")
    err = cases(root)["gym env start"].find("error")
    assert err.get("type") == "startup_failed"
    assert "Errno 98" in err.get("message") and err.get("message").endswith("(logs/policy_model.log:9)")
    assert "server policy_model failed" in err.text
    assert "STARTUP FAILED" in suite.find("system-err").text
    assert "STARTUP FAILED" in suite.find("system-out").text


def test_an_aborted_collection_is_an_error_and_its_missing_trials_failures():
    _, root = junit(CASES / "aborted_500")
    tc = cases(root)
    err = tc["gym eval run (rollout collection)"].find("error")
    assert err.get("type") == "collection_aborted"
    assert err.get("message").endswith("(logs/mcqa_simple_agent.log:11)")
    missing = tc["task 1 rollout 0"].find("failure")
    assert missing.get("type") == "missing" and "gym_eval_run.stderr.log:57" in missing.get("message")


def test_untrusted_text_is_escaped_and_forbidden_characters_dropped(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(CASES07 / "g07_run_failures_sidecar", run)
    side = next(run.glob("*_failures.jsonl"))
    rows = side.read_text().splitlines()
    row = json.loads(rows[0])
    evil = 'a]]>b <x y="z"> & \x1b[31mred\x1b[0m \x1b]0;title\x07 bell\x07 nul\x00 ff\x0c "q" \'s\' end'
    row["_ng_failure_message"] = evil
    side.write_text("\n".join([json.dumps(row)] + rows[1:]) + "\n")
    xml, root = junit(run)
    assert "\x1b" not in xml and "\x00" not in xml and "\x07" not in xml and "\x0c" not in xml
    msgs = [c.find("failure").get("message") for c in root.iter("testcase") if c.find("failure") is not None]
    hit = [m for m in msgs if "a]]>b" in m]
    assert hit and '<x y="z"> & red bell nul ff "q" \'s\' end' in hit[0]
    assert "title" not in hit[0]


def test_escaping_helpers():
    assert xml_text("a<b>&c\x00\x1b[1m\ud800\ufffe") == "a&lt;b&gt;&amp;c"
    assert xml_attr('x"y\nz\tw') == "x&quot;y&#10;z&#9;w"


def test_cli_format_junit_and_its_exit_code():
    p = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(CASES / "some_never_ran"), "--format",
                        "junit", "--no-process-check"], capture_output=True, text=True)
    assert p.returncode == 1                                  # some never ran: the report's exit code
    SCHEMA.validate(p.stdout)
    assert p.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>')
