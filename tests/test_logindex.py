"""Unit tests of the log line index (headless)."""

import os
import random
import subprocess
import sys
import threading
import time

import pytest

from conftest import record_made
from gymwatch.core import eolcount, logindex
from gymwatch.core.logindex import CAP, LogIndex
from gymwatch.core.logset import LogSet
from gymwatch.core.matcher import Matcher
from gymwatch.core.tail import Tailer, decode


def write(path, data: bytes, mode="wb"):
    with open(path, mode) as fh:
        fh.write(data)


def lines_of(ix: LogIndex) -> list[str]:
    ix.wait()
    return [ix.line(i) for i in range(ix.line_count)]


def tailer_truth(path) -> list[str]:
    return [decode(raw) for _, raw in Tailer(str(path)).read(final=True).lines]


def set_chunk(monkeypatch, n: int) -> None:
    """Count (eolcount) and split blocks (logindex) in chunks of n bytes."""
    monkeypatch.setattr(logindex, "CHUNK", n)
    monkeypatch.setattr(eolcount, "CHUNK", n)


@pytest.fixture
def small_chunks(monkeypatch):
    set_chunk(monkeypatch, 4)
    monkeypatch.setattr(logindex, "SYNC_BYTES", 0)      # index in the background thread


def test_core_does_not_import_textual():
    code = "import sys, gymwatch.core.logindex; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lines_and_partial_last_line(tmp_path):
    p = tmp_path / "a.log"
    write(p, b"one\ntwo\nthr")
    ix = LogIndex(p)
    assert lines_of(ix) == ["one", "two", "thr"]
    write(p, b"ee\nfour\n", "ab")
    r = ix.refresh()
    assert (r.added, r.reset) == (1, False)      # the partial line grew, one new line
    assert lines_of(ix) == ["one", "two", "three", "four"]


@pytest.mark.parametrize("data, expected", [
    (b"a\r\nb\r\nc", ["a", "b", "c"]),
    (b"a\rb\rc\n", ["a", "b", "c"]),
    (b"a\r\r\nb", ["a", "", "b"]),
    (b"\n\n", ["", ""]),
    (b"", []),
    (b"x\r", ["x"]),
])
def test_universal_newlines(tmp_path, data, expected):
    p = tmp_path / "a.log"
    write(p, data)
    assert lines_of(LogIndex(p)) == expected == tailer_truth(p)


def test_cr_at_eof_decided_by_next_append(tmp_path):
    p = tmp_path / "a.log"
    write(p, b"a\r")
    ix = LogIndex(p)
    assert lines_of(ix) == ["a"]
    write(p, b"\nb\n", "ab")                    # it was \r\n: still one line end
    ix.refresh()
    assert lines_of(ix) == ["a", "b"]
    write(p, b"c\rd", "ab")                      # a lone \r inside an append
    ix.refresh()
    assert lines_of(ix) == ["a", "b", "c", "d"]


def test_random_bytes_match_the_core_tailer(tmp_path, small_chunks):
    rng = random.Random(7)
    pieces = [b"a", b"bc", b"\r", b"\n", b"\r\n", b"xyz", b"\xc3\xa9", b"\xff"]
    for _ in range(150):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        p = tmp_path / "r.log"
        cut = rng.randint(0, len(data))
        write(p, data[:cut])
        ix = LogIndex(p, sync_lines=rng.choice([0, 3, 100]))
        write(p, data[cut:], "ab")
        ix.refresh()
        assert lines_of(ix) == tailer_truth(p), data


def test_line_numbers_match_fixture_evidence(cases):
    import json
    truth = json.loads((cases / "aborted_500" / "truth.json").read_text())
    found = 0
    for ev in _evidence(truth):
        path = cases / "aborted_500" / ev["file"]
        if not path.is_file() or not ev.get("text"):
            continue
        ix = LogIndex(path)
        ix.wait()
        assert ev["text"].strip() in ix.line(ev["line"] - 1), ev
        found += 1
    assert found


