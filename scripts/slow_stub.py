#!/usr/bin/env python3
"""The fixture stub policy (tests/fixtures/gym-0.4.0-mcqa/stub_openai.py, loaded unchanged) with every
POST delayed by STUB_DELAY seconds (default 1.5), so a recorded collection takes a while.

    STUB_DELAY=1.5 STUB_LOG=/tmp/x/stub_requests.log python3 scripts/slow_stub.py <port>
"""
import importlib.util
import os
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

STUB = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gym-0.4.0-mcqa" / "stub_openai.py"
DELAY = float(os.environ.get("STUB_DELAY", "1.5"))

spec = importlib.util.spec_from_file_location("stub_openai", STUB)
stub = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stub)

_post = stub.H.do_POST


def slow_post(self):
    time.sleep(DELAY)
    return _post(self)


stub.H.do_POST = slow_post

if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 18999
    ThreadingHTTPServer(("127.0.0.1", port), stub.H).serve_forever()
