"""Unit tests of the line parsers, row parsers, redaction and layout discovery."""

import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import gymlines as gl, markers
from gymwatch.core.layout import NotARun, discover
from gymwatch.core.markers import find_marker, is_error_line
from gymwatch.core.records import BadLine, failure_facts, materialized_facts, rollout_facts
from gymwatch.core.redact import REDACTED, redact_argv, redact_obj, redact_text
from gymwatch.core.sanitize import clean


@pytest.mark.parametrize("line, name, body", [
    ("(mcqa) INFO:     Started server process [1]", "mcqa", "INFO:     Started server process [1]"),
    ("(mcqa_simple_agent)  + pip==26.3", "mcqa_simple_agent", " + pip==26.3"),
    ("(policy_model)", "policy_model", ""),
    ("INFO:     127.0.0.1:1 - \"GET / HTTP/1.1\" 200 OK", None, "INFO:     127.0.0.1:1 - \"GET / HTTP/1.1\" 200 OK"),
    ("(raylet) something", None, "(raylet) something"),
    ("(pid=1234) worker", None, "(pid=1234) worker"),
])
def test_split_prefix(line, name, body):
    assert gl.split_prefix(line) == (name, body)


def test_unglue_parent_messages_and_known_prefixes():
    assert gl.unglue("Waiting for head server to spin upINFO:     Waiting for application startup.", []) == [
        "Waiting for head server to spin up", "INFO:     Waiting for application startup."]
    assert gl.unglue("Head server is not up yet (status `connection_error`). Sleeping...INFO:     Uvicorn "
                     "running on http://127.0.0.1:11000", []) == [
        "Head server is not up yet (status `connection_error`). Sleeping...",
        "INFO:     Uvicorn running on http://127.0.0.1:11000"]
    assert gl.unglue("Sleeping...(mcqa) INFO: up", ["mcqa"]) == ["Sleeping...", "(mcqa) INFO: up"]
    assert gl.unglue("see (mcqa) and more", ["mcqa"]) == ["see (mcqa) and more"]   # after a space: not glued
    assert gl.unglue("plain line", ["mcqa"]) == ["plain line"]
    # a prefixed line: its own `(` is not a glue point, one further on may be
    assert gl.cannot_glue("(mcqa) INFO: up") and not gl.cannot_glue("(mcqa) INFO: up(agent) x")
    assert gl.unglue("(mcqa) INFO: up(agent) x", ["mcqa", "agent"]) == ["(mcqa) INFO: up", "(agent) x"]


@pytest.mark.parametrize("line", [
    "(mcqa) INFO: up", "(mcqa) INFO: up(agent) x", "see (mcqa) and more", "x(mcqa) y", "(", "((mcqa) z",
    "Waiting for servers to spin up(mcqa) a", "Head server is not up yet (status `x`). Sleeping...(mcqa) b",
    "Checking for HTTP server statuses.", "plain",
])
def test_cannot_glue_only_where_unglue_finds_nothing(line):
    if gl.cannot_glue(line):
        assert gl.unglue(line, ["mcqa", "agent"]) == [line]


def test_parse_pending_list():
    text = "2 / 3 servers ready. Waiting for servers to spin up: ['policy_model']"
    assert gl.parse_pending(text) == (2, 3, ["policy_model"])
    assert gl.parse_pending("0 / 2 servers ready. Waiting for servers to spin up: ['a', \"b\"]") == (0, 2, ["a", "b"])
    assert gl.parse_pending("0 / 0 servers ready. Waiting for servers to spin up: []") == (0, 0, [])
    assert gl.parse_pending("unrelated") is None


def test_banner_and_kinds():
    m = gl.BANNER_RE.match("[2] mcqa_simple_agent (responses_api_agents/simple_agent)")
    assert m and m.group(2) == "mcqa_simple_agent" and gl.SERVER_TYPE_KIND[m.group(3)] == "agent"
    assert gl.server_kind("x", "Creating virtual environment at: /w/responses_api_models/vllm/.venv") == "model"
    assert gl.server_kind("my_agent") == "agent"
    assert gl.server_kind("mcqa") == "unknown"


