"""What the score is worth (core/score.py): the denominator (expected, scored, failed, never ran,
missing, masked) in the report and the summary, rows Gym masked (`mask_sample`), Gym's own score
from its aggregate metrics with the counts it used, what it leaves out (failures routed to the
sidecar) or counts (never-ran rows), and a health check that vouches for nothing. On the recorded
real runs (tests/fixtures), and made runs for what no recording has (masked rows)."""

from __future__ import annotations

import json

import pytest

from conftest import CASES, CASES07, FIXTURES, json_report
from gymwatch.core import records, score
from gymwatch.core.session import read_run
from runbuilder import Run, rollout
from test_tui_app import summary_plain
from tuihelpers import fixture_app, wait_for

SIDECAR = CASES07 / "g07_run_failures_sidecar"
NEVER_RAN = CASES07 / "g07_some_never_ran"
OBSERVED = CASES07 / "g07_health_summary"
STALLS = FIXTURES / "gym-0.7.0-stalls"


@pytest.mark.parametrize("value, masked", [(True, True), (False, False), (0.0, False), (1.0, True), (1, True),
                                           (None, False), ("", False), ("yes", True)])
def test_mask_sample_is_read_for_its_truth_as_gym_reads_it(value, masked):
    row = json.dumps(rollout(0, 0, mask_sample=value)).encode()
    assert records.rollout_facts(row).masked is masked
    assert not records.rollout_facts(json.dumps(rollout(0, 0)).encode()).masked
    (fast,) = records.rollout_rows(row + b"\n")
    assert fast.masked is masked


def test_the_sidecar_run_says_over_how_many_of_how_many_and_that_gyms_score_leaves_failures_out():
    data, _ = json_report(SIDECAR)
    s = data["score"]
    assert (s["expected"], s["scored"], s["not_scored"], s["failed"], s["never_ran"], s["missing"], s["masked"]) == \
        (10, 6, 4, 4, 0, 0, 0)
    assert s["mean_reward"] == data["mean_reward"] == 0.5
    assert s["words"] == "0.500 over 6 of 10 expected; 4 not scored (4 failed)"
    (gym,) = s["gym"]
    assert gym["agent"] == "mcqa_simple_agent" and gym["key_metrics"]["mean/reward"] == 0.5
    assert gym["key_metrics"]["majority@2/accuracy"] == 50.0 and list(gym["key_metrics"])[0] == "mean/reward"
    # Gym's counts: 3 tasks in each of its 2 repeats, none missing from one: the 4 failed are not in it
    assert (gym["sample_count"], gym["missing_count"]) == (6, 0)
    assert gym["evidence"]["file"] == "rollouts_aggregate_metrics.json"
    left = s["gym_leaves_out"]
    assert left["trials"] == 4 and left["file"] == "rollouts_failures.jsonl"
    assert left["words"].startswith("Gym's own score leaves out the 4 trials whose failures it routed to "
                                    "rollouts_failures.jsonl")
    assert not s["gym_health_vouches"] and "+observability_enabled=true" in s["gym_health_note"]
    text = _text(SIDECAR)
    assert "mean reward 0.500 over 6 of 10 expected; 4 not scored (4 failed)" in text
    assert "Gym's own score (rollouts_aggregate_metrics.json): mcqa_simple_agent: mean/reward 0.5," in text
    assert "over 6 rows" in text and "note: Gym's own score leaves out the 4 trials" in text
    assert "note: Gym's health check vouches for nothing here: it could not observe 6 of its 6 trials" in text
    md = _text(SIDECAR, "md")
    assert "Mean reward: 0.500 over 6 of 10 expected; 4 not scored (4 failed)" in md
    assert "| mcqa_simple_agent: mean/reward 0.5," in md and "> Gym's own score leaves out the 4 trials" in md


def test_never_ran_rows_are_counted_by_gym_and_withheld_by_gymwatch():
    data, _ = json_report(NEVER_RAN)
    s = data["score"]
    assert s["words"] == "0.833 over 6 of 10 expected; 4 not scored (4 never ran)"
    (gym,) = s["gym"]
    assert gym["key_metrics"]["mean/reward"] == 0.5 and gym["sample_count"] == 10
    assert s["gym_leaves_out"] is None and s["gym_counts_never_ran"].startswith("Gym's own score counts the 4 trials")


def test_a_health_check_that_observed_its_trials_vouches():
    s = json_report(OBSERVED)[0]["score"]
    assert s["gym_health_vouches"] and s["gym_health_note"] is None


