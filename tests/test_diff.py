"""`gymwatch diff A B`: the trials that changed, per-task figures, servers, verdicts, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gymwatch.cli import main
from gymwatch.core.session import read_run
from gymwatch.diff import change, compare

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "gym-0.4.0-cases"


def diff_json(capsys, a, b) -> tuple[int, dict]:
    code = main(["diff", str(a), str(b), "--format", "json", "--no-process-check"])
    return code, json.loads(capsys.readouterr().out)


def changed_keys(a: Path, b: Path) -> set:
    """The trials whose status or reward differ, straight from the two reports' models."""
    sa, sb = (read_run(str(p), check_processes=False).state for p in (a, b))
    out = set()
    for k in set(sa.trials) | set(sb.trials):
        ta, tb = sa.trials.get(k), sb.trials.get(k)
        if (ta and (ta.status, ta.reward)) != (tb and (tb.status, tb.reward)):
            out.add(k)
    return out


def test_never_ran_trials_are_worse(capsys):
    code, d = diff_json(capsys, CASES / "mixed_ok", CASES / "some_never_ran")
    assert code == 1 and d["worse"] == 4
    got = {(t["task_index"], t["rollout_index"]) for t in d["trials"]}
    assert got == {(1, 0), (1, 1), (4, 0), (4, 1)} == changed_keys(CASES / "mixed_ok", CASES / "some_never_ran")
    t = d["trials"][0]
    assert (t["a_status"], t["b_status"], t["a_reward"], t["b_reward"]) == ("completed", "never_ran", 0.0, None)
    assert (d["a"]["verdict"], d["b"]["verdict"]) == ("ok", "some_never_ran")
    task1 = next(t for t in d["tasks"] if t["task_index"] == 1)
    assert task1["a"]["completed"] == 2 and task1["b"]["never_ran"] == 2 and task1["b"]["mean_reward"] is None
    assert {s["name"] for s in d["servers"]} == {"mcqa", "mcqa_simple_agent", "policy_model"}
    assert all("a_time_to_ready" in s and "b_time_to_ready" in s for s in d["servers"])


def test_the_other_way_nothing_got_worse(capsys):
    code, d = diff_json(capsys, CASES / "some_never_ran", CASES / "mixed_ok")
    assert code == 0 and d["worse"] == 0 and d["better"] == 4 and len(d["trials"]) == 4


def test_missing_trials_of_an_aborted_collection(capsys):
    code, d = diff_json(capsys, CASES / "mixed_ok", CASES / "aborted_500")
    assert code == 1
    got = {(t["task_index"], t["rollout_index"]) for t in d["trials"]}
    assert got == changed_keys(CASES / "mixed_ok", CASES / "aborted_500")
    assert sum(1 for t in d["trials"] if t["b_status"] == "missing") == 6


def test_a_run_against_itself_changes_nothing(capsys):
    code, d = diff_json(capsys, CASES / "mixed_ok", CASES / "mixed_ok")
    assert code == 0 and d["trials"] == [] and d["worse"] == 0


def test_runs_of_different_gym_versions_compare(capsys):
    a, b = CASES / "mixed_ok", FIXTURES / "gym-0.7.0-cases" / "g07_some_never_ran"
    code, d = diff_json(capsys, a, b)
    assert {(t["task_index"], t["rollout_index"]) for t in d["trials"]} == changed_keys(a, b)
    assert code == (1 if d["worse"] else 0)
    assert d["a"]["gym_version"] != d["b"]["gym_version"]
    assert "mcqa_environment_server" in {s["name"] for s in d["servers"]}      # 0.7 only: absent in A


def test_a_lower_reward_is_worse(tmp_path, capsys):
    b = tmp_path / "b"
    shutil.copytree(CASES / "mixed_ok", b)
    rows = (b / "rollouts.jsonl").read_text().splitlines()
    d0 = json.loads(rows[0])
    if d0.get("reward") != 1.0:
        i = next(i for i, r in enumerate(rows) if json.loads(r).get("reward") == 1.0)
        rows[0], rows[i] = rows[i], rows[0]
        d0 = json.loads(rows[0])
    d0["reward"] = 0.25
    rows[0] = json.dumps(d0)
    (b / "rollouts.jsonl").write_text("\n".join(rows) + "\n")
    code, d = diff_json(capsys, CASES / "mixed_ok", b)
    assert code == 1 and len(d["trials"]) == 1
    t = d["trials"][0]
    assert (t["a_status"], t["b_status"], t["a_reward"], t["b_reward"], t["change"]) == \
        ("completed", "completed", 1.0, 0.25, "worse")


@pytest.mark.parametrize("fmt, needle", [("text", "WORSE"), ("md", "| 1 | 0 | completed |")])
def test_text_and_markdown(capsys, fmt, needle):
    assert main(["diff", str(CASES / "mixed_ok"), str(CASES / "some_never_ran"), "--format", fmt,
                 "--no-process-check"]) == 1
    out = capsys.readouterr().out
    assert needle in out and "some_never_ran" in out