@pytest.mark.parametrize("line, marker", [
    ("Traceback (most recent call last):", "traceback"),
    ("RuntimeError: Process `policy_model` finished unexpectedly!", "process_died"),
    ("(policy_model) [model_retry url=http://x/v1 status=500 kind=server_error try=1 max_tries=3]", "model_retry"),
    ('(a) INFO:     127.0.0.1:1 - "POST /run HTTP/1.1" 500 Internal Server Error', "http_5xx"),
    ("(a) error: Request failed after 3 retries", "uv_error"),
    ("(a) ERROR:    [Errno 98] error while attempting to bind", "errno"),
    ("PermissionError: [Errno 13] Permission denied: '/x'", "errno"),
    ("Killed", "killed"),
    ("Timed out after 600s waiting for Gym servers to become ready: a, b", "timeout"),
    ("🚨 Caught an exception printed above in mcqa", "caught_exception"),
])
def test_markers(line, marker):
    assert find_marker(line) == marker and is_error_line(line)


@pytest.mark.parametrize("line", [
    "(a) INFO:     Application startup complete.",
    '(a) INFO:     127.0.0.1:1 - "POST /run HTTP/1.1" 200 OK',
    "Found ulimit of %s and failed to automatically increase with error %s. This can cause fd limit errors "
    "like `OSError: [Errno 24] Too many open files`.",
    "(mcqa) Resolved 161 packages in 3.40s",
])
def test_not_markers(line):
    assert find_marker(line) is None and not is_error_line(line)


@pytest.mark.parametrize("name", [name for name, _ in markers.MARKERS])
def test_every_marker_match_holds_one_of_its_keywords(name):
    """The keyword prefilter may only skip lines no marker matches: generate matches of each
    marker's pattern (with text around them) and check each holds one of its keywords."""
    pattern = dict(markers.MARKERS)[name]
    keywords = markers.KEYWORDS_BY_MARKER[name]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(pattern))
    def check(line):
        assert any(k in line for k in keywords), line
        if "\n" not in line and "\r" not in line and not markers.BENIGN.search(line):
            assert markers.find_marker(line) is not None
    check()


def _row(**kw):
    base = {"response": {"output": [{"type": "message"}], "usage": {"input_tokens": 5, "output_tokens": 2}},
            "reward": 1.0, "_ng_task_index": 3, "_ng_rollout_index": 1, "agent_ref": {"name": "ag"}}
    base.update(kw)
    return json.dumps(base).encode()


def test_rollout_facts():
    f = rollout_facts(_row())
    assert (f.task, f.rollout, f.attempt, f.reward, f.input_tokens, f.output_tokens, f.agent, f.never_ran) == (
        3, 1, None, 1.0, 5, 2, "ag", False)
    f = rollout_facts(_row(_ng_attempt_index=2, response={"output": [], "usage": {"prompt_tokens": 0}}))
    assert f.attempt == 2 and f.never_ran and f.input_tokens == 0


@pytest.mark.parametrize("kw, problem", [
    ({"reward": "1.0"}, "reward is str"),
    ({"_ng_task_index": "3"}, "_ng_task_index is str"),
    ({"_ng_task_index": True}, "_ng_task_index is bool"),
    ({"_ng_task_index": -1}, "_ng_task_index is int"),
    ({"_ng_rollout_index": 1.5}, "_ng_rollout_index is float"),
])
def test_rollout_wrong_types_are_reported_not_raised(kw, problem):
    f = rollout_facts(_row(**kw))
    assert problem in f.problem


def test_wrong_shapes_do_not_raise():
    f = rollout_facts(_row(response={"output": None, "usage": [1, 2]}, agent_ref="x", unknown_key={"a": 1}))
    assert not f.never_ran and f.input_tokens is None and f.agent == ""
    f = rollout_facts(_row(response="nope"))
    assert not f.never_ran


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\"str\"", b"\xff\xfe", b"{\"a\": 1"])
def test_bad_lines_raise_badline(raw):
    with pytest.raises(BadLine):
        rollout_facts(raw)


def test_failure_and_materialized_facts():
    f = failure_facts(json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_failure_class": "judge_failed",
                                  "_ng_failure_stage": "verify", "error": "judge 401"}).encode())
    assert f.failure_class == "judge_failed" and f.message == "judge 401"
    f = failure_facts(json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_failure_class": "x",
                                  "_ng_failure_stage": "agent"}).encode())
    assert f.message == "stage=agent"
    m = materialized_facts(json.dumps({"_ng_task_index": 4, "_ng_rollout_index": 1, "question": "q"}).encode())
    assert (m.task, m.rollout) == (4, 1)


