"""What the charts show, computed from the model (core/quantiles.py, core/figures.py,
core/costs.py, core/timeline.py): percentiles and outliers against hand-computed cases and numpy,
results per minute, bins, cost per agent, and a server's startup steps as the reducer times them."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from conftest import CASES07
from gymwatch.core import costs, figures, timeline
from gymwatch.core.layout import ENV
from gymwatch.core.model import (
    S_FAILED,
    S_INSTALL,
    S_LOCK,
    S_READY,
    S_START,
    S_VENV,
    T_COMPLETED,
    T_FAILED,
    T_NEVER_RAN,
    RunInfo,
    RunState,
    StepMark,
    Trial,
)
from gymwatch.core.quantiles import Typical, quantile
from gymwatch.core.reducer import Reducer
from gymwatch.core.session import read_run

T0 = 1_800_000_000.0


# --- percentiles and the "far above" rule ------------------------------------------------------
def test_percentiles_by_hand():
    v = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert quantile(v, 0.5) == 3.0
    assert quantile(v, 0.9) == pytest.approx(7.6)        # rank 3.6: 4 + 0.6 * (10 - 4)
    assert quantile(v, 1.0) == 10.0 and quantile(v, 0.0) == 1.0
    assert quantile([5.0], 0.9) == 5.0 and quantile([], 0.5) is None


def test_percentiles_are_numpys_linear_ones():
    rng = random.Random(3)
    for n in (1, 2, 7, 100):
        v = sorted(rng.uniform(0, 1000) for _ in range(n))
        for q in (0.5, 0.9, 0.99):
            assert quantile(v, q) == pytest.approx(float(np.percentile(v, q * 100)))


def test_far_above_by_hand():
    """median 100, MAD 2.5 (deviations 0,0,0,0,0,5,5,10,10,4900): 5000 and 250 are far above
    (robust z 1322 and 40, and at least twice the median); 110 is not (z 2.7); 190 is not (z 51,
    but under twice the median)."""
    t = Typical(sorted([90, 95, 100, 100, 100, 105, 110, 100, 100, 5000]))
    assert (t.median, t.mad, t.n) == (100.0, 2.5, 10)
    assert t.far_above(5000) and t.far_above(250)
    assert not t.far_above(110) and not t.far_above(190) and not t.far_above(100)
    assert t.threshold() == 200.0


def test_far_above_needs_peers_and_a_spread_of_zero_flags_only_twice_the_median():
    assert not Typical([1.0, 1.0, 50.0]).far_above(50.0)       # three trials say nothing of typical
    same = Typical([10.0] * 9)
    assert same.mad == 0 and not same.far_above(15.0) and same.far_above(20.0)


# --- the model the figures read ----------------------------------------------------------------
def trial(task, rollout=0, status=T_COMPLETED, reward=1.0, inp=100, out=10, agent="ag", arrived=None,
          answered=None, latency=None) -> Trial:
    return Trial(task, rollout, status=status, reward=reward if status == T_COMPLETED else None,
                 input_tokens=inp, output_tokens=out, agent=agent, arrived=arrived, answered_at=answered,
                 latency=latency)


def state_of(*trials: Trial, concurrency=None) -> RunState:
    st = RunState(root="/r", info=RunInfo(concurrency=concurrency))
    st.trials = {t.key: t for t in trials}
    return st


def test_throughput_counts_each_status_per_ten_seconds_from_the_first_result():
    st = state_of(trial(0, arrived=T0 + 5), trial(1, arrived=T0 + 59), trial(2, status=T_FAILED, arrived=T0 + 61),
                  trial(3, status=T_NEVER_RAN, out=0, arrived=T0 + 185), trial(4, arrived=None),
                  trial(5, status="pending"))
    tp = figures.throughput(st)
    assert tp.basis == figures.SEEN
    assert tp.width == 10 and len(tp.buckets) == 19        # every 10 s from the first, empty ones too
    assert [(b.start - T0, b.completed, b.failed, b.never_ran) for b in tp.buckets if b.total] == [
        (0, 1, 0, 0), (50, 1, 0, 0), (60, 0, 1, 0), (180, 0, 0, 1)]
    assert tp.untimed == {T_COMPLETED: 1}        # there before gymwatch looked
    merged = tp.merged(2)      # 10 buckets of 10 s would do; merged to a width a person reads: 2 minutes
    assert merged.width == 120 and [(b.completed, b.failed, b.never_ran) for b in merged.buckets] == [(2, 1, 0), (0, 0, 1)]


def test_throughput_of_a_run_read_after_the_fact_uses_when_the_model_answered():
    st = state_of(trial(0, answered=T0 + 10), trial(1, answered=T0 + 70), trial(2, status=T_FAILED))
    tp = figures.throughput(st)
    assert tp.basis == figures.ANSWERED
    assert [b.total for b in tp.buckets] == [1, 0, 0, 0, 0, 0, 1] and tp.untimed == {T_FAILED: 1}
    assert figures.throughput(state_of(trial(0))).buckets == []


def test_rewards_bin_by_value_and_tasks_by_their_mean():
    st = state_of(trial(0, 0, reward=1.0), trial(0, 1, reward=1.0), trial(1, 0, reward=0.0), trial(1, 1, reward=1.0),
                  trial(2, 0, reward=0.0), trial(2, 1, status=T_FAILED), trial(3, 0, reward=0.5, agent="other"))
    ag, other = figures.rewards_by_agent(st)
    assert (ag.title, [(b.lo, b.count) for b in ag.bins]) == ("ag", [(0.0, 2), (1.0, 3)])
    assert [(b.lo, b.count) for b in other.bins] == [(0.5, 1)]
    tasks = figures.task_means(st)
    assert [(b.lo, b.count) for b in tasks.bins] == [(0.0, 1), (0.5, 2), (1.0, 1)]


def test_many_distinct_values_bin_in_ten_of_equal_width():
    sp = figures.binned("x", [float(v) for v in range(100)])
    assert len(sp.bins) == 10 and [b.count for b in sp.bins] == [10] * 9 + [10]
    assert sp.bins[0].lo == 0 and sp.bins[-1].hi == pytest.approx(99)
    tokens = figures.binned("t", [float(v) for v in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 25)], whole=True)
    assert all(b.hi - b.lo == 3 for b in tokens.bins) and sum(b.count for b in tokens.bins) == 13


def test_tokens_per_trial_leave_never_ran_trials_out():
    st = state_of(trial(0, inp=50, out=5), trial(1, status=T_NEVER_RAN, inp=0, out=0), trial(2, inp=70, out=7))
    inp, out = figures.tokens_per_trial(st)
    assert inp.n == 2 and out.n == 2 and [b.lo for b in out.bins] == [5.0, 7.0]


# --- cost per agent ----------------------------------------------------------------------------
def test_cost_per_agent_by_hand():
    outs = [90, 95, 100, 100, 100, 105, 110, 100, 100, 5000]
    trials = [trial(i, inp=200 + i, out=o, latency=1.0 + i / 10) for i, o in enumerate(outs)]
    trials.append(trial(10, status=T_NEVER_RAN, inp=0, out=0))
    trials.append(trial(11, inp=50, out=20, agent="b", latency=2.0))
    a, b = costs.costs(state_of(*trials))
    assert (a.agent, a.trials, a.ran) == ("ag", 11, 10)
    assert a.input_tokens == sum(200 + i for i in range(10)) and a.output_tokens == sum(outs)
    assert (a.output.p50, a.output.max) == (100.0, 5000.0)
    assert a.output.p90 == pytest.approx(110 + 0.1 * (5000 - 110))       # rank 8.1 of the 10 that ran
    assert a.input.p50 == pytest.approx(204.5)
    assert a.duration_from == costs.GYM and a.duration.p50 == pytest.approx(1.45)
    assert [(o.key, o.kind, o.value, o.typical) for o in a.outliers] == [((9, 0), costs.TOKENS, 5000.0, 100.0)]
    assert a.outlier_counts == {costs.TOKENS: 1}
    assert (b.agent, b.trials, b.output.max, b.outliers) == ("b", 1, 20.0, [])   # one trial: no peers


def test_a_trial_far_slower_than_its_peers_is_flagged():
    lat = [10.0, 11.0, 12.0, 9.0, 10.0, 10.5, 11.5, 10.0, 95.0]
    c, = costs.costs(state_of(*(trial(i, latency=s) for i, s in enumerate(lat))))
    assert [(o.key[0], o.kind, o.value) for o in c.outliers] == [(8, costs.SLOW, 95.0)]


def test_durations_without_gyms_are_estimated_from_arrivals_with_the_concurrency():
    """Concurrency 2: the i-th result's trial began when the (i-2)-th ended."""
    at = [0, 4, 10, 13, 20, 30]
    st = state_of(*(trial(i, arrived=T0 + a) for i, a in enumerate(at)), concurrency=2)
    c, = costs.costs(st)
    assert c.duration_from == costs.ESTIMATED and c.duration.n == 4
    assert (c.duration.p50, c.duration.max) == (10.0, 17.0)       # gaps 10, 9, 10, 17 -> 9, 10, 10, 17
    assert c.duration.p90 == pytest.approx(14.9)                 # rank 2.7: 10 + 0.7 * 7
    assert c.outliers == []                                       # estimates flag nothing
    assert costs.costs(state_of(*(trial(i, arrived=T0 + a) for i, a in enumerate(at))))[0].duration is None


