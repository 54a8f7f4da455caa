"""The run's rows: the rollouts (a trial's facts), the failures sidecar, the materialized inputs
(the trials expected), Gym's own health files (0.6+), and the aggregate metrics' arrival."""

from __future__ import annotations

from typing import Iterator, Optional

from .. import attempts, health, records
from ..model import (
    SRC_FAILURE_ROW, SRC_ROW, T_COMPLETED, T_FAILED, T_NEVER_RAN, Attempt, Evidence, Trial, TrialKey,
)
from .writer import Part, Writer

CANON_MAX = 4096            # distinct values rollout_items keeps one object of


class Rows(Part):
    def __init__(self, w: Writer):
        super().__init__(w)
        self._canon: tuple[dict, dict, dict] = ({}, {}, {})   # rollout_items' agent names, rewards, token counts

    def collection_began(self) -> None:
        """The materialized inputs exist: Gym writes them first, as collection begins."""
        if not self.state.collector.started:
            self.state.collector.started = True
            self.changes.run = True

    def aggregate_done(self) -> None:
        """The aggregate metrics file is whole: the collection finished."""
        if not self.state.aggregate_written:
            self.state.aggregate_written = True
            self.changes.run = True

    def rollout_rows(self, file: str, first: int, rows: list[bytes]) -> None:
        """Rows `first`.. of a rollouts file (a run of lines: Tailer.read(rows=True))."""
        self.rollout_items(file, first, records.row_items(rows))

    def rollout_block(self, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of a rollouts file as one block of whole lines (Tailer.read(blocks=True)):
        decoded at once when every line is a row of the usual shape (records.block_items)."""
        self.rollout_items(file, first, records.block_items(block))

    def rollout_items(self, file: str, first: int, items: list) -> None:
        """Rows `first`.. of a rollouts file, each as its facts (records.rollout_tuple's tuple, or
        a list of them) or, when only the general code can read it, its raw bytes. A row of the
        usual shape for a trial with no failure yet is applied here directly (what `rollout_row`
        and `attempts.observe_row` do with it, without their objects: a 100k-row file is most
        of a report's time); any other goes through `rollout_row`."""
        state = self.state
        trials, agents, changed = state.trials, state.agent_names, self.changes.trials
        # The same object for the same agent name, reward and token count (a run has few): a
        # trial's values then share cache lines with the others', which halved the cache misses
        # of writing the JSON report in key order (~0.28 s -> ~0.2 s for 100k trials), and ~15 MB.
        # Zero rewards keep their own objects (0.0 == -0.0 would merge them).
        canon = self._canon
        if len(canon[0]) + len(canon[1]) + len(canon[2]) > CANON_MAX:
            canon = self._canon = ({}, {}, {})
        names, floats, ints = canon
        applied = False
        for lineno, f in enumerate(items, first):
            if type(f) is bytes:
                self.rollout_row(file, lineno, f)
                continue
            task, rollout, attempt, reward, inp, out, nr, agent = f
            key = (task, rollout)
            t = trials.get(key)
            if agent:
                agent = names.setdefault(agent, agent)
                if agent not in agents:
                    agents.add(agent)
            if reward:
                reward = floats.setdefault(reward, reward)
            if inp is not None:
                inp = ints.setdefault(inp, inp)
            if out is not None:
                out = ints.setdefault(out, out)
            status, kept, withheld = (T_NEVER_RAN, None, reward) if nr else (T_COMPLETED, reward, None)
            if t is None:       # a new trial, made whole in one call
                trials[key] = Trial(task, rollout, attempt, status, kept, withheld, inp, out, "", "", None, agent,
                                    Evidence(file, lineno), SRC_ROW)
            elif t.source >= SRC_FAILURE_ROW or t.line is not None:
                self._rollout_facts(file, lineno, records.RowFacts(*f))
                continue
            else:
                if agent:
                    t.agent = agent
                t.attempt_index, t.source, t.evidence, t.input_tokens, t.output_tokens = attempt, SRC_ROW, \
                    Evidence(file, lineno), inp, out
                t.failure_class, t.message, t.http_status, t.row_own = "", "", None, None
                t.status, t.reward, t.withheld_reward = status, kept, withheld
            changed.add(key)
            applied = True
        if applied:
            state.collector.started = True       # a row proves the collector ran
            self.changes.run = True

    def materialized_rows(self, file: str, first: int, rows: list[bytes]) -> None:
        """Rows `first`.. of the materialized inputs (a run of lines): each is an expected trial."""
        plain = records.rows_plain(rows)
        fast = records.materialized_key
        tasks: list[int] = []
        rollouts: list[int] = []
        odd: list[bytes] = []
        for raw in rows:
            key = fast(raw, plain) if plain else None
            if key is None:
                tasks.append(-1)
                rollouts.append(-1)
                odd.append(raw)
            else:
                tasks.append(key[0])
                rollouts.append(key[1])
        self.materialized_keys(file, first, (tasks, rollouts, odd))

    def materialized_keys(self, file: str, first: int, keys: tuple[list[int], list[int], list[bytes]]) -> None:
        """Materialized-input rows `first`.. as (task of each row, rollout of each row, the odd
        rows): a row of the usual shape by its key, any other (task -1) by its raw bytes, in the
        order they come (read the general way): from `materialized_rows`, or from the child
        process that read them (core/inputkeys.py)."""
        tasks, rollouts, odd = keys
        state = self.state
        at, raws = 0, iter(odd)
        for i in _odd_rows(tasks, len(odd)):
            self._expect(first + at, zip(tasks[at:i], rollouts[at:i]))
            self.materialized_row(file, first + i, next(raws))
            at = i + 1
        self._expect(first + at, zip(tasks[at:], rollouts[at:]) if at else zip(tasks, rollouts))
        n = len(tasks) - len(odd)
        if n:
            state.inputs_file = file
            state.collector.started = True
            state.expected_total = (state.expected_total or 0) + n
            self.changes.run = True

    def _expect(self, first: int, keys) -> None:
        """Expected trials by key, lines `first`..: made or marked (input_line: their line)."""
        trials, changed = self.state.trials, self.changes.trials
        for lineno, key in enumerate(keys, first):
            t = trials.get(key)
            if t is None:
                trials[key] = Trial(key[0], key[1], expected=True, input_line=lineno)
                changed.add(key)
            else:
                t.expected, t.input_line = True, lineno

    def rollout_row(self, file: str, lineno: int, raw: bytes, plain: bool = False) -> None:
        """One row; `plain`: its block passed records.block_plain."""
        facts = self._facts(records.rollout_facts, file, lineno, raw, plain)
        if facts is not None:
            self._rollout_facts(file, lineno, facts)

    def _rollout_facts(self, file: str, lineno: int, facts: records.RowFacts) -> None:
        if facts.agent and facts.agent not in self.state.agent_names:
            self.state.agent_names.add(facts.agent)
        key = self._key(facts, file, lineno)
        if key is None:
            return
        if facts.never_ran:
            status = T_NEVER_RAN
        else:
            status = T_FAILED if facts.failure_class else T_COMPLETED
        attempts.observe_row(self.w.trial(key), Attempt(facts.attempt, status, facts.reward, facts.failure_class,
                                                       facts.message, facts.http_status, Evidence(file, lineno),
                                                       SRC_ROW), facts)

    def failure_row(self, file: str, lineno: int, raw: bytes) -> None:
        facts = self._facts(records.failure_facts, file, lineno, raw)
        if facts is None:
            return
        key = self._key(facts, file, lineno)
        if key is None:
            return
        # A failure row that meets the never-ran rule counts as never-ran (docs/gym-formats.md).
        status = T_NEVER_RAN if facts.never_ran else T_FAILED
        attempts.observe_row(self.w.trial(key), Attempt(facts.attempt, status, None, facts.failure_class,
                                                       facts.message, facts.http_status, Evidence(file, lineno),
                                                       SRC_FAILURE_ROW), facts)

    def materialized_row(self, file: str, lineno: int, raw: bytes, plain: bool = False) -> None:
        facts = self._facts(records.materialized_facts, file, lineno, raw, plain)
        if facts is None:
            return
        if facts.task is None or facts.rollout is None:
            self.w.malformed(file, lineno, facts.problem or "no usable trial key")
            return
        state = self.state
        state.collector.started = True
        state.expected_total = (state.expected_total or 0) + 1
        key = (facts.task, facts.rollout)
        state.inputs_file = file
        t = state.trials.get(key)
        if t is None:
            state.trials[key] = Trial(facts.task, facts.rollout, expected=True, input_line=lineno)
            self.changes.trials.add(key)
        else:
            t.expected, t.input_line = True, lineno
        self.changes.run = True

    def verdict_row(self, file: str, lineno: int, raw: bytes) -> None:
        """A line of Gym's rollout_verdicts.jsonl: Gym's health verdict on one rollout."""
        try:
            key, gym = health.verdict_row(raw)
        except records.BadLine as exc:
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
        except records.BadLine as exc:
            self.w.file_error(file, str(exc))
            return
        totals.evidence = Evidence(file, 1)
        self.state.health_totals = totals
        self.w.health_file_totals = True
        self.w.sign("health_check", totals.evidence)
        self.changes.run = True

    def _facts(self, parse, file: str, lineno: int, raw: bytes, *plain: bool):
        try:
            return parse(raw, *plain)
        except records.BadLine as exc:
            if not raw.strip():
                return None   # a blank line is not a row
            self.w.malformed(file, lineno, str(exc))
            return None

    def _key(self, facts: records.RowFacts, file: str, lineno: int) -> Optional[TrialKey]:
        if not self.state.collector.started:
            self.state.collector.started = True    # a row proves the collector ran
        if facts.task is None or facts.rollout is None:
            self.state.unattributed_records += 1
            self.w.malformed(file, lineno, facts.problem or "no usable _ng_task_index")
            return None
        if facts.problem:
            self.w.malformed(file, lineno, facts.problem)
        return facts.task, facts.rollout




def _odd_rows(tasks: list[int], n: int) -> Iterator[int]:
    """The positions of the `n` odd rows (task -1) of a materialized-inputs run, in order."""
    i = -1
    for _ in range(n):
        i = tasks.index(-1, i + 1)
        yield i
