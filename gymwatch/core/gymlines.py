"""Gym's own output lines: the patterns, and splitting merged streams per server.

Formats from GYM_REFERENCE §2-3. Patterns are searched, never anchored to a
whole line, because merged streams glue lines together.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

# --- the `(<name>) ` prefix -------------------------------------------------
PREFIX_RE = re.compile(r"^\(([A-Za-z_][\w.\-/]*)\) ?")
# Process names other tools put in parentheses; never Gym servers.
NOT_SERVERS = frozenset({"raylet", "gcs_server", "dashboard", "autoscaler", "monitor", "pid",
                         "log_monitor", "runtime_env_agent", "dashboard_agent", "core_worker"})

# --- the Gym parent (gym env start) ---------------------------------------------
PENDING_RE = re.compile(r"(\d+)\s*/\s*(\d+) servers ready\. Waiting for servers to spin up: \[([^\]]*)\]")
ALL_READY_RE = re.compile(r"All (\d+) / (\d+) servers ready")
DIED_RE = re.compile(r"Process `([^`]+)` finished unexpectedly!")
TIMEOUT_RE = re.compile(r"Timed out after (\d+)s waiting for Gym servers to become ready: ?(.*)")
FINISHED_RE = re.compile(r"NeMo Gym finished!")
BANNER_RE = re.compile(r"^\[(\d+)\] (\S+) \(([\w\-]+)/([^)]*)\)\s*$")
BANNER_FIELD_RE = re.compile(r"^\s*'(host|port|pid|url|process_name|server_type)': '?([^',]*)'?,?\s*$")
HEAD_RE = re.compile(r"Uvicorn running on (https?://[^\s:/]+:(\d+))")
# Parent messages that merged streams glue the next line onto.
GLUE_HEADS = (
    "Waiting for head server to spin up",
    "Waiting for servers to spin up",
    "Checking for HTTP server statuses.",
)
_GLUE_STARTS = GLUE_HEADS + ("Head server is not up yet",)
SLEEPING_RE = re.compile(r"^Head server is not up yet \(status `[^`]*`\)\. Sleeping\.\.\.")

# --- the collector (gym eval run) ---------------------------------------------
COLLECT_DONE_RE = re.compile(r"Finished rollout collection!")
PROGRESS_RE = re.compile(r"Finished (\d+) / (\d+) rollouts")
TQDM_RE = re.compile(r"Collecting rollouts:\s*\d+%\|[^|]*\|\s*(\d+)/(\d+)")
EXAMPLES_LEFT_RE = re.compile(r"^\d+\. (\S+): (\d+)\s*$")
COLLECT_START_RE = re.compile(r"Querying with \d+ concurrent requests|Collecting rollouts:|Repeating rows \d+ times")
EXC_LINE_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")
URL_PORT_RE = re.compile(r"url='?https?://[^:/'\s]+:(\d+)(/[^'\s]*)?")

# --- a server's own lines --------------------------------------------------------
VENV_RE = re.compile(r"Using CPython .* interpreter at|Creating virtual environment|Using Python [\d.]+ environment at")
KIND_PATH_RE = re.compile(r"/(resources_servers|responses_api_agents|responses_api_models)/")
RESOLVED_RE = re.compile(r"Resolved (\d+) packages?")
INSTALLED_RE = re.compile(r"Installed (\d+) packages?")
CHECKED_RE = re.compile(r"^\s*(?:Checked|Audited) (\d+) packages?")    # a warm venv: nothing to install
INSTALL_RE = re.compile(r"^\s*(?:Prepared \d+ packages?|Downloading |Downloaded |Building |Built |Audited |"
                        r"Checked \d+ packages?|Uninstalled |[+-] [\w.\-\[\]]+==|Activate with:)")
STARTING_RE = re.compile(r"Connecting to Ray cluster|Connected to Ray cluster|Adding a uvicorn logging filter|"
                         r"Started server process|Waiting for application startup|Application startup complete")
SERVER_PID_RE = re.compile(r"Started server process \[(\d+)\]")
UVICORN_RE = re.compile(r"Uvicorn running on (https?://([^\s:/]+):(\d+))")
SHUTDOWN_RE = re.compile(r"Application shutdown complete|Finished server process")
RUN_500_RE = re.compile(r"\"POST /run HTTP/[\d.]+\" 5\d\d")
MODEL_RETRY_RE = re.compile(r"\[model_retry ")

SERVER_TYPE_KIND = {
    "resources_servers": "resources",
    "responses_api_agents": "agent",
    "responses_api_models": "model",
}


def split_prefix(line: str) -> tuple[Optional[str], str]:
    """`(name) text` -> (name, text); a line without a Gym prefix -> (None, line)."""
    m = PREFIX_RE.match(line)
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


def _glue_point(line: str, known: Iterable[str]) -> int:
    if "(" not in line and not line.startswith(_GLUE_STARTS):
        return -1       # the common case: nothing glued
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
    """resources / agent / model from a venv path, else guessed from the name."""
    m = KIND_PATH_RE.search(path_hint)
    if m:
        return SERVER_TYPE_KIND[m.group(1)]
    low = name.lower()
    if "agent" in low:
        return "agent"
    if "model" in low or "policy" in low or "judge" in low:
        return "model"
    return "unknown"


# Any line gym env start prints that `_parent_patterns` acts on: one search rejects the rest.
PARENT_ANY_RE = re.compile("|".join(p.pattern for p in (
    PENDING_RE, ALL_READY_RE, DIED_RE, TIMEOUT_RE, FINISHED_RE, HEAD_RE)) + r"|^Traceback \(most recent call last\):")


def parse_pending(text: str) -> Optional[tuple[int, int, list[str]]]:
    m = PENDING_RE.search(text)
    if not m:
        return None
    names = [n.strip().strip("'\"") for n in m.group(3).split(",") if n.strip().strip("'\"")]
    return int(m.group(1)), int(m.group(2)), names
