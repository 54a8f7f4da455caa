"""`gymwatch diff`'s statistics: trials paired on (task, rollout) where both runs scored them, the
per-task changes, the run's mean difference with its interval and exact test, the flipped tasks,
the verdict line, the trials counted apart; and Gym's own `gym eval compare` report beside them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp

from gymwatch import stats
from gymwatch.cli import main
from gymwatch.diffstats import MIN_TASKS
from runbuilder import Run, rollout, scored_pair

FIXTURES = Path(__file__).parent / "fixtures"
CASES07 = FIXTURES / "gym-0.7.0-cases"
COMPARE = FIXTURES / "gym-0.7.0-compare"


def diff(capsys, a, b, fmt="json"):
    code = main(["diff", str(a), str(b), "--format", fmt, "--no-process-check"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if fmt == "json" else out)


def two_runs(root: Path, a_rewards: list, b_rewards: list, repeats: int = 1) -> tuple[Path, Path]:
    """Runs A and B of len(rewards) tasks; a reward None is no row at all for that trial."""
    paths = []
    for name, rewards in (("A", a_rewards), ("B", b_rewards)):
        run = Run(root / name)
        run.expect(len(rewards), repeats)
        for t, rs in enumerate(rewards):
            for r, x in enumerate(rs if isinstance(rs, list) else [rs]):
                if x is not None:
                    run.rows("", rollout(t, r, reward=x))
        run.finish()
        paths.append(run.root)
    return paths[0], paths[1]


A12 = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
B12 = [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def test_a_hand_computed_case(tmp_path, capsys):
    """Twelve tasks, one trial each: tasks 0-3 pass in A and fail in B, task 4 the other way."""
    code, d = diff(capsys, *two_runs(tmp_path, A12, B12))
    s = d["stats"]
    assert code == 1                                           # exit codes keep their meaning
    assert (s["paired_trials"], s["paired_tasks"], s["rewards"]) == (12, 12, "binary")
    assert (s["a_mean"], s["b_mean"]) == (6 / 12, 3 / 12) and s["mean_difference"] == pytest.approx(-0.25)
    assert (s["tasks_worse"], s["tasks_better"], s["tasks_same"]) == (4, 1, 7)
    assert s["discordant"] == {"a_passed_only": 4, "b_passed_only": 1}
    assert s["test"] == "mcnemar_exact" and s["p_value"] == pytest.approx(2 * (1 + 5) / 32)   # P(X<=1), n=5
    assert s["p_value"] == pytest.approx(sp.binomtest(1, 5, 0.5).pvalue)
    assert [(f["task_index"], f["flip"]) for f in s["flipped"]] == \
        [(0, "pass_to_fail"), (1, "pass_to_fail"), (2, "pass_to_fail"), (3, "pass_to_fail"), (4, "fail_to_pass")]
    # the interval resamples the twelve tasks' differences: the same as stats computes from them
    assert s["interval_method"] == "task_bootstrap" and (s["resamples"], s["seed"]) == (stats.RESAMPLES, stats.SEED)
    assert s["interval"] == list(stats.task_bootstrap([-1.0] * 4 + [1.0] + [0.0] * 7, [1] * 12))
    lo, hi = s["interval"]
    assert s["verdict"] == f"B is worse on 4 of 12 tasks, better on 1; mean -0.250 [{lo:+.3f}, {hi:+.3f}]"
    t0 = d["tasks"][0]
    assert (t0["paired"], t0["a_paired_mean"], t0["b_paired_mean"], t0["change"], t0["direction"], t0["flip"]) == \
        (1, 1.0, 0.0, -1.0, "worse", "pass_to_fail")
    assert d["tasks"][5]["direction"] == "same" and d["tasks"][5]["flip"] is None
    assert d["gym_compare"] is None


def test_per_task_change_over_several_rollouts(tmp_path, capsys):
    a = [[1.0, 1.0, 0.0, 0.0]] * 10 + [[1.0, 1.0, 1.0, 1.0]]
    b = [[1.0, 0.0, 0.0, 0.0]] * 10 + [[0.0, 0.0, 0.0, 0.0]]
    _, d = diff(capsys, *two_runs(tmp_path, a, b, repeats=4))
    s = d["stats"]
    assert (s["paired_trials"], s["paired_tasks"], s["tasks_worse"]) == (44, 11, 11)
    assert d["tasks"][0]["change"] == -0.25 and d["tasks"][0]["flip"] is None        # not every trial passed in A
    assert d["tasks"][10]["change"] == -1.0 and d["tasks"][10]["flip"] == "pass_to_fail"
    assert s["mean_difference"] == pytest.approx((10 * -1 + -4) / 44)
    assert s["interval"] == list(stats.task_bootstrap([-1.0] * 10 + [-4.0], [4] * 11))


def test_trials_one_side_did_not_score_are_counted_apart_never_as_zeros(tmp_path, capsys):
    """B's task 12 never ran, 13 failed, 14 went missing, 16 is not in B at all; 15 failed in A."""
    a, b = Run(tmp_path / "A"), Run(tmp_path / "B")
    a.expect(17)
    b.expect(16)
    for t, (ra, rb) in enumerate(zip(A12, B12, strict=True)):
        a.rows("", rollout(t, 0, reward=ra))
        b.rows("", rollout(t, 0, reward=rb))
    a.rows("", rollout(12, 0, reward=1.0), rollout(13, 0, reward=1.0), rollout(14, 0, reward=1.0),
           rollout(16, 0, reward=1.0))
    a.rows("_failures", {"_ng_task_index": 15, "_ng_rollout_index": 0, "_ng_failure_class": "agent_run_error"})
    b.rows("", rollout(12, 0, reward=0.0, ran=False), rollout(15, 0, reward=1.0))
    b.rows("_failures", {"_ng_task_index": 13, "_ng_rollout_index": 0, "_ng_failure_class": "agent_run_error"})
    a.finish()
    b.finish()
    _, d = diff(capsys, a.root, b.root)
    s = d["stats"]
    assert (s["paired_trials"], s["paired_tasks"]) == (12, 12)
    assert s["mean_difference"] == pytest.approx(-0.25)           # as without them: no zero was added
    assert s["unpaired"] == {"a_only": 4, "b_only": 1, "neither": 0,
                             "a_only_b_status": {"absent": 1, "failed": 1, "missing": 1, "never_ran": 1},
                             "b_only_a_status": {"failed": 1}}
    assert (d["tasks"][12]["paired"], d["tasks"][12]["a_only"], d["tasks"][12]["direction"]) == (0, 1, None)
    assert d["tasks"][15]["b_only"] == 1
    _, text = diff(capsys, a.root, b.root, "text")
    assert "counted apart: 4 scored in A only (B: 1 absent, 1 failed, 1 missing, 1 never ran), " \
           "1 in B only (A: 1 failed)" in text


