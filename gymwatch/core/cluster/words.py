"""Slurm's job states and pending reasons in the words of a person waiting for their job.

Reasons that mean the job asks for what it can never get (more nodes or time than the partition
allows, an account or QOS it may not use, a dependency that can no longer be met) are marked
`never`: such a job stays PENDING forever unless someone changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# Job states Slurm reports, grouped by what they mean for the person waiting.
QUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED",
                           "STOPPED"})
RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"})
ENDED_STATES = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL",
                          "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})

_STATE_WORDS = {
    "PENDING": "queued", "REQUEUED": "queued again", "REQUEUE_HOLD": "held after a requeue",
    "SUSPENDED": "suspended", "STOPPED": "stopped", "RESV_DEL_HOLD": "held (its reservation was deleted)",
    "RUNNING": "running", "CONFIGURING": "starting (its nodes are being set up)",
    "COMPLETING": "finishing (its processes are being cleaned up)", "RESIZING": "running (being resized)",
    "COMPLETED": "completed", "FAILED": "failed", "TIMEOUT": "hit its time limit", "CANCELLED": "cancelled",
    "OUT_OF_MEMORY": "ran out of memory", "NODE_FAIL": "lost: a node it ran on failed",
    "PREEMPTED": "preempted by a higher-priority job", "BOOT_FAIL": "its nodes failed to boot",
    "DEADLINE": "missed its deadline", "REVOKED": "revoked (it ran on another cluster)",
    "SPECIAL_EXIT": "held after a special exit",
}


@dataclass(frozen=True)
class Reason:
    words: str
    never: bool = False        # it will never start as it is


_REASONS = {
    "None": Reason("waiting to be scheduled"),
    "Priority": Reason("waiting: other jobs come first (priority)"),
    "Resources": Reason("waiting for resources: the nodes it needs are busy"),
    "BeginTime": Reason("waiting for its begin time"),
    "Dependency": Reason("waiting for the job it depends on"),
    "DependencyNeverSatisfied": Reason("its dependency can never be met", never=True),
    "JobHeldAdmin": Reason("held by an administrator"),
    "JobHeldUser": Reason("held by its owner (scontrol release lets it run)"),
    "PartitionConfig": Reason("asks for more than its partition has (nodes, CPUs, memory or GPUs)", never=True),
    "PartitionNodeLimit": Reason("asks for more nodes than its partition allows", never=True),
    "PartitionTimeLimit": Reason("asks for more time than its partition allows", never=True),
    "BadConstraints": Reason("asks for node features no node has", never=True),
    "InvalidAccount": Reason("its account is not valid here", never=True),
    "InvalidQOS": Reason("its QOS is not valid here", never=True),
    "QOSNotAllowed": Reason("its QOS may not be used in this partition", never=True),
    "AccountNotAllowed": Reason("its account may not use this partition", never=True),
    "PartitionDown": Reason("its partition is down"),
    "PartitionInactive": Reason("its partition is inactive"),
    "NodeDown": Reason("a node it needs is down"),
    "ReqNodeNotAvail": Reason("a node it asks for is not available (down, drained or reserved)"),
    "Reservation": Reason("waiting for its reservation"),
    "Licenses": Reason("waiting for licenses"),
    "Cleaning": Reason("waiting: it was requeued and is being cleaned up"),
    "launch failed requeued held": Reason("held after its launch failed"),
    "FrontEndDown": Reason("no front-end node is up"),
}


def state_words(state: str) -> str:
    return _STATE_WORDS.get(state, state.lower().replace("_", " ") if state else "unknown")


def reason(code: str) -> Reason:
    """A pending reason in words; Slurm's own code is kept in the words when unknown."""
    code = code.strip()
    if code in _REASONS:
        return _REASONS[code]
    key, _, rest = code.partition(",")          # `ReqNodeNotAvail, UnavailableNodes:gpu[1-2]`
    if rest and key in _REASONS:
        return Reason(f"{_REASONS[key].words}: {rest.strip()}", never=_REASONS[key].never)
    if code.startswith(("QOS", "Assoc")) and "PerJob" in code:
        # A per-job cap of the QOS or association: this job alone asks for more than it allows.
        return Reason(f"asks for more than its {_whose(code)} allows per job ({code})", never=True)
    if code.startswith(("QOS", "Assoc")) and "Limit" in code:
        return Reason(f"waiting: a limit of its {_whose(code)} is reached ({code})")
    if code.startswith("Max") or code.endswith("Limit"):
        return Reason(f"waiting for a limit ({code})")
    return Reason(f"waiting ({code})" if code else "waiting")


def _whose(code: str) -> str:
    return "QOS" if code.startswith("QOS") else "account"


# Signals a task can die of, by number (Linux), for ExitCode `0:N` and srun's words.
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ"}


def signal_name(number: Optional[int]) -> str:
    if not number:
        return ""
    return SIGNALS.get(number, f"signal {number}")


def ended_words(state: str, exit_code: Optional[int], signal: Optional[int]) -> str:
    """An ended job's state in words: `FAILED` with its exit code or signal, the others by name."""
    base = state_words(state)
    if state == "FAILED":
        if signal:
            return f"failed: killed by {signal_name(signal)}"
        if exit_code:
            return f"failed: exit code {exit_code}"
    if state == "CANCELLED" and signal and signal != 15:
        return f"cancelled ({signal_name(signal)})"
    return base