def test_redaction():
    assert redact_argv(["gym", "++policy_api_key=sk-123", "--api-key", "sk-9", "++policy_model_name=m"]) == [
        "gym", f"++policy_api_key={REDACTED}", "--api-key", REDACTED, "++policy_model_name=m"]
    assert redact_obj({"policy_api_key": "x", "nested": {"hf_token": "t", "ok": 1}, "l": ["password=p"]}) == {
        "policy_api_key": REDACTED, "nested": {"hf_token": REDACTED, "ok": 1}, "l": [f"password={REDACTED}"]}
    assert "s3cr3t" not in redact_text('{"client_secret": "s3cr3t"}')
    assert redact_text("AUTH_CREDENTIALS: abc") == f"AUTH_CREDENTIALS: {REDACTED}"
    # the quick way out (no secret word at all) must not skip a word in any case or spelling
    assert redact_text("x Api-Key = v1 y PassWD:v2") == f"x Api-Key = {REDACTED} y PassWD:{REDACTED}"
    assert redact_text("no key here: value") == "no key here: value"


def test_token_counts_and_tokenizers_are_not_secrets():
    # generation settings the JSON report and a launched run's manifest must show: counts of tokens, a tokenizer
    argv = ["gym", "++responses_create_params.max_output_tokens=512", "--max-tokens", "2048",
            "++tokenizer=meta/llama", "++hf_token=123456", "++api_tokens=abc", "--hf-token", "99"]
    assert redact_argv(argv) == ["gym", "++responses_create_params.max_output_tokens=512", "--max-tokens",
                                 "2048", "++tokenizer=meta/llama", f"++hf_token={REDACTED}",
                                 f"++api_tokens={REDACTED}", "--hf-token", REDACTED]
    assert redact_obj({"max_tokens": 2048, "max_new_tokens": "64", "tokenizer_name": "a/b", "hf_token": 5,
                       "auth_tokens": "x", "tokens_secret": 3, "max_tokens_flag": True}) == {
        "max_tokens": 2048, "max_new_tokens": "64", "tokenizer_name": "a/b", "hf_token": REDACTED,
        "auth_tokens": REDACTED, "tokens_secret": REDACTED, "max_tokens_flag": REDACTED}
    assert redact_text('{"max_output_tokens": 512, "refresh_token": "r-1"}') == \
        f'{{"max_output_tokens": 512, "refresh_token": "{REDACTED}"}}'


def test_clean_strips_escapes():
    assert clean("a\x1b[31mred\x1b[0m b") == "ared b"
    assert clean("x\x1b]52;c;ZXZpbA==\x07y") == "xy"
    assert clean("t\x1b]0;title\x1b\\u") == "tu"
    assert clean("[b]markup[/b]") == "[b]markup[/b]"
    assert clean("tab\tok\x00\x07") == "tab\tok"


def test_discover_kinds(tmp_path):
    from conftest import CASES, MCQA

    assert discover(CASES / "mixed_ok").kind == "gym_dir"
    assert discover(CASES / "evaluator_bundle").kind == "evaluator_bundle"
    lay = discover(CASES / "evaluator_bundle")
    assert lay.rollouts.name == "rollouts.jsonl" and lay.rollouts.parent.name == "gym_run"
    assert discover(MCQA / "run_ok").rollouts.name == "rollouts.jsonl"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "gymwatch-manifest.json").write_text("{oops")
    with pytest.raises(NotARun, match="manifest"):
        discover(tmp_path / "m")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(NotARun, match="not a rollouts file"):
        discover(tmp_path / "x.txt")


def test_discover_any_stem_and_subdir(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "evals.jsonl").write_text("")
    (out / "evals_materialized_inputs.jsonl").write_text("")
    lay = discover(tmp_path)
    assert lay.rollouts == out / "evals.jsonl"
    assert lay.failures.name == "evals_failures.jsonl" and lay.aggregate.name == "evals_aggregate_metrics.json"


