"""Failure markers in Gym output (docs/gym-formats.md), shared by the core and the log viewer.

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
    ("model_retry", re.compile(r"\[model_retry(?:_stop)? [^\]]*status=\d+")),
    ("upstream_failed", re.compile(r"\[upstream_request_failed\]")),
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
    ("timeout", re.compile(r"Timed out after [\d.e+]+s waiting for Gym servers")),
    ("never_answered", re.compile(r"model endpoint\(s\) never answered")),
)

# Known-harmless lines that mention an error word (Ray's ulimit warning quotes an OSError).
BENIGN = re.compile(r"Found ulimit of .* failed to automatically increase")

# For each marker, literals one of which every match of it contains (a test generates matches
# from each pattern to check this). Most lines hold none of them, and one search for all the
# literals rejects those far faster than the markers' own patterns.
KEYWORDS_BY_MARKER: dict[str, tuple[str, ...]] = {
    "traceback": ("Traceback (most recent call last):",), "process_died": ("finished unexpectedly!",),
    "caught_exception": ("Caught an exception printed above in",), "model_retry": ("[model_retry",),
    "upstream_failed": ("[upstream_request_failed]",),
    "request_exception": ("Hit an exception while making a request",), "http_5xx": ('" 5',),
    "uv_version": ("required uv version",), "uv_error": ("error: ",), "errno": ("[Errno ",),
    "permission": ("PermissionError",), "not_found": ("FileNotFoundError",),
    "killed": ("Killed", "Out of memory", "oom-kill"),
    "exception_line": ("Error: ", "Exception: "), "log_error": ("ERROR", "CRITICAL"),
    "timeout": ("Timed out after ",), "never_answered": ("model endpoint(s) never answered",),
}
MARKER_KEYWORDS = tuple(dict.fromkeys(k for name, _ in MARKERS for k in KEYWORDS_BY_MARKER[name]))
_KEYWORD = re.compile("|".join(re.escape(k) for k in MARKER_KEYWORDS))
# A line that holds a keyword is tried against the markers whose keywords it holds, in order: an
# alternation of all the markers' patterns is slow (Python's `re` tries every branch at every
# position), on lines as common as Ray's ulimit warning.
_GATED = tuple((name, pattern, KEYWORDS_BY_MARKER[name]) for name, pattern in MARKERS)


def find_marker(line: str) -> str | None:
    """The name of the first failure marker in `line`, or None."""
    if _KEYWORD.search(line) is None or BENIGN.search(line):
        return None
    for name, pattern, words in _GATED:
        for word in words:
            if word in line:
                if pattern.search(line):
                    return name
                break
    return None


def is_error_line(line: str) -> bool:
    return find_marker(line) is not None