def test_too_few_tasks_get_no_interval_and_say_why(tmp_path, capsys):
    k = MIN_TASKS - 1
    _, d = diff(capsys, *two_runs(tmp_path, [1.0] * k, [1.0] * (k - 1) + [0.0]))
    s = d["stats"]
    assert s["interval"] is None and s["interval_method"] is None and s["mean_difference"] == pytest.approx(-1 / k)
    assert s["no_interval"] == f"{k} tasks scored in both runs, {MIN_TASKS} needed"
    assert s["verdict"] == f"B is worse on 1 of {k} tasks, better on 0; mean -0.111 (no interval: {s['no_interval']})"
    _, text = diff(capsys, tmp_path / "A", tmp_path / "B", "text")
    assert "[" not in text.split("paired on (task, rollout)")[1].split("\n")[1]      # no interval printed


def test_graded_rewards_have_no_exact_test_and_no_flips(tmp_path, capsys):
    a = [0.5, 0.25, 1.0, 0.75] * 3
    b = [0.25, 0.25, 0.0, 1.0] * 3
    _, d = diff(capsys, *two_runs(tmp_path, a, b))
    s = d["stats"]
    assert s["rewards"] == "graded" and s["test"] is None and s["p_value"] is None and s["flipped"] == []
    assert all(t["flip"] is None for t in d["tasks"])
    assert s["interval"] is not None and (s["tasks_worse"], s["tasks_better"]) == (6, 3)
    _, text = diff(capsys, tmp_path / "A", tmp_path / "B", "text")
    assert "rewards not all 0 or 1: no exact test, no flipped tasks" in text


