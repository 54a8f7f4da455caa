"""Gym's own output lines: the patterns, and splitting merged streams per server.

Formats are described in docs/gym-formats.md. Patterns are searched, never anchored to a
whole line, because merged streams glue lines together.

Every pattern and literal the line path acts on is declared here, in the registry of its source
(`SERVER`: a server's own lines; `PARENT`: gym env start's own lines; `COLLECTOR`: gym eval
run's), with the literal words every line it acts on holds (or starts with). The block search
that skips the lines that change nothing (core/fast/scan.py) looks for those words: a new
pattern declared here is found there with no change to it. A pattern that acts only in a state
the line path reads line by line anyway (a venv being built, a banner's fields) says so
(`steady=False`) and adds no word to the search; tests/test_fast_scan.py checks every claim.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Optional, TypeGuard

from .markers import KEYWORDS_BY_MARKER, MARKERS
from .model import K_AGENT, K_ENVIRONMENT, K_MODEL, K_RESOURCES, K_UNKNOWN


class Gated:
    """A pattern tried only on text holding one of `words` (or starting with one of `starts`):
    literals that every line it matches holds. Python's `re` tries a pattern that starts with a
    class like `\\d`, or alternates, at every position, where the `in` of a literal is one pass."""

    __slots__ = ("regex", "words", "starts")

    def __init__(self, pattern: str, words: tuple[str, ...] = (), starts: tuple[str, ...] = ()):
        self.regex, self.words, self.starts = re.compile(pattern), words, starts

    def may_match(self, text: str) -> bool:
        """`text` starts with one of `starts` or holds one of `words`: the pattern is worth trying."""
        if self.starts and text.startswith(self.starts):
            return True
        for word in self.words:        # (a loop: a generator in any() costs twice the check)
            if word in text:
                return True
        return False

    def search(self, text: str) -> Optional[re.Match[str]]:
        return self.regex.search(text) if self.may_match(text) else None

    def match(self, text: str) -> Optional[re.Match[str]]:
        return self.regex.match(text) if self.may_match(text) else None

    def last(self, text: str) -> Optional[re.Match[str]]:
        """The last match in `text` (a progress bar redrawn many times on one line)."""
        if not self.may_match(text):
            return None
        last = None
        for m in self.regex.finditer(text):
            last = m
        return last


class Lines:
    """The registry of one source's lines: every pattern (and literal) its line path acts on,
    with the words that gate it. `steady`: it may act while the line path is steady (no state
    open that reads the next lines one by one), so the block search must find its lines; False:
    it acts only in such a state. `once`: it acts on the first such line only (per file, or per
    server): the reducer tells the block search when it is done."""

    def __init__(self, source: str):
        self.source = source
        self.gates: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool, bool]] = {}
        self.version = 0            # bumped at each declaration (the block search's cache key)

    def pattern(self, name: str, regex: str, words: tuple[str, ...] = (), starts: tuple[str, ...] = (),
                steady: bool = True, once: bool = False) -> re.Pattern[str]:
        """A pattern whose every match's line holds one of `words` (or starts with one of `starts`).
        One that starts with a literal or `^` is quick to try as it is (`re` scans for its first
        literal); one that starts with a class or alternates is `gated()`."""
        self._declare(name, words, starts, steady, once)
        return re.compile(regex)

    def gated(self, name: str, regex: str, words: tuple[str, ...] = (), starts: tuple[str, ...] = (),
              steady: bool = True, once: bool = False) -> Gated:
        """A pattern tried only on lines holding one of its words (Python's `re` tries a pattern
        that starts with a class or alternates at every position of a line)."""
        return self.add(name, Gated(regex, words, starts), steady, once)

    def add(self, name: str, gate: Gated, steady: bool = True, once: bool = False) -> Gated:
        """A gated pattern declared elsewhere (another source's, a failure marker) that this one acts on too."""
        self._declare(name, gate.words, gate.starts, steady, once)
        return gate

    def also(self, name: str, pattern: re.Pattern[str], source: "Lines", steady: bool = True) -> re.Pattern[str]:
        """`source`'s pattern `name`, which this source acts on too."""
        words, starts, _, once = source.gates[name]
        self._declare(name, words, starts, steady, once)
        return pattern

    def words(self, name: str, *words: str, steady: bool = True, once: bool = False) -> tuple[str, ...]:
        """A literal test the line path makes (`in`, `startswith`): the words."""
        self._declare(name, words, (), steady, once)
        return words

    def starts(self, name: str, *starts: str, steady: bool = True) -> tuple[str, ...]:
        """A test of how a line starts: the starts."""
        self._declare(name, (), starts, steady, False)
        return starts

    def _declare(self, name: str, words: tuple[str, ...], starts: tuple[str, ...], steady: bool, once: bool) -> None:
        if not (words or starts):
            raise ValueError(f"{self.source}: {name} has no word to be found by")
        self.gates[name] = (words, starts, steady, once)
        self.version += 1

    def keywords(self, done: frozenset[str] = frozenset()) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(words, starts) the block search must find while the line path is steady: those of
        every steady entry, but the `once` entries in `done`."""
        words: dict[str, None] = {}
        starts: dict[str, None] = {}
        for name, (w, s, steady, once) in self.gates.items():
            if steady and not (once and name in done):
                words.update(dict.fromkeys(w))
                starts.update(dict.fromkeys(s))
        return tuple(words), tuple(starts)


SERVER = Lines("a server's own lines")             # core/servers.py, core/reducer/servers.py
PARENT = Lines("gym env start's own lines")        # core/reducer/streams.py (_parent_line)
COLLECTOR = Lines("gym eval run's own lines")      # core/reducer/streams.py (_collector_line)

# The failure markers (core/markers.py): a server's error lines, and gym env start's own error.
for _name, _marker in MARKERS:
    _gate = Gated(_marker.pattern, KEYWORDS_BY_MARKER[_name])
    SERVER.add(f"marker {_name}", _gate)
    PARENT.add(f"marker {_name}", _gate)

# --- the `(<name>) ` prefix -------------------------------------------------
PREFIX_RE = re.compile(r"^\(([A-Za-z_][\w.\-/]*)\) ?")
# Process names other tools put in parentheses; never Gym servers.
NOT_SERVERS = frozenset({"raylet", "gcs_server", "dashboard", "autoscaler", "monitor", "pid",
                         "log_monitor", "runtime_env_agent", "dashboard_agent", "core_worker"})

# --- the Gym parent (gym env start) ---------------------------------------------
PENDING_RE = PARENT.gated("PENDING_RE", r"(\d+)\s*/\s*(\d+) servers ready\. Waiting for servers to spin up: \[([^\]]*)\]",
                            (" servers ready. Waiting for servers to spin up: [",))
ALL_READY_RE = PARENT.pattern("ALL_READY_RE", r"All (\d+) / (\d+) servers ready", ("servers ready",))
DIED_RE = PARENT.pattern("DIED_RE", r"Process `([^`]+)` finished unexpectedly!", ("finished unexpectedly!",))
TIMEOUT_RE = PARENT.pattern("TIMEOUT_RE", r"Timed out after (\d+(?:\.\d+)?(?:e\+?\d+)?)s waiting for Gym servers to become ready: ?(.*)",
                            ("Timed out after ",))
FINISHED_RE = PARENT.pattern("FINISHED_RE", r"NeMo Gym finished!", ("NeMo Gym finished!",))
# The last line of the traceback of a process stopped by Ctrl-C (SIGINT): no message, no colon.
INTERRUPT_RE = PARENT.pattern("INTERRUPT_RE", r"^KeyboardInterrupt\s*$", ("KeyboardInterrupt",))
COLLECTOR.also("INTERRUPT_RE", INTERRUPT_RE, PARENT)
# RunHelper.shutdown's first line (every version): gym env start stops its servers (on Ctrl-C, or after a
# failed start from 0.7). A server still starting then ends wherever it was: stopped, not dead.
SHUTDOWN_BEGIN_RE = PARENT.pattern("SHUTDOWN_BEGIN_RE", r"^Sending interrupt signals to servers\.\.\.",
                                   ("Sending interrupt signals to servers",))
BANNER_RE = PARENT.pattern("BANNER_RE", r"^\[(\d+)\] (\S+) \(([\w\-]+)/([^)]*)\)\s*$", starts=("[",))
# A banner's fields and the lines that close it: read one by one while a banner is open.
BANNER_FIELD_RE = PARENT.pattern("BANNER_FIELD_RE", r"^\s*'(host|port|pid|url|process_name|server_type)': '?([^',]*)'?,?\s*$",
                                 ("'",), steady=False)
HEAD_RE = PARENT.pattern("HEAD_RE", r"Uvicorn running on (https?://[^\s:/]+:(\d+))", ("Uvicorn running on http",))
SPINUP_RE = PARENT.pattern("SPINUP_RE", r"^Waiting for servers to spin up\s*$", ("Waiting for servers to spin up",))
HEAD_WAIT_RE = PARENT.pattern("HEAD_WAIT_RE", r"^Waiting for head server to spin up", ("Waiting for head server to spin up",))
# Gym polls its own head server before it starts waiting for the servers: forever (every version).
HEAD_DOWN_RE = PARENT.pattern("HEAD_DOWN_RE", r"^Head server is not up yet \(status `?([^`)]*)`?\)",
                              ("Head server is not up yet",))
BIND_ERROR_RE = PARENT.pattern("BIND_ERROR_RE", r"error while attempting to bind on address",     # uvicorn's, any server
                               ("error while attempting to bind on address",))
BIND_PORT_RE = re.compile(r"bind on address \('[^']*', (\d+)\)")
LAUNCH_RE = PARENT.pattern("LAUNCH_RE", r"^Starting `([^`]+)` from venv (\S+)", ("Starting `",))   # Gym 0.7: one line per server
# The model-endpoint wait after all servers are ready (Gym 0.5+).
ENDPOINT_WAIT_RE = PARENT.pattern("ENDPOINT_WAIT_RE", r"Waiting for (\d+) model endpoint\(s\) to answer: ?(.*)",
                                  ("model endpoint",))
ENDPOINT_LIMIT_RE = PARENT.pattern("ENDPOINT_LIMIT_RE", r"Waiting up to (\d+(?:\.\d+)?)s\.\.\.", ("Waiting up to ",))
ENDPOINT_STILL_RE = PARENT.pattern("ENDPOINT_STILL_RE", r"^\s*still waiting, (\d+(?:\.\d+)?)s elapsed", ("still waiting, ",))
ENDPOINT_OK_RE = PARENT.pattern("ENDPOINT_OK_RE", r"All model endpoints are answering after (\d+(?:\.\d+)?)s",
                                ("model endpoint",))
ENDPOINT_FAILED_RE = PARENT.gated("ENDPOINT_FAILED_RE", r"(\d+) model endpoint\(s\) never answered within (\d+(?:\.\d+)?)s",
                                    (" model endpoint(s) never answered within ",))
ENDPOINT_UNRESOLVED_RE = PARENT.pattern("ENDPOINT_UNRESOLVED_RE", r"Model endpoint (\S+) \(([^)]*)\) does not resolve",
                                        ("Model endpoint ",))
ENDPOINT_URL_RE = re.compile(r"(https?://[^\s,]+)(?: \(([^)]*)\))?")     # (within ENDPOINT_WAIT_RE's match)
# `  - http://host/v1 (from `key`)`: the endpoints listed under Gym's give-up line (read one by one)
ENDPOINT_ITEM = PARENT.words("ENDPOINT_ITEM", "://", steady=False)
# Parent messages that merged streams glue the next line onto.
GLUE_HEADS = (
    "Waiting for head server to spin up",
    "Waiting for servers to spin up",
    "Checking for HTTP server statuses.",
)
GLUE_STARTS = PARENT.starts("GLUE_STARTS", *GLUE_HEADS, "Head server is not up yet")   # a line without `(` glues only after these
SLEEPING_RE = re.compile(r"^Head server is not up yet \(status `[^`]*`\)\. Sleeping\.\.\.")
TRACEBACK = "Traceback (most recent call last):"     # may start mid-line, after a tqdm segment
PARENT.words("TRACEBACK", TRACEBACK)
COLLECTOR.words("TRACEBACK", TRACEBACK)

# --- the collector (gym eval run) ---------------------------------------------
COLLECT_DONE_RE = COLLECTOR.pattern("COLLECT_DONE_RE", r"Finished rollout collection!", ("Finished rollout collection!",))
PROGRESS_RE = COLLECTOR.gated("PROGRESS_RE", r"Finished (\d+) / (\d+) rollouts", ("Finished ",))
TQDM_RE = COLLECTOR.gated("TQDM_RE", r"Collecting rollouts:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+)", ("Collecting rollouts:",))
# Progress bars are never a collector's last line.
NOT_LAST_LINES = COLLECTOR.words("NOT_LAST_LINES", "Collecting rollouts:", "Reading rows:")
EXAMPLES_LEFT = COLLECTOR.words("EXAMPLES_LEFT", "Examples left:")       # the line after it is read by itself
EXAMPLES_LEFT_RE = COLLECTOR.pattern("EXAMPLES_LEFT_RE", r"^\d+\. (\S+): (\d+)\s*$", (": ",), steady=False)
COLLECT_START_RE = COLLECTOR.gated("COLLECT_START_RE", r"Querying with \d+ concurrent requests|Collecting rollouts:|Repeating rows \d+ times",
                                     ("Querying with ", "Collecting rollouts:", "Repeating rows "))
CONCURRENCY = "Querying with "     # `Querying with 2 concurrent requests`: Gym's limit on trials in flight
CONCURRENCY_RE = COLLECTOR.pattern("CONCURRENCY_RE", r"^Querying with (\d+) concurrent requests", starts=(CONCURRENCY,))
EXC_LINE_RE = COLLECTOR.pattern("EXC_LINE_RE", r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$",
                                ("Error:", "Exception:", "Interrupt:", "Exit:"))
# A `gym` command's own error for a mistake in its config or arguments (0.6+: ConfigError, printed by
# rich as `Error: <message>`, wrapped at the terminal's width; the command then exits 1). The lines it
# was wrapped onto are read one by one.
CLI_ERROR_RE = COLLECTOR.pattern("CLI_ERROR_RE", r"^Error: \S", ("Error: ",))
URL_PORT_RE = re.compile(r"url='?https?://[^:/'\s]+:(\d+)(/[^'\s]*)?")
# Lines of the collector that name a failed trial (`row={...}` is Gym's debug summary of the row).
TRIAL_LINE = "[rollout_"
RUN_FAILED_RE = COLLECTOR.pattern("RUN_FAILED_RE", r"\[rollout_\w+\] /run failed status=(\w+) row=(\{.*?\})(?:\s|$)",
                                  (TRIAL_LINE,))
DROPPED_RE = COLLECTOR.pattern("DROPPED_RE", r"\[rollout_\w+\] rollout dropped from the score: row=(\{.*?\}) class=(\S+)(?: error=(.*))?",
                               (TRIAL_LINE,))
FOUND_RE = COLLECTOR.pattern("FOUND_RE", r"Found \d+ / \d+ \([\d.]+%\) rollouts for `", ("rollouts for `",))
HEALTH_LINE = "Rollout health:"
HEALTH_LINE_RE = COLLECTOR.pattern("HEALTH_LINE_RE", r"Rollout health: (\d+) checked, (\d+) healthy, (\d+) unhealthy, (\d+) unobserved",
                                   (HEALTH_LINE,))
# Features of the collector's output that bound the Gym version (core/gymversion.py).
ROUTE_FAILURES = COLLECTOR.starts("ROUTE_FAILURES", "route_failures_to_sidecar is on")
TASK_LATENCY = COLLECTOR.starts("TASK_LATENCY", "Per-task latency over")

# --- a server's own lines --------------------------------------------------------
VENV_RE = SERVER.gated("VENV_RE", r"Using CPython .* interpreter at|Creating virtual environment|Using Python [\d.]+ environment at",
                         ("Using CPython ", "Creating virtual environment", "Using Python "))
VENV_PATH_RE = SERVER.pattern("VENV_PATH_RE", r"(?:Creating virtual environment.* at|Using Python [\d.]+ environment at):? (\S+/\.venv)\b",
                              ("Creating virtual environment", "Using Python "))
VENV_LOCK_RE = SERVER.pattern("VENV_LOCK_RE", r"^Waiting for virtual environment setup: (\S+)",   # Gym 0.7: a shared venv's lock
                              ("Waiting for virtual environment setup",))
PARENT.also("VENV_LOCK_RE", VENV_LOCK_RE, SERVER)
KIND_PATH_RE = re.compile(r"/(resources_servers|responses_api_agents|responses_api_models|environment_servers)/")
GYM_PACKAGE_RE = SERVER.pattern("GYM_PACKAGE_RE", r"^\s*\+ nemo-gym==(\d+\.\d+\.\d+\S*)", ("nemo-gym==",))   # uv's list of a cold venv build
# uv's lines while a venv is built: they act only while the server installs (core/servers.py)
RESOLVED_RE = SERVER.pattern("RESOLVED_RE", r"Resolved (\d+) packages?", ("Resolved ",), steady=False)
INSTALLED_RE = SERVER.pattern("INSTALLED_RE", r"Installed (\d+) packages?", ("Installed ",), steady=False)
PACKAGE_LINE_RE = SERVER.pattern("PACKAGE_LINE_RE", r"^\s*[+-] [\w.\-\[\]]+==\S+\s*$", ("==",), steady=False)   # uv's list after `Installed N packages`
CHECKED_RE = SERVER.pattern("CHECKED_RE", r"^\s*(?:Checked|Audited) (\d+) packages?", ("Checked ", "Audited "),   # a warm venv: nothing to install
                            steady=False)
INSTALL_RE = SERVER.pattern("INSTALL_RE", r"^\s*(?:Prepared \d+ packages?|Downloading |Downloaded |Building |Built |Audited |"
                            r"Checked \d+ packages?|Uninstalled |[+-] [\w.\-\[\]]+==|Activate with:)",
                            ("Prepared ", "Downloading ", "Downloaded ", "Building ", "Built ", "Audited ", "Checked ",
                             "Uninstalled ", "==", "Activate with:"), steady=False)
_STARTING = ("Connecting to Ray cluster", "Connected to Ray cluster", "Adding a uvicorn logging filter",
             "Started server process", "Waiting for application startup", "Application startup complete")
STARTING_RE = SERVER.gated("STARTING_RE", "|".join(_STARTING), _STARTING)
SERVER_PID_RE = SERVER.pattern("SERVER_PID_RE", r"Started server process \[(\d+)\]", ("Started server process [",))
UVICORN_RE = SERVER.pattern("UVICORN_RE", r"Uvicorn running on (https?://([^\s:/]+):(\d+))", ("Uvicorn running on ",))
SHUTDOWN_RE = SERVER.gated("SHUTDOWN_RE", r"Application shutdown complete|Finished server process",
                             ("Application shutdown complete", "Finished server process"))
# A server that says it is stopping (uvicorn on SIGINT/SIGTERM): what it prints after is shutdown noise.
STOPPING_RE = SERVER.gated("STOPPING_RE", r"INFO:\s+Shutting down\s*$|Waiting for application shutdown|Application shutdown complete|"
                             r"Finished server process", ("Shutting down", "Waiting for application shutdown",
                                                          "Application shutdown complete", "Finished server process"))
# Lines that continue an error block (read one by one while a block is open); a chained
# traceback's first line may start the next one.
CHAINED = SERVER.starts("CHAINED", "The above exception", "During handling of the above exception")
SERVER.also("EXC_LINE_RE", EXC_LINE_RE, COLLECTOR, steady=False)
# The last line of a traceback a shutdown prints (an interrupt, a cancelled task, an exit).
SHUTDOWN_EXC_RE = SERVER.pattern("SHUTDOWN_EXC_RE", r"^(?:[\w.]+\.)?(?:KeyboardInterrupt|CancelledError|SystemExit)\b(?::.*)?$",
                                 ("KeyboardInterrupt", "CancelledError", "SystemExit"), steady=False)
# The answer an upstream gave, on the line after Gym 0.7's `[upstream_request_failed]` (a failure
# marker: its error block is read line by line; core/upstream.py reads the answer).
UPSTREAM_ANSWER = SERVER.words("UPSTREAM_ANSWER", "Response content:", steady=False)
RUN_500_RE = re.compile(r"\"POST /run HTTP/[\d.]+\" 5\d\d")
# An agent's access log (Gym 0.4-0.5): its first `/run` is kept (once a server).
RUN_ACCESS_RE = SERVER.pattern("RUN_ACCESS_RE", r"\"POST /run HTTP/[\d.]+\" \d{3}", ('"POST /run HTTP/',), once=True)
# A file's first access-log line: a sign of the Gym version (0.6 turned servers' access logs off; once a file).
ACCESS_LINE = SERVER.words("ACCESS_LINE", 'HTTP/1.1" ', once=True)
# Literal features of a server's output that bound the Gym version (core/gymversion.py).
POOL_SIGN = SERVER.words("POOL_SIGN", "aiohttp connection pool capacity")[0]
ACCESS_OFF_SIGN = SERVER.words("ACCESS_OFF_SIGN", "Disabling a uvicorn access logging")[0]
MODEL_RETRY_RE = re.compile(r"\[model_retry(?:_stop)? ")
# A connection Gym could not make (refused, reset, dropped), retried 0.5 s apart without end (every
# Gym version: server_utils._request_with_retries); printed every 100 failures of a process.
REQUEST_RETRY = "[request_retry "
REQUEST_RETRY_RE = SERVER.pattern("REQUEST_RETRY_RE", r"\[request_retry url=(\S+) error=(\w+) retry=(\d+) elapsed_s=([\d.]+)\]"
                                  r"(?: Hit (\d+) global)?", (REQUEST_RETRY,))
COLLECTOR.also("REQUEST_RETRY_RE", REQUEST_RETRY_RE, SERVER)

# Patterns of no registry: the `(name) ` prefix (the block search knows it: a line starting with `(`),
# patterns tried only within another's match, and those read only from lines already kept as
# evidence (by the verdict and attribution), never on the line path.
NOT_GATED = ("BIND_PORT_RE", "ENDPOINT_URL_RE", "KIND_PATH_RE", "MODEL_RETRY_RE", "PREFIX_RE", "RUN_500_RE",
             "SLEEPING_RE", "URL_PORT_RE")

SERVER_TYPE_KIND = {
    "resources_servers": K_RESOURCES,
    "responses_api_agents": K_AGENT,
    "responses_api_models": K_MODEL,
    "environment_servers": K_ENVIRONMENT,
}


def split_prefix(line: str) -> tuple[Optional[str], str]:
    """`(name) text` -> (name, text); a line without a Gym prefix -> (None, line)."""
    m = PREFIX_RE.match(line) if line[:1] == "(" else None     # (most lines: no call to the pattern)
    if m and m.group(1) not in NOT_SERVERS:
        return m.group(1), line[m.end():]
    return None, line


def log_stem(name: str) -> str:
    """The file name (without .log) Gym gives a server's log: slashes become `_`."""
    return name.replace("/", "_")


def unglue(line: str, known: Iterable[str]) -> list[str]:
    """Split a merged-stream line where two writes were glued without a newline."""
    parts = []
    rest = line
    while rest:
        cut = _glue_point(rest, known)
        if cut <= 0:
            parts.append(rest)
            break
        parts.append(rest[:cut])
        rest = rest[cut:]
    return parts


def cannot_glue(line: str) -> bool:
    """The common case: no `(` after the first character (where a glued server prefix would
    start; a prefixed line's own is at 0) and none of Gym's glue heads: nothing is glued in it."""
    return line.find("(", 1) < 0 and not line.startswith(GLUE_STARTS)


def _glue_point(line: str, known: Iterable[str]) -> int:
    if cannot_glue(line):
        return -1
    for head in GLUE_HEADS:
        if line.startswith(head) and len(line) > len(head):
            return len(head)
    m = SLEEPING_RE.match(line)
    if m and len(line) > m.end():
        return m.end()
    best = -1
    for name in known:
        i = line.find(f"({name}) ", 1)
        if i > 0 and not line[i - 1].isspace() and (best < 0 or i < best):
            best = i
    return best


def server_kind(name: str, path_hint: str = "") -> str:
    """resources / agent / model / environment from a venv path, else guessed from the name
    (Gym 0.7 names an agent's automatic environment server `<agent>_environment_server`)."""
    m = KIND_PATH_RE.search(path_hint)
    if m:
        return SERVER_TYPE_KIND[m.group(1)]
    low = name.lower()
    if "environment_server" in low or low.endswith("_env_server"):
        return K_ENVIRONMENT
    if "agent" in low:
        return K_AGENT
    if "model" in low or "policy" in low or "judge" in low:
        return K_MODEL
    return K_UNKNOWN


def row_key(text: str) -> Optional[tuple[int, int, Optional[int]]]:
    """(task, rollout, attempt) from the `row={...}` summary a collector line prints."""
    try:
        row = json.loads(text)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    task, rollout, attempt = (row.get(k) for k in ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index"))
    if not _index(task) or not (_index(rollout) or rollout is None) or not (_index(attempt) or attempt is None):
        return None
    return task, rollout if rollout is not None else 0, attempt


_TASK_NAMED_RE = re.compile(r"_ng_task_index\W{0,4}(\d+)")
_ROLLOUT_NAMED_RE = re.compile(r"_ng_rollout_index\W{0,4}(\d+)")


def names_trial(text: str, key: tuple[int, int]) -> bool:
    """The line names this (task, rollout) by Gym's own keys (a `row={...}` summary, a dumped
    request, escaped or not); a line naming the task alone names each of its rollouts."""
    task = _TASK_NAMED_RE.search(text) if "_ng_task_index" in text else None
    if task is None or int(task.group(1)) != key[0]:
        return False
    rollout = _ROLLOUT_NAMED_RE.search(text)
    return rollout is None or int(rollout.group(1)) == key[1]


def _index(v: object) -> TypeGuard[int]:
    return type(v) is int and v >= 0


def endpoint_urls(text: str) -> list[str]:
    """`url (key), url (key)` -> ["url (key)", ...]"""
    return [m.group(1) + (f" ({m.group(2)})" if m.group(2) else "")
            for m in ENDPOINT_URL_RE.finditer(text.strip())]


# Any line gym env start prints that `_parent_patterns` acts on holds one of its patterns' words:
# one search of them turns most of Gym's output away before the patterns are tried one by one.
_PARENT_WORDS = tuple(dict.fromkeys(w for name, (words, _, steady, _) in PARENT.gates.items()
                                    if steady and not name.startswith("marker ") for w in words))
_PARENT_WORD_RE = re.compile("|".join(re.escape(k) for k in _PARENT_WORDS))


def parent_line_candidate(text: str) -> bool:
    """May any of Gym's parent patterns match this line? (False: none can.)"""
    return _PARENT_WORD_RE.search(text) is not None


def parse_pending(text: str) -> Optional[tuple[int, int, list[str]]]:
    m = PENDING_RE.search(text)
    if not m:
        return None
    names = [n.strip().strip("'\"") for n in m.group(3).split(",") if n.strip().strip("'\"")]
    return int(m.group(1)), int(m.group(2)), names
