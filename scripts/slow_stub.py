#!/usr/bin/env python3
"""The fixture stub policy (tests/fixtures/gym-0.4.0-mcqa/stub_openai.py, loaded unchanged) with every
POST delayed, so a recorded collection takes a while, and optionally an endpoint that stops answering.

    STUB_DELAY=1.5 STUB_LOG=/tmp/x/stub_requests.log python3 scripts/slow_stub.py <port>

Switches (environment):
  STUB_DELAY=S        seconds before each POST is answered (default 1.5)
  STUB_DELAY_MAX=S    if set, each delay is drawn uniformly from [STUB_DELAY, STUB_DELAY_MAX]
                      (seeded by STUB_SEED, default 0, so a recording can be made again)
  STUB_HANG_AFTER=N   after N POSTs, every later one is held: the connection stays open, the request is
                      read, nothing is answered (an endpoint that went silent)
  STUB_HANG_FOR=S     the held POSTs (and later ones) are answered again S seconds after the first was
                      held (an endpoint that recovers); unset: held for ever
  STUB_RULES=JSON     answers by what a request holds: a list of {"match": TEXT, "answer": "fail"|"empty",
                      "from": K}; a POST whose body contains TEXT gets HTTP 500 ("fail") or an empty
                      output with zero usage ("empty", a trial that never ran) from the K-th such POST
                      on (default 1: all of them); the first rule that matches decides
  STUB_RULES_WHILE=P  the rules apply only while the file P exists (a test removes it to let a rerun pass)
Every POST's arrival, hold and release is logged to STUB_LOG (`<unix> HELD #<n> <path>` etc.) beside the
base stub's own `POST` line, written when it answers.
"""
import importlib.util
import io
import json
import os
import random
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

STUB = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gym-0.4.0-mcqa" / "stub_openai.py"
DELAY = float(os.environ.get("STUB_DELAY", "1.5"))
DELAY_MAX = float(os.environ["STUB_DELAY_MAX"]) if os.environ.get("STUB_DELAY_MAX") else None
HANG_AFTER = int(os.environ["STUB_HANG_AFTER"]) if os.environ.get("STUB_HANG_AFTER") else None
HANG_FOR = float(os.environ["STUB_HANG_FOR"]) if os.environ.get("STUB_HANG_FOR") else None
RULES = json.loads(os.environ.get("STUB_RULES") or "[]")
RULES_WHILE = os.environ.get("STUB_RULES_WHILE")

spec = importlib.util.spec_from_file_location("stub_openai", STUB)
stub = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stub)

_post = stub.H.do_POST
_lock = threading.Lock()
_rng = random.Random(int(os.environ.get("STUB_SEED", "0")))
_state = {"posts": 0, "held_since": None}
_matched = [0] * len(RULES)


def _note(text: str) -> None:
    with _lock:
        stub.LOG.write(f"{time.time():.3f} {text}\n")
        stub.LOG.flush()


def _arrive() -> tuple[int, float, bool]:
    """This POST's number, its delay, and whether it is held (the endpoint is silent now)."""
    with _lock:
        _state["posts"] += 1
        n = _state["posts"]
        delay = _rng.uniform(DELAY, DELAY_MAX) if DELAY_MAX is not None else DELAY
        held = HANG_AFTER is not None and n > HANG_AFTER
        if held and _state["held_since"] is None:
            _state["held_since"] = time.time()
        return n, delay, held


def slow_post(self):
    n, delay, held = _arrive()
    _note(f"ARRIVED #{n} {self.path}")
    if held:
        until = None if HANG_FOR is None else _state["held_since"] + HANG_FOR
        if until is None or time.time() < until:
            _note(f"HELD #{n} {self.path}")
            while until is None or time.time() < until:
                time.sleep(1.0 if until is None else min(1.0, max(0.0, until - time.time())))
            _note(f"RELEASED #{n} {self.path}")
    time.sleep(delay)
    body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
    self.rfile = io.BytesIO(body)                  # the base stub reads it again
    answer = _rule(body)
    if answer:
        _note(f"RULE {answer} #{n} {self.path}")
        return _answer(self, answer)
    return _post(self)


def _rule(body: bytes) -> str:
    if RULES_WHILE and not os.path.exists(RULES_WHILE):
        return ""
    for i, rule in enumerate(RULES):
        if rule["match"].encode() in body:
            with _lock:
                _matched[i] += 1
                return rule["answer"] if _matched[i] >= rule.get("from", 1) else ""
    return ""


def _answer(self, answer: str):
    if answer == "fail":
        return self._send(500, {"error": {"message": "stub forced failure", "type": "server_error"}})
    zero = {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}
    if self.path.endswith("/chat/completions"):
        return self._send(200, {"id": "chatcmpl_stub_empty", "object": "chat.completion", "created": int(time.time()),
                                "model": "stub-model", "choices": [{"index": 0, "finish_reason": "length",
                                                                    "message": {"role": "assistant", "content": ""}}],
                                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
    return self._send(200, {
        "id": "resp_stub_empty", "created_at": time.time(), "model": "stub-model", "object": "response",
        "status": "incomplete", "error": None, "incomplete_details": {"reason": "max_output_tokens"},
        "instructions": None, "metadata": {}, "output": [], "parallel_tool_calls": True, "temperature": 1.0,
        "tool_choice": "auto", "tools": [], "top_p": 1.0, "usage": zero})


stub.H.do_POST = slow_post

if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 18999
    ThreadingHTTPServer(("127.0.0.1", port), stub.H).serve_forever()
