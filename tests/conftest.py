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
