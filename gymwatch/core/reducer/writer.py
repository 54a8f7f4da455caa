"""What every source of run facts writes through: the state, what changed (`Changes`), the clock,
and the few writes the sources share (a server met, a Gym version sign, a timestamp, a trial
touched, a malformed line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .. import gymlines as gl
from ..model import K_RESOURCES, Evidence, Malformed, Retrying, RunState, Server, Trial, TrialKey
from ..servers import ServerTracker
from ..stamps import line_stamp

MAX_KEPT_MALFORMED = 200


@dataclass(slots=True)
class Changes:
    """What moved since the views last looked (they redraw only that), and what the session read."""

    servers: set[str] = field(default_factory=set)
    trials: set[TrialKey] = field(default_factory=set)
    removed_trials: set[TrialKey] = field(default_factory=set)
    run: bool = False
    files: dict[str, int] = field(default_factory=dict)   # file (relative) -> new lines read
    reset: bool = False

    def __bool__(self) -> bool:
        return bool(self.servers or self.trials or self.removed_trials or self.run or self.files or self.reset)

    def take(self) -> "Changes":
        """What is recorded so far, handed over; this record starts again empty."""
        out = Changes(self.servers, self.trials, self.removed_trials, self.run, self.files, self.reset)
        self.servers, self.trials, self.removed_trials, self.files = set(), set(), set(), {}
        self.run = self.reset = False
        return out


class Writer:
    """The state and what every source's part of the reducer (`Part`) writes through."""

    def __init__(self, state: RunState, clock: Callable[[], Optional[float]]):
        self.state = state
        self.clock = clock
        self.changes = Changes()
        self.trackers: dict[str, ServerTracker] = {}     # per server: what its lines left open
        self.health_file_totals = False     # Gym's totals read from quality_summary.json: they outrank its line
        self.bad_rows: dict[str, int] = {}  # per rows file, its last line that was no row
        self.rollout_lines = 0              # lines of the rollouts file read (a submitted run's links wrote them)

    def now(self) -> Optional[float]:
        """When a line is seen (None: a line already there when the run was first read)."""
        return self.clock()

    def arrived(self, n: int) -> None:
        """`n` results seen now (rows, failure rows, lines naming a failed trial, progress that
        moved): one clock reading for all of them (a block of rows is one arrival)."""
        self.state.arrivals.add(self.clock(), n)

    def lines_read(self, file: str, n: int) -> None:
        if n > 0:
            self.changes.files[file] = self.changes.files.get(file, 0) + n

    def server(self, name: str) -> Server:
        """The server `name`, made when first met; marked changed."""
        s = self.state.servers.get(name)
        if s is None:
            kind = K_RESOURCES if name == self.state.info.environment else gl.server_kind(name)
            s = Server(name=name, kind=kind)
            self.state.servers[name] = s
            self.trackers[name] = ServerTracker()
            self.changes.run = True
        self.changes.servers.add(name)
        return s

    def stamp(self, text: str) -> None:
        """A line that may start with a timestamp: the run's first and last recorded times."""
        ts = line_stamp(text)
        if ts is not None:
            st = self.state
            if st.first_stamp is None or ts < st.first_stamp:
                st.first_stamp = ts
            if st.last_stamp is None or ts > st.last_stamp:
                st.last_stamp = ts

    def sign(self, name: str, ev: Evidence) -> None:
        """A feature of the run's output that bounds its Gym version (gymversion.py). The
        first by file name and line is kept, so the basis reads the same whatever order the
        files were read in."""
        old = self.state.gym_signs.get(name)
        if old is None or (ev.file, ev.line) < (old.file, old.line):
            self.state.gym_signs[name] = ev

    def trial(self, key: TrialKey) -> Trial:
        """The trial `key`, made when first met; marked changed."""
        t = self.state.trials.get(key)
        if t is None:
            t = self.state.trials[key] = Trial(key[0], key[1])
        self.changes.trials.add(key)
        self.changes.run = True
        return t

    def malformed(self, file: str, lineno: int, reason: str) -> None:
        """A line that could not be used: counted, and the first MAX_KEPT_MALFORMED kept for the report."""
        self.state.malformed_count += 1
        if len(self.state.malformed) < MAX_KEPT_MALFORMED:
            self.state.malformed.append(Malformed(file, lineno, reason))
        self.changes.run = True

    def file_error(self, file: str, reason: str) -> None:
        """A whole file that could not be read (once per reason)."""
        for m in self.state.malformed:
            if m.file == file and m.line == 0 and m.reason == reason:
                return
        self.malformed(file, 0, reason)


class Part:
    """One source's share of the reducer, writing through the run's one `Writer`."""

    def __init__(self, w: Writer):
        self.w = w
        self.state = w.state
        self.changes = w.changes      # the same record for the reducer's life (Changes.take empties it)
        self.trackers = w.trackers


def retrying(records: dict[str, Retrying], text: str, ev: Evidence) -> bool:
    """A `[request_retry ...]` line: the latest word on connections to its URL (the first kept)."""
    m = gl.REQUEST_RETRY_RE.search(text)
    if m is None:
        return False
    url, error, retry, elapsed, failures = m.groups()
    try:
        seconds = float(elapsed)
    except ValueError:           # `elapsed_s=1.2.3`: not Gym's (it prints a float)
        return False
    old = records.get(url)
    records[url] = Retrying(url, error, int(retry), seconds, int(failures) if failures else None,
                            old.first if old is not None else ev, ev)
    return True