def test_costs_of_a_recorded_run_with_gyms_own_figures():
    """Gym 0.7 with observability: every row's ng_perf.total_latency_ms."""
    st = read_run(str(CASES07 / "g07_health_summary"), check_processes=False).state
    rows = [json.loads(line) for line in (CASES07 / "g07_health_summary" / "rollouts.jsonl").read_text().splitlines()]
    ran = [r for r in rows if r["response"]["usage"]["output_tokens"]]
    c, = costs.costs(st)
    assert c.duration_from == costs.GYM
    assert c.duration.p50 == pytest.approx(float(np.percentile([r["ng_perf"]["total_latency_ms"] / 1000 for r in ran], 50)))
    assert c.input_tokens == sum(r["response"]["usage"]["input_tokens"] for r in rows)


# --- the startup timeline ----------------------------------------------------------------------
def feed_timed(lines: list[tuple[float, str, str]]) -> RunState:
    """Lines of a server's own log (`name`), each seen at T0 + t."""
    st = RunState(root="/r")
    now = [T0]
    r = Reducer(st, lambda: now[0])
    for i, (t, name, text) in enumerate(lines, 1):
        now[0] = T0 + t
        r.server_log_line(name, f"logs/{name}.log", i, text)
        r.settle(now[0])
    return st


