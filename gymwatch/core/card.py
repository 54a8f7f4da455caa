"""A trial's card: everything about one trial in one place. Its status and the rule that decided
it (from the row's own fields), reward and answers, tokens, the conversation, Gym's health findings,
and the lines that explain it, in the order to read them. Built from the model and the trial's
own row; the views only lay it out. Every text in it comes from the run: untrusted."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from . import attempts, attribution, health
from .model import T_FAILED, T_MISSING, T_NEVER_RAN, T_PENDING, Evidence, RunState, Trial, TrialKey
from .neverran import INPUT_KEYS, TOKEN_KEYS

ROW_MAX = 64 << 20        # bytes: a row bigger than this is not parsed for the card
TEXT_MAX = 20_000         # characters of one message shown
CHUNK = 1 << 20


@dataclass
class Card:
    key: TrialKey
    status: str
    rule: list[str] = field(default_factory=list)                 # why this status
    facts: list[tuple[str, str]] = field(default_factory=list)    # (label, value)
    conversation: list[tuple[str, str]] = field(default_factory=list)   # (who, text)
    health: list[str] = field(default_factory=list)               # Gym's own findings
    lines: list[Evidence] = field(default_factory=list)           # the evidence, then the cause chain
    row: Optional[Evidence] = None                                # the raw row: one key away

    @property
    def title(self) -> str:
        return f"task {self.key[0]} rollout {self.key[1]}"


def build(state: RunState, trial: Trial, row: Optional[dict]) -> Card:
    """The card of one trial from its row (None: it has none, or it is not read yet). What the row
    lacks (a failure row has no request, a missing trial no row) is taken from the trial's line
    in the materialized inputs: its prompt and expected answer."""
    card = Card(trial.key, trial.status, row=trial.evidence if trial.source >= 1 else None)
    response = row.get("response") if isinstance(row, dict) else None
    inputs = _inputs(state, trial) if not (isinstance(row, dict) and "responses_create_params" in row) else None
    card.rule = _rule(state, trial, response)
    card.facts = _facts(trial, row, response, inputs)
    card.conversation = conversation(row) if isinstance(row, dict) else []
    if not card.conversation and inputs is not None:
        card.conversation = conversation(inputs)
    card.health = _health(state, trial)
    card.lines = [_named_row(ev, trial) for ev in attribution.cause_chain(state, trial)]
    return card


def _named_row(ev: Evidence, trial: Trial) -> Evidence:
    """A row says nothing in a list of lines (its text is not kept): name it."""
    own = trial.evidence
    if ev.note or ev.text or own is None or (ev.file, ev.line) != (own.file, own.line):
        return ev
    return Evidence(ev.file, ev.line, ev.text, "the trial's row")


# --- the rule -----------------------------------------------------------------------------
def _rule(state: RunState, t: Trial, response: Any) -> list[str]:
    if t.status == T_NEVER_RAN:
        return ["never ran: the model was never called", *_never_ran_because(response)]
    if t.status == T_FAILED:
        return _failed_because(state, t)
    if t.status == T_MISSING:
        return _missing_because(state, t)
    if t.status == T_PENDING:
        return ["pending: no row yet; the collection is still going"]
    out = ["completed: the model answered"]
    if t.reward == 0:
        out.append("it scored 0: the answer was judged wrong (not a run failure)")
    return out


def _never_ran_because(response: Any) -> list[str]:
    if not isinstance(response, dict):
        return ["(its row could not be read)"]
    usage = response["usage"] if isinstance(response.get("usage"), dict) else {}
    zeros = [k for k in (*INPUT_KEYS, *TOKEN_KEYS) if k in usage and usage[k] == 0]
    return [f"response.output is empty ({json.dumps(response.get('output'))})",
            "token counts that are 0: " + (", ".join(dict.fromkeys(zeros)) or "none")]


def _failed_because(state: RunState, t: Trial) -> list[str]:
    out = [f"failed: {_failure(state, t)}"]
    if t.message:
        out.append(t.message)
    target = attribution.target_server(state, t)
    if target is not None:
        out.append(f"server: {target.name} (the port in the error's URL)")
    if t.named_at is not None and t.named_at is not t.evidence:
        out.append(f"the collector named it at {t.named_at.where()}")
    return out


def _failure(state: RunState, t: Trial) -> str:
    """Gym's class for the failure (and its HTTP status); without one, the call that failed and
    where it went."""
    status = f"HTTP {t.http_status}" if t.http_status else ""
    if t.failure_class:
        return t.failure_class + (f", {status}" if status else "")
    call = attribution.failing_call(state, t)
    if call is None:
        return status or "Gym gave no failure class"
    path, server = call
    where = f"{path} at {server.name}" if server is not None else path
    return f"{where} answered {status}" if status else f"{where} failed"


def _missing_because(state: RunState, t: Trial) -> list[str]:
    out = ["missing: no row for it, and the collection has ended"]
    out.append("it was in the collector's inputs" if t.expected else "the collector's inputs do not list it")
    c = state.collector
    if c.error is not None:
        out.append(f"the collector stopped: {c.error.text.strip()}")
    elif c.exit_code is not None:
        out.append(f"the collector exited with status {c.exit_code}")
    elif not c.finished:
        out.append("the collector ended without finishing (no exit status known)")
    return out


# --- facts --------------------------------------------------------------------------------
def _inputs(state: RunState, t: Trial) -> Optional[dict]:
    if not state.inputs_file or t.input_line is None:
        return None
    return read_row(state.root, Evidence(state.inputs_file, t.input_line))


# (key, label) of a row's own words worth a line on the card; Gym 0.7's failure rows add theirs.
ROW_FACTS = (("expected_answer", "expected"), ("extracted_answer", "extracted"), ("failure_kind", "failure kind"),
             ("failure_reason", "failure reason"), ("_ng_failure_type", "failure type"),
             ("_ng_failure_response_body", "response body"), ("_ng_environment_server", "environment server"))


def _facts(t: Trial, row: Any, response: Any, inputs: Optional[dict] = None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if t.reward is not None:
        out.append(("reward", f"{t.reward:g}"))
    elif t.withheld_reward is not None:
        out.append(("reward", f"{t.withheld_reward:g} recorded by Gym, not counted (never ran)"))
    own = row if isinstance(row, dict) else {}
    for key, label in ROW_FACTS:
        chain = error_chain(own[key]) if key == BODY_KEY and isinstance(own.get(key), str) else None
        if chain is not None:      # the servers it came through, then what the last one was told
            out.append((label, _short(" → ".join([*chain[0], f"upstream: {chain[1]}"]))))
        elif own.get(key) is not None:
            out.append((label, _short(own[key])))
        elif key == "expected_answer" and inputs is not None and inputs.get(key) is not None:
            out.append((label, _short(inputs[key]) + "  (from the inputs)"))
    if t.input_tokens is not None or t.output_tokens is not None:
        out.append(("tokens", f"{_n(t.input_tokens)} in / {_n(t.output_tokens)} out"))
    if isinstance(response, dict):
        for key in ("status", "incomplete_details", "error"):
            if response.get(key) is not None:
                out.append((f"response.{key}", _short(response[key])))
    if t.agent:
        out.append(("agent", t.agent))
    tries = attempts.attempts(t)
    if len(tries) > 1:
        out.append(("attempts", " → ".join(_attempt(a) for a in tries)))
    return out


BODY_KEY = "_ng_failure_response_body"
# Gym's servers wrap an inner server's error body in their own, each escaping it once more:
# `"Hit an exception in SimpleAgent___mcqa_simple_agent calling an inner server: b'\"Hit an ...`
_HOP_RE = re.compile(r"Hit an exception in (?:\w+?___)?([\w.\-/]+) calling an inner server")


def error_chain(body: str) -> Optional[tuple[list[str], str]]:
    """A failure's response body read as Gym's servers nested it: the servers it went through,
    outermost first, and what the innermost one was told (the upstream error's message when it
    is JSON). None when the body is not such a chain."""
    hops = _HOP_RE.findall(body)
    if not hops:
        return None
    names = [h for i, h in enumerate(hops) if i == 0 or hops[i - 1] != h]
    tail = re.sub(r"\\+", "", body[body.rfind("calling an inner server") + len("calling an inner server"):])
    start, end = tail.find("{"), tail.rfind("}")
    inner = tail[start:end + 1] if 0 <= start < end else tail.strip(" :b'\"")
    return names, _upstream_message(inner)


def _upstream_message(text: str) -> str:
    try:
        obj = json.loads(text)
    except ValueError:
        return text
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        kind = err.get("type") or err.get("code")
        return err["message"] + (f" ({kind})" if isinstance(kind, str) and kind else "")
    return text


def _attempt(a) -> str:
    return a.status + (f" (HTTP {a.http_status})" if a.http_status else "")


def _n(v: Optional[int]) -> str:
    return "?" if v is None else str(v)


def _short(v: Any, limit: int = 400) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


# --- the conversation -----------------------------------------------------------------------
def conversation(row: dict) -> list[tuple[str, str]]:
    """(who, text) in order: instructions, input messages, then what the model produced (messages,
    tool calls and their outputs, reasoning summaries)."""
    out: list[tuple[str, str]] = []
    params = row.get("responses_create_params")
    if isinstance(params, dict):
        if isinstance(params.get("instructions"), str):
            out.append(("instructions", params["instructions"]))
        items = params.get("input")
        out += [("user", items)] if isinstance(items, str) else _items(items)
    response = row.get("response")
    if isinstance(response, dict):
        out += _items(response.get("output"))
    return [(who, _cap(text)) for who, text in out if text]


def _items(items: Any) -> list[tuple[str, str]]:
    if not isinstance(items, list):
        return []
    out = []
    for it in items:
        if not isinstance(it, dict):
            continue
        kind = it.get("type") or "message"
        if kind == "message":
            out.append((str(it.get("role") or "message"), _content(it.get("content"))))
        elif kind == "function_call":
            out.append((f"tool call {it.get('name', '?')}", str(it.get("arguments", ""))))
        elif kind == "function_call_output":
            out.append(("tool output", _content(it.get("output"))))
        elif kind == "reasoning":
            out.append(("reasoning", _content(it.get("summary") or it.get("content"))))
        else:
            out.append((str(kind), _short(it, 2000)))
    return out


def _content(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(_content(p.get("text", p.get("output", "")) if isinstance(p, dict) else p) for p in c)
    return "" if c is None else _short(c, 2000)


def _cap(text: str) -> str:
    return text if len(text) <= TEXT_MAX else text[:TEXT_MAX] + f"… ({len(text) - TEXT_MAX} more characters)"


# --- Gym's health check ------------------------------------------------------------------------
def _health(state: RunState, t: Trial) -> list[str]:
    gym = state.health.get(t.key)
    if gym is None:
        return []
    out = [f"Gym's health check: {gym.verdict}" + (f" ({', '.join(gym.checks)})" if gym.checks else "")]
    if gym.detail:
        out.append(gym.detail)
    if health.disagreement(t.status, gym):
        out.append(f"≠ gymwatch says {t.status.replace('_', ' ')}")
    return out


# --- the row itself -----------------------------------------------------------------------------
def read_row(root: str, ev: Optional[Evidence]) -> Optional[dict]:
    """The JSON object on line `ev.line` of `ev.file` (relative to the run root); None when it
    cannot be read or is not an object."""
    if ev is None or ev.line < 1:
        return None
    path = ev.file if os.path.isabs(ev.file) else os.path.join(root, ev.file)
    raw = _nth_line(path, ev.line)
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _nth_line(path: str, n: int) -> Optional[bytes]:
    """Line `n` (1-based) of a file, found by counting line ends in chunks (no per-line loop)."""
    try:
        fh = open(path, "rb")
    except OSError:
        return None
    with fh:
        seen, buf = 0, b""
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                return buf if seen == n - 1 and buf else None
            buf += chunk
            count = buf.count(b"\n")
            if seen + count < n - 1:
                seen += count
                buf = b""
                continue
            start = 0
            while seen < n - 1:
                start = buf.index(b"\n", start) + 1
                seen += 1
            buf = buf[start:]
            break
        while b"\n" not in buf and len(buf) <= ROW_MAX:
            more = fh.read(CHUNK)
            if not more:
                break
            buf += more
        line = buf.split(b"\n", 1)[0]
        return line if len(line) <= ROW_MAX else None
