"""Synthetic Gym run directories for the benchmarks, shaped like tests/fixtures/gym-0.4.0-cases.

A row is what Gym 0.4.0 writes for mcqa + simple_agent (docs/gym-formats.md §6): the request
(`responses_create_params`, most of the bytes), an OpenAI Responses `response`, `reward`,
environment extras, `_ng_task_index`, `_ng_rollout_index`, `agent_ref`. Indices, rewards, usage
and prompt text vary; a few percent of rows are never-ran (§5); a failures sidecar and the
materialized inputs (every expected trial) come with it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

AGENT = "mcqa_simple_agent"
LETTERS = "ABCDEFGHIJ"
ROLLOUTS_PER_TASK = 4
NEVER_RAN_EVERY = 29        # ~3.4% of rollout rows are never-ran
FAILURE_SHARE = 0.01        # extra trials that only have a failure row
MISSING_SHARE = 0.002       # expected trials with no row at all (killed)
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gym-0.4.0-cases" / "mixed_ok"

_WORDS = ("genome sequencing variant allele mutation protein enzyme chromosome karyotype screening "
          "inheritance recessive dominant mitochondrial expression methylation hybridization assay "
          "polymerase restriction fragment microarray phenotype carrier penetrance mosaicism").split()

_REQ_HEAD = '{"background":null,"include":null,"input":[{"content":'
_REQ_TAIL = (',"role":"user","type":"message"}],"instructions":null,"max_output_tokens":null,'
             '"max_tool_calls":null,"metadata":null,"model":null,"parallel_tool_calls":true,'
             '"previous_response_id":null,"prompt":null,"reasoning":null,"service_tier":null,"store":null,'
             '"temperature":null,"text":null,"tool_choice":"auto","tools":[],"top_logprobs":null,'
             '"top_p":null,"truncation":null,"user":null,"stream":null}')


@dataclass
class Generated:
    root: Path
    rollouts: Path
    rows: int
    never_ran: int
    failures: int
    expected: int
    bytes: int


def _prompt(rng: random.Random, task: int) -> str:
    stem = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(18, 30)))
    opts = "\n".join(f"{c}: " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 9)))
                     for c in LETTERS)
    return ("You should output your final response letter inside \\boxed{} and nothing else You can first "
            f"think step-by-step. Question {task} — which statement about {stem} is true?\n{opts}")


def _response(rng: random.Random, n: int, answer: str, inp: int, never_ran: bool) -> str:
    if never_ran:
        output, usage = "[]", {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                               "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                               "total_tokens": 0}
    else:
        out_tok = rng.randint(5, 40)
        output = json.dumps([{"id": f"msg_{n:x}", "content": [{"annotations": [], "text": f"The answer is \\boxed{{{answer}}}",
                             "type": "output_text", "logprobs": None}], "role": "assistant",
                              "status": "completed", "type": "message"}], separators=(",", ":"))
        usage = {"input_tokens": inp, "input_tokens_details": {"cached_tokens": rng.choice((0, 0, 64))},
                 "output_tokens": out_tok, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": inp + out_tok}
    return (f'{{"id":"resp_{n:08x}","created_at":{1795947104.4194846 + n * 0.37!r},"error":null,'
            '"incomplete_details":null,"instructions":null,"metadata":{},"model":"stub-model",'
            f'"object":"response","output":{output},"parallel_tool_calls":true,"temperature":1.0,'
            '"tool_choice":"auto","tools":[],"top_p":1.0,"background":null,"conversation":null,'
            '"max_output_tokens":null,"max_tool_calls":null,"previous_response_id":null,"prompt":null,'
            '"prompt_cache_key":null,"reasoning":null,"safety_identifier":null,"service_tier":null,'
            '"status":"completed","text":null,"top_logprobs":null,"truncation":null,'
            f'"usage":{json.dumps(usage, separators=(",", ":"))},"user":null}}')


def _trajectory(rng: random.Random, prompt_json: str, answer: str) -> str:
    """Gym 0.7's `ng_trajectory` (with observability on): each model call of the rollout, its
    messages and its usage: the rows get 2-3x bigger."""
    turns = []
    for i in range(rng.randint(1, 3)):
        turns.append({"turn": i, "model_call": {"input": [{"role": "user", "content": json.loads(prompt_json)}],
                                                "output": [{"role": "assistant", "content": f"Thinking about step {i}: " + " ".join(
                                                    rng.choice(_WORDS) for _ in range(40)) + f" \\boxed{{{answer}}}"}],
                                                "usage": {"input_tokens": rng.randint(200, 400), "output_tokens": rng.randint(5, 60)},
                                                "latency_s": round(rng.random() * 3, 3)}})
    return json.dumps(turns, separators=(",", ":"), ensure_ascii=True)


def rollout_line(rng: random.Random, n: int, task: int, rollout: int, prompt_json: str,
                 expected: str, never_ran: bool, shape: str = "0.4") -> str:
    """One rollouts.jsonl line (no newline); `shape` "0.7": with Gym 0.7's extra keys and a trajectory."""
    answer = expected if rng.random() < 0.55 else rng.choice(LETTERS)
    reward = 1.0 if answer == expected else 0.0
    inp = 120 + len(prompt_json) // 5 + rng.randint(0, 30)
    resp = _response(rng, n, answer, inp, never_ran)
    extracted = "null" if never_ran else json.dumps(answer)
    extra = ""
    if shape == "0.7":
        extra = (f',"mask_sample":false,"failure_kind":null,"failure_reason":null,'
                 f'"_ng_environment_server":"mcqa_environment_server","_ng_result_type":"verify_response",'
                 f'"ng_trajectory":{"[]" if never_ran else _trajectory(rng, prompt_json, answer)}')
    return (f'{{"responses_create_params":{_REQ_HEAD}{prompt_json}{_REQ_TAIL},"response":{resp},'
            f'"reward":{0.0 if never_ran else reward},"expected_answer":"{expected}",'
            f'"extracted_answer":{extracted},"_ng_task_index":{task},"_ng_rollout_index":{rollout},'
            f'"agent_ref":{{"name":"{AGENT}"}}{extra}}}')


