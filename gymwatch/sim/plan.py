"""The demo's launch plan: the simulated gym, driven by the same launcher as a real one."""

from __future__ import annotations

import sys
from pathlib import Path

from ..launch.plan import make_plan
from .collect import DATA
from .env import free_port

FAST_SPEED = 0.05   # the whole demo in a few seconds (tests)


def demo_plan(run_dir: Path, fast: bool = False, speed: float | None = None):
    speed = speed if speed is not None else (FAST_SPEED if fast else 1.0)
    head = ["+head_server.host=127.0.0.1", f"+head_server.port={free_port()}", f"+sim_speed={speed}"]
    # As the recorded runs were started: each server's own log (so `m` on the screen interleaves
    # them as Gym received their lines), the venvs already built skipped (with the log dir, Gym
    # 0.4.0 would lose those servers to its pipefail bug: docs/gym-formats.md §4); mcqa's is cold.
    logs = [f"+nemo_gym_log_dir={run_dir / 'logs'}", "+skip_venv_if_present=true"]
    tokens = ["env", "start", "--resources-server", "mcqa", "--model-type", "openai_model",
              "++policy_base_url=http://127.0.0.1:9/v1", "++policy_api_key=demo-key",
              "++policy_model_name=sim-model", *logs, *head,
              "--then", "eval", "run", "--agent", "mcqa_simple_agent", "--input", str(DATA),
              "--num-repeats", "2", "--concurrency", "2", *head]
    plan = make_plan(tokens, run_dir, run_dir, [sys.executable, "-m", "gymwatch.sim"])
    plan.gym_version = "0.4.0 (simulated)"
    return plan