def test_no_trial_scored_in_both(tmp_path, capsys):
    a, b = Run(tmp_path / "A"), Run(tmp_path / "B")
    for run, ran in ((a, True), (b, False)):
        run.expect(3)
        run.rows("", *[rollout(t, 0, reward=1.0, ran=ran) for t in range(3)])
        run.finish()
    _, d = diff(capsys, a.root, b.root)
    s = d["stats"]
    assert s["paired_trials"] == 0 and s["mean_difference"] is None and s["interval"] is None
    assert s["verdict"] == "no trial was scored in both runs: nothing to compare"
    assert s["unpaired"]["a_only_b_status"] == {"never_ran": 3}


def test_the_verdict_line_of_fifty_tasks(tmp_path, capsys):
    """The issue's example: worse on 7 of 50 tasks, better on 2, a mean with its interval."""
    a, b = scored_pair(tmp_path)
    code, d = diff(capsys, a, b)
    s = d["stats"]
    assert re.fullmatch(r"B is worse on 7 of 50 tasks, better on 2; mean -0\.\d{3} \[[-+]0\.\d{3}, [-+]0\.\d{3}\]",
                        s["verdict"])
    assert (s["paired_trials"], s["unpaired"]["a_only"]) == (197, 3)
    assert [(f["task_index"], f["flip"]) for f in s["flipped"]] == \
        [(3, "pass_to_fail"), (11, "pass_to_fail"), (27, "pass_to_fail"), (8, "fail_to_pass")]
    # the reference: per-task differences computed here from the rows, then scipy's paired bootstrap
    diffs: dict[int, list[float]] = {}
    rows_a = {(r["_ng_task_index"], r["_ng_rollout_index"]): r["reward"] for r in map(json.loads, open(a / "rollouts.jsonl"))}
    for r in map(json.loads, open(b / "rollouts.jsonl")):
        if r["response"]["output"]:                                   # never-ran rows are not scored
            key = (r["_ng_task_index"], r["_ng_rollout_index"])
            diffs.setdefault(key[0], []).append(r["reward"] - rows_a[key])
    sums, counts = np.array([sum(v) for v in diffs.values()]), np.array([len(v) for v in diffs.values()], float)
    assert s["mean_difference"] == pytest.approx(sums.sum() / counts.sum())
    ref = sp.bootstrap((sums, counts), lambda x, n, axis=-1: x.sum(axis=axis) / n.sum(axis=axis), paired=True,
                       vectorized=True, n_resamples=20000, method="percentile", rng=np.random.default_rng(0))
    se = ref.standard_error
    assert s["interval"][0] == pytest.approx(ref.confidence_interval.low, abs=0.2 * se)
    assert s["interval"][1] == pytest.approx(ref.confidence_interval.high, abs=0.2 * se)
    assert code == 1


def test_text_and_markdown_carry_the_statistics(tmp_path, capsys):
    a, b = scored_pair(tmp_path)
    _, d = diff(capsys, a, b)
    verdict = d["stats"]["verdict"]
    _, text = diff(capsys, a, b, "text")
    assert f"paired on (task, rollout), the trials both runs scored:\n  {verdict}\n" in text
    assert "McNemar exact (0/1 rewards): 19 passed in A only, 7 in B only; p = 0.03" in text
    assert "95% interval: 2000 resamples of the tasks, seed 37" in text
    assert "    task 3: passed in A, failed in B (4 paired trials)" in text
    row = next(line for line in text.splitlines() if line.split()[:2] == ["3", "1.000"])
    assert row.split() == ["3", "1.000", "0.000", "4/0/0/0", "4/0/0/0", "4", "1.000", "->", "0.000", "-1.000",
                           "passed", "->", "failed", "*"]
    _, md = diff(capsys, a, b, "md")
    assert f"## Statistics\n\nPaired on (task, rollout): the trials both runs scored.\n\n**{verdict}**\n" in md
    assert "- task 8: failed in A, passed in B (4 paired trials)" in md
    assert "| paired | A paired mean | B paired mean | change | flipped |" in md
    assert "| 3 | 1.000 | 0.000 | 4/0/0/0 | 4/0/0/0 | 4 | 1.000 | 0.000 | -1.000 | passed -> failed |" in md


