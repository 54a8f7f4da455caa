import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "gym-0.4.0-cases"
CASES07 = FIXTURES / "gym-0.7.0-cases"
RECORDED0506 = FIXTURES / "gym-0.5-0.6-recorded"     # real 0.5.1 / 0.6.0 runs, no per-server logs
RECORDED070 = FIXTURES / "gym-0.7.0-recorded"       # real 0.7.0 runs where something died mid-collection
MCQA = FIXTURES / "gym-0.4.0-mcqa"


@pytest.fixture
def cases() -> Path:
    return CASES


def json_report(path, *extra) -> tuple[dict, int]:
    """`gymwatch report PATH --format json --no-process-check`, run as a user runs it: (the report,
    the exit code). Nothing may be printed on stderr."""
    proc = subprocess.run([sys.executable, "-m", "gymwatch", "report", str(path), "--format", "json",
                           "--no-process-check", *extra], capture_output=True, text=True, timeout=120)
    assert proc.stderr == "", proc.stderr
    return json.loads(proc.stdout), proc.returncode


def record_made(monkeypatch, owner, name: str) -> list:
    """Replace `owner.name` (a class or factory) by one that records every object it makes."""
    made = []
    real = getattr(owner, name)

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(owner, name, spy)
    return made


@pytest.fixture
def clock():
    """A settable clock at tuihelpers.EPOCH (no wall time in what the screen shows)."""
    from tuihelpers import FakeClock  # here, not at the top: it imports the whole screen
    return FakeClock()


@pytest.fixture
def shape_check_every_poll(monkeypatch):
    """The core re-discovers a growing run's files at most once a second of real time; the
    live-screen tests replay faster than that, so let every poll look."""
    from gymwatch.core import session as core_session

    monkeypatch.setattr(core_session, "SHAPE_CHECK_EVERY", 0.0, raising=False)
