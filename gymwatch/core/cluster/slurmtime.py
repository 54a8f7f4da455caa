"""Slurm's spellings of durations and times, read and written.

Durations: `--time` and squeue's TIME / TIME_LIMIT take `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
`D-HH:MM`, `D-HH:MM:SS`; `UNLIMITED` / `infinite` mean no limit. Times (`SubmitTime=...`,
sacct's `Start`) are ISO without a zone, in the cluster's local time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

# What Slurm prints where a value is not set: never a value of its own.
UNSET = frozenset({"", "(null)", "None", "N/A", "n/a", "Unknown", "NONE", "none", "INVALID", "NOT_SET",
                   "(none)", "None assigned"})
_NO_LIMIT = frozenset({"UNLIMITED", "INFINITE", "Partition_Limit"})


def clean(value: str) -> str:
    """A Slurm field with its not-set spellings turned into ""."""
    value = value.strip()
    return "" if value in UNSET else value


def duration(text: str) -> Optional[int]:
    """Seconds in a Slurm duration, None when unset, unlimited or not a duration."""
    text = clean(text)
    if not text or text.upper() in {v.upper() for v in _NO_LIMIT}:
        return None
    days = 0
    rest = text
    if "-" in text:
        day, _, rest = text.partition("-")
        if not day.isdigit():
            return None
        days = int(day)
    parts = rest.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    values = [int(p) for p in parts]
    if days:
        # D-HH, D-HH:MM, D-HH:MM:SS: the first part after the day is hours.
        values += [0] * (3 - len(values))
        hours, minutes, seconds = values
    elif len(values) == 1:
        hours, minutes, seconds = 0, values[0], 0
    elif len(values) == 2:
        hours, minutes, seconds = 0, values[0], values[1]
    else:
        hours, minutes, seconds = values
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def unlimited(text: str) -> bool:
    return clean(text).upper() in {v.upper() for v in _NO_LIMIT}


def show_duration(seconds: Optional[int]) -> str:
    """Seconds as Slurm shows them: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`; "?" when unknown."""
    if seconds is None:
        return "?"
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def timestamp(text: str) -> Optional[datetime]:
    """A Slurm time (`2026-12-06T04:52:48`), naive like Slurm's own; None when unset."""
    text = clean(text)
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
