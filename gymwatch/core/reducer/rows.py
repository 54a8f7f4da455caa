"""The run's rows: the rollouts (a trial's facts), the failures sidecar, the materialized inputs
(the trials expected), Gym's own health files (0.6+), and the aggregate metrics' arrival. A row
comes decoded into its facts (core/records.py); here they are applied."""

from __future__ import annotations

from typing import Optional

from .. import attempts, health
from ..model import (
    SRC_FAILURE_ROW,
    SRC_ROW,
    T_COMPLETED,
    T_FAILED,
    T_NEVER_RAN,
    Attempt,
    Evidence,
    GymScore,
    Trial,
    TrialKey,
)
from ..records import BadLine, Row, RowFacts
from .writer import Part


class Rows(Part):
    def rollouts(self, file: str, first: int, rows: list[Row]) -> None:
        """Rows `first`.. of a rollouts file: each decides its trial's status, unless a later
        attempt already did (core/attempts.py)."""
        self.w.rollout_lines = max(self.w.rollout_lines, first + len(rows) - 1)
        self._trial_rows(file, first, rows, SRC_ROW)

    def failures(self, file: str, first: int, rows: list[Row]) -> None:
        """Rows `first`.. of the failures sidecar: a failed trial each (a never-ran one when the
        row meets the never-ran rule, docs/gym-formats.md)."""
        self._trial_rows(file, first, rows, SRC_FAILURE_ROW)

    def _trial_rows(self, file: str, first: int, rows: list[Row], source: int) -> None:
        state = self.state
        trials, agents, changed = state.trials, state.agent_names, self.changes.trials
        applied = 0
        now = self.w.clock()      # when these rows were seen (None: there at the first read)
        for lineno, facts in enumerate(rows, first):
            if not isinstance(facts, RowFacts):
                self._not_a_row(file, lineno, facts)
                continue
            if facts.agent and source == SRC_ROW and facts.agent not in agents:
                agents.add(facts.agent)
            task, rollout = facts.task, facts.rollout
            if task is None or rollout is None or facts.problem:
                key = self._key(facts, file, lineno)
                if key is None:
                    continue
            else:
                key = (task, rollout)
            if facts.never_ran:
                status = T_NEVER_RAN
            elif source == SRC_FAILURE_ROW or facts.failure_class:
                status = T_FAILED
            else:
                status = T_COMPLETED
            ev = Evidence(file, lineno)
            t = trials.get(key)
            if t is None:            # the trial as its first row shows it (attempts.observe_row of a new trial)
                trials[key] = Trial(key[0], key[1], attempt_index=facts.attempt, status=status,
                                    reward=facts.reward if status == T_COMPLETED else None,
                                    withheld_reward=facts.reward if status == T_NEVER_RAN else None,
                                    input_tokens=facts.input_tokens, output_tokens=facts.output_tokens,
                                    failure_class=facts.failure_class, message=facts.message,
                                    http_status=facts.http_status, agent=facts.agent, evidence=ev, source=source,
                                    arrived=now, latency=facts.latency, answered_at=facts.answered_at,
                                    masked=facts.masked)
            else:
                if t.source < SRC_FAILURE_ROW and t.line is None:
                    attempts.first_row(t, status, facts, ev, source)
                else:
                    reward = facts.reward if source == SRC_ROW else None
                    attempts.observe_row(t, Attempt(facts.attempt, status, reward, facts.failure_class,
                                                    facts.message, facts.http_status, ev, source), facts)
                if now is not None:
                    t.arrived = now
            changed.add(key)
            applied += 1
        if applied:
            state.collector.started = True     # a row proves the collector ran
            self.changes.run = True
            self.w.arrived(applied)

    def _key(self, facts: RowFacts, file: str, lineno: int) -> Optional[TrialKey]:
        """The row's trial; None (and the row malformed) when it names none."""
        if not self.state.collector.started:
            self.state.collector.started = True    # a row proves the collector ran
        if facts.task is None or facts.rollout is None:
            self.state.unattributed_records += 1
            self.w.malformed(file, lineno, facts.problem or "no usable _ng_task_index")
            return None
        if facts.problem:
            self.w.malformed(file, lineno, facts.problem)
        return facts.task, facts.rollout

    def inputs(self, file: str, first: int, rows: list[Row]) -> None:
        """Rows `first`.. of the materialized inputs: each is an expected trial (`input_line`: its
        line there, where the card reads its request)."""
        state = self.state
        trials, changed = state.trials, self.changes.trials
        n = 0
        for lineno, facts in enumerate(rows, first):
            if not isinstance(facts, RowFacts):
                self._not_a_row(file, lineno, facts)
                continue
            if facts.task is None or facts.rollout is None:
                self.w.malformed(file, lineno, facts.problem or "no usable trial key")
                continue
            n += 1
            key = (facts.task, facts.rollout)
            t = trials.get(key)
            if t is None:
                trials[key] = Trial(facts.task, facts.rollout, expected=True, input_line=lineno)
                changed.add(key)
            else:
                t.expected, t.input_line = True, lineno
        if n:
            state.inputs_file = file
            state.collector.started = True
            state.expected_total = (state.expected_total or 0) + n
            self.changes.run = True

    def _not_a_row(self, file: str, lineno: int, bad: Optional[BadLine]) -> None:
        if bad is not None:          # (None: a blank line, which is no row)
            self.w.malformed(file, lineno, str(bad))
            self.w.bad_rows[file] = lineno

    def cut_row(self, ev: Optional[Evidence]) -> None:
        """The rollouts file's last line when it is no whole row (the session tells: a partial line
        held back, or an unusable last line with no line end), else None."""
        c = self.state.collector
        if c.cut_row != ev:
            c.cut_row = ev
            self.changes.run = True

    def verdict_row(self, file: str, lineno: int, raw: bytes) -> None:
        """A line of Gym's rollout_verdicts.jsonl: Gym's health verdict on one rollout."""
        try:
            key, gym = health.verdict_row(raw)
        except BadLine as exc:
            if raw.strip():
                self.w.malformed(file, lineno, str(exc))
            return
        gym.evidence = Evidence(file, lineno)
        self.state.health[key] = gym
        self.w.sign("health_check", gym.evidence)
        if key in self.state.trials:
            self.changes.trials.add(key)
        self.changes.run = True

    def health_summary(self, file: str, data: bytes) -> None:
        """quality_summary.json, read whole once it is complete: Gym's own totals."""
        try:
            totals = health.summary_totals(data)
        except BadLine as exc:
            self.w.file_error(file, str(exc))
            return
        totals.evidence = Evidence(file, 1)
        self.state.health_totals = totals
        self.w.health_file_totals = True
        self.w.sign("health_check", totals.evidence)
        self.changes.run = True

    def collection_began(self) -> None:
        """The materialized inputs exist: Gym writes them first, as collection begins."""
        if not self.state.collector.started:
            self.state.collector.started = True
            self.changes.run = True

    def aggregate_done(self, scores: list[GymScore]) -> None:
        """The aggregate metrics file is whole: the collection finished; Gym's own score in it."""
        if not self.state.aggregate_written:
            self.state.aggregate_written = True
            self.state.gym_scores = scores
            self.changes.run = True
