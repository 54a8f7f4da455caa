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
