"""Gym's own output lines: the patterns, and splitting merged streams per server.

Formats are described in docs/gym-formats.md. Patterns are searched, never anchored to a
whole line, because merged streams glue lines together.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Optional, TypeGuard

from .model import K_AGENT, K_ENVIRONMENT, K_MODEL, K_RESOURCES, K_UNKNOWN


class Gated:
    """A pattern searched only in text holding one of `words`, literals that every match of it
    holds (tests generate matches of each to check). Python's `re` tries a pattern that starts
    with a class like `\\d`, or alternates, at every position: 1-9 us on a long Ray line, where
    the `in` of a literal is ~0.1 us."""

    __slots__ = ("regex", "words")

    def __init__(self, pattern: str, words: tuple[str, ...]):
        self.regex, self.words = re.compile(pattern), words

    def search(self, text: str) -> Optional[re.Match[str]]:
        for word in self.words:
            if word in text:
                return self.regex.search(text)
        return None


# --- the `(<name>) ` prefix -------------------------------------------------
PREFIX_RE = re.compile(r"^\(([A-Za-z_][\w.\-/]*)\) ?")
# Process names other tools put in parentheses; never Gym servers.
NOT_SERVERS = frozenset({"raylet", "gcs_server", "dashboard", "autoscaler", "monitor", "pid",
                         "log_monitor", "runtime_env_agent", "dashboard_agent", "core_worker"})

# --- the Gym parent (gym env start) ---------------------------------------------
PENDING_RE = Gated(r"(\d+)\s*/\s*(\d+) servers ready\. Waiting for servers to spin up: \[([^\]]*)\]",
                   (" servers ready. Waiting for servers to spin up: [",))
ALL_READY_RE = re.compile(r"All (\d+) / (\d+) servers ready")
DIED_RE = re.compile(r"Process `([^`]+)` finished unexpectedly!")
TIMEOUT_RE = re.compile(r"Timed out after (\d+(?:\.\d+)?(?:e\+?\d+)?)s waiting for Gym servers to become ready: ?(.*)")
FINISHED_RE = re.compile(r"NeMo Gym finished!")
# The last line of the traceback of a process stopped by Ctrl-C (SIGINT): no message, no colon.
INTERRUPT_RE = re.compile(r"^KeyboardInterrupt\s*$")
# RunHelper.shutdown's first line (every version): gym env start stops its servers (on Ctrl-C, or after a
# failed start from 0.7). A server still starting then ends wherever it was: stopped, not dead.
SHUTDOWN_BEGIN_RE = re.compile(r"^Sending interrupt signals to servers\.\.\.")
BANNER_RE = re.compile(r"^\[(\d+)\] (\S+) \(([\w\-]+)/([^)]*)\)\s*$")
BANNER_FIELD_RE = re.compile(r"^\s*'(host|port|pid|url|process_name|server_type)': '?([^',]*)'?,?\s*$")
HEAD_RE = re.compile(r"Uvicorn running on (https?://[^\s:/]+:(\d+))")
SPINUP_RE = re.compile(r"^Waiting for servers to spin up\s*$")        # the spin-up limit's clock starts
HEAD_WAIT_RE = re.compile(r"^Waiting for head server to spin up")
# Gym polls its own head server before it starts waiting for the servers: forever (every version).
HEAD_DOWN_RE = re.compile(r"^Head server is not up yet \(status `?([^`)]*)`?\)")
BIND_ERROR_RE = re.compile(r"error while attempting to bind on address")     # uvicorn's, any server
BIND_PORT_RE = re.compile(r"bind on address \('[^']*', (\d+)\)")
LAUNCH_RE = re.compile(r"^Starting `([^`]+)` from venv (\S+)")          # Gym 0.7: one line per server
# The model-endpoint wait after all servers are ready (Gym 0.5+).
ENDPOINT_WAIT_RE = re.compile(r"Waiting for (\d+) model endpoint\(s\) to answer: ?(.*)")
ENDPOINT_LIMIT_RE = re.compile(r"Waiting up to (\d+(?:\.\d+)?)s\.\.\.")
ENDPOINT_STILL_RE = re.compile(r"^\s*still waiting, (\d+(?:\.\d+)?)s elapsed")
ENDPOINT_OK_RE = re.compile(r"All model endpoints are answering after (\d+(?:\.\d+)?)s")
ENDPOINT_FAILED_RE = Gated(r"(\d+) model endpoint\(s\) never answered within (\d+(?:\.\d+)?)s",
                           (" model endpoint(s) never answered within ",))
ENDPOINT_UNRESOLVED_RE = re.compile(r"Model endpoint (\S+) \(([^)]*)\) does not resolve")
ENDPOINT_URL_RE = re.compile(r"(https?://[^\s,]+)(?: \(([^)]*)\))?")
# Parent messages that merged streams glue the next line onto.
GLUE_HEADS = (
    "Waiting for head server to spin up",
    "Waiting for servers to spin up",
    "Checking for HTTP server statuses.",
)
GLUE_STARTS = GLUE_HEADS + ("Head server is not up yet",)   # a line without `(` glues only after these
SLEEPING_RE = re.compile(r"^Head server is not up yet \(status `[^`]*`\)\. Sleeping\.\.\.")

# --- the collector (gym eval run) ---------------------------------------------
COLLECT_DONE_RE = re.compile(r"Finished rollout collection!")
PROGRESS_RE = re.compile(r"Finished (\d+) / (\d+) rollouts")
TQDM_RE = re.compile(r"Collecting rollouts:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+)")
EXAMPLES_LEFT_RE = re.compile(r"^\d+\. (\S+): (\d+)\s*$")
COLLECT_START_RE = Gated(r"Querying with \d+ concurrent requests|Collecting rollouts:|Repeating rows \d+ times",
                         ("Querying with ", "Collecting rollouts:", "Repeating rows "))
EXC_LINE_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")
# A `gym` command's own error for a mistake in its config or arguments (0.6+: ConfigError, printed by
# rich as `Error: <message>`, wrapped at the terminal's width; the command then exits 1).
CLI_ERROR_RE = re.compile(r"^Error: \S")
URL_PORT_RE = re.compile(r"url='?https?://[^:/'\s]+:(\d+)(/[^'\s]*)?")
TRACEBACK = "Traceback (most recent call last):"     # may start mid-line, after a tqdm segment
# Lines of the collector that name a failed trial (`row={...}` is Gym's debug summary of the row).
RUN_FAILED_RE = re.compile(r"\[rollout_\w+\] /run failed status=(\w+) row=(\{.*?\})(?:\s|$)")
DROPPED_RE = re.compile(r"\[rollout_\w+\] rollout dropped from the score: row=(\{.*?\}) class=(\S+)(?: error=(.*))?")
FOUND_RE = re.compile(r"Found \d+ / \d+ \([\d.]+%\) rollouts for `")
HEALTH_LINE_RE = re.compile(r"Rollout health: (\d+) checked, (\d+) healthy, (\d+) unhealthy, (\d+) unobserved")

# --- a server's own lines --------------------------------------------------------
VENV_RE = Gated(r"Using CPython .* interpreter at|Creating virtual environment|Using Python [\d.]+ environment at",
                ("Using CPython ", "Creating virtual environment", "Using Python "))
VENV_PATH_RE = re.compile(r"(?:Creating virtual environment.* at|Using Python [\d.]+ environment at):? (\S+/\.venv)\b")
VENV_LOCK_RE = re.compile(r"^Waiting for virtual environment setup: (\S+)")   # Gym 0.7: a shared venv's lock
KIND_PATH_RE = re.compile(r"/(resources_servers|responses_api_agents|responses_api_models|environment_servers)/")
GYM_PACKAGE_RE = re.compile(r"^\s*\+ nemo-gym==(\d+\.\d+\.\d+\S*)")   # uv's list of a cold venv build
RESOLVED_RE = re.compile(r"Resolved (\d+) packages?")
INSTALLED_RE = re.compile(r"Installed (\d+) packages?")
PACKAGE_LINE_RE = re.compile(r"^\s*[+-] [\w.\-\[\]]+==\S+\s*$")    # uv's list after `Installed N packages`
CHECKED_RE = re.compile(r"^\s*(?:Checked|Audited) (\d+) packages?")    # a warm venv: nothing to install
INSTALL_RE = re.compile(r"^\s*(?:Prepared \d+ packages?|Downloading |Downloaded |Building |Built |Audited |"
                        r"Checked \d+ packages?|Uninstalled |[+-] [\w.\-\[\]]+==|Activate with:)")
_STARTING = ("Connecting to Ray cluster", "Connected to Ray cluster", "Adding a uvicorn logging filter",
             "Started server process", "Waiting for application startup", "Application startup complete")
STARTING_RE = Gated("|".join(_STARTING), _STARTING)
SERVER_PID_RE = re.compile(r"Started server process \[(\d+)\]")
UVICORN_RE = re.compile(r"Uvicorn running on (https?://([^\s:/]+):(\d+))")
SHUTDOWN_RE = Gated(r"Application shutdown complete|Finished server process",
                    ("Application shutdown complete", "Finished server process"))
# A server that says it is stopping (uvicorn on SIGINT/SIGTERM): what it prints after is shutdown noise.
STOPPING_RE = Gated(r"INFO:\s+Shutting down\s*$|Waiting for application shutdown|Application shutdown complete|"
                    r"Finished server process", ("Shutting down", "Waiting for application shutdown",
                                                 "Application shutdown complete", "Finished server process"))
# The last line of a traceback a shutdown prints (an interrupt, a cancelled task, an exit).
SHUTDOWN_EXC_RE = re.compile(r"^(?:[\w.]+\.)?(?:KeyboardInterrupt|CancelledError|SystemExit)\b(?::.*)?$")
RUN_500_RE = re.compile(r"\"POST /run HTTP/[\d.]+\" 5\d\d")
RUN_ACCESS_RE = re.compile(r"\"POST /run HTTP/[\d.]+\" \d{3}")     # an agent's access log (Gym 0.4-0.5)
MODEL_RETRY_RE = re.compile(r"\[model_retry(?:_stop)? ")
# A connection Gym could not make (refused, reset, dropped), retried 0.5 s apart without end (every
# Gym version: server_utils._request_with_retries); printed every 100 failures of a process.
REQUEST_RETRY = "[request_retry "
REQUEST_RETRY_RE = re.compile(r"\[request_retry url=(\S+) error=(\w+) retry=(\d+) elapsed_s=([\d.]+)\]"
                              r"(?: Hit (\d+) global)?")

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


# Any line gym env start prints that `_parent_patterns` acts on: one search rejects the rest.
PARENT_PATTERNS = (PENDING_RE.regex, ALL_READY_RE, DIED_RE, TIMEOUT_RE, FINISHED_RE, HEAD_RE, SPINUP_RE, HEAD_WAIT_RE,
                   LAUNCH_RE, ENDPOINT_WAIT_RE, ENDPOINT_LIMIT_RE, ENDPOINT_STILL_RE, ENDPOINT_OK_RE,
                   ENDPOINT_FAILED_RE.regex, ENDPOINT_UNRESOLVED_RE, VENV_LOCK_RE, HEAD_DOWN_RE, SHUTDOWN_BEGIN_RE,
                   INTERRUPT_RE, re.compile(r"Traceback \(most recent call last\):"))
# Literals one of which every match of a PARENT_PATTERNS pattern holds (tests/test_parsers.py
# generates matches of each to check it): one search for them (~0.7 us a line) turns away most lines
# of Gym's output, where the alternation of the patterns themselves took ~5.7 us (Python's `re`
# tries each at every position): ~0.7 ms of a summary of a run whose whole `gym env start` output
# is read. A line that holds one goes on to the patterns themselves, one by one.
PARENT_KEYWORDS = ("servers ready", "finished unexpectedly!", "Timed out after ", "NeMo Gym finished!",
                   "Uvicorn running on http", "Waiting for servers to spin up", "Waiting for head server to spin up",
                   "Waiting for virtual environment setup", "Starting `", "Waiting up to ", "still waiting, ",
                   "model endpoint", "Model endpoint ", "Head server is not up yet", "Traceback (most recent call last):",
                   "Sending interrupt signals to servers", "KeyboardInterrupt")
PARENT_KEY_RE = re.compile("|".join(re.escape(k) for k in PARENT_KEYWORDS))


def parent_line_candidate(text: str) -> bool:
    """May any of Gym's parent patterns match this line? (False: none can.)"""
    return PARENT_KEY_RE.search(text) is not None


def parse_pending(text: str) -> Optional[tuple[int, int, list[str]]]:
    m = PENDING_RE.search(text)
    if not m:
        return None
    names = [n.strip().strip("'\"") for n in m.group(3).split(",") if n.strip().strip("'\"")]
    return int(m.group(1)), int(m.group(2)), names
