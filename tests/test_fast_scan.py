"""core/fast/scan.py (the lines of a block that can change nothing, skipped in C) gives the model
its reference twin gives, the reducer's line path a line at a time: server logs and Gym's captured
output made of lines that match every pattern of gymlines' registries (generated from the
patterns themselves, whatever their declared words), ordinary lines and the lines that reach every
state, cut into blocks anywhere. A pattern declared in a registry is found by the block search
with no change to it; every pattern gymlines defines is declared (or says why not)."""

from __future__ import annotations

import re
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import fast, gymlines as gl
from gymwatch.core.fast import scan
from gymwatch.core.layout import BOTH, ENV, EVAL, VALIDATE
from gymwatch.core.model import READY, RunState
from gymwatch.core.reducer import Reducer
from gymwatch.core.tail import Tailer

REGISTRIES = {"SERVER": gl.SERVER, "PARENT": gl.PARENT, "COLLECTOR": gl.COLLECTOR}
PATTERNS = {f"{src}.{name}": getattr(gl, name.removeprefix("marker "), None) or name
            for src, reg in REGISTRIES.items() for name in reg.gates}


def _regex(src: str, name: str):
    """The pattern a registry entry gates (a failure marker's from core/markers.py), or None (a literal)."""
    from gymwatch.core.markers import MARKERS
    if name.startswith("marker "):
        return dict(MARKERS)[name.removeprefix("marker ")]
    obj = getattr(gl, name, None)
    return obj.regex if isinstance(obj, gl.Gated) else obj if isinstance(obj, re.Pattern) else None


def _matches(src: str, name: str):
    """Lines the entry acts on: generated from its pattern, or holding its literal."""
    rx = _regex(src, name)
    if rx is not None:
        return st.from_regex(rx).filter(lambda s: "\n" not in s and "\r" not in s and s.isprintable())
    words, starts, _, _ = REGISTRIES[src].gates[name]
    return st.one_of(*(st.builds(lambda a, w, b: a + w + b, st.sampled_from(["", "x ", "  "]), st.just(w),
                                 st.sampled_from(["", " y", ": z"])) for w in words),
                     *(st.builds(lambda s, b: s + b, st.just(s), st.sampled_from(["", " y"])) for s in starts))


ENTRIES = [(src, name) for src, reg in REGISTRIES.items() for name in reg.gates]


@pytest.mark.parametrize("src,name", ENTRIES, ids=[f"{s}.{n}" for s, n in ENTRIES])
def test_every_line_a_registered_pattern_matches_holds_one_of_its_words(src, name):
    words, starts, _, _ = REGISTRIES[src].gates[name]
    rx = _regex(src, name)
    if rx is None:
        return

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(rx))
    def check(text):
        line = text.split("\n")[0] if rx.pattern.startswith("^") else text
        if rx.search(line):
            assert any(w in line for w in words) or line.startswith(starts), (name, line)
    check()


def test_every_pattern_of_gymlines_is_declared_in_a_registry_or_says_why_not():
    declared = {id(getattr(gl, n)) for reg in REGISTRIES.values() for n in reg.gates if hasattr(gl, n)}
    for name, obj in vars(gl).items():
        if isinstance(obj, (gl.Gated, re.Pattern)) and not name.startswith("_") and name.isupper():
            assert id(obj) in declared or name in gl.NOT_GATED, name


def test_a_pattern_declared_in_a_registry_is_found_by_the_block_search():
    line = b"a brand new Gym line format 42 says so\n"
    block = b"plain text of no interest\n" + line
    assert scan.next_line(scan.stream_search(frozenset()), block, 0, len(block)) == len(block)
    assert scan.next_line(scan.server_search("srv", frozenset()), block, 0, len(block)) == len(block)
    gates = {k: dict(r.gates) for k, r in REGISTRIES.items()}
    try:
        gl.COLLECTOR.pattern("TEST_NEW", r"brand new Gym line format (\d+)", ("brand new Gym line format",))
        gl.SERVER.pattern("TEST_NEW", r"brand new Gym line format (\d+)", ("brand new Gym line format",))
        at = len(b"plain text of no interest\n")
        assert scan.next_line(scan.stream_search(frozenset()), block, 0, len(block)) == at
        assert scan.next_line(scan.server_search("srv", frozenset()), block, 0, len(block)) == at
    finally:
        for k, r in REGISTRIES.items():
            r.gates = gates[k]
            r.version += 1