def test_the_json_keeps_its_fields(tmp_path, capsys):
    """Fields are added, none renamed or removed."""
    _, d = diff(capsys, *two_runs(tmp_path, A12, B12))
    assert {"gymwatch_version", "a", "b", "trials", "tasks", "servers", "worse", "better", "exit_code"} <= set(d)
    assert {"task_index", "a", "b"} <= set(d["tasks"][0]) and "mean_reward" in d["tasks"][0]["a"]
    assert {"stats", "gym_compare"} <= set(d)


# --- Gym's own comparison beside it ---------------------------------------------------------
def with_report(tmp_path: Path, run: Path, report: Path) -> Path:
    """A copy of `run` (same directory name) with Gym's report beside its rollouts, where Gym puts it."""
    dst = tmp_path / run.name
    shutil.copytree(run, dst)
    shutil.copy(report, dst / "compare_report.json")
    return dst


def test_gyms_report_beside_b_counts_never_ran_trials_that_gymwatch_counts_apart(tmp_path, capsys):
    b = with_report(tmp_path, CASES07 / "g07_some_never_ran", COMPARE / "g07_mixed_ok-vs-g07_some_never_ran" / "compare_report.json")
    code, d = diff(capsys, CASES07 / "g07_mixed_ok", b)
    g = d["gym_compare"]
    assert code == 1 and g["compared"] and g["error"] is None and g["nemo_gym_version"] == "0.7.0"
    assert (g["a_mean"], g["b_mean"], g["mean_difference"]) == (0.5, 0.5, 0.0)
    assert g["interval"] == pytest.approx([-0.6084869844593307, 0.6084869844593307])
    assert (g["flip_mode"], g["common_tasks"], g["pass_to_fail"], g["fail_to_pass"], g["tied"]) == ("binary", 5, [], [], 1)
    assert g["disagreements"] == [
        "Gym scores 4 trials of B that never ran (tasks 1, 4) with the reward recorded for them; "
        "gymwatch counts them apart",
        "tasks compared: Gym 5 (in both runs' metrics), gymwatch 3 (with a trial both runs scored)",
        "Gym's interval [-0.608, +0.608] (Welch, across repeats); gymwatch gives none "
        "(3 tasks scored in both runs, 10 needed)"]
    _, text = diff(capsys, CASES07 / "g07_mixed_ok", b, "text")
    assert f"Gym's own comparison ({b / 'compare_report.json'}, nemo-gym 0.7.0)" in text
    assert "  where Gym and gymwatch disagree:\n    - Gym scores 4 trials of B that never ran" in text


def test_gyms_report_across_gym_versions_agrees_on_the_flip(tmp_path, capsys):
    b = with_report(tmp_path, FIXTURES / "gym-0.5-0.6-recorded" / "g051_ok", COMPARE / "mixed_ok-vs-g051_ok" / "compare_report.json")
    _, d = diff(capsys, FIXTURES / "gym-0.4.0-cases" / "mixed_ok", b)
    g, s = d["gym_compare"], d["stats"]
    assert g["pass_to_fail"] == [3] == [f["task_index"] for f in s["flipped"]] and g["flip_disagreements"] == []
    assert g["mean_difference"] == pytest.approx(s["mean_difference"]) == pytest.approx(-0.3)
    assert len(g["disagreements"]) == 1 and g["disagreements"][0].startswith("Gym's interval [-1.571, +0.971]")


