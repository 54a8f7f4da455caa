"""Gym's captured output read in blocks (core/streamscan.py, Reducer.stream_block): every line the
line path can act on is found by the block search, and output read in blocks, cut anywhere between
lines, gives the same model as the same output read line by line."""

import itertools
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import gymlines as gl, logscan, streamscan
from gymwatch.core.layout import BOTH, ENV, EVAL, VALIDATE
from gymwatch.core.markers import MARKERS
from gymwatch.core.model import RunState
from gymwatch.core.reducer import Reducer

# Every pattern the line path of a captured stream acts through (core/reducer.py).
ACTING = {**{f"PARENT_{i}": p for i, p in enumerate(gl.PARENT_PATTERNS)},
          **{f"MARKER_{name}": p for name, p in MARKERS},
          **{name: getattr(getattr(gl, name), "regex", getattr(gl, name)) for name in (
              "BIND_ERROR_RE", "COLLECT_START_RE", "REQUEST_RETRY_RE", "COLLECT_DONE_RE", "PROGRESS_RE", "TQDM_RE",
              "EXC_LINE_RE", "INTERRUPT_RE", "CLI_ERROR_RE", "RUN_FAILED_RE", "DROPPED_RE", "HEALTH_LINE_RE",
              "FOUND_RE", "BANNER_RE", "HEAD_RE", "SLEEPING_RE")}}


def _hot(line: str, quiet: frozenset[str] = frozenset()) -> bool:
    block = line.encode() + b"\n"
    return logscan.next_line(streamscan.hot_pattern(quiet), block, 0, len(block)) == 0


@pytest.mark.parametrize("name", sorted(ACTING))
def test_every_line_a_pattern_acts_on_is_found_by_the_block_search(name):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(ACTING[name]).filter(lambda s: "\n" not in s and "\r" not in s))
    def check(line):
        assert _hot(line), line
    check()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet="ab( )\t\u00a0", max_size=30), st.sampled_from(["srv", "a/b.c", "x-y"]),
       st.text(alphabet="ab( )", max_size=10))
def test_a_line_another_write_may_be_glued_onto_is_found(head, name, tail):
    line = f"{head}({name}) {tail}"
    if len(gl.unglue(line, [name])) > 1 or gl.split_prefix(line)[0] is not None:
        assert _hot(line), line


@pytest.mark.parametrize("line", ["plain text of no interest", "", "    'port': 15222,", "{", "#" * 20,
                                  '  File "/x/main.py", line 78, in dispatch', "    ~~~~^^",
                                  "2026-11-29 10:14:21,230\tINFO worker.py:2029 -- Connecting to existing Ray cluster"])
def test_ordinary_lines_are_not_hot(line):
    assert not _hot(line)


def test_a_quiet_servers_lines_are_not_hot_unless_a_write_may_be_glued_on():
    quiet = frozenset({"mcqa", "a/b", "monitor"})
    assert not _hot("(mcqa) INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C)", quiet)
    assert not _hot("(a/b)ERROR: no space after the prefix", quiet)
    assert _hot("(mcqa) text(policy_model) glued", quiet)
    assert _hot("(mcqa_x) INFO:     a server not quiet", quiet) and _hot("(mcq", quiet)
    assert _hot("(monitor) NeMo Gym finished!", quiet)        # never a Gym prefix: Gym's own line
    assert not _hot("(café) ERROR: a server named outside ASCII", frozenset({"café"}))
    assert _hot("(cafe) ERROR: not that server", frozenset({"café"}))


def test_no_keyword_starts_like_a_servers_prefix():
    """A keyword is looked for in a line not starting with `(`, or in a foreign server's line."""
    assert not any(w.startswith("(") for w in streamscan._WORDS)


