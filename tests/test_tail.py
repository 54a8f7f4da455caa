"""The byte-offset tailer: partial lines held back, universal newlines, truncation, replacement."""

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import tail
from gymwatch.core.tail import Tailer, decode


def lines(batch):
    return [(n, raw.decode()) for n, raw in batch.lines]


def test_partial_line_is_held_back_then_completed(tmp_path):
    p = tmp_path / "f.log"
    p.write_bytes(b"one\ntw")
    t = Tailer(str(p))
    assert lines(t.read()) == [(1, "one")]
    with open(p, "ab") as fh:
        fh.write(b"o\nthree")
    assert lines(t.read()) == [(2, "two")]
    assert lines(t.read(final=True)) == [(3, "three")]


def test_universal_newlines_count_like_python_text_mode(tmp_path):
    data = b"a\r\nb\rc\nd\r"
    p = tmp_path / "f.log"
    p.write_bytes(data)
    t = Tailer(str(p))
    got = [raw.decode() for _, raw in t.read(final=True).lines]
    assert got == data.decode().splitlines() == ["a", "b", "c", "d"]


def test_crlf_split_across_reads_is_one_line_end(tmp_path):
    p = tmp_path / "f.log"
    p.write_bytes(b"a\r")
    t = Tailer(str(p))
    assert t.read().lines == []
    with open(p, "ab") as fh:
        fh.write(b"\nb\n")
    assert lines(t.read()) == [(1, "a"), (2, "b")]


def test_truncation_resets(tmp_path):
    p = tmp_path / "f.log"
    p.write_bytes(b"one\ntwo\n")
    t = Tailer(str(p))
    t.read()
    p.write_bytes(b"x\n")
    b = t.read()
    assert b.reset and lines(b) == [(1, "x")]


def test_replacement_by_rename_resets(tmp_path):
    p = tmp_path / "f.log"
    p.write_bytes(b"old line that is long\n")
    t = Tailer(str(p))
    t.read()
    new = tmp_path / "new"
    new.write_bytes(b"fresh content that is longer than before\n")
    os.replace(new, p)
    b = t.read()
    assert b.reset and lines(b) == [(1, "fresh content that is longer than before")]


def test_missing_file_then_appears(tmp_path):
    p = tmp_path / "later.jsonl"
    t = Tailer(str(p))
    assert t.read().lines == [] and not t.exists
    p.write_bytes(b"x\n")
    assert lines(t.read()) == [(1, "x")]


def test_unreadable_file_reports_error(tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    b = Tailer(str(d)).read()
    assert b.error


def test_giant_line_is_cut_and_counted_once(tmp_path, monkeypatch):
    monkeypatch.setattr(tail, "MAX_LINE", 100)
    monkeypatch.setattr(tail, "CHUNK", 64)
    p = tmp_path / "f.log"
    p.write_bytes(b"x" * 1000 + b"\nnext\n")
    got = Tailer(str(p)).read().lines
    assert [n for n, _ in got] == [1, 2]
    assert got[0][1] == b"x" * 100 and got[1][1] == b"next"


def test_decode_replaces_invalid_utf8():
    assert decode(b"ok \xff\xfe end\r") == "ok \ufffd\ufffd end"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=400).map(lambda b: b.replace(b"\x00", b"")),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_chunking_gives_the_same_lines(tmp_path_factory, data, cuts):
    d = tmp_path_factory.mktemp("chunks")
    p = d / "f"
    p.write_bytes(b"")
    t = Tailer(str(p))
    got = []
    prev = 0
    for cut in sorted(set(c for c in cuts if c <= len(data))) + [len(data)]:
        with open(p, "ab") as fh:
            fh.write(data[prev:cut])
        prev = cut
        got += t.read().lines
    got += t.read(final=True).lines
    whole = Tailer(str(p)).read(final=True).lines
    assert got == whole
    assert [n for n, _ in got] == list(range(1, len(got) + 1))
    expected = re.split(rb"\r\n|\r|\n", data)
    if expected and expected[-1] == b"":
        expected.pop()
    assert [raw for _, raw in got] == expected


def test_read_head_reads_the_start_of_a_file_or_raises_like_open(tmp_path):
    p = tmp_path / "f.log"
    p.write_bytes(b"abc\n" * 1000)
    assert tail.read_head(p) == b"abc\n" * 1000
    assert tail.read_head(p, 6) == b"abc\nab"
    assert tail.read_head(p, 1 << 20) == b"abc\n" * 1000
    data, st = tail.read_head_stat(p, 3)
    assert data == b"abc" and st.st_size == 4000
    (tmp_path / "empty").write_bytes(b"")
    assert tail.read_head(tmp_path / "empty") == b""
    for bad in (tmp_path / "missing", tmp_path):       # absent; a directory
        with pytest.raises(OSError):
            tail.read_head(bad)


# --- bounded reads: the same lines in any slices (moved from the rows' fast-path tests) ------------
def _reference_lines(data: bytes) -> list[bytes]:
    out = re.split(rb"\r\n|\r|\n", data)
    if out and out[-1] == b"":
        out.pop()
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\n", b"\r", b"\r\n", b"{\"x\":1}"]), max_size=80)
       .map(b"".join),
       chunk=st.integers(min_value=1, max_value=16),
       max_bytes=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_tail_fast_path_and_bounded_reads(tmp_path_factory, monkeypatch, data, chunk, max_bytes, cuts):
    monkeypatch.setattr(tail, "CHUNK", chunk)
    p = tmp_path_factory.mktemp("tail") / "f.jsonl"
    p.write_bytes(b"")
    t = Tailer(str(p))
    got = []
    prev = 0
    for cut in sorted(set(c for c in cuts if c <= len(data))) + [len(data)]:
        with open(p, "ab") as fh:
            fh.write(data[prev:cut])
        prev = cut
        while True:
            b = t.read(max_bytes=max_bytes)
            got += b.lines
            if not b.more:
                break
    while True:
        b = t.read(final=True, max_bytes=max_bytes)
        got += b.lines
        if not b.more:
            break
    assert [n for n, _ in got] == list(range(1, len(got) + 1))
    assert [raw for _, raw in got] == _reference_lines(data)


def test_bounded_read_holds_a_bounded_batch(tmp_path):
    p = tmp_path / "big.jsonl"
    line = b"{\"k\":\"" + b"x" * 1000 + b"\"}\n"
    p.write_bytes(line * 5000)
    t = Tailer(str(p))
    sizes = []
    total = 0
    while True:
        b = t.read(max_bytes=1 << 20)
        sizes.append(sum(len(r) for _, r in b.lines))
        total += len(b.lines)
        if not b.more:
            break
    assert total == 5000 and len(sizes) > 3 and max(sizes) <= (1 << 20) + len(line)