def test_gyms_report_without_the_failed_trials(tmp_path, capsys):
    b = with_report(tmp_path, CASES07 / "g07_run_failures_sidecar",
                    COMPARE / "g07_mixed_ok-vs-g07_run_failures_sidecar" / "compare_report.json")
    _, d = diff(capsys, CASES07 / "g07_mixed_ok", b)
    g, s = d["gym_compare"], d["stats"]
    assert (g["common_tasks"], g["a_only_tasks"]) == (3, 2) and s["paired_tasks"] == 3
    assert s["unpaired"]["a_only_b_status"] == {"failed": 4}
    assert not any(x.startswith(("tasks compared", "mean difference", "Gym scores")) for x in g["disagreements"])


def test_a_report_of_other_runs_or_unreadable_is_named_not_fatal(tmp_path, capsys):
    report = COMPARE / "g07_mixed_ok-vs-g07_some_never_ran" / "compare_report.json"
    b = with_report(tmp_path, CASES07 / "g07_some_never_ran", report)
    code, d = diff(capsys, CASES07 / "g07_health_summary", b)                      # not the baseline Gym compared
    assert code in (0, 1) and not d["gym_compare"]["compared"]
    assert d["gym_compare"]["note"] == "it compares g07_mixed_ok/rollouts.jsonl with g07_some_never_ran/rollouts.jsonl, not A with B"
    (b / "compare_report.json").write_text('{"schema_version": "1", "candidates": ')
    _, d = diff(capsys, CASES07 / "g07_mixed_ok", b)
    assert d["gym_compare"]["error"].startswith("unreadable: invalid JSON")
    _, text = diff(capsys, CASES07 / "g07_mixed_ok", b, "text")
    assert "  unreadable: invalid JSON" in text and "Traceback" not in text


def test_a_report_the_other_way_round_is_not_set_beside(tmp_path, capsys):
    a = with_report(tmp_path, CASES07 / "g07_some_never_ran", COMPARE / "g07_mixed_ok-vs-g07_some_never_ran" / "compare_report.json")
    _, d = diff(capsys, a, CASES07 / "g07_mixed_ok")
    assert d["gym_compare"]["note"].startswith("it compares the runs the other way round")


def gym_report(a: Path, b: Path, delta: float, ci: list, p2f: list, f2p: list, scores: dict) -> dict:
    """A `compare_report.json` in Gym 0.7.0's schema (docs/gym-formats.md, section 11)."""
    flips = [{"task_index": t, "baseline_score": scores[t][0], "candidate_score": scores[t][1],
              "delta": scores[t][1] - scores[t][0], "direction": d, "baseline_rewards": None, "candidate_rewards": None}
             for d, ts in (("pass_to_fail", p2f), ("fail_to_pass", f2p)) for t in ts]
    return {"schema_version": "1", "generated_at": "2026-12-06T00:00:00+00:00", "nemo_gym_version": "0.7.0",
            "command": "gym eval compare ...",
            "baseline": {"role": "baseline", "index": 0, "rollouts_jsonl_fpath": str(a / "rollouts.jsonl"), "label": a.name},
            "candidates": [{"role": "candidate", "index": 0, "rollouts_jsonl_fpath": str(b / "rollouts.jsonl"), "label": b.name}],
            "comparisons": [{"baseline_agent": "env_agent", "candidate_agents": ["env_agent"],
                             "baseline_task_count": 50, "candidate_task_counts": [50],
                             "metrics": [{"metric": "mean/reward", "is_key_metric": True, "present_in": ["baseline", "candidate[0]"],
                                          "baseline": {"value": 0.69, "mean_across_repeats": 0.69},
                                          "candidates": [{"value": 0.62, "mean_across_repeats": 0.62, "delta": delta,
                                                          "delta_ci_low": ci[0], "delta_ci_high": ci[1]}]}],
                             "flips": [{"candidate_index": 0, "mode": "binary", "field": "reward", "common_task_count": 50,
                                        "baseline_only_task_count": 0, "candidate_only_task_count": 0,
                                        "pass_to_fail_count": len(p2f), "fail_to_pass_count": len(f2p), "tied_count": 4,
                                        "unchanged_count": 50 - 4 - len(p2f) - len(f2p), "flips": flips}],
                             "notes": []}],
            "skipped_agents": {}, "warnings": []}


