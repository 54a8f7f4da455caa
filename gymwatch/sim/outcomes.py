"""What happens to each simulated trial: how long it takes and how it ends.

The (simulated) policy always answers B. Task 4's two rollouts never reach the model
(empty output, zero usage, reward 0.0: "never ran"); task 2 rollout 1 hits an agent error
that the collector records in `_failures.jsonl`."""

from __future__ import annotations

import time

NEVER_RAN_TASK = 4
FAILED_TRIAL = (2, 1)
ANSWER = "B"


def duration(task: int, rollout: int) -> float:
    """Seconds a trial takes at speed 1 (12 trials at concurrency 2 take about a minute)."""
    return 6.0 + ((task * 7 + rollout * 3) % 5) * 1.2


def outcome(task: int, rollout: int, n_tasks: int) -> str:
    never = NEVER_RAN_TASK if n_tasks > NEVER_RAN_TASK else n_tasks - 1
    if task == never:
        return "never_ran"
    if (task, rollout) == FAILED_TRIAL:
        return "agent_error"
    return "ok"


def response(task: int, rollout: int, kind: str, prompt_tokens: int) -> dict:
    """An OpenAI Responses object like the recorded ones."""
    rid = f"resp_sim_{task}_{rollout}"
    base = {"id": rid, "created_at": time.time(), "error": None, "incomplete_details": None,
            "instructions": None, "metadata": {}, "model": "sim-model", "object": "response",
            "parallel_tool_calls": True, "temperature": 1.0, "tool_choice": "auto", "tools": [], "top_p": 1.0,
            "status": "completed", "text": None, "truncation": None, "user": None}
    if kind == "never_ran":
        return {**base, "incomplete_details": {"reason": "max_output_tokens"}, "status": "incomplete",
                "output": [], "usage": _usage(0, 0)}
    text = f"The answer is \\boxed{{{ANSWER}}}"
    return {**base, "output": [{"id": f"msg_sim_{task}_{rollout}", "type": "message", "role": "assistant",
                                "status": "completed", "content": [{"annotations": [], "text": text,
                                                                    "type": "output_text", "logprobs": None}]}],
            "usage": _usage(prompt_tokens, 9)}


def _usage(inp: int, outp: int) -> dict:
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": outp,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inp + outp}
