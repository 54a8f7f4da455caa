"""Build small synthetic Gym run dirs in the formats of docs/gym-formats.md, for scenario tests."""

from __future__ import annotations

import json
from pathlib import Path

ZERO = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
USED = {"input_tokens": 40, "output_tokens": 7, "total_tokens": 47}
ANSWER = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "B"}]}]


def rollout(task: int, rollout_: int = 0, reward: float = 1.0, ran: bool = True, agent: str = "env_agent",
            **extra) -> dict:
    response = {"output": ANSWER if ran else [], "usage": USED if ran else ZERO}
    return {"responses_create_params": {"input": [{"role": "user", "content": "q"}]}, "response": response,
            "reward": reward, "_ng_task_index": task, "_ng_rollout_index": rollout_,
            "agent_ref": {"name": agent}, **extra}


class Run:
    def __init__(self, root: Path, stem: str = "rollouts"):
        self.root = root
        self.stem = stem
        root.mkdir(parents=True, exist_ok=True)

    def write(self, rel: str, text: str | bytes, append: bool = True) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode() if isinstance(text, str) else text
        with open(p, "ab" if append else "wb") as fh:
            fh.write(data)
        return p

    def lines(self, rel: str, *lines: str) -> Path:
        return self.write(rel, "".join(line + "\n" for line in lines))

    def rows(self, suffix: str, *rows: dict | str) -> Path:
        out = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        return self.lines(f"{self.stem}{suffix}.jsonl", *out)

    def expect(self, tasks: int, repeats: int = 1) -> Path:
        return self.rows("_materialized_inputs", *[
            {"_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": {"name": "env_agent"}}
            for t in range(tasks) for r in range(repeats)])

    def server_log(self, name: str, *lines: str, prefix: bool = True) -> Path:
        return self.lines(f"logs/{name}.log", *[(f"({name}) " if prefix else "") + x for x in lines])

    def ready_server(self, name: str, port: int) -> Path:
        return self.server_log(name, "INFO:     Started server process [1]",
                               "INFO:     Application startup complete.",
                               f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")

    def finish(self) -> None:
        self.lines("gym_eval_run.stdout.log", "Finished rollout collection! View results at:")
        self.write(f"{self.stem}_aggregate_metrics.json", "[]", append=False)


def scored_pair(root: Path, tasks: int = 50, repeats: int = 4) -> tuple[Path, Path]:
    """Two finished runs of the same tasks with 0/1 rewards (root/A, root/B), made the same way every
    time: B fails every trial of tasks 3, 11 and 27 that A passed (flipped), passes every trial of
    task 8 that A failed, and does a little worse or better on a few more; task 40's last two
    trials never ran in B, and task 45's last one failed there (both counted apart, not paired)."""
    a, b = Run(root / "A"), Run(root / "B")
    for run in (a, b):
        run.ready_server("env", 15000)
        run.expect(tasks, repeats)
    worse = {3: 0, 11: 0, 27: 0, 5: 2, 14: 2, 19: 3, 33: 2}     # task: how many of A's passes B keeps
    better = {8: repeats, 21: 3}
    for t in range(tasks):
        passes = 0 if t in better else [repeats, 3, 2, 0, repeats][t % 5] if t not in worse else repeats
        b_passes = worse.get(t, better.get(t, passes))
        for r in range(repeats):
            a.rows("", rollout(t, r, reward=1.0 if r < passes else 0.0))
            if t == 40 and r >= 2:
                b.rows("", rollout(t, r, reward=0.0, ran=False))
            elif t == 45 and r == repeats - 1:
                b.rows("_failures", {"_ng_task_index": t, "_ng_rollout_index": r,
                                     "_ng_failure_class": "agent_run_error", "error": "HTTP 500"})
            else:
                b.rows("", rollout(t, r, reward=1.0 if r < b_passes else 0.0))
    for run in (a, b):
        run.finish()
    return a.root, b.root