def test_where_gym_and_gymwatch_disagree_on_fifty_tasks(tmp_path, capsys):
    """Gym's flip rule (the task mean crosses 0.5) also flips task 21 (0 -> 0.75); its Welch interval
    across repeats excludes 0 where gymwatch's over tasks does not; its mean counts never-ran rows."""
    a, b = scored_pair(tmp_path)
    report = gym_report(a, b, -0.07, [-0.12, -0.02], [3, 11, 27], [8, 21],
                        {3: (1, 0), 11: (1, 0), 27: (1, 0), 8: (0, 1), 21: (0, 0.75)})
    (b / "compare_report.json").write_text(json.dumps(report))
    _, d = diff(capsys, a, b)
    g, s = d["gym_compare"], d["stats"]
    assert s["interval"][0] < 0 < s["interval"][1]
    assert g["flip_disagreements"] == [{"task_index": 21, "gym": "fail_to_pass", "gymwatch": None,
                                        "gym_scores": [0.0, 0.75], "paired": 4}]
    assert g["disagreements"] == [
        "Gym scores 2 trials of B that never ran (task 40) with the reward recorded for them; gymwatch counts them apart",
        f"mean difference: Gym -0.070 (each run's mean over its own rows), gymwatch {s['mean_difference']:+.3f} (over paired trials)",
        f"Gym's interval [-0.120, -0.020] (Welch, across repeats) excludes 0; gymwatch's "
        f"[{s['interval'][0]:+.3f}, {s['interval'][1]:+.3f}] (tasks resampled) includes 0",
        "flipped failed -> passed by Gym's rule, not by gymwatch's: task 21"]
    _, md = diff(capsys, a, b, "md")
    assert "### Gym's own comparison (" in md and "  - flipped failed -> passed by Gym's rule, not by gymwatch's: task 21" in md


@pytest.mark.parametrize("text, why", [
    ("[]", "not a JSON object"),
    ('{"baseline": {}, "candidates": []}', "no candidate run (candidates[])"),
    ('{"baseline": {"rollouts_jsonl_fpath": 3}, "candidates": [{"rollouts_jsonl_fpath": "b/r.jsonl"}]}',
     "the runs compared are not named (rollouts_jsonl_fpath)"),
    ("{nope", "invalid JSON"),
    ('{"baseline": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
])
def test_a_report_gymwatch_cannot_use_says_why(tmp_path, text, why):
    from gymwatch.core.comparereport import BadReport, read

    (tmp_path / "compare_report.json").write_text(text)
    with pytest.raises(BadReport, match=re.escape(why)):
        read(tmp_path / "compare_report.json")


def test_a_report_with_odd_values_reads_what_it_can(tmp_path):
    from gymwatch.core.comparereport import read

    (tmp_path / "compare_report.json").write_text(json.dumps({
        "baseline": {"rollouts_jsonl_fpath": "a/rollouts.jsonl"}, "candidates": [{"rollouts_jsonl_fpath": "b/rollouts.jsonl"}],
        "comparisons": [{"metrics": [{"metric": "mean/reward", "baseline": {"value": "x"},
                                      "candidates": [{"value": 0.5, "delta": True, "delta_ci_low": float("nan")}]}],
                         "flips": [{"mode": "binary", "common_task_count": -3,
                                    "flips": [{"task_index": "7", "direction": "pass_to_fail"}, 5,
                                              {"task_index": 2, "direction": "pass_to_fail"}]}],
                         "notes": "not a list"}, 7],
        "warnings": None}))
    r = read(tmp_path / "compare_report.json")
    [c] = r.comparisons
    assert (c.baseline_mean, c.candidate_mean, c.delta, c.delta_interval) == (None, 0.5, None, None)
    assert c.flips is not None and c.flips.pass_to_fail == (2,) and c.flips.common_tasks == 0 and c.notes == ()
