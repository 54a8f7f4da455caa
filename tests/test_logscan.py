"""Server logs read in blocks (core/logscan.py, Reducer.server_log_block): the keywords cover
every pattern a steady server's lines can act through, and a log read in blocks, cut anywhere
between lines, gives the same model as the same log read line by line."""

import itertools
import re
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import gymlines as gl, logscan
from gymwatch.core.model import READY, RunState
from gymwatch.core.reducer import Reducer
from gymwatch.core.tail import Tailer

PATTERNS = {"VENV_RE": gl.VENV_RE, "UVICORN_RE": gl.UVICORN_RE, "STARTING_RE": gl.STARTING_RE,
            "SHUTDOWN_RE": gl.SHUTDOWN_RE, "STOPPING_RE": gl.STOPPING_RE, "VENV_LOCK_RE": gl.VENV_LOCK_RE,
            "GYM_PACKAGE_RE": gl.GYM_PACKAGE_RE, "REQUEST_RETRY_RE": gl.REQUEST_RETRY_RE}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_every_match_of_a_steady_pattern_holds_one_of_its_keywords(name):
    keywords = logscan.STEADY_KEYWORDS[name]

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(getattr(PATTERNS[name], "regex", PATTERNS[name])))
    def check(line):
        assert any(k in line for k in keywords), line
    check()


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.from_regex(gl.RUN_ACCESS_RE))
def test_every_run_access_line_holds_its_keyword(line):
    assert logscan.RUN_ACCESS_KEYWORD in line


def test_the_chained_starts_are_keywords():
    from gymwatch.core.servers import _CHAINED
    assert set(_CHAINED) <= set(logscan.STEADY_KEYWORDS["CHAINED"])


START = ["Using CPython 3.13.15 interpreter at: /w/bin/python3", "Creating virtual environment at: /w/srv/.venv",
         "Resolved 12 packages in 1ms", "Installed 3 packages in 5ms", " + foo==1.0", " + nemo-gym==0.7.0",
         "(srv) INFO:     Started server process [4242]", "(srv) INFO:     Waiting for application startup.",
         "(srv) INFO:     Uvicorn running on http://127.0.0.1:12907 (Press CTRL+C to quit)"]
LINES = [
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


def _line(i: int, text: str) -> str:
    """Its timestamp grows with `i`: a server writes its lines in time order."""
    return text.replace("{ts}", f"2026-12-01 {6 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}")


def _by_lines(lines: list[str]) -> RunState:
    r = _reducer()
    for i, text in enumerate(lines, 1):
        r.server_log_line("srv", "logs/srv.log", i, text)
    return r.state


def _by_blocks(lines: list[str], cuts: list[int]) -> RunState:
    r = _reducer()
    bounds = sorted({0, len(lines), *(c % (len(lines) + 1) for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        block = "".join(t + "\n" for t in lines[a:b]).encode()
        r.server_log_block("srv", "logs/srv.log", a + 1, block)
    return r.state


def _reducer() -> Reducer:
    r = Reducer(RunState(root="/run"))
    r.server_log_line("other", "logs/other.log", 1, "INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C to quit)")
    return r


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(range(len(LINES))), max_size=120),
       st.lists(st.integers(min_value=0, max_value=200), max_size=8),
       st.booleans())
def test_a_log_read_in_blocks_gives_the_model_read_by_lines(picks, cuts, started):
    lines = [_line(i, LINES[k]) for i, k in enumerate(picks)]
    if started:
        lines = START + lines
    assert asdict(_by_blocks(lines, cuts)) == asdict(_by_lines(lines))


def test_a_steady_servers_ordinary_lines_are_skipped_but_its_last_line_and_stamps_kept():
    lines = START + [_line(i, LINES[i % 2 * 4]) for i in range(5000)] + ["(srv) INFO:     done for now"]
    st_ = _by_blocks(lines, [])
    s = st_.servers["srv"]
    assert s.state == READY and s.last_line == "INFO:     done for now"
    assert s.last_line_at.line == len(lines) and s.error_count == 0
    assert st_.first_stamp is not None and st_.last_stamp > st_.first_stamp
    assert asdict(st_) == asdict(_by_lines(lines))


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
    """logscan.find asks RE2's compiled matcher directly; any other pattern object, its search."""
    block = b"(policy_model) INFO: ok\n(policy_model) [model_retry url=x status=500]\nxx\n"
    pat = logscan.pattern("policy_model", True, True)
    if via == "re":
        pat = re.compile(rb"model_retry|Traceback")
    for pos, end in ((0, len(block)), (30, len(block)), (0, 20), (60, len(block)), (len(block), len(block))):
        m = pat.search(block, pos, end)
        assert logscan.find(pat, block, pos, end) == (m.start() if m else -1)


def test_a_server_named_outside_ascii_is_read_in_blocks():
    """Its name is escaped byte by byte in the block search (RE2 refused the raw bytes: an
    internal error on any run with such a log), its own lines are skipped, and they give the
    model read by lines."""
    pat = logscan.pattern("café", False, False)
    own, other = "(café) INFO: ok\n".encode(), b"(cafe) INFO: ok\n"
    assert logscan.find(pat, own, 0, len(own)) == -1 and logscan.find(pat, other, 0, len(other)) == 0
    lines = [t.replace("(srv)", "(café)") for t in START] + \
        ['(café) INFO:     127.0.0.1:5000 - "POST /v1/responses HTTP/1.1" 200 OK'] * 50 + ["(café) the end"]
    block = "".join(t + "\n" for t in lines).encode()
    by_block, by_line = Reducer(RunState(root="/run")), Reducer(RunState(root="/run"))
    by_block.server_log_block("café", "logs/café.log", 1, block)
    for i, text in enumerate(lines, 1):
        by_line.server_log_line("café", "logs/café.log", i, text)
    assert by_block.state.servers["café"].last_line == "the end"
    assert asdict(by_block.state) == asdict(by_line.state)