START = ["Using CPython 3.13.15 interpreter at: /w/bin/python3", "Creating virtual environment at: /w/srv/.venv",
         "Resolved 12 packages in 1ms", "Installed 3 packages in 5ms", " + foo==1.0", " + nemo-gym==0.7.0",
         "(srv) INFO:     Started server process [4242]", "(srv) INFO:     Waiting for application startup.",
         "(srv) INFO:     Uvicorn running on http://127.0.0.1:12907 (Press CTRL+C to quit)"]
SERVER_LINES = [
    '(srv) INFO:     127.0.0.1:5000 - "POST /v1/responses HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5001 - "POST /v1/responses HTTP/1.1" 200 OK',
    '(srv) INFO:     127.0.0.1:5002 - "POST /run HTTP/1.1" 200 OK',
    '(srv) INFO:     127.0.0.1:5003 - "POST /run HTTP/1.1" 500 Internal Server Error',
    "(srv) [{ts} I 12 34] core_worker.cc:99: task finished",
    "{ts}\tINFO worker.py:1841 -- Connected to Ray cluster.",
    "(srv) {ts} WARNING something slow",
    "(srv) [model_retry url=http://127.0.0.1:18999/v1/responses status=500 kind=http_error try=1 max_tries=3]",
    "(srv) [request_retry url=http://127.0.0.1:38861/v1/responses error=ClientOSError retry=51 elapsed_s=25.1] "
    "Hit 100 global `ClientOSError` while querying http://127.0.0.1:38861/v1/responses.",
    "[request_retry url=http://127.0.0.1:9/run error=ServerDisconnectedError retry=7 elapsed_s=3.0]",
    "Traceback (most recent call last):", '  File "app.py", line 3, in run', "ValueError: boom",
    "(srv) Traceback (most recent call last):", "(srv)   File \"x.py\", line 1, in f", "(srv) RuntimeError: no",
    "During handling of the above exception, another exception occurred:", "The above exception was the direct cause",
    "KeyboardInterrupt", "asyncio.exceptions.CancelledError", "", "   ", "\u00a0", "(srv) ",
    "(srv) INFO:     Shutting down", "(srv) INFO:     Application shutdown complete.",
    "(srv) INFO:     Finished server process [4242]",
    "(srv) INFO:     Uvicorn running on http://127.0.0.1:12908 (Press CTRL+C to quit)",
    "(srv) INFO:     Started server process [4343]",
    "Creating virtual environment at: /w/srv/.venv", "Checked 5 packages in 1ms", " + bar==2.0",
    "Waiting for virtual environment setup: /w/srv/.venv",
    "(other) INFO:     a line of another server", "(other) ERROR: other's error", "(1, 2) a tuple printed",
    "(srvx) not srv's prefix", "(srv)no space after the prefix",
    "error: failed to build `x`", "OSError: [Errno 24] Too many open files", "plain text of no interest",
    "Killed", "🚨 Caught an exception printed above in srv",
]


# Lines of `gym env start`, `gym eval run` and a merged stream (two of each reach every state the
# line path reads line by line: a banner's fields, the endpoint list, `Examples left:`, a CLI error).
STREAM_LINES = [
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




def _stamped(i: int, text: str) -> str:
    """Its timestamp grows with `i`: a server writes its lines in time order."""
    return (text.replace("{ts}", f"2026-12-01 {6 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}")
            .replace("{s:02d}", f"{i % 60:02d}"))


def _cut(lines: list[str], cuts: list[int]) -> list[tuple[int, bytes]]:
    bounds = sorted({0, len(lines), *(c % (len(lines) + 1) for c in cuts)})
    return [(a + 1, "".join(t + "\n" for t in lines[a:b]).encode()) for a, b in zip(bounds, bounds[1:], strict=False)]


def _server_state(lines: list[str], cuts: list[int], quick: bool) -> dict:
    saved = set(fast.OFF)
    fast.OFF.clear()
    fast.OFF.update(set() if quick else {"scan"})
    try:
        r = Reducer(RunState(root="/run"))
        r.server_log_line("other", "logs/other.log", 1, "INFO:     Uvicorn running on http://127.0.0.1:1 (x)")
        for first, block in _cut(lines, cuts):
            r.server_log_block("srv", "logs/srv.log", first, block)
        return asdict(r.state)
    finally:
        fast.OFF.clear()
        fast.OFF.update(saved)


def _stream_state(role: str, lines: list[str], cuts: list[int], quick: bool) -> tuple:
    saved = set(fast.OFF)
    fast.OFF.clear()
    fast.OFF.update(set() if quick else {"scan"})
    try:
        r = Reducer(RunState(root="/run"))
        r.servers_own_logs({"mcqa", "monitor"})
        r.server("mcqa")
        r.server("monitor")          # never a Gym prefix (gymlines.NOT_SERVERS): its lines are Gym's own
        for first, block in _cut(lines, cuts):
            r.stream_block(role, "out.log", first, block)
        return asdict(r.state), r.changes.run, r.changes.servers
    finally:
        fast.OFF.clear()
        fast.OFF.update(saved)


def _any_entry(sources: tuple[str, ...]):
    return st.sampled_from([(s, n) for s, n in ENTRIES if s in sources]).flatmap(lambda e: _matches(*e))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(st.sampled_from(SERVER_LINES), _any_entry(("SERVER",)),
                          _any_entry(("SERVER",)).map(lambda t: "(srv) " + t)), max_size=60),
       st.lists(st.integers(min_value=0, max_value=80), max_size=6),
       st.sampled_from([[], START, START[:4], START[:5] + ["(srv) some line of its own"]]))