COLD = [
    (0, "mcqa", "Creating virtual environment at: /w/resources_servers/mcqa/.venv"),
    (0, "policy", "Creating virtual environment at: /w/responses_api_models/openai_model/.venv"),
    (12, "mcqa", "Resolved 161 packages in 4.2s"),
    (20, "mcqa", "Installed 161 packages in 777ms"),
    (22, "policy", "Resolved 159 packages in 3s"),
    (22, "policy", "Installed 159 packages in 700ms"),
    (40, "mcqa", "INFO:     Uvicorn running on http://127.0.0.1:9001 (Press CTRL+C to quit)"),
    (55, "policy", "INFO:     Uvicorn running on http://127.0.0.1:9002 (Press CTRL+C to quit)"),
]


def test_a_servers_steps_are_timed_when_their_lines_are_seen():
    st = feed_timed(COLD)
    assert st.servers["mcqa"].steps == [StepMark(S_VENV, T0), StepMark(S_INSTALL, T0 + 12), StepMark(S_START, T0 + 20),
                                        StepMark(S_READY, T0 + 40)]
    tl = timeline.startup(st)
    assert (tl.start, tl.end, tl.took, tl.critical) == (T0, T0 + 55, 55, "policy")
    mcqa, policy = tl.lanes
    assert [(sp.label, sp.start - T0, sp.end - T0) for sp in mcqa.spans] == [
        ("venv create", 0, 12), ("install 161 packages", 12, 20), ("start", 20, 40)]
    # uv's lines came in one burst: no time passed in the install step, which joins the step before
    assert [(sp.label, sp.end - sp.start) for sp in policy.spans] == [("venv create + install 159 packages", 22),
                                                                     ("start", 33)]
    assert policy.critical and not mcqa.critical and mcqa.outcome == S_READY