# Lines of `gym env start`, `gym eval run` and a merged stream (two of each reach every state the
# line path reads line by line: a banner's fields, the endpoint list, `Examples left:`, a CLI error).
LINES = [
    "plain text of no interest", "", "   ", "\u00a0", "{", "}", "#" * 20,
    "2026-11-29 10:14:{s:02d},230\tINFO worker.py:2029 -- Connected to Ray cluster.",
    "[2026-11-29 10:15:{s:02d}] something stamped", "2026-11-29 1 not a stamp", "[1 not a stamp either",
    "[1] mcqa (resources_servers/mcqa)", "    'host': '127.0.0.1',", "    'port': 15222,", "    'pid': 4242,",
    "[2] policy_model (responses_api_models/openai_model)", "    'url': 'http://127.0.0.1:15223',",
    "(mcqa) INFO:     Started server process [4242]", "(mcqa) INFO:     Uvicorn running on http://127.0.0.1:1 (x)",
    "(other) ERROR:    boom", "(mcqa) text(policy_model) glued", "(mcqa) ERROR:    boom", "(mcqa)",
    "(mcqa)no space", "(mcqa_x) near", "(monitor) Finished 3 / 10 rollouts", "(monitor) x", "(raylet) y", "Waiting for servers to spin up(mcqa) glued",
    "Waiting for head server to spin up", "Waiting for servers to spin up", "Checking for HTTP server statuses.",
    "0 / 2 servers ready. Waiting for servers to spin up: ['mcqa', 'policy_model']",
    "All 2 / 2 servers ready! Polling every 60s", "Head server is not up yet (status `connection_error`). Sleeping...",
    "Process `mcqa` finished unexpectedly!", "NeMo Gym finished!", "Sending interrupt signals to servers...",
    "INFO:     Uvicorn running on http://127.0.0.1:11000 (Press CTRL+C to quit)",
    "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 11000): address already in use",
    "Waiting for 1 model endpoint(s) to answer: http://127.0.0.1:9/v1 (policy_base_url)",
    "1 model endpoint(s) never answered within 30s:", "  - http://127.0.0.1:9/v1 (from `policy_base_url`)",
    "Traceback (most recent call last):", '  File "/x/main.py", line 78, in dispatch', "    ~~~~^^",
    "RuntimeError: Process `mcqa` finished unexpectedly!", "KeyboardInterrupt", "ValueError: bad",
    "Error: Input file not found: /x.jsonl", "please check the path", "and try again",
    "Querying with 2 concurrent requests", "Collecting rollouts:  40%|####      | 4/10 [00:01<00:02,  2.45it/s]",
    "Reading rows: 5it [00:00, 37052.16it/s]", "Finished 3 / 10 rollouts", "Finished rollout collection!",
    "Examples left:", "1. mcqa: 4", "[rollout_collection] /run failed status=500 row={\"_ng_task_index\": 3}",
    "[request_retry url=http://127.0.0.1:9/run error=ClientOSError retry=7 elapsed_s=3.0]",
    "Rollout health: 10 checked, 8 healthy, 1 unhealthy, 1 unobserved", "Per-task latency over 3 tasks",
]


def _line(i: int, text: str) -> str:
    return text.replace("{s:02d}", f"{i % 60:02d}")


def _reducer() -> Reducer:
    r = Reducer(RunState(root="/run"))
    r.own_logs = {"mcqa", "monitor"}
    r.server("mcqa")
    r.server("monitor")          # never a Gym prefix (gymlines.NOT_SERVERS): its lines are Gym's own
    return r


def _by_lines(role: str, lines: list[str]) -> Reducer:
    r = _reducer()
    for i, text in enumerate(lines, 1):
        r.stream_line(role, "out.log", i, text)
    return r


def _by_blocks(role: str, lines: list[str], cuts: list[int]) -> Reducer:
    r = _reducer()
    bounds = sorted({0, len(lines), *(c % (len(lines) + 1) for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        r.stream_block(role, "out.log", a + 1, "".join(t + "\n" for t in lines[a:b]).encode())
    return r


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([ENV, EVAL, BOTH, VALIDATE]),
       st.lists(st.sampled_from(range(len(LINES))), max_size=80),
       st.lists(st.integers(min_value=0, max_value=100), max_size=6))
def test_output_read_in_blocks_gives_the_model_read_by_lines(role, picks, cuts):
    lines = [_line(i, LINES[k]) for i, k in enumerate(picks)]
    a, b = _by_blocks(role, lines, cuts), _by_lines(role, lines)
    assert asdict(a.state) == asdict(b.state)
    assert (a.changes.run, a.changes.servers) == (b.changes.run, b.changes.servers)


def test_a_quiet_servers_lines_are_skipped_behind_the_last_line_of_the_stream():
    lines = ["All 1 / 1 servers ready! Polling every 60s", "gym's own line"] + \
        ["(mcqa) INFO:     127.0.0.1:5000 - \"POST /run HTTP/1.1\" 200 OK"] * 5000 + ["", "(mcqa) the end"]
    r = _by_blocks(ENV, lines, [])
    assert r.state.parent.last_lines["out.log"].text == "gym's own line"
    assert r.state.parent.last_lines["out.log"].line == 2
    assert asdict(r.state) == asdict(_by_lines(ENV, lines).state)


def test_quiet_lines_are_skipped_but_the_last_line_and_stamps_kept():
    lines = ["Querying with 2 concurrent requests"] + \
        [_line(i, LINES[i % 3 * 7]) for i in range(3000)] + ["the last word"]
    r = _by_blocks(EVAL, lines, [])
    c = r.state.collector
    assert c.started and c.last_lines["out.log"].text == "the last word"
    assert c.last_lines["out.log"].line == len(lines)
    assert r.state.first_stamp is not None and r.state.last_stamp > r.state.first_stamp
    assert asdict(r.state) == asdict(_by_lines(EVAL, lines).state)