def _evidence(obj):
    if isinstance(obj, dict):
        if isinstance(obj.get("file"), str) and isinstance(obj.get("line"), int):
            yield obj
        for v in obj.values():
            yield from _evidence(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _evidence(v)


def test_truncation_and_replacement_reindex(tmp_path):
    p = tmp_path / "a.log"
    write(p, b"1\n2\n3\n")
    ix = LogIndex(p)
    ix.wait()
    write(p, b"x\n")                             # truncated (copytruncate rotation)
    r = ix.refresh()
    assert r.reset and lines_of(ix) == ["x"]
    q = tmp_path / "b.log"
    write(q, b"new\nfile\n")
    os.replace(q, p)                             # replaced: new inode
    r = ix.refresh()
    assert r.reset and lines_of(ix) == ["new", "file"]


def test_file_created_later(tmp_path):
    p = tmp_path / "later.log"
    ix = LogIndex(p)
    assert ix.error and ix.line_count == 0
    write(p, b"hello\n")
    ix.refresh()
    assert lines_of(ix) == ["hello"]


def test_long_lines_are_capped_but_readable_whole(tmp_path, monkeypatch):
    set_chunk(monkeypatch, 1000)
    p = tmp_path / "a.log"
    long = b"x" * 50_000
    write(p, b"short\n" + long + b"\nafter\n" + long)
    ix = LogIndex(p)
    assert lines_of(ix)[0] == "short" and ix.line(2) == "after"
    assert len(ix.line(1)) == CAP and ix.is_capped(1)
    assert ix.full_line(1) == long.decode() and ix.full_line(3) == long.decode()
    assert not ix.is_capped(0)


def test_first_lines_available_before_background_finishes(tmp_path, monkeypatch):
    set_chunk(monkeypatch, 64)
    monkeypatch.setattr(logindex, "SYNC_BYTES", 0)
    p = tmp_path / "big.log"
    write(p, b"".join(b"line %d\n" % i for i in range(20_000)))
    ix = LogIndex(p, sync_lines=100)
    assert ix.line_count >= 100 and ix.line(99) == "line 99"   # before any wait
    ix.wait()
    assert ix.done and ix.line_count == 20_000 and ix.line(19_999) == "line 19999"


def appended_while_indexing(p, n: int, more: int, sync_lines: int) -> LogIndex:
    """n numbered lines, an index opened on them, `more` lines appended while it works."""
    write(p, b"".join(b"%d\n" % i for i in range(n)))
    ix = LogIndex(p, sync_lines=sync_lines)
    write(p, b"".join(b"%d\n" % i for i in range(n, n + more)), "ab")
    ix.refresh()
    ix.wait()
    ix.refresh()
    assert lines_of(ix) == [str(i) for i in range(n + more)]
    return ix


def test_appends_while_background_indexing(tmp_path, monkeypatch):
    set_chunk(monkeypatch, 32)
    monkeypatch.setattr(logindex, "SYNC_BYTES", 0)
    appended_while_indexing(tmp_path / "a.log", 5000, 1000, sync_lines=10)


def test_find_next_prev_and_case(tmp_path, small_chunks):
    p = tmp_path / "a.log"
    write(p, b"alpha\nBeta\ngamma\nbeta2\ndelta\n")
    ix = LogIndex(p)
    ix.wait()
    m = Matcher("beta")
    assert ix.find(m, 0) == 1
    assert ix.find(m, 1) == 3
    assert ix.find(m, 3) == 1                     # wraps
    assert ix.find(m, 2, forward=False) == 1
    assert ix.find(m, 1, forward=False) == 3      # wraps backwards
    assert ix.find(Matcher("beta", ignore_case=False), 0) == 3
    assert ix.find(Matcher("zzz"), 0) is None


def test_filter_text_inverted_and_errors(tmp_path, small_chunks):
    p = tmp_path / "a.log"
    write(p, b"INFO: ok\nTraceback (most recent call last):\nValueError: bad\nfine\r[Errno 98] addr\n")
    ix = LogIndex(p)
    ix.wait()
    assert ix.filter(Matcher("ok")) == [0]
    assert ix.filter(Matcher("!ok")) == [1, 2, 3, 4]
    assert ix.filter(Matcher(errors_only=True)) == [1, 2, 4]
    assert ix.filter(Matcher("!errno", errors_only=True)) == [1, 2]
    assert Matcher("ab").spans("xAByab") == [(1, 3), (4, 6)]


def test_merged_set_concatenates_then_interleaves_appends(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    write(a, b"a1\na2\n")
    write(b, b"b1\n")
    s = LogSet([("A", str(a)), ("B", str(b))])
    for ix in s.indexes:
        ix.wait()
    s.sync()
    assert [s.text(r)[1:] for r in range(s.rows)] == [(0, "a1"), (1, "a2"), (0, "b1")]
    write(b, b"b2\n", "ab")
    write(a, b"a3\n", "ab")
    s.refresh()
    got = [(s.labels[src], text) for src, _, text in (s.text(r) for r in range(s.rows))]
    assert got == [("A", "a1"), ("A", "a2"), ("B", "b1"), ("A", "a3"), ("B", "b2")]
    assert s.filter(Matcher("2")) == [1, 4]
    assert s.find(Matcher("b"), 2) == 4 and s.find(Matcher("b"), 4) == 2
    assert s.row_of(0, 2) == 3 and s.locate(4) == (1, 1)


MARKER_EXAMPLES = [
    "Traceback (most recent call last):", "Process `policy_model` finished unexpectedly!",
    "Caught an exception printed above in worker", "(p) [model_retry url=x status=500 kind=s]",
    "Hit an exception while making a request", '(p) INFO: 1.2.3.4:5 - "POST /run HTTP/1.1" 500 Internal',
    "required uv version 0.9", "  error: failed to build", "OSError: [Errno 98] in use",
    "raise PermissionError", "FileNotFoundError happened", "Killed", "ValueError: x", "ERROR: x",
    "Timed out after 30s waiting for Gym servers", "2 model endpoint(s) never answered",
    "Found ulimit of 1024 and failed to automatically increase: OSError: x",   # benign
]


def test_errors_filter_finds_every_marker(tmp_path, small_chunks):
    from gymwatch.core import markers
    assert {name for name, _ in markers.MARKERS} == set(markers.KEYWORDS_BY_MARKER)
    lines = []
    for ex in MARKER_EXAMPLES:
        lines += ["INFO: filler line", ex]
    p = tmp_path / "m.log"
    write(p, ("\n".join(lines) + "\n").encode())
    ix = LogIndex(p)
    ix.wait()
    expected = [i for i, line in enumerate(lines) if markers.is_error_line(line)]
    assert len(expected) == len(MARKER_EXAMPLES) - 1
    assert ix.filter(Matcher(errors_only=True)) == expected


def test_lines_after_a_giant_line_are_searched(tmp_path, monkeypatch):
    set_chunk(monkeypatch, 64)
    p = tmp_path / "g.log"
    write(p, b"a\n" + b"y" * 5000 + b" needle-late\nafter needle\nERROR: x\n")
    ix = LogIndex(p)
    ix.wait()
    assert ix.filter(Matcher("needle")) == [2]            # past the cap in line 1: not found there
    assert ix.filter(Matcher(errors_only=True)) == [3]
    assert ix.find(Matcher("after"), 0) == 2


# --- eolcount: counting, and the back half counted in a child process -----------------------

def random_log(rng: random.Random, n: int) -> bytes:
    pieces = [b"a", b"bc", b"\r", b"\n", b"\r\n", b"xyz " * 12, b"\xc3\xa9", b"\n\n"]
    return b"".join(rng.choice(pieces) for _ in range(n))


@pytest.mark.parametrize("line", [1, 3, 20, 90, 300])
def test_count_lf_agrees_with_count_at_any_density(monkeypatch, line):
    monkeypatch.setattr(eolcount, "_PIECE", 7)          # many pieces per chunk
    data = (b"x" * (line - 1) + b"\n") * 200 + b"tail"
    for cut in (0, 1, len(data) // 3, len(data) - 4, len(data)):
        assert eolcount.count_lf(bytearray(data), cut) == data.count(b"\n", 0, cut)


@pytest.mark.parametrize("data, pos, expected", [
    (b"ab\ncd", 3, 3),          # a line starts right at pos
    (b"ab\ncd", 2, 3),
    (b"ab\r\ncd", 3, 4),        # never between the two bytes of \r\n
    (b"ab\r\ncd", 4, 4),
    (b"ab\rcd", 3, 3),          # a lone \r ends a line
    (b"abcdef", 2, -1),         # no line end within reach
    (b"ab\r", 2, -1),           # \r at EOF: may become \r\n, undecided
    (b"ab\n", 2, -1),           # the next line would start at EOF: nothing after it
])
def test_line_start_after(tmp_path, data, pos, expected):
    p = tmp_path / "a.log"
    write(p, data)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert eolcount.line_start_after(fd, pos, 16) == expected
    finally:
        os.close(fd)


def test_script_mode_writes_what_scan_range_finds(tmp_path, monkeypatch):
    set_chunk(monkeypatch, 64)
    p = tmp_path / "a.log"
    write(p, random_log(random.Random(3), 3000) + b"partial")
    size = p.stat().st_size
    fd = os.open(p, os.O_RDONLY)
    try:
        start = eolcount.line_start_after(fd, size // 2, 1000)
        want = eolcount.scan_range(fd, start, size).tobytes()
        out = subprocess.run([sys.executable, "-I", "-S", eolcount.__file__, str(fd), str(start), str(size),
                              "64"], pass_fds=(fd,), capture_output=True, check=True)
    finally:
        os.close(fd)
    assert out.stdout == want


@pytest.fixture
def split_small(monkeypatch):
    """Split files of a few KB, and record each child the index starts."""
    set_chunk(monkeypatch, 64)
    monkeypatch.setattr(logindex, "SPLIT_MIN", 512)
    monkeypatch.setattr(logindex, "SYNC_BYTES", 0)
    monkeypatch.setattr(logindex, "_cores", lambda: 2)
    return record_made(monkeypatch, logindex.subprocess, "Popen")


def test_split_index_matches_the_core_tailer(tmp_path, split_small):
    rng = random.Random(11)
    for i in range(25):
        p = tmp_path / f"s{i}.log"
        write(p, random_log(rng, rng.randint(200, 2000)))
        ix = LogIndex(p, sync_lines=rng.choice([0, 5]))
        assert lines_of(ix) == tailer_truth(p)
        ix.close()
    assert len(split_small) >= 20 and all(c.returncode == 0 for c in split_small)


def test_no_split_on_one_core(tmp_path, split_small, monkeypatch):
    monkeypatch.setattr(logindex, "_cores", lambda: 1)
    p = tmp_path / "a.log"
    write(p, random_log(random.Random(2), 1500))
    assert lines_of(LogIndex(p, sync_lines=0)) == tailer_truth(p) and not split_small


def test_split_at_a_crlf_and_at_a_lone_cr(tmp_path, split_small, monkeypatch):
    for mid_bytes in (b"\r\n", b"\r", b"\n"):
        body = b"".join(b"line %04d\r\n" % i for i in range(300))
        half = len(body) // 2
        data = body[:half - 1] + mid_bytes + body[half - 1:]
        p = tmp_path / "m.log"
        write(p, data)
        ix = LogIndex(p, sync_lines=0)
        assert lines_of(ix) == tailer_truth(p)
        ix.close()


def test_split_falls_back_when_the_child_fails(tmp_path, split_small, monkeypatch):
    monkeypatch.setattr(eolcount, "__file__", str(tmp_path / "missing.py"))
    p = tmp_path / "a.log"
    write(p, random_log(random.Random(5), 1500))
    ix = LogIndex(p, sync_lines=0)
    assert lines_of(ix) == tailer_truth(p)
    assert split_small and split_small[0].returncode != 0      # it did fail; the thread went on


def test_split_then_append_then_truncate(tmp_path, split_small):
    p = tmp_path / "a.log"
    ix = appended_while_indexing(p, 2000, 100, sync_lines=0)
    write(p, b"".join(b"t%d\n" % i for i in range(1000)))
    assert ix.refresh().reset and lines_of(ix) == [f"t{i}" for i in range(1000)]
    ix.close()
    assert all(c.poll() is not None for c in split_small)      # every child reaped


def test_close_while_a_child_starts_stops_it(tmp_path, split_small, monkeypatch):
    """close() while the index's thread starts the back half's child: that child is stopped too,
    not left counting its half to the end with close() waiting on it (a child here: 5 s)."""
    real = logindex.subprocess.Popen
    opened: list[LogIndex] = []
    closers: list[threading.Thread] = []
    made: list = []

    def start_child(args, **kw):
        while not opened:
            time.sleep(0.001)
        ix = opened[0]
        if made:           # the back half: the user closes the log just now
            before = ix.generation
            closers.append(threading.Thread(target=ix.close))
            closers[0].start()
            while ix.generation == before:
                time.sleep(0.001)
            closers[0].join(0.3)    # (the old close() stopped the children listed so far and went on)
        made.append(real([sys.executable, "-c", "import time; time.sleep(5)"], **kw))
        return made[-1]
    monkeypatch.setattr(logindex.subprocess, "Popen", start_child)
    p = tmp_path / "a.log"
    write(p, random_log(random.Random(3), 3000))
    opened.append(LogIndex(p, sync_lines=0))
    opened[0].wait(30)
    for closer in closers:
        closer.join(30)
    assert len(made) == 2 and all(c.returncode is not None and c.returncode < 0 for c in made)


def test_find_and_filter_agree_with_every_line_checked(tmp_path, monkeypatch):
    """Hits are turned into line numbers without splitting the block: check that against the
    plain answer, with every kind of line end around the hits."""
    from gymwatch.core.markers import is_error_line
    set_chunk(monkeypatch, 97)
    rng = random.Random(13)
    bodies = [b"ok line", b"ERROR: bad", b"x [Errno 98] y", b"needle here", b"Needle twice needle",
              b"Traceback (most recent call last):", b'"POST /x HTTP/1.1" 500 Internal', b""]
    ends = [b"\n", b"\r\n", b"\r"]
    for k in range(20):
        data = b"".join(rng.choice(bodies) + rng.choice(ends) for _ in range(rng.randint(1, 120)))
        p = tmp_path / f"f{k}.log"
        write(p, data + rng.choice([b"", b"tail needle"]))
        ix = LogIndex(p, sync_lines=0)
        truth = tailer_truth(p)
        assert lines_of(ix) == truth
        assert ix.filter(Matcher(errors_only=True)) == [i for i, t in enumerate(truth) if is_error_line(t)]
        assert ix.filter(Matcher("needle")) == [i for i, t in enumerate(truth) if "needle" in t.lower()]
        assert ix.filter(Matcher("!needle")) == [i for i, t in enumerate(truth) if "needle" not in t.lower()]
        ix.close()