def test_a_server_log_read_in_blocks_gives_the_model_read_by_lines(lines, cuts, start):
    lines = [_stamped(i, t) for i, t in enumerate(start + lines)]
    assert _server_state(lines, cuts, True) == _server_state(lines, cuts, False)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([ENV, EVAL, BOTH, VALIDATE]),
       st.lists(st.one_of(st.sampled_from(STREAM_LINES), _any_entry(("PARENT", "COLLECTOR")),
                          _any_entry(("SERVER",)).map(lambda t: "(mcqa) " + t)), max_size=60),
       st.lists(st.integers(min_value=0, max_value=80), max_size=6))
def test_captured_output_read_in_blocks_gives_the_model_read_by_lines(role, lines, cuts):
    lines = [_stamped(i, t) for i, t in enumerate(lines)]
    assert _stream_state(role, lines, cuts, True) == _stream_state(role, lines, cuts, False)


# States a server's log can be in when a line comes: not started, installing, between its install
# summary and its own start, starting, ready, in an error block, shutting down.
STARTS = [[], START[:3], START[:5], START[:5] + ["(srv) some line of its own"], START,
          START + ["(srv) Traceback (most recent call last):", '(srv)   File "x.py", line 1, in f'],
          START + ["(srv) INFO:     Shutting down"],
          START + ["(srv) [upstream_request_failed] server=m method=POST url=http://x/v1/responses status=500"]]


@pytest.mark.parametrize("name", sorted(gl.SERVER.gates))
def test_every_server_pattern_in_every_state_reads_the_same_in_blocks(name):
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(STARTS), st.lists(st.sampled_from(SERVER_LINES[:3]), max_size=3),
           _matches("SERVER", name), st.booleans(), st.lists(st.integers(0, 20), max_size=3))
    def check(start, before, line, prefixed, cuts):
        lines = [_stamped(i, t) for i, t in enumerate(start + before + [("(srv) " if prefixed else "") + line,
                                                                      "(srv) a line after it"])]
        assert _server_state(lines, cuts, True) == _server_state(lines, cuts, False), lines
    check()


# States of Gym's captured output: nothing read, all ready, a banner open, collecting, after a
# traceback, after `Examples left:`, after a `gym` command's error.
STREAM_STARTS = [[], ["All 2 / 2 servers ready! Polling every 60s"], ["[1] mcqa (resources_servers/mcqa)"],
                 ["Querying with 2 concurrent requests"], ["Traceback (most recent call last):"],
                 ["Examples left:"], ["Error: Input file not found: /x.jsonl"]]


@pytest.mark.parametrize("name", [f"{s}.{n}" for s in ("PARENT", "COLLECTOR") for n in sorted(REGISTRIES[s].gates)])
def test_every_gym_output_pattern_in_every_state_reads_the_same_in_blocks(name):
    src, entry = name.split(".", 1)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from([ENV, EVAL, BOTH, VALIDATE]), st.sampled_from(STREAM_STARTS),
           st.lists(st.sampled_from(STREAM_LINES[:3]), max_size=3), _matches(src, entry),
           st.lists(st.integers(0, 20), max_size=3))
    def check(role, start, before, line, cuts):
        lines = [_stamped(i, t) for i, t in enumerate(start + before + [line, "a line after it"])]
        assert _stream_state(role, lines, cuts, True) == _stream_state(role, lines, cuts, False), lines
    check()


