"""The run-state model: plain data, filled only by the reducer, read by every view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# Server states, in the order a healthy server passes through them.
PENDING, INSTALLING, STARTING, READY, EXITED, FAILED = (
    "pending", "installing", "starting", "ready", "exited", "failed")
SERVER_STATES = (PENDING, INSTALLING, STARTING, READY, EXITED, FAILED)

# Trial statuses.
T_PENDING, T_COMPLETED, T_FAILED, T_NEVER_RAN, T_MISSING = (
    "pending", "completed", "failed", "never_ran", "missing")
TRIAL_STATUSES = (T_PENDING, T_COMPLETED, T_FAILED, T_NEVER_RAN, T_MISSING)

# Run verdicts.
V_STARTING, V_COLLECTING, V_OK, V_SOME_NEVER_RAN, V_NO_AGENT_RAN = (
    "starting", "collecting", "ok", "some_never_ran", "no_agent_ran")
V_COLLECTION_ABORTED, V_STARTUP_FAILED, V_INCOMPLETE = (
    "collection_aborted", "startup_failed", "incomplete")
VERDICTS = (V_STARTING, V_COLLECTING, V_OK, V_SOME_NEVER_RAN, V_NO_AGENT_RAN,
            V_COLLECTION_ABORTED, V_STARTUP_FAILED, V_INCOMPLETE)

TrialKey = tuple[int, int, Optional[int]]


@dataclass(frozen=True, slots=True)
class Evidence:
    """A line in a file of the run: `file` is relative to the run root, `line` 1-based."""

    file: str
    line: int
    text: str = ""
    note: str = ""

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict:
        out = {"file": self.file, "line": self.line, "text": self.text}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(slots=True)
class Server:
    name: str
    kind: str = "unknown"            # resources / agent / model / unknown
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
    reported_ready_by_gym: bool = False
    silent_death: bool = False                             # GYM_REFERENCE §3 pipefail bug
    process: Optional[dict] = None                         # psutil facts, when known
    http_ok: Optional[bool] = None                         # last `GET /` probe (with --head)

    @property
    def became_ready(self) -> bool:
        return self.ready_evidence is not None or self.reported_ready_by_gym


@dataclass(slots=True)
class Trial:
    task_index: int
    rollout_index: int
    attempt_index: Optional[int] = None
    status: str = T_PENDING
    reward: Optional[float] = None          # None when withheld (never ran) or unknown
    withheld_reward: Optional[float] = None  # the reward Gym recorded for a never-ran trial
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    failure_class: str = ""
    message: str = ""
    agent: str = ""
    evidence: Optional[Evidence] = None     # the row behind the status
    cause: Optional[Evidence] = None        # where the cause is (a server log line), when known
    expected: bool = False                  # listed in the materialized inputs

    @property
    def key(self) -> TrialKey:
        return (self.task_index, self.rollout_index, self.attempt_index)


@dataclass(slots=True)
class Malformed:
    """A line gymwatch could not use; kept so the report can list it."""

    file: str
    line: int
    reason: str


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
    error: Optional[Evidence] = None   # the last exception line of its traceback
    last_lines: dict[str, Evidence] = field(default_factory=dict)   # per captured stream
    progress: Optional[tuple[int, int]] = None   # done, total
    examples_left: Optional[int] = None

    @property
    def last_line(self) -> Optional[Evidence]:
        return last_of(self.last_lines)


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
    timeout: Optional[Evidence] = None           # Gym 0.7 startup timeout
    traceback: Optional[Evidence] = None
    error: Optional[Evidence] = None             # its own first error line before all were ready
    finished: Optional[Evidence] = None          # NeMo Gym finished!
    last_lines: dict[str, Evidence] = field(default_factory=dict)   # per captured stream
    head_url: Optional[str] = None

    @property
    def last_line(self) -> Optional[Evidence]:
        return last_of(self.last_lines)


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
    gym_version: str = ""
    started_at: Optional[float] = None
    run_id: str = ""


@dataclass(slots=True)
class RunState:
    root: str
    kind: str = "gym_dir"                        # gym_dir / launched / evaluator_bundle
    servers: dict[str, Server] = field(default_factory=dict)
    trials: dict[TrialKey, Trial] = field(default_factory=dict)
    parent: Parent = field(default_factory=Parent)
    collector: Collector = field(default_factory=Collector)
    info: RunInfo = field(default_factory=RunInfo)
    malformed: list[Malformed] = field(default_factory=list)
    malformed_count: int = 0
    unattributed_records: int = 0               # rows without a usable _ng_task_index
    aggregate_written: bool = False
    expected_total: Optional[int] = None         # rows in the materialized inputs
    port_owner: dict[int, str] = field(default_factory=dict)
    agent_names: set[str] = field(default_factory=set)  # agent_ref.name seen in rows
    notes: list[str] = field(default_factory=list)
    now: Optional[float] = None                   # clock of the last update (live runs)
    reading: bool = False                         # files not yet read to their end (a budgeted poll)