def test_the_first_server_to_fail_is_the_critical_one_and_a_step_still_going_is_open():
    st = feed_timed(COLD[:3] + [(30, "mcqa", "error: Failed to prepare distributions")])
    tl = timeline.startup(st, now=T0 + 50)
    mcqa, policy = tl.lanes
    assert mcqa.outcome == S_FAILED and mcqa.ended == T0 + 30 and tl.critical == "mcqa"
    assert policy.spans[-1].end is None and policy.spans[-1].length(T0 + 50) == 50


def test_a_run_read_after_the_fact_has_an_untimed_timeline():
    tl = timeline.startup(read_run(str(CASES07 / "g07_cold_start_shared_venv"), check_processes=False).state)
    assert not tl.timed and tl.critical is None
    lanes = {ln.name: ln for ln in tl.lanes}
    assert lanes["mcqa"].untimed == [S_VENV, S_INSTALL, S_START] and lanes["mcqa"].outcome == S_READY
    assert S_LOCK in lanes["mcqa_simple_agent_b"].untimed


def test_settle_concluding_the_same_again_keeps_the_steps_time():
    """Gym said a server died: settle concludes it failed at every poll; its step keeps the first time."""
    st = RunState(root="/r")
    now = [T0]
    r = Reducer(st, lambda: now[0])
    r.server_log_line("mcqa", "logs/mcqa.log", 1, "Creating virtual environment at: /w/x/.venv")
    r.stream_line(ENV, "gym_env_start.stdout.log", 1, "Process `mcqa` finished unexpectedly!")
    for t in (5, 9, 30):
        now[0] = T0 + t
        r.settle(now[0])
    assert st.servers["mcqa"].steps == [StepMark(S_VENV, T0), StepMark(S_FAILED, T0 + 5)]


def test_results_there_before_gymwatch_looked_are_placed_by_their_answers_when_the_clocks_agree():
    earlier = [trial(0, answered=T0 + 5), trial(1, answered=T0 + 70)]
    later = [trial(2, arrived=T0 + 130, answered=T0 + 129), trial(3, status=T_FAILED, arrived=T0 + 135)]
    tp = figures.throughput(state_of(*earlier, *later))
    assert tp.basis == figures.SEEN and tp.mixed and tp.untimed == {}
    assert [(b.completed, b.failed) for b in tp.buckets if b.total] == [(1, 0), (1, 0), (1, 1)]
    # a replay: its clock runs days after the recording's answers: those stay untimed
    replayed = [trial(0, answered=T0 - 5 * 86400), trial(2, arrived=T0 + 130)]
    tp = figures.throughput(state_of(*replayed))
    assert not tp.mixed and tp.untimed == {T_COMPLETED: 1} and [b.total for b in tp.buckets] == [1]


def test_steps_seen_within_a_second_of_the_next_join_the_one_before():
    """uv's lines, and a poll's, come in bursts: a step that lasted less than a second is not a bar
    of its own; a first one (a server's first line, then its lock wait) is dropped, its time kept."""
    st = feed_timed([(0, "a", "Waiting for virtual environment setup: /w/x/.venv"),
                     (0.0002, "a", "Creating virtual environment at: /w/x/.venv"),
                     (20, "a", "Resolved 3 packages in 1s"), (20.3, "a", "Installed 3 packages in 9ms"),
                     (35, "a", "INFO:     Uvicorn running on http://127.0.0.1:9001 (Press CTRL+C to quit)")])
    lane, = timeline.startup(st).lanes
    assert [(sp.label, sp.start - T0, sp.end - T0) for sp in lane.spans] == [
        ("venv create + install 3 packages", 0, pytest.approx(20.3)), ("start", pytest.approx(20.3), 35)]


def test_a_pause_of_a_minute_and_more_shows_in_a_short_runs_throughput():
    """Results, then 75 s of nothing, then more: in buckets of a minute the pause hid (3, then 7); it
    shows as empty buckets, and wider merged buckets keep widths a person reads."""
    st = state_of(*(trial(i, arrived=T0 + i) for i in range(3)), *(trial(i, arrived=T0 + 80 + i) for i in range(3, 10)))
    tp = figures.throughput(st)
    assert [b.total for b in tp.buckets] == [3, 0, 0, 0, 0, 0, 0, 0, 7]
    assert tp.merged(5).width == 20 and tp.merged(2).width == 60 and tp.merged(1).width == 120