def test_sidecars_follow_the_rollouts_when_they_change(tmp_path):
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "a_materialized_inputs.jsonl").write_text("")
    lay = discover(tmp_path)
    assert lay.failures == tmp_path / "a_failures.jsonl" and lay.health_verdicts == tmp_path / "rollout_verdicts.jsonl"
    lay.rollouts = tmp_path / "sub" / "b.jsonl"
    assert lay.failures == tmp_path / "sub" / "b_failures.jsonl"
    assert lay.health_summary == tmp_path / "sub" / "quality_summary.json"
    lay.rollouts = None
    assert lay.failures is None and lay.health_verdicts is None


@given(parts=st.lists(st.sampled_from(["a", "b", ".hydra", "..", ".", "", "x.log", "logs"]), min_size=1, max_size=5))
def test_evidence_paths_are_relpaths_inside_the_run(parts):
    from pathlib import Path

    from gymwatch.core.layout import RunLayout
    lay = RunLayout(root=Path("/runs/r1"), kind="gym_dir")
    for text in ("/runs/r1/" + "/".join(parts), "/runs/r10/" + "/".join(parts)):
        want = os.path.relpath(text, "/runs/r1") if text.startswith("/runs/r1") else text
        assert lay.rel(text) == want
        assert lay.rel(Path(text)) == os.path.relpath(Path(text), "/runs/r1")


def test_a_warm_venv_says_so_in_the_phase():
    from gymwatch.core.model import Evidence, Server
    from gymwatch.core.servers import ServerTracker, on_line
    s, tr = Server(name="mcqa", kind="resources"), ServerTracker()
    for i, line in enumerate(["Using CPython 3.13.0 interpreter at: /x/python3",
                              "Creating virtual environment with seed packages at: /w/.venv",
                              "Checked 4 packages in 10ms"], 1):
        on_line(s, tr, line, Evidence("logs/mcqa.log", i, line), None)
    assert (s.state, s.phase, s.packages) == ("installing", "venv up to date: 4 packages", 4)


def test_plain_configs_are_read_as_omegaconf_reads_them(tmp_path):
    """config._load_plain_yaml (PyYAML's C loader, OmegaConf's scalar rules) gives what
    OmegaConf gives, or leaves the file to it."""
    from omegaconf import OmegaConf

    from gymwatch.core import config

    def omega(p):
        try:
            return OmegaConf.to_container(OmegaConf.load(p), resolve=False)
        except Exception:  # noqa: BLE001
            return None

    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures"
    docs = ["a: 1e3\nb: 1.5\nc: .inf\nd: 2024-01-02\ne: yes\nf: null\ng: ~\nh: '007'\ni: 0o17\nj: 0x1f\n",
            "- a\n- 1\n- [x, {y: 2}]\n", "a: 1\na: 2\n", "", "just text\n", "a: ${b}\nb: 1\n", "a: ???\n",
            "a: &x 1\nb: *x\n", "a: !!binary aGk=\n", "1: a\n", "a: [1, 2\n", "a: 1_000\nb: +12\nc: -0.0\nd: 1:30\n"]
    paths = sorted(fixtures.rglob(".hydra/*.yaml"))
    for i, doc in enumerate(docs):
        paths.append(tmp_path / f"{i}.yaml")
        paths[-1].write_text(doc)
    plain = 0
    for p in paths:
        got = config._load_plain_yaml(p)
        if got is config._UNSURE:
            continue
        plain += 1
        assert repr(got) == repr(omega(p)), p
        assert config._load_yaml(p) == omega(p), p
    assert plain > 20


PARENT_PATTERNS = sorted(name for name, (words, _, steady, _) in gl.PARENT.gates.items()
                         if steady and words and not name.startswith("marker ") and hasattr(gl, name))


@pytest.mark.parametrize("name", PARENT_PATTERNS)
def test_every_parent_pattern_match_holds_a_keyword(name):
    """The parent lines' keyword prefilter may only skip lines no parent pattern matches."""
    pattern = getattr(gl, name)
    pattern = getattr(pattern, "regex", pattern)
    if not isinstance(pattern, re.Pattern):
        return       # a literal, not a pattern

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(pattern))
    def check(line):
        assert gl.parent_line_candidate(line), line
    check()


GATED = sorted(name for name, value in vars(gl).items() if isinstance(value, gl.Gated))


@pytest.mark.parametrize("name", GATED)
def test_every_match_of_a_gated_pattern_holds_one_of_its_words(name):
    """A gated pattern is searched only in text holding one of its words: it may miss nothing."""
    gated = getattr(gl, name)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(gated.regex))
    def check(line):
        assert any(w in line for w in gated.words) or line.startswith(gated.starts), line
        assert gated.search(line) is not None
    check()


