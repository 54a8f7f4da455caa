"""core/pace.py: a collection's pace judged from when its results arrived, through the reducer's front
on a fake clock: never a stall at startup, for a slow but steady run, between Gym's progress blocks,
once the collection finished or was stopped, or with nothing in flight; a stall, what it says, and
its recovery kept in the model. (The recorded stall runs, replayed: tests/test_stalls.py.)"""

from __future__ import annotations

import json
from typing import Optional

from gymwatch.core import pace
from gymwatch.core.layout import EVAL
from gymwatch.core.model import STALL_ENDED, STALL_ON, STALL_RECOVERED, RunInfo, RunState, ongoing_stall
from gymwatch.core.reducer import Reducer
from gymwatch.core.verdict import verdict

T0 = 1_800_000_000.0
OUT = "gym_eval_run.stdout.log"


class Run:
    """A collection fed to the reducer at times the test sets (seconds after T0)."""

    def __init__(self, expected: int = 10, concurrency: Optional[int] = 2, timed: bool = True):
        self.t: Optional[float] = T0 if timed else None
        self.state = RunState(root="/run")
        self.r = Reducer(self.state, lambda: self.t)
        self.r.run_info(RunInfo(concurrency=concurrency))
        self.done = 0
        self.line = 0
        self.expected = expected
        if expected:
            rows = b"".join(json.dumps({"_ng_task_index": i // 2, "_ng_rollout_index": i % 2}).encode() + b"\n"
                            for i in range(expected))
            self.r.materialized_block("rollouts_materialized_inputs.jsonl", 1, rows)
        self.settle()

    def at(self, t: float) -> Optional[pace.Pace]:
        if self.t is not None:
            self.t = T0 + t
        self.settle()
        return pace.judge(self.state, self.t)

    def settle(self) -> None:
        self.r.settle(self.t)

    def rows(self, t: float, n: int = 1) -> None:
        self.t = T0 + t if self.t is not None else None
        block = b"".join(json.dumps({"_ng_task_index": (self.done + i) // 2, "_ng_rollout_index": (self.done + i) % 2,
                                     "reward": 1.0, "response": {"output": ["x"], "usage": {"input_tokens": 5}}}).encode()
                         + b"\n" for i in range(n))
        self.r.rollout_block("rollouts.jsonl", self.done + 1, block)
        self.done += n
        self.settle()

    def say(self, t: float, text: str) -> None:
        self.t = T0 + t
        self.line += 1
        self.r.stream_line(EVAL, OUT, self.line, text)
        self.settle()


def steady(every: float, first: float, n: int, **kw) -> Run:
    run = Run(**kw)
    for i in range(n):
        run.rows(first + i * every)
    return run


def test_startup_is_never_a_stall():
    run = Run(expected=0)
    run.state.collector.started = False
    run.r.stream_line("env", "gym_env_start.stdout.log", 1, "Waiting for servers to spin up: ['a']")
    assert run.at(5000) is None and not run.state.stalls


def test_results_every_few_seconds_are_stalled_after_a_minute_of_silence():
    run = steady(every=2, first=2, n=3)              # results at 2, 4, 6 s
    j = run.at(60)
    assert j is not None and j.scale == 2 and j.limit == pace.FLOOR and not j.stalled
    assert not run.state.stalls
    j = run.at(67)
    assert j.stalled and j.silent == 61 and j.in_flight == 2
    stall = ongoing_stall(run.state)
    assert stall is not None and stall.since == T0 + 6 and stall.in_flight == 2 and not stall.files
    v = verdict(run.state)
    assert v.name == "collecting" and v.reason.startswith(f"stalled: no result for 1m01s, since {pace.clock(T0 + 6)}")
    assert "2 trials in flight" in v.reason and "results came at most 2s apart; a stall is 1m00s" in v.reason


def test_a_stall_recovers_when_results_come_again_and_the_run_keeps_it():
    run = steady(every=2, first=2, n=3)
    run.at(70)
    run.rows(81)                                    # 75 s after the last result
    assert ongoing_stall(run.state) is None
    (stall,) = run.state.stalls
    assert stall.how == STALL_RECOVERED and stall.end == T0 + 81 and stall.seconds == 75
    assert pace.note(stall) == f"stalled 1m15s at {pace.clock(T0 + 6, seconds=False)}, recovered"
    # the stall's silence is not the run's pace: a minute without a result is a stall again
    j = run.at(81 + 59)
    assert j.scale == 2 and not j.stalled
    assert run.at(81 + 61).stalled and len(run.state.stalls) == 2 and run.state.stalls[1].how == STALL_ON


def test_a_slow_but_steady_run_is_not_stalled():
    run = steady(every=30, first=35, n=4, expected=8)    # trials take minutes: results 30-35 s apart
    for t in range(125, 125 + 100, 5):             # 100 s without a result: less than 3 x 35 s
        j = run.at(t)
        assert j is not None and not j.stalled, t
    assert not run.state.stalls and run.at(125 + 106).stalled


def test_before_the_first_result_gyms_limits_and_the_startup_time_are_the_scale():
    run = Run()
    assert not run.at(pace.GYM_WAIT - 1).stalled          # Gym waits 600 s for servers and endpoints
    assert run.at(pace.GYM_WAIT + 1).stalled
    slow = Run()
    slow.r.run_info(RunInfo(concurrency=2, endpoint_limit=1800.0))
    assert not slow.at(1700).stalled and slow.at(1801).stalled
    cold = Run(expected=0)
    cold.t = T0 - 400.0                              # a server first seen 400 s before the collection
    cold.r.server_log_line("policy_model", "logs/policy_model.log", 1, "INFO:     Started server process [1]")
    cold.t = T0
    cold.r.materialized_block("rollouts_materialized_inputs.jsonl", 1, b'{"_ng_task_index":0,"_ng_rollout_index":0}\n')
    cold.settle()
    assert pace.startup_took(cold.state) == 400 and not cold.at(1199).stalled and cold.at(1201).stalled


def test_the_pause_between_gyms_progress_blocks_is_not_a_stall():
    """With results seen only as progress (Gym 0.4 prints it at 20, 40, 60 ... %), their own pace is
    the scale: the first block's wait from the collection's start."""
    run = Run(expected=10)
    run.say(100, "Finished 2 / 10 rollouts (20%) in 0:01:40 (1.20 rollouts/min). Examples left:")
    run.say(101, "Collecting rollouts:  20%|██        | 2/10 [01:41<06:44, 50.5s/it]")    # the same result
    assert run.state.arrivals.times[-1] == T0 + 100
    run.say(160, "Collecting rollouts:  20%|██        | 2/10 [02:40<06:44, 50.5s/it]")    # a redrawn bar
    assert run.state.arrivals.last == T0 + 100
    assert not run.at(100 + 290).stalled and run.at(100 + 301).stalled


def test_a_finished_or_stopped_collection_is_never_stalled():
    done = steady(every=2, first=2, n=3)
    done.say(10, "Finished rollout collection! View results at:")
    assert done.at(5000) is None and not done.state.stalls
    stopped = steady(every=2, first=2, n=3)
    stopped.say(10, "Traceback (most recent call last):")
    stopped.say(10, "KeyboardInterrupt")
    assert stopped.at(5000) is None and not stopped.state.stalls


def test_a_stall_ends_with_the_collection():
    run = steady(every=2, first=2, n=3)
    assert run.at(100).stalled
    run.say(200, "Traceback (most recent call last):")
    run.say(200, "KeyboardInterrupt")
    (stall,) = run.state.stalls
    assert stall.how == STALL_ENDED and stall.until == T0 + 200 and stall.seconds == 194
    assert pace.note(stall).endswith(", then the collection ended")


def test_nothing_in_flight_is_no_stall():
    """Every trial has its result: Gym is sorting and scoring them (minutes, for a big run)."""
    run = steady(every=2, first=2, n=10)
    assert pace.in_flight(run.state) == 0 and run.at(5000) is None


def test_trials_in_flight_come_from_the_concurrency_and_what_arrived():
    run = steady(every=2, first=2, n=3)
    assert pace.in_flight(run.state) == 2
    assert pace.in_flight(steady(every=2, first=2, n=9).state) == 1
    unlimited = steady(every=2, first=2, n=3, concurrency=None)   # Gym dispatches every trial at once
    assert pace.in_flight(unlimited.state) == 7
    said = steady(every=2, first=2, n=3, concurrency=None)
    said.say(1, "Querying with 4 concurrent requests")
    assert pace.in_flight(said.state) == 4


def test_where_trials_wait_is_each_servers_last_line_and_its_age():
    run = Run()
    run.t = T0 - 30
    run.r.server_log_line("mcqa_simple_agent", "logs/mcqa_simple_agent.log", 1, "INFO:     Started server process [2]")
    run.r.server_log_line("policy_model", "logs/policy_model.log", 7,
                          "(policy_model) INFO:     Uvicorn running on http://127.0.0.1:9 (Press CTRL+C to quit)")
    run.rows(2)
    run.at(100)
    (stall,) = run.state.stalls
    assert [(w.name, w.kind, w.age) for w in stall.waits] == [("policy_model", "model", 130.0),
                                                           ("mcqa_simple_agent", "agent", 130.0)]
    model = stall.waits[0]
    assert model.line.where() == "logs/policy_model.log:7" and model.text.startswith("INFO:     Uvicorn running")
    v = verdict(run.state)
    assert v.evidence.where() == "logs/policy_model.log:7"
    assert "waiting on policy_model (last line 2m10s ago), mcqa_simple_agent (last line 2m10s ago)" in v.reason


def test_untimed_results_are_judged_by_their_files_last_writes():
    """Results already there at the first read have no time: their files' writes stand in (a
    one-shot read of a live run: `gymwatch report`)."""
    run = Run(timed=False)
    for _ in range(3):
        run.rows(0)
    assert run.state.arrivals.untimed == 3 and not run.state.arrivals.times
    wall = 1_790_000_000.0
    run.r.file_activity(wall - 200, wall, {}, wall - 200, wall - 200, wall - 206, wall - 100)
    run.settle()
    (stall,) = run.state.stalls
    assert stall.files and stall.since == wall - 200 and stall.seconds == 200 and stall.how == STALL_ON
    assert stall.scale == 4.0           # 6 s for 3 results, 2 at a time: a trial takes about 4 s
    assert "by its files a trial takes about 4s" in verdict(run.state).reason