@pytest.mark.parametrize("case, counts", [
    (STALLS / "g070_endpoint_silent_75s", (10, 0)), (STALLS / "g070_slow_steady", (8, 0)),
    (FIXTURES / "gym-0.5-0.6-recorded" / "g060_ok_health_files", (10, 0)),
    (CASES / "mixed_ok", (None, None)),                   # Gym 0.4 writes no repeat-level counts
])
def test_gyms_key_metrics_and_counts_on_recorded_runs(case, counts):
    state = read_run(str(case), check_processes=False).state
    (gym,) = state.gym_scores
    agg = json.loads((case / "rollouts_aggregate_metrics.json").read_text())[0]
    assert gym.key_metrics == agg["key_metrics"] and (gym.sample_count, gym.missing_count) == counts
    d = score.denominator(state)
    assert d.scored == d.expected == len(state.trials) and d.not_scored == 0


def test_an_unfinished_run_has_no_gym_score_and_its_denominator_counts_what_is_left(tmp_path):
    run = Run(tmp_path / "run")
    run.expect(4, 2)
    run.rows("", rollout(0, 0, 1.0), rollout(0, 1, 0.0), rollout(1, 0, 1.0, mask_sample=True))
    state = read_run(str(run.root), check_processes=False).state
    d = score.denominator(state)
    assert not state.gym_scores and (d.scored, d.masked, d.pending, d.out_of) == (2, 1, 5, 8)
    assert score.words(d) == "0.500 over 2 of 8 expected; 6 not scored (1 masked, 5 pending)"


def test_masked_rows_are_counted_and_left_out_of_the_mean(tmp_path):
    """Gym's aggregation leaves a masked row's reward out of its score: its reward is no
    measurement (reward_profile.select_measured). So does gymwatch's mean, and says how many."""
    run = Run(tmp_path / "run")
    run.expect(3, 2)
    run.rows("", rollout(0, 0, 1.0), rollout(0, 1, 0.0), rollout(1, 0, 0.0, mask_sample=True),
             rollout(1, 1, 1.0, mask_sample=False), rollout(2, 0, 0.0, mask_sample=True), rollout(2, 1, 1.0))
    run.finish()
    data, _ = json_report(run.root)
    assert data["verdict"] == "ok" and data["counts"]["completed"] == 6
    assert data["mean_reward"] == 0.75
    s = data["score"]
    assert (s["scored"], s["masked"], s["not_scored"]) == (4, 2, 2)
    assert s["words"] == "0.750 over 4 of 6 expected; 2 not scored (2 masked)"
    masked = {(t["task_index"], t["rollout_index"]) for t in data["trials"] if t["masked"]}
    assert masked == {(1, 0), (2, 0)}


def test_gym_score_of_an_odd_aggregate_file():
    """Gym 0.4-0.6 write NaN with Python's json; an entry without counts or of another shape."""
    data = (b'[{"agent_ref": {"name": "a"}, "key_metrics": {"mean/reward": NaN, "pass@1": 1, "x": "y", "b": true},'
            b' "repeat_level_metrics": [{"sample_count": 3, "missing_count": 1}, {"sample_count": 2}, 7]}, 5]')
    (g,) = score.gym_scores(data, "r_aggregate_metrics.json")
    assert g.agent == "a" and g.key_metrics == {"pass@1": 1.0} and (g.sample_count, g.missing_count) == (5, 1)
    assert score.gym_scores(b'{"mean/reward": 1}', "f") == [] and score.gym_scores(b"[]", "f") == []
    masked = b'[{"agent_ref": {"name": "a"}, "key_metrics": {"mean/reward": 1.0}, "agent_metrics": ' \
             b'{"coverage/masked_rollouts": 2, "mean/reward": 1.0}, "group_level_metrics": [{"big": [1, 2]}]}]'
    (g,) = score.gym_scores(masked, "f")
    assert g.masked == 2 and g.sample_count is None and "masked" not in score.gym_score_words(g)


@pytest.mark.parametrize("case, says, gym", [(NEVER_RAN, "mean reward 0.833 over 6/10", "Gym 0.500 over 10"),
                                              (SIDECAR, "mean reward 0.500 over 6/10", None)])
async def test_the_summary_says_over_how_many_of_how_many_and_gyms_own_where_it_differs(case, says, gym):
    app = fixture_app(case)
    async with app.run_test(size=(160, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.started and "mean reward" in summary_plain(app))
        text = summary_plain(app)
        assert says in text and (gym in text if gym else "Gym 0" not in text), text


def _text(run, fmt: str = "text") -> str:
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "gymwatch", "report", str(run), "--format", fmt, "--no-process-check"],
                          capture_output=True, text=True, timeout=120).stdout