def test_the_slow_patterns_are_gated():
    """The patterns that start with a digit class or alternate, searched in every line read."""
    assert {"PENDING_RE", "ENDPOINT_FAILED_RE", "COLLECT_START_RE", "VENV_RE", "STARTING_RE", "SHUTDOWN_RE",
            "STOPPING_RE"} <= set(GATED)


@pytest.mark.parametrize("data, whole", [
    (b'[{"mean/reward": 0.5, "per_task": [1, 2], "name": "x\\u00e9"}]', True),
    (b'{"mean/reward": NaN}', True),                      # Python's json writes NaN: still whole
    (b'[{"mean/reward": 0.5', False), (b"", False),       # caught halfway through its write
    (b'[] []', False), (b'{"a": [1,]}', False), (b'{"a": tru}', False),
])
def test_aggregate_metrics_count_only_once_whole(data, whole):
    from gymwatch.core.score import gym_scores
    if whole:
        gym_scores(data, "rollouts_aggregate_metrics.json")
    else:
        with pytest.raises(ValueError):
            gym_scores(data, "rollouts_aggregate_metrics.json")


@pytest.mark.parametrize("text, key, named", [
    ('[rollout_collection] /run failed status=500 row={"_ng_rollout_index": 1, "_ng_task_index": 4}', (4, 1), True),
    ('[rollout_collection] /run failed status=500 row={"_ng_rollout_index": 1, "_ng_task_index": 4}', (4, 0), False),
    ('(agent) body: {\\"_ng_task_index\\": 12, \\"_ng_rollout_index\\": 0}', (12, 0), True),
    ("(agent) task _ng_task_index=3 failed", (3, 2), True),         # the task alone: each of its rollouts
    ('(agent) {"_ng_task_index": 31}', (3, 0), False),
    ("(agent) aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected", (0, 0), False),
])
def test_a_line_names_a_trial_by_gyms_keys(text, key, named):
    assert gl.names_trial(text, key) is named


def test_a_request_retry_line_with_a_number_not_gyms_is_no_retry_and_no_traceback():
    """`elapsed_s=1.2.3` matches the pattern's `[\\d.]+` but is no float: the reducer raised on it
    (found by tests/test_fast_scan.py's lines generated from every pattern)."""
    from gymwatch.core.layout import EVAL
    from gymwatch.core.model import RunState
    from gymwatch.core.reducer import Reducer

    r = Reducer(RunState(root="/r"))
    r.stream_line(EVAL, "gym_eval_run.stdout.log", 1, "Querying with 2 concurrent requests")
    r.stream_line(EVAL, "gym_eval_run.stdout.log", 2, "[request_retry url=http://x/run error=E retry=1 elapsed_s=1.2.3]")
    r.server_log_line("srv", "logs/srv.log", 1, "[request_retry url=http://x/v1 error=E retry=1 elapsed_s=..]")
    assert r.state.collector.retrying == {} and r.state.servers["srv"].retrying == {}


def test_a_rows_timing_facts():
    """Gym 0.7 with observability writes `ng_perf.total_latency_ms` (how long the /run took); every
    row's response has `created_at` (when the model answered). Anything but a number is no time."""
    row = {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1.0,
           "response": {"created_at": 1796107104.478194, "output": [{"type": "message"}],
                        "usage": {"input_tokens": 139, "output_tokens": 9}},
           "ng_perf": {"num_turns": 1, "total_latency_ms": 124.07326698303223}}
    f = rollout_facts(json.dumps(row).encode())
    assert f.latency == pytest.approx(0.12407326698303223) and f.answered_at == 1796107104.478194
    assert failure_facts(json.dumps({**row, "_ng_failure_class": "x"}).encode()).latency == pytest.approx(0.124073267)
    for odd in (None, True, "124", -5, 1e400, 2 ** 60, [1]):
        bad = {**row, "ng_perf": {"total_latency_ms": odd}, "response": {**row["response"], "created_at": odd}}
        f = rollout_facts(json.dumps(bad).encode())
        assert (f.latency, f.answered_at) == (None, None), odd
    for perf in (None, [], "x"):
        assert rollout_facts(json.dumps({**row, "ng_perf": perf}).encode()).latency is None
