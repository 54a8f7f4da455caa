"""The run-state model: plain data, filled only by the reducer, read by every view."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Optional

from msgspec import Struct

if TYPE_CHECKING:
    from datetime import datetime

    from .cluster.model import Conclusion, Job
    from .cluster.ray import RayState

# Server states, in the order a healthy server passes through them.
PENDING, INSTALLING, STARTING, READY, EXITED, FAILED = (
    "pending", "installing", "starting", "ready", "exited", "failed")
SERVER_STATES = (PENDING, INSTALLING, STARTING, READY, EXITED, FAILED)

# A server's startup steps, as its startup timeline draws them (core/servers.py `step_of()` says
# which state and phase each is): a shared venv's setup-lock wait (Gym 0.7), the venv's creation,
# uv's install, the server's own start, ready; or where it ended before or after.
S_LOCK, S_VENV, S_INSTALL, S_START, S_READY, S_FAILED, S_STOPPED = (
    "setup-lock wait", "venv create", "install", "start", "ready", "failed", "stopped")
STEPS = (S_LOCK, S_VENV, S_INSTALL, S_START, S_READY, S_FAILED, S_STOPPED)

# Trial statuses.
T_PENDING, T_COMPLETED, T_FAILED, T_NEVER_RAN, T_MISSING = (
    "pending", "completed", "failed", "never_ran", "missing")
TRIAL_STATUSES = (T_PENDING, T_COMPLETED, T_FAILED, T_NEVER_RAN, T_MISSING)

# Run verdicts.
V_STARTING, V_COLLECTING, V_OK, V_SOME_FAILED, V_SOME_NEVER_RAN, V_NO_AGENT_RAN = (
    "starting", "collecting", "ok", "some_failed", "some_never_ran", "no_agent_ran")
V_COLLECTION_ABORTED, V_STARTUP_FAILED, V_INCOMPLETE = (
    "collection_aborted", "startup_failed", "incomplete")
V_UNREADABLE = "unreadable"     # the run's rows could not be read: what its trials did is unknown
V_QUEUED = "queued"             # a submitted run's Slurm job waits in the queue: nothing of it runs yet
VERDICTS = (V_QUEUED, V_STARTING, V_COLLECTING, V_OK, V_SOME_FAILED, V_SOME_NEVER_RAN, V_NO_AGENT_RAN,
            V_COLLECTION_ABORTED, V_STARTUP_FAILED, V_INCOMPLETE, V_UNREADABLE)

# Server kinds (Gym's server types: resources_servers, responses_api_agents, responses_api_models,
# and from 0.7 environment_servers, which receive the collector's /run), and a submitted run's
# service steps (`# service:` in its job.sh: vLLM and the like, started by the job before Gym).
K_RESOURCES, K_AGENT, K_MODEL, K_ENVIRONMENT, K_UNKNOWN, K_SERVICE = (
    "resources", "agent", "model", "environment", "unknown", "service")

# Gym's own per-rollout health verdicts (rollout_verdicts.jsonl, Gym 0.6+).
H_HEALTHY, H_UNHEALTHY, H_UNOBSERVED = "healthy", "unhealthy", "unobserved"
HEALTH_VERDICTS = (H_HEALTHY, H_UNHEALTHY, H_UNOBSERVED)

# A trial is a (task, rollout) pair; its attempts (retries, resumes) are listed inside it.
TrialKey = tuple[int, int]

# Where a trial's status came from, weakest first: among observations of one attempt, a success
# row beats a failure-sidecar row, which beats a collector line that named the trial failed.
SRC_NONE, SRC_LINE, SRC_FAILURE_ROW, SRC_ROW = -1, 0, 1, 2


class Evidence(Struct, frozen=True, gc=False):
    """A line in a file of the run: `file` is relative to the run root, `line` 1-based, or, for a
    line read from a file's end without counting the lines before it (the runs browser samples a
    big log's head and tail), counted from the end: -1 is the last line.

    A msgspec Struct, not a frozen dataclass: made in C (a frozen dataclass's `__init__` sets
    each field through `object.__setattr__`), and a big run makes one a row."""

    file: str
    line: int
    text: str = ""
    note: str = ""

    def where(self) -> str:
        if self.line < 0:
            return f"{self.file} ({'its last line' if self.line == -1 else f'{-self.line} lines from its end'})"
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict:
        out = {"file": self.file, "line": self.line, "text": self.text}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(slots=True)
class Retrying:
    """Requests a process could not connect with. Gym retries a refused or dropped connection
    0.5 s apart without end, and says so every 100 such failures of the process:
    `[request_retry url=U error=E retry=N elapsed_s=S] Hit K global `E` while querying U.`"""

    url: str
    error: str                  # ClientOSError (refused, reset) or ServerDisconnectedError
    retry: int                  # the tries so far of the request that printed the line
    elapsed: float              # seconds that request had been retrying
    failures: Optional[int]     # the process's failures of this kind so far (K)
    first: Evidence
    last: Evidence


class StepMark(NamedTuple):
    """A server entered a startup step (S_*): when gymwatch saw the line that began it (the run's
    clock; None for a line already there when the run was first read, or read after the fact)."""

    step: str
    at: Optional[float]


@dataclass(slots=True)
class Server:
    name: str
    kind: str = K_UNKNOWN            # resources / agent / model / environment / unknown / service
    state: str = PENDING
    phase: str = ""                  # human words: "installing venv: 161 packages", ...
    first_seen: Optional[float] = None
    last_seen: Optional[float] = None
    state_since: Optional[float] = None
    ready_at: Optional[float] = None
    host: Optional[str] = None
    port: Optional[int] = None
    url: Optional[str] = None
    pid: Optional[int] = None
    last_line: str = ""
    last_line_at: Optional[Evidence] = None
    error_count: int = 0
    errors: list[Evidence] = field(default_factory=list)   # first few, for the report
    ready_evidence: Optional[Evidence] = None
    failure: Optional[Evidence] = None                     # the line that explains a failure
    failure_reason: str = ""
    log_file: Optional[str] = None                         # per-server log, relative to root
    packages: Optional[int] = None                         # from uv's Resolved/Installed N packages
    venv: Optional[str] = None                             # `Starting X from venv <dir>` (Gym 0.7)
    reported_ready_by_gym: bool = False
    silent_death: bool = False                             # docs/gym-formats.md §4: the pipefail bug
    process: Optional[dict] = None                         # psutil facts, when known
    orphaned: bool = False                                 # still running after gym env start ended
    first_run: Optional[Evidence] = None                   # its first `POST /run` (an agent's access log)
    shut_down: Optional[Evidence] = None                   # its own clean shutdown began (uvicorn's `Shutting down`, ...)
    http_ok: Optional[bool] = None                         # last `GET /` probe (with --head)
    retrying: dict[str, Retrying] = field(default_factory=dict)   # by URL: connections it could not make
    # the `Response content: ...` line after each of its first `[upstream_request_failed]` lines (Gym
    # 0.7): what the server it called answered (core/upstream.py)
    answers: list[Evidence] = field(default_factory=list)
    steps: list[StepMark] = field(default_factory=list)    # each startup step entered, in order (its timeline)
    ray: str = ""                                          # what Ray says against it (its node dead, its actor)

    @property
    def became_ready(self) -> bool:
        return self.ready_evidence is not None or self.reported_ready_by_gym


@dataclass(slots=True)
class Attempt:
    """One try of a trial: a row, or a collector line that named it failed."""

    attempt_index: Optional[int]
    status: str
    reward: Optional[float] = None
    failure_class: str = ""
    message: str = ""
    http_status: Optional[int] = None
    evidence: Optional[Evidence] = None
    source: int = SRC_NONE
    named_at: Optional[Evidence] = None      # the collector line that named the failure, if any

    def to_json(self) -> dict:
        return {"attempt_index": self.attempt_index, "status": self.status, "reward": self.reward,
                "failure_class": self.failure_class or None, "message": self.message or None,
                "http_status": self.http_status,
                "evidence": {"file": self.evidence.file, "line": self.evidence.line} if self.evidence else None}


@dataclass(slots=True)
class Trial:
    task_index: int
    rollout_index: int
    attempt_index: Optional[int] = None     # of the attempt the status comes from
    status: str = T_PENDING
    reward: Optional[float] = None          # None when withheld (never ran) or unknown
    withheld_reward: Optional[float] = None  # the reward Gym recorded for a never-ran trial
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    failure_class: str = ""
    message: str = ""
    http_status: Optional[int] = None       # of a failed /run
    agent: str = ""
    evidence: Optional[Evidence] = None     # the row (or collector line) behind the status
    source: int = SRC_NONE                  # what the status came from (SRC_*)
    named_at: Optional[Evidence] = None     # the collector line that named its failure, if any
    expected: bool = False                  # listed in the materialized inputs
    input_line: Optional[int] = None        # its line there (the card reads its request from it)
    earlier: Optional[list[Attempt]] = None  # rows of attempts before the one the status comes from
    line: Optional[Attempt] = None          # what collector lines said of its failure (attempts.py)
    row_own: Optional[tuple] = None         # the current row's own failure facts, once a line filled gaps
    masked: bool = False                    # its row is one Gym masked (`mask_sample`): not scored
    arrived: Optional[float] = None         # when its latest result (row, failure row, line) was seen (the
                                            # run's clock; None: already there when the run was first read)
    latency: Optional[float] = None         # seconds its /run took, as Gym recorded it (ng_perf, observability on)
    answered_at: Optional[float] = None     # its row's response.created_at (epoch: when the model answered)

    @property
    def key(self) -> TrialKey:
        return (self.task_index, self.rollout_index)

    def current(self) -> Attempt:
        return Attempt(self.attempt_index, self.status, self.reward if self.reward is not None
                       else self.withheld_reward, self.failure_class, self.message, self.http_status,
                       self.evidence, self.source, self.named_at)


@dataclass(slots=True)
class GymHealth:
    """Gym's own verdict on one rollout (rollout_verdicts.jsonl), beside gymwatch's status."""

    verdict: str
    checks: tuple[str, ...] = ()            # the checks that found something
    detail: str = ""                        # the first finding's reason, in Gym's words
    evidence: Optional[Evidence] = None


@dataclass(slots=True)
class GymScore:
    """Gym's own score of one agent, from its aggregate metrics: `key_metrics` (pass@k,
    majority@k, mean/reward ...), and the counts Gym computed them over."""

    agent: str
    key_metrics: dict[str, float]           # numbers only, in Gym's order
    sample_count: Optional[int] = None      # rows scored: `repeat_level_metrics`' sample_count, summed
    missing_count: Optional[int] = None     # tasks a repeat lacked, summed (only those another repeat has)
    masked: Optional[int] = None            # rows left out as masked (`coverage/masked_rollouts`)
    evidence: Optional[Evidence] = None


@dataclass(slots=True)
class Malformed:
    """A line gymwatch could not use; kept so the report can list it."""

    file: str
    line: int
    reason: str


@dataclass(slots=True)
class Unreadable:
    """A file or directory of the run gymwatch could not read (permission denied, a directory
    where a file belongs, an I/O error): said once, never made into lines or trial verdicts."""

    file: str            # relative to the run root; a directory ends with `/`
    reason: str          # the system's words: "Permission denied", "Is a directory", ...
    rows: bool = False   # a file of rows (rollouts, failures, materialized inputs): trials depend on it

    def words(self) -> str:
        return f"cannot read {self.file}: {self.reason}"


def last_of(streams: dict[str, Evidence]) -> Optional[Evidence]:
    """The last line of the stream that says most: stderr (tracebacks) before stdout.
    Independent of the order the files were read in."""
    if not streams:
        return None
    return streams[min(streams, key=lambda f: ("stderr" not in f, f))]


@dataclass(slots=True)
class Collector:
    """What is known about `gym eval run`."""

    started: bool = False
    finished: bool = False             # printed `Finished rollout collection!` / wrote aggregate metrics
    alive: Optional[bool] = None       # None: unknown (no process facts)
    exit_code: Optional[int] = None
    traceback: Optional[Evidence] = None
    error: Optional[Evidence] = None   # the last exception line of its traceback, or Gym's `Error: ...`
    error_more: list[str] = field(default_factory=list)   # the lines an `Error: ...` was wrapped onto
    last_lines: dict[str, Evidence] = field(default_factory=dict)   # per captured stream
    progress: Optional[tuple[int, int]] = None   # done, total
    examples_left: Optional[int] = None
    concurrency: Optional[int] = None  # `Querying with N concurrent requests`
    retrying: dict[str, Retrying] = field(default_factory=dict)   # by URL: connections it could not make
    # the rollouts file's last line when it is no whole row (cut mid-row: the collector died writing it)
    cut_row: Optional[Evidence] = None

    @property
    def last_line(self) -> Optional[Evidence]:
        return last_of(self.last_lines)

    @property
    def interrupted(self) -> bool:
        """It was stopped (Ctrl-C, SIGINT): its traceback ends with a bare `KeyboardInterrupt`, or
        its exit status says SIGINT."""
        return self.exit_code == -2 or (self.error is not None and self.error.text.strip() == "KeyboardInterrupt")


@dataclass(slots=True)
class Parent:
    """What is known about `gym env start` (or the serve half of `gym eval run`)."""

    started: bool = False
    alive: Optional[bool] = None
    exit_code: Optional[int] = None
    pending: Optional[list[str]] = None         # last "Waiting for servers to spin up: [...]"
    ready_count: Optional[tuple[int, int]] = None
    all_ready: Optional[Evidence] = None
    wait_line: Optional[Evidence] = None
    died: Optional[Evidence] = None              # Process `X` finished unexpectedly!
    died_server: Optional[str] = None
    timeout: Optional[Evidence] = None           # Gym 0.7 spin-up limit ran out
    spinup: Optional[Evidence] = None            # `Waiting for servers to spin up`: the limit's clock starts
    spinup_at: Optional[float] = None            # ... when that line was seen (None: read after the fact)
    endpoints: "EndpointWait" = field(default_factory=lambda: EndpointWait())
    traceback: Optional[Evidence] = None
    error: Optional[Evidence] = None             # its own first error line before all were ready
    finished: Optional[Evidence] = None          # NeMo Gym finished!
    stopping: Optional[Evidence] = None          # `Sending interrupt signals to servers...`: it stops them
    interrupt: Optional[Evidence] = None         # its traceback's bare `KeyboardInterrupt`: Ctrl-C, SIGINT
    last_lines: dict[str, Evidence] = field(default_factory=dict)   # per captured stream
    head_url: Optional[str] = None
    head_failed: Optional[Evidence] = None       # its head server could not bind its port
    head_down: Optional[Evidence] = None         # the last `Head server is not up yet (status ...)`
    head_down_count: int = 0

    @property
    def last_line(self) -> Optional[Evidence]:
        return last_of(self.last_lines)


@dataclass(slots=True)
class EndpointWait:
    """Gym 0.5+ waits for the model endpoints after `All N / N servers ready` (a stage of its own:
    all servers ready is not ready to collect)."""

    waiting: Optional[Evidence] = None           # `Waiting for N model endpoint(s) to answer: ...`
    waiting_at: Optional[float] = None
    urls: list[str] = field(default_factory=list)
    limit: Optional[float] = None                # `Waiting up to Ns...`
    elapsed: Optional[float] = None              # `  still waiting, Ns elapsed`
    elapsed_at: Optional[float] = None
    answered: Optional[Evidence] = None          # `All model endpoints are answering after Ns.`
    gave_up: Optional[Evidence] = None           # `Error: N model endpoint(s) never answered within Ns:`
    unresolved: list[Evidence] = field(default_factory=list)   # `Model endpoint X (key) does not resolve`

    @property
    def pending(self) -> bool:
        return self.waiting is not None and self.answered is None and self.gave_up is None


@dataclass(slots=True)
class HealthTotals:
    """Gym's own totals: quality_summary.json's run verdicts, or its `Rollout health:` line."""

    healthy: int = 0
    unhealthy: int = 0
    unobserved: int = 0
    evidence: Optional[Evidence] = None

    @property
    def checked(self) -> int:
        return self.healthy + self.unhealthy + self.unobserved


@dataclass(slots=True)
class RunInfo:
    """Names and settings from Hydra configs, overrides and manifests (secrets redacted)."""

    environment: str = ""
    agent: str = ""
    model: str = ""
    num_repeats: Optional[int] = None
    concurrency: Optional[int] = None
    settings: dict = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    gym_version: str = ""                        # from the manifest (a launched run)
    gym_site: str = ""                           # the site-packages Gym's config paths point into
    spinup_limit: Optional[float] = None         # server_spinup_timeout_seconds from the config
    endpoint_limit: Optional[float] = None       # model_endpoint_readiness_timeout_seconds
    started_at: Optional[float] = None
    run_id: str = ""


SILENCE = 600.0     # seconds without a write, and no process to be seen, after which a run has ended


@dataclass(slots=True)
class Activity:
    """Is a run whose processes cannot be seen still going? Judged by its files: on a cluster,
    Gym runs on a compute node and gymwatch reads the shared filesystem from a login node."""

    processes_checked: bool = False     # gymwatch looked for the run's processes on this machine
    processes_seen: bool = False        # ... and found some (or the manifest says they live)
    last_write: Optional[float] = None  # newest modification time of the run's files (epoch)
    quiet_for: Optional[float] = None   # seconds since then, at the last poll
    writes: dict[str, float] = field(default_factory=dict)   # each read file's last write, by its name
    rows_write: Optional[float] = None  # the rollouts file's last write: when a trial was last recorded
    checked_at: Optional[float] = None  # when these were looked at (epoch)
    results_write: Optional[float] = None    # the rollouts' or failures' last write: the last result
    inputs_write: Optional[float] = None     # the materialized inputs' write: the collection's start
    collector_write: Optional[float] = None  # gym eval run's output's last write: its last sign of life

    @property
    def quiet(self) -> bool:
        """No write for SILENCE seconds and no process seen: what has not ended now has."""
        return not self.processes_seen and self.quiet_for is not None and self.quiet_for >= SILENCE


ARRIVALS_KEPT = 1000    # arrival times kept: the pace is judged on the recent ones (core/pace.py)


@dataclass(slots=True)
class Arrivals:
    """When the collection's results were seen: rows, failure rows, lines naming a failed trial,
    progress that moved (recorded by the reducer, one time per poll that brought any). Results
    already there at the first read have no time. core/pace.py judges the pace from these."""

    start_seen: bool = False            # the collection has been seen started
    started_at: Optional[float] = None  # ... when (None: before the first read)
    first: Optional[float] = None       # the first result seen arriving
    times: deque = field(default_factory=lambda: deque(maxlen=ARRIVALS_KEPT))   # distinct, ascending
    results: int = 0                    # results seen (each row, line or step of progress)
    untimed: int = 0                    # ... of them already there at the first read

    @property
    def last(self) -> Optional[float]:
        return self.times[-1] if self.times else None

    def add(self, t: Optional[float], n: int) -> None:
        self.results += n
        if t is None:
            self.untimed += n
            return
        if self.first is None:
            self.first = t
        if not self.times or t > self.times[-1]:
            self.times.append(t)


@dataclass(slots=True)
class ServerWait:
    """Where a stalled collection's trials wait: a server's last line, and how long ago it came."""

    name: str
    kind: str
    line: Optional[Evidence]     # its last line (None: no line of its own yet)
    text: str                    # ... without the `(name) ` prefix of Gym's captured output
    age: Optional[float]         # seconds since that line was seen (None: not known)


# How a stall ended (Stall.how): "" it lasts; results came again; the collection ended first.
STALL_ON, STALL_RECOVERED, STALL_ENDED = "", "recovered", "ended"


@dataclass(slots=True)
class Stall:
    """No result for much longer than the run's own pace (core/pace.py), while trials were in
    flight. Times are on the clock the run was watched by (epoch seconds)."""

    since: float                 # the last result before the silence (or the collection's start)
    limit: float                 # silence longer than this was a stall, at this run's pace
    scale: Optional[float]       # the run's longest ordinary wait for a result (None: before the first)
    in_flight: Optional[int]     # trials dispatched and not finished
    waits: list[ServerWait] = field(default_factory=list)   # each server's last line, at the last look
    until: Optional[float] = None   # the last look at it; when it ended, once it has
    end: Optional[float] = None     # when results came again (recovered)
    how: str = STALL_ON
    files: bool = False          # judged from the files' times alone (no arrival was seen live)

    @property
    def seconds(self) -> float:
        """How long it lasted (so far)."""
        return max(0.0, (self.end or self.until or self.since) - self.since)


@dataclass(slots=True)
class RunState:
    root: str
    kind: str = "gym_dir"                        # gym_dir / launched / evaluator_bundle / slurm_job
    servers: dict[str, Server] = field(default_factory=dict)
    trials: dict[TrialKey, Trial] = field(default_factory=dict)
    parent: Parent = field(default_factory=Parent)
    collector: Collector = field(default_factory=Collector)
    info: RunInfo = field(default_factory=RunInfo)
    malformed: list[Malformed] = field(default_factory=list)
    malformed_count: int = 0
    unattributed_records: int = 0               # rows without a usable _ng_task_index
    aggregate_written: bool = False
    inputs_file: str = ""                        # the materialized inputs, relative to the root
    expected_total: Optional[int] = None         # rows in the materialized inputs
    port_owner: dict[int, str] = field(default_factory=dict)
    health: dict[TrialKey, GymHealth] = field(default_factory=dict)   # Gym's per-rollout verdicts
    health_totals: Optional[HealthTotals] = None
    gym_signs: dict[str, Evidence] = field(default_factory=dict)      # version features seen (gymversion.py)
    agent_names: set[str] = field(default_factory=set)  # agent_ref.name seen in rows
    notes: list[str] = field(default_factory=list)
    unreadable: dict[str, Unreadable] = field(default_factory=dict)   # by file: what could not be read
    now: Optional[float] = None                   # clock of the last update (live runs)
    activity: "Activity" = field(default_factory=lambda: Activity())
    reading: bool = False                         # files not yet read to their end (a budgeted poll)
    first_stamp: Optional[float] = None           # earliest / latest timestamp a read log line starts
    last_stamp: Optional[float] = None            # with (epoch; core/stamps.py says how they are read)
    gym_scores: list[GymScore] = field(default_factory=list)   # Gym's own score, per agent (core/score.py)
    arrivals: Arrivals = field(default_factory=Arrivals)   # when results came (core/pace.py)
    stalls: list[Stall] = field(default_factory=list)      # the collection's stalls, oldest first
    # a submitted run (kind slurm_job): its benchmark's Slurm job, as its files and Slurm tell it
    # (core/cluster/job.py), and the job in one phase and line (core/cluster/conclusion.py)
    job: Optional["Job"] = None
    job_conclusion: Optional["Conclusion"] = None
    # the Ray cluster under the run (`--ray URL`: core/rayfeed.py), as its dashboard last answered
    ray: Optional["RayState"] = None
    ray_asked_at: Optional["datetime"] = None


# --- predicates over the state: what settle (core/reducer/settle.py) and the verdict (core/verdict.py) both
# conclude from it ---------------------------------------------------------------------------------
def parent_ended(state: RunState) -> bool:
    """gym env start has ended: it said so (finished, a death, the spin-up limit, a traceback), or
    its process is gone (with no process facts: the run's files fell quiet)."""
    p = state.parent
    gone = p.alive is False or (p.alive is None and state.activity.quiet)
    return bool(p.finished or p.died or p.timeout or p.traceback or (p.started and gone))


def parent_gave_up(state: RunState) -> bool:
    """gym env start ended (or gave up) before every server was ready."""
    return state.parent.all_ready is None and parent_ended(state)


def exited_with_run(state: RunState, s: Server) -> bool:
    """Its own output shows a clean uvicorn shutdown (`Shutting down`, ..., `Finished server
    process`) on a stop Gym was making (it stopped its servers, or was interrupted). Ctrl-C reaches
    gym env start and its servers at once: a server can be gone before Gym's next poll, which then
    calls it dead (`Process X finished unexpectedly!`). It did not die: it exited with the run."""
    p = state.parent
    return s.shut_down is not None and (p.stopping is not None or p.interrupt is not None or p.finished is not None)


def scored(t: Trial) -> bool:
    """A trial whose reward counts: completed with one, and not masked by Gym."""
    return t.status == T_COMPLETED and t.reward is not None and not t.masked


def ongoing_stall(state: RunState) -> Optional[Stall]:
    """The stall the collection is in now, if any (settle records it; core/pace.py judges it)."""
    last = state.stalls[-1] if state.stalls else None
    return last if last is not None and last.how == STALL_ON else None


def collector_ended(state: RunState) -> bool:
    """The collector is done: what has no row now never will. Not while rows are still being
    read (a screen catching up with a big run): every pending trial would look missing."""
    c = state.collector
    if state.reading:
        return False
    if c.finished or state.aggregate_written:
        return True
    if not c.started:
        return False
    if c.alive is False:
        return True
    # gym env start shut its servers down (`NeMo Gym finished!`): no row can come any more
    servers_gone = state.parent.finished is not None
    return c.alive is None and (c.error is not None or state.activity.quiet or servers_gone)