def failure_line(rng: random.Random, task: int, rollout: int, prompt_json: str) -> str:
    cls = rng.choice(("judge_failed", "agent_run_error", "timeout_exceeded"))
    msg = {"judge_failed": "judge returned HTTP 500", "agent_run_error": "ClientResponseError: 500",
           "timeout_exceeded": "rollout exceeded 600s"}[cls]
    return (f'{{"responses_create_params":{_REQ_HEAD}{prompt_json}{_REQ_TAIL},'
            f'"_ng_task_index":{task},"_ng_rollout_index":{rollout},"agent_ref":{{"name":"{AGENT}"}},'
            f'"_ng_failure_class":"{cls}","_ng_failure_message":{json.dumps(msg)}}}')


def materialized_line(task: int, rollout: int, prompt_json: str, expected: str) -> str:
    return (f'{{"responses_create_params":{{"input":[{{"role":"user","content":{prompt_json}}}]}},'
            f'"expected_answer":"{expected}","grading_mode":"strict_single_letter_boxed",'
            f'"uuid":"{task:08x}-4b88-54be-b72a-e9c438ca6335","agent_ref":{{"name":"{AGENT}"}},'
            f'"_ng_task_index":{task},"_ng_rollout_index":{rollout}}}')


def make_run(root: Path, rows: int, seed: int = 6, shape: str = "0.4") -> Generated:
    """A finished Gym output dir under `root` with `rows` rollout rows (plus sidecars and logs);
    `shape` "0.7": rows as Gym 0.7 writes them with observability on (see rollout_line)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    _copy_fixture_logs(root)
    n_fail = max(1, int(rows * FAILURE_SHARE))
    n_missing = max(1, int(rows * MISSING_SHARE))
    total = rows + n_fail + n_missing
    tasks = -(-total // ROLLOUTS_PER_TASK)
    keys = [(t, r) for t in range(tasks) for r in range(ROLLOUTS_PER_TASK)][:total]
    order = keys[:]
    rng.shuffle(order)                   # completion order
    done, failed = order[:rows], order[rows:rows + n_fail]
    prompts: dict[int, tuple[str, str]] = {}

    def prompt(t: int) -> tuple[str, str]:
        p = prompts.get(t)
        if p is None:
            p = prompts[t] = (json.dumps(_prompt(rng, t)), rng.choice(LETTERS))
        return p

    rollouts = root / "rollouts.jsonl"
    with open(root / "rollouts_materialized_inputs.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(materialized_line(t, r, *prompt(t)) + "\n" for t, r in keys)
    never = 0
    size = 0
    with open(rollouts, "w", encoding="utf-8") as fh:
        buf = []
        for n, (t, r) in enumerate(done):
            nr = n % NEVER_RAN_EVERY == 7
            never += nr
            pj, exp = prompt(t)
            buf.append(rollout_line(rng, n, t, r, pj, exp, nr, shape) + "\n")
            if len(buf) >= 2000:
                fh.writelines(buf)
                buf.clear()
        fh.writelines(buf)
    with open(root / "rollouts_failures.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(failure_line(rng, t, r, prompt(t)[0]) + "\n" for t, r in failed)
    size = rollouts.stat().st_size
    return Generated(root, rollouts, rows, never, n_fail, total, size)


def make_live_run(root: Path, expected: int = 400) -> tuple[Path, list[str]]:
    """A run that is collecting: materialized inputs written, rollouts.jsonl empty.

    Returns the rollouts path and the lines to append (one per expected trial).
    """
    rng = random.Random(7)
    root.mkdir(parents=True, exist_ok=True)
    keys = [(t, r) for t in range(-(-expected // ROLLOUTS_PER_TASK)) for r in range(ROLLOUTS_PER_TASK)][:expected]
    prompts = {t: (json.dumps(_prompt(rng, t)), rng.choice(LETTERS)) for t, _ in keys}
    with open(root / "rollouts_materialized_inputs.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(materialized_line(t, r, *prompts[t]) + "\n" for t, r in keys)
    (root / "rollouts_failures.jsonl").touch()
    rollouts = root / "rollouts.jsonl"
    rollouts.touch()
    lines = [rollout_line(rng, n, t, r, *prompts[t], n % NEVER_RAN_EVERY == 7) + "\n"
             for n, (t, r) in enumerate(keys)]
    return rollouts, lines


def _copy_fixture_logs(root: Path) -> None:
    """Server logs, captured streams and Hydra dirs of a real (small) run, so the report has servers."""
    if not FIXTURE.is_dir():
        return
    for name in os.listdir(FIXTURE):
        src = FIXTURE / name
        if name.startswith("rollouts") and name.endswith(".jsonl"):
            continue
        if name in ("truth.json", "timeline.jsonl", "README.md"):
            continue
        if src.is_dir():
            shutil.copytree(src, root / name, dirs_exist_ok=True)
        else:
            shutil.copy2(src, root / name)
