"""A report reads big materialized inputs in a child process (core/inputkeys.py): the model is
the one the report makes reading them itself, odd rows included, and any failure of the child
falls back to reading them here."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from gymwatch.core import inputkeys, session
from gymwatch.core.session import read_run
from runbuilder import Run, rollout

ODD = ['{"_ng_task_index": 7, "_ng_rollout_index": 0, "q": "ünïcødé"}',           # not ASCII
       '{"_ng_task_index": 8, "_ng_rollout_index": 0, "_ng_attempt_index": 1}',    # an attempt
       '{"_ng_task_index": 9}',                                                    # no rollout index
       'not json at all', '', '   ',
       '{"_ng_task_index": 10, "_ng_rollout_index": 0, "n": ' + "9" * 5000 + '}']  # jiter refuses


def make(root: Path, odd: bool = True, tail: str = "") -> Path:
    run = Run(root)
    rows = [json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": {"name": "env_agent"},
                        "responses_create_params": {"input": [{"role": "user", "content": "q" * 50}]}})
            for t in range(6) for r in range(2)]
    if odd:
        rows[3:3] = ODD
    run.lines("rollouts_materialized_inputs.jsonl", *rows)
    if tail:
        run.write("rollouts_materialized_inputs.jsonl", tail)
    run.rows("", *[rollout(t, r) for t in range(4) for r in range(2)])
    run.finish()
    return root


def model(root: Path, child: bool, monkeypatch) -> dict:
    monkeypatch.setattr(session, "KEYS_CHILD_MIN", 0 if child else 1 << 60)
    monkeypatch.setattr(session.procs, "usable_cpus", lambda: 2)
    state = asdict(read_run(str(root), check_processes=False).state)
    state["malformed"].sort(key=lambda m: (m["file"], m["line"]))    # read in another order
    del state["activity"]                                             # when it was read
    return state


@pytest.mark.parametrize("odd, tail", [(False, ""), (True, ""), (True, '{"_ng_task_index": 11, "_ng_rollout_index": 0}')],
                         ids=["usual", "odd_rows", "last_line_without_newline"])
def test_the_child_gives_the_model_read_here(tmp_path, monkeypatch, odd, tail):
    root = make(tmp_path / "run", odd, tail)
    used = []
    real = inputkeys.KeysChild
    monkeypatch.setattr(inputkeys, "KeysChild", lambda *a: used.append(a) or real(*a))
    by_child = model(root, True, monkeypatch)
    assert used, "the child was not used"
    assert by_child == model(root, False, monkeypatch)
    assert by_child["expected_total"] >= 12


def test_a_file_with_a_carriage_return_is_read_here(tmp_path, monkeypatch):
    root = make(tmp_path / "run")
    p = root / "rollouts_materialized_inputs.jsonl"
    p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n", 2))
    assert model(root, True, monkeypatch) == model(root, False, monkeypatch)


def test_a_child_that_fails_is_made_up_for(tmp_path, monkeypatch):
    root = make(tmp_path / "run")

    class Broken:
        def __init__(self, *a):
            pass

        def result(self):
            return None

    monkeypatch.setattr(inputkeys, "KeysChild", Broken)
    assert model(root, True, monkeypatch) == model(root, False, monkeypatch)


def test_rows_that_are_not_one_a_line_are_read_line_by_line(tmp_path, monkeypatch):
    """msgspec's decode_lines reads values, not lines: two rows on a line beside a row over two
    lines would give as many keys as lines, on the wrong lines."""
    run = Run(tmp_path / "run")
    rows = [json.dumps({"_ng_task_index": t, "_ng_rollout_index": 0}) for t in range(6)]
    rows[2] = rows[2] + " " + json.dumps({"_ng_task_index": 20, "_ng_rollout_index": 0})
    rows[4] = '{"_ng_task_index": 4,\n"_ng_rollout_index": 0}'
    run.lines("rollouts_materialized_inputs.jsonl", *rows)
    run.rows("", *[rollout(t, 0) for t in range(3)])
    run.finish()
    used = []
    real = inputkeys.KeysChild
    monkeypatch.setattr(inputkeys, "KeysChild", lambda *a: used.append(a) or real(*a))
    by_child = model(tmp_path / "run", True, monkeypatch)
    assert used
    assert by_child == model(tmp_path / "run", False, monkeypatch)
    assert by_child["malformed_count"] == 3
