"""The simulated `gym eval run`: materialized inputs first, a row per finished trial (failures to
`_failures.jsonl`), aggregate metrics at the end. Without --no-serve it starts the servers too."""

from __future__ import annotations

import json
import os
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import lines as L

ERR = sys.stderr
DATA = Path(__file__).with_name("data") / "mcqa_demo.jsonl"


def _post(url: str, row: dict, timeout: float) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(row).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _agent_url(args, agent: str) -> str:
    host, port = args.get("head_server.host", "127.0.0.1"), args.get("head_server.port", "11000")
    with urllib.request.urlopen(f"http://{host}:{port}/server_instances", timeout=5) as r:
        for s in json.loads(r.read()):
            if s["process_name"] == agent:
                return s["url"]
    raise RuntimeError(f"agent `{agent}` not found on the head server")


def _sidecar(out: Path, suffix: str, ext: str = ".jsonl") -> Path:
    return out.with_name(out.stem + suffix + ext)


def _metrics(rows: list[dict], agent: str) -> dict:
    rewards = [r["reward"] for r in rows]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    key = {"mean/reward": mean, "pass@1/accuracy": 100.0 * mean}
    return {"agent_ref": {"name": agent}, "agent_metrics": {**key, "max/reward": max(rewards, default=0.0),
                                                            "min/reward": min(rewards, default=0.0)},
            "key_metrics": key, "group_level_metrics": []}


def collect(args) -> int:
    agent = args.get("agent_name", "mcqa_simple_agent")
    src = Path(args.get("input_jsonl_fpath") or DATA)
    out = Path(args.get("output_jsonl_fpath") or "rollouts.jsonl").absolute()
    repeats = int(args.get("num_repeats", "1"))
    conc = int(args.get("num_samples_in_parallel", "1"))
    speed = args.speed
    L.out("Clearing output fpath since `resume_from_cache=False`!")
    failures, materialized = _sidecar(out, "_failures"), _sidecar(out, "_materialized_inputs")
    out.parent.mkdir(parents=True, exist_ok=True)
    for p in (out, failures):
        p.write_text("")
    tasks = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    if args.get("limit"):
        tasks = tasks[: int(args.get("limit"))]
    L.out(f"Reading rows: {len(tasks)}it [00:00, 28225.46it/s]", ERR)
    L.out(f"Using `{agent}` for rows that do not already have an agent ref")
    L.out(f"Repeating rows {repeats} times (in a pattern of abc to aabbcc)!")
    rows = [{**t, "agent_ref": t.get("agent_ref") or {"name": agent}, "_ng_task_index": i, "_ng_rollout_index": r}
            for i, t in enumerate(tasks) for r in range(repeats)]
    materialized.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    url = _agent_url(args, agent) + "/run"
    L.out(f"Querying with {conc} concurrent requests")
    lock = threading.Lock()
    done: list[dict] = []
    total = len(rows)

    def one(row: dict) -> None:
        status, body = _post(url, {**row, "_sim_n_tasks": len(tasks)}, timeout=600 * max(speed, 0.01) + 30)
        with lock:
            if status == 200:
                rec = {"responses_create_params": row["responses_create_params"], "response": body["response"],
                       "reward": body["reward"], "expected_answer": row.get("expected_answer"),
                       "extracted_answer": body.get("extracted_answer"),
                       "_ng_task_index": row["_ng_task_index"], "_ng_rollout_index": row["_ng_rollout_index"],
                       "agent_ref": row["agent_ref"]}
                target = out
                done.append(rec)
            else:
                rec = {**{k: row[k] for k in ("_ng_task_index", "_ng_rollout_index", "agent_ref")},
                       "_ng_failure_class": "agent_run_error",
                       "_ng_failure_message": f"POST {url} returned {status}: {body.get('detail', '')}"}
                target = failures
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
            finished = len(done) + _count(failures)
            ERR.write(f"\rCollecting rollouts: {100 * finished // total:3d}%|{'█' * (10 * finished // total):<10}| "
                      f"{finished}/{total} [00:{finished:02d}<?, ?it/s]")
            ERR.flush()
            if finished % 2 == 0 and finished < total:
                L.out("Examples left:")
                L.out(f"1. {agent}: {total - finished}")

    with ThreadPoolExecutor(max_workers=max(1, conc)) as pool:
        list(pool.map(one, rows))
    ERR.write("\n")
    L.out("Sorting results to ensure consistent ordering")
    L.out("Computing aggregate metrics")
    metrics = [_metrics(done, agent)]
    agg = _sidecar(out, "_aggregate_metrics", ".json")
    tmp = agg.with_name(agg.name + ".tmp")
    tmp.write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    os.replace(tmp, agg)
    L.out("")
    L.out(f"Key metrics for {agent}:")
    L.out(json.dumps(metrics[0]["key_metrics"], indent=4))
    L.out("Finished rollout collection! View results at:")
    L.out(f"Fully materialized inputs: {materialized}")
    L.out(f"Rollouts: {out}")
    L.out(f"Aggregate metrics: {agg}")
    return 0


def _count(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return fh.read().count(b"\n")
    except OSError:
        return 0


def run_eval(args) -> int:
    if args.no_serve:
        return collect(args)
    from .env import SimEnv, Stop

    env = SimEnv(args)
    try:
        env.start()
        code = collect(args)
    except Stop:
        code = 130
    env.shutdown()
    return code