def test_a_steady_servers_ordinary_lines_are_skipped_but_its_last_line_and_stamps_kept():
    lines = START + [_stamped(i, SERVER_LINES[i % 2 * 4]) for i in range(5000)] + ["(srv) INFO:     done for now"]
    state = _server_state(lines, [], True)
    s = state["servers"]["srv"]
    assert s["state"] == READY and s["last_line"] == "INFO:     done for now"
    assert s["last_line_at"].line == len(lines) and s["error_count"] == 0
    assert state["first_stamp"] is not None and state["last_stamp"] > state["first_stamp"]
    assert state == _server_state(lines, [], False)


def test_a_venv_build_resumed_after_its_install_summary_is_read_line_by_line():
    """uv's lines act until the server's own start (a latent difference of the block search,
    found by the test above: they were skipped once the server had printed any line)."""
    lines = ["Installed 3 packages in 5ms", " + foo==1.0", "(srv) some line of its own", "Downloading bar (1MB)"]
    state = _server_state(lines, [], True)
    assert state["servers"]["srv"]["state"] == "installing"
    assert state == _server_state(lines, [], False)


def test_a_quiet_servers_lines_are_skipped_behind_the_last_line_of_the_stream():
    lines = ["All 1 / 1 servers ready! Polling every 60s", "gym's own line"] + \
        ["(mcqa) INFO:     127.0.0.1:5000 - \"POST /run HTTP/1.1\" 200 OK"] * 5000 + ["", "(mcqa) the end"]
    state = _stream_state(ENV, lines, [], True)[0]
    assert state["parent"]["last_lines"]["out.log"].text == "gym's own line"
    assert state["parent"]["last_lines"]["out.log"].line == 2
    assert state == _stream_state(ENV, lines, [], False)[0]


def _hot(line: str, quiet: frozenset[str] = frozenset()) -> bool:
    block = line.encode() + b"\n"
    return scan.next_line(scan.stream_search(quiet), block, 0, len(block)) == 0


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


def test_no_word_starts_like_a_servers_prefix():
    """A word is looked for in a line not starting with `(`, or in a foreign server's line."""
    for reg in (gl.PARENT, gl.COLLECTOR):
        words, starts = reg.keywords()
        assert not any(w.startswith("(") for w in words + starts)


def test_the_tailer_gives_the_same_lines_as_blocks(tmp_path):
    path = tmp_path / "srv.log"
    data = b"a\nb\r\nc\rd\n" + b"x" * 10 + b"\n" * 3 + b"tail without newline"
    path.write_bytes(data)
    lines = [raw for _, raw in Tailer(str(path)).read(final=True).lines]
    blocks = Tailer(str(path)).read(final=True, blocks=True).blocks
    got = [ln for first, block in blocks for ln in block.split(b"\n")[:-1]]
    assert got == lines and blocks[0][0] == 1
    assert all(b"\r" not in block for _, block in blocks)


@pytest.mark.parametrize("via", ["re2", "re"])
def test_find_is_where_a_search_starts(via):
    """scan.find asks RE2's compiled matcher directly; any other pattern object, its search."""
    block = b"(policy_model) INFO: ok\n(policy_model) [model_retry url=x status=500]\nxx\n"
    pat = scan.server_search("policy_model", frozenset())
    if via == "re":
        pat = re.compile(rb"model_retry|Traceback")
    for pos, end in ((0, len(block)), (30, len(block)), (0, 20), (60, len(block)), (len(block), len(block))):
        m = pat.search(block, pos, end)
        assert scan.find(pat, block, pos, end) == (m.start() if m else -1)


def test_a_server_named_outside_ascii_is_read_in_blocks():
    """Its name is escaped byte by byte in the block search (RE2 refused the raw bytes: an
    internal error on any run with such a log), its own lines are skipped, and they give the
    model read by lines."""
    pat = scan.server_search("café", frozenset({"ACCESS_LINE", "RUN_ACCESS_RE"}))
    own, other = "(café) INFO: ok\n".encode(), b"(cafe) INFO: ok\n"
    assert scan.find(pat, own, 0, len(own)) == -1 and scan.find(pat, other, 0, len(other)) == 0
    lines = [t.replace("(srv)", "(café)") for t in START] + \
        ['(café) INFO:     127.0.0.1:5000 - "POST /v1/responses HTTP/1.1" 200 OK'] * 50 + ["(café) the end"]
    block = "".join(t + "\n" for t in lines).encode()
    by_block, by_line = Reducer(RunState(root="/run")), Reducer(RunState(root="/run"))
    by_block.server_log_block("café", "logs/café.log", 1, block)
    for i, text in enumerate(lines, 1):
        by_line.server_log_line("café", "logs/café.log", i, text)
    assert by_block.state.servers["café"].last_line == "the end"
    assert asdict(by_block.state) == asdict(by_line.state)
