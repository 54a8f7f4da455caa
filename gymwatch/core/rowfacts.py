"""A row of Gym's rows files as gymwatch sees it: the key names that join Gym (the writer) and
gymwatch (the reader), and `RowFacts`, the few facts the model takes from a row. Both ways of
decoding a row give these: core/records.py (the reference) and core/fast/rows.py."""

from __future__ import annotations

import math
from typing import Any, Optional, Union

from msgspec import Struct

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
ATTEMPT_KEY = "_ng_attempt_index"
FAILURE_CLASS_KEY = "_ng_failure_class"
FAILURE_STATUS_KEY = "_ng_failure_http_status"
FAILURE_PREFIX = "_ng_failure_"
FAILURE_TERMINAL_KEY = "_ng_failure_terminal"     # Gym's resume never retries such a failure
AGENT_REF_KEY = "agent_ref"
MASK_KEY = "mask_sample"       # Gym 0.7's verify field: true when the rollout must not be scored or trained on
PERF_KEY = "ng_perf"                  # Gym 0.7 with observability on: the rollout's own figures
LATENCY_KEY = "total_latency_ms"      # ... among them how long its /run took
CREATED_KEY = "created_at"            # response.created_at: when the model answered (epoch seconds)
MAX_SECONDS = 1 << 53                 # a time or duration beyond this is no number Gym writes
# Failure-row keys that may carry a human message, most specific first.
MESSAGE_KEYS = ("_ng_failure_message", "_ng_failure_reason", "_ng_failure_error", "error",
                "infrastructure_error", "failure_reason", "message")


class RowFacts(Struct, gc=False, array_like=True):
    """What the model takes from one row (a msgspec Struct: a big run makes one a row; encoded as
    an array when a forked child sends it, core/fast/fork.py)."""

    task: Optional[int] = None
    rollout: Optional[int] = None
    attempt: Optional[int] = None
    reward: Optional[float] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    never_ran: bool = False
    agent: str = ""
    failure_class: str = ""
    message: str = ""
    http_status: Optional[int] = None
    problem: str = ""     # why this row is unusable or partly wrong (shown in the report)
    masked: bool = False  # Gym masked it (`mask_sample`): its reward is no measurement, its score leaves it out
    latency: Optional[float] = None       # seconds its /run took (ng_perf.total_latency_ms / 1000)
    answered_at: Optional[float] = None   # response.created_at


class BadLine(ValueError):
    """A line that is not a JSON object."""


# A line of a rows file: its facts, why it is not a row, or None (a blank line, which is no row).
Row = Union[RowFacts, BadLine, None]


def seconds(v: Any) -> Optional[float]:
    """A time or a duration: a number (not a bool), finite, not negative, as a float; else None."""
    if type(v) is int:
        return float(v) if 0 <= v <= MAX_SECONDS else None
    if type(v) is float and math.isfinite(v) and 0 <= v <= MAX_SECONDS:
        return v
    return None