def test_json_is_the_comparison_whole_in_ascii(tmp_path, capsys):
    """The JSON holds every value compare() made (read back equal) and escapes what is not ASCII,
    as json.dumps did (a run's path, its servers' names and lines may hold any text)."""
    a = tmp_path / "rün-ä"
    shutil.copytree(CASES / "mixed_ok", a)
    code, d = diff_json(capsys, a, CASES / "some_never_ran")
    want = compare(*(read_run(str(p), check_processes=False).state for p in (a, CASES / "some_never_ran")),
                   (str(a), str(CASES / "some_never_ran")))
    assert d == json.loads(json.dumps(want)) and d["a"]["path"] == str(a)
    main(["diff", str(a), str(CASES / "some_never_ran"), "--format", "json", "--no-process-check"])
    out = capsys.readouterr().out
    assert out.isascii() and "r\\u00fcn-\\u00e4" in out


def test_an_unreadable_side_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for a, b, bad in ((tmp_path / "nope", CASES / "mixed_ok", tmp_path / "nope"),
                      (CASES / "mixed_ok", tmp_path / "empty", tmp_path / "empty")):
        assert main(["diff", str(a), str(b)]) == 3
        cap = capsys.readouterr()
        assert cap.out == "" and str(bad) in cap.err and len(cap.err.strip().splitlines()) == 1
        assert "Traceback" not in cap.err


def test_change_rules():
    from gymwatch.core.model import Trial

    def t(status, reward=None):
        return Trial(0, 0, status=status, reward=reward)
    assert change(t("completed", 1.0), t("failed")) == "worse"
    assert change(t("completed", 1.0), None) == "worse"
    assert change(t("completed", 1.0), t("missing")) == "worse"
    assert change(t("failed"), t("completed", 0.0)) == "better"
    assert change(t("failed"), t("never_ran")) == "changed"
    assert change(t("completed", 0.5), t("completed", 0.5)) == ""
    assert compare(read_run(str(CASES / "mixed_ok"), check_processes=False).state,
                   read_run(str(CASES / "mixed_ok"), check_processes=False).state)["exit_code"] == 0


def test_compare_walks_each_runs_trials_a_few_times_whatever_the_number_of_tasks():
    """Grouping trials by task took one walk over all the trials per task: 1,000 tasks of 100
    trials took 12 s. The walks are counted (no timing): a few per run, not one per task."""
    from gymwatch.core.model import RunState, Trial

    class Counted(dict):
        walks = 0

        def items(self):
            Counted.walks += 1
            return super().items()

        def values(self):
            Counted.walks += 1
            return super().values()

        def __iter__(self):
            Counted.walks += 1
            return super().__iter__()

    def run(reward: float) -> RunState:
        s = RunState(root="/r")
        s.trials = Counted({(t, r): Trial(t, r, status="completed", reward=reward) for t in range(200) for r in range(2)})
        return s
    d = compare(run(1.0), run(0.0))
    assert len(d["tasks"]) == 200 and d["stats"]["tasks_worse"] == 200
    assert Counted.walks < 20


def _columns(line: str) -> list[int]:
    """Where each cell of a table line ends (cells are separated by two spaces or more)."""
    import re

    return [m.end() for m in re.finditer(r"\S+(?: \S+)*", line)]


def test_the_text_is_tables_and_a_recorded_runs_servers_say_not_timed(capsys):
    code = main(["diff", str(CASES / "mixed_ok"), str(FIXTURES / "gym-0.7.0-recorded" / "g070_agent_killed"),
                 "--no-process-check"])
    text = capsys.readouterr().out
    assert code == 1 and "?" not in text.split("servers", 1)[1]
    lines = text.splitlines()
    tasks = lines[lines.index(next(x for x in lines if x.startswith("tasks (trials ok/failed/never ran/missing"))) + 1:]
    tasks = tasks[: tasks.index("")]
    assert tasks[0].split()[:9] == ["task", "A", "mean", "B", "mean", "A", "trials", "B", "trials"]
    ends = {tuple(_columns(line)[:5]) for line in tasks[1:]}
    assert len(ends) == 1, tasks          # task, both means and both counts end at the same columns
    servers = lines[lines.index("servers (time to ready: not timed when the run was not watched live):") + 1:]
    servers = servers[: servers.index("")]
    assert servers[0].split()[:3] == ["server", "A", "ready"]
    for line in servers[1:]:
        assert "not timed" in line and "(exited)" not in line
    # a server only one run has: absent on the other side, in its own column
    agent = next(line for line in servers if "mcqa_environment_server" in line)
    assert agent.split()[-1] == "exited" and "absent" in agent
    trials = lines[lines.index(next(x for x in lines if x.startswith("trials that changed"))) + 1:]
    trials = trials[: trials.index("")]
    assert len({_columns(line)[1] for line in trials}) == 1      # rollout numbers right-aligned in one column
