import os
from pathlib import Path

import pytest

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "gym-0.4.0-cases"
MCQA = FIXTURES / "gym-0.4.0-mcqa"


@pytest.fixture
def cases() -> Path:
    return CASES


def record_made(monkeypatch, owner, name: str) -> list:
    """Replace `owner.name` (a class or factory) by one that records every object it makes."""
    made = []
    real = getattr(owner, name)

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(owner, name, spy)
    return made
