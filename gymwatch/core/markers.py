"""Failure markers in Gym output (GYM_REFERENCE §3), shared by the core and the log viewer.

One place decides what counts as an error line so the readiness board, the
report and the viewer's errors-only filter can never disagree.
"""

from __future__ import annotations

import re

# Each marker: a short name and the pattern that finds it anywhere in a line.
MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("traceback", re.compile(r"Traceback \(most recent call last\):")),
    ("process_died", re.compile(r"Process `[^`]+` finished unexpectedly!")),
    ("caught_exception", re.compile(r"Caught an exception printed above in")),
    ("model_retry", re.compile(r"\[model_retry [^\]]*status=\d+")),
    ("request_exception", re.compile(r"Hit an exception while making a request")),
    ("http_5xx", re.compile(r"\"[A-Z]+ [^\"]*HTTP/[\d.]+\" 5\d\d")),
    ("uv_version", re.compile(r"required uv version")),
    ("uv_error", re.compile(r"^(?:\([^)]*\) )?\s*error: ")),
    ("errno", re.compile(r"\[Errno \d+\]")),
    ("permission", re.compile(r"\bPermissionError\b")),
    ("not_found", re.compile(r"\bFileNotFoundError\b")),
    ("killed", re.compile(r"(?:^|\s)Killed(?:\s|$)|Out of memory|OOMKilled|oom-kill")),
    ("exception_line", re.compile(r"^(?:\([^)]*\) )?[A-Za-z_][\w.]*(?:Error|Exception): ")),
    ("log_error", re.compile(r"^(?:\([^)]*\) )?(?:ERROR|CRITICAL):? ")),
    ("timeout", re.compile(r"Timed out after \d+s waiting for Gym servers")),
    ("never_answered", re.compile(r"model endpoint\(s\) never answered")),
)

# Known-harmless lines that mention an error word (Ray's ulimit warning quotes an OSError).
BENIGN = re.compile(r"Found ulimit of .* failed to automatically increase")

# One combined scan: most lines hold no marker, so a single search rejects them fast.
_ANY = re.compile("|".join(f"(?:{p.pattern})" for _, p in MARKERS))


def find_marker(line: str) -> str | None:
    """The name of the first failure marker in `line`, or None."""
    if not _ANY.search(line) or BENIGN.search(line):
        return None
    for name, pattern in MARKERS:
        if pattern.search(line):
            return name
    return None


def is_error_line(line: str) -> bool:
    return _ANY.search(line) is not None and not BENIGN.search(line)
