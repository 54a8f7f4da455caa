"""`gymwatch demo`'s launch plan: the simulated gym (gymwatch/sim, run as a program, never imported:
it stands for Gym), driven by the same launcher as a real one."""

from __future__ import annotations

import socket
import sys
from importlib.resources import files
from pathlib import Path

from .plan import Plan, make_plan

FAST_SPEED = 0.05   # `--fast` (and the tests): the whole demo in a few seconds
SIM = [sys.executable, "-m", "gymwatch.sim"]


def demo_inputs() -> Path:
    """The sim's packaged inputs: its mcqa questions."""
    return Path(str(files("gymwatch.sim") / "data" / "mcqa_demo.jsonl"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_plan(run_dir: Path, fast: bool = False, speed: float | None = None) -> Plan:
    speed = speed if speed is not None else (FAST_SPEED if fast else 1.0)
    head = ["+head_server.host=127.0.0.1", f"+head_server.port={_free_port()}", f"+sim_speed={speed}"]
    # As the recorded runs were started: each server's own log (so `m` on the screen interleaves
    # them as Gym received their lines), the venvs already built skipped (with the log dir, Gym
    # 0.4.0 would lose those servers to its pipefail bug: docs/gym-formats.md §4); mcqa's is cold.
    logs = [f"+nemo_gym_log_dir={run_dir / 'logs'}", "+skip_venv_if_present=true"]
    tokens = ["env", "start", "--resources-server", "mcqa", "--model-type", "openai_model",
              "++policy_base_url=http://127.0.0.1:9/v1", "++policy_api_key=demo-key",
              "++policy_model_name=sim-model", *logs, *head,
              "--then", "eval", "run", "--agent", "mcqa_simple_agent", "--input", str(demo_inputs()),
              "--num-repeats", "2", "--concurrency", "2", *head]
    plan = make_plan(tokens, run_dir, run_dir, SIM)
    plan.gym_version = "0.4.0 (simulated)"
    return plan
