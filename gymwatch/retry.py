"""`gymwatch report RUN --retry-input FILE`: the trials a rerun can fix, as a file `gym eval run
--input` reads, and the command that collects them with the run's own agent and settings.

The file holds the trials' rows of the run's materialized inputs, byte for byte, in (task, rollout)
order. Gym keeps a row's `_ng_task_index` but numbers rollouts again from 0 per task, in file
order (`_preprocess_raw_rows` in Gym 0.4-0.7's rollout_collection.py): the k-th retried rollout
of a task is collected as rollout k, and `gym_indices` says which is which. The rows are already
repeated, so the command asks for one rollout of each (`--num-repeats 1`). The run itself is
never written: FILE may not be inside it, and the rollouts go to a new dir beside FILE.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .core import records
from .core.layout import RunLayout
from .core.model import RunState
from .core.redact import redact_argv
from .core.rerun import RerunTrial, lines_at

# `gym eval run`'s flags (Gym's cli/main.py: `--name VALUE` becomes `+<key>=VALUE`) and the Hydra
# keys the rerun sets itself or must not repeat: the rows are already materialized (prompt applied,
# repeated, routed, seeded), so applying any of these again would change or multiply them.
VALUE_FLAGS = {"--input": "input_jsonl_fpath", "-i": "input_jsonl_fpath", "--output": "output_jsonl_fpath",
               "-o": "output_jsonl_fpath", "--limit": "limit", "--num-repeats": "num_repeats",
               "--prompt-config": "prompt_config", "--split": "split", "--agent": "agent_name", "-a": "agent_name"}
BOOL_FLAGS = {"--resume": "resume_from_cache"}
DROPPED = {"input_jsonl_fpath", "output_jsonl_fpath", "limit", "num_repeats", "prompt_config", "split",
           "resume_from_cache", "num_repeats_add_seed", "fan_out", "agent_map"}
RELOCATED = {"hydra.run.dir", "nemo_gym_log_dir"}   # dirs a gym command writes: moved beside the new output
ROUTING = {"fan_out", "agent_map"}     # with these, each row's own agent_ref is its agent, not --agent
ROLLOUTS_NAME = "rollouts.jsonl"


def nothing_to_rerun(plan: list[RerunTrial], file: str | os.PathLike) -> str:
    why = ("every trial completed" if not plan else
           f"none of the {len(plan)} trial(s) that did not complete can be rerun: {plan[0].why_not()}")
    return f"nothing to rerun ({why}); {file} not written"


class RetryRefused(Exception):
    """Why no retry file was written (one line for the user). `usage`: FILE itself is the
    problem (exists, inside the run, no such directory), not the run."""

    def __init__(self, message: str, usage: bool = False):
        super().__init__(message)
        self.usage = usage


@dataclass
class RetryInput:
    file: Path
    output: Path                                         # the new collection's rollouts file
    argv: list[str]                                      # secrets redacted
    source: str                                          # where the run's command was read
    indices: list[tuple[int, int, int]] = field(default_factory=list)   # (task, rollout, as Gym numbers it)
    servers: str = ""                                    # how to have the run's servers up, when they may not be

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.file), "rows": len(self.indices), "output": str(self.output),
                "command": self.command, "command_from": self.source, "servers": self.servers or None,
                "gym_indices": [{"task_index": t, "rollout_index": r, "new_rollout_index": n}
                                for t, r, n in self.indices]}

    def text(self) -> list[str]:
        out = [f"wrote {len(self.indices)} trial(s) to {self.file} (their materialized input rows, unchanged);",
               "collect them with the run's agent and settings (from its " + self.source + "):",
               f"  {self.command}"]
        if self.servers:
            out.append(f"  ({self.servers})")
        moved = [(t, r, n) for t, r, n in self.indices if r != n]
        if moved:
            out.append("Gym numbers each task's rollouts again from 0: " + ", ".join(
                f"task {t} rollout {r} is collected as rollout {n}" for t, r, n in moved[:8])
                + (f", ... ({len(moved) - 8} more)" if len(moved) > 8 else ""))
        return out


def write(state: RunState, layout: RunLayout, plan: list[RerunTrial], file: str | os.PathLike
          ) -> Optional[RetryInput]:
    """Write the rerunnable trials' input rows to a new FILE (None, and no file, when there are
    none); RetryRefused when it cannot be written."""
    target = _target(file, state, layout)
    todo = [p for p in plan if p.rerunnable]
    if not todo:
        return None
    rows = _input_rows(state, todo)
    indices, seen = [], {}
    for p in todo:
        n = seen[p.task_index] = seen.get(p.task_index, -1) + 1
        indices.append((p.task_index, p.rollout_index, n))
    _create(target, b"".join(rows[(p.task_index, p.rollout_index)] for p in todo))
    output = _new_output(target)
    argv, source = eval_command(state, layout)
    return RetryInput(target, output, redact_argv(_rerun_argv(argv, target, output)), source, indices,
                      _servers_note(state, layout, output))


def _target(file: str | os.PathLike, state: RunState, layout: RunLayout) -> Path:
    raw = Path(file).expanduser()
    target = raw.parent.resolve() / raw.name
    for inside in {Path(state.root).resolve(), *([layout.rollouts.parent.resolve()] if layout.rollouts else [])}:
        if target == inside or target.is_relative_to(inside):
            raise RetryRefused(f"{raw}: inside the run ({inside}); gymwatch never writes into a run: "
                               "name a file outside it", usage=True)
    if os.path.lexists(target):
        raise RetryRefused(f"{raw}: already exists; gymwatch does not overwrite it: name a new file", usage=True)
    if not target.parent.is_dir():
        raise RetryRefused(f"{raw}: no such directory {target.parent}", usage=True)
    return target


def _input_rows(state: RunState, todo: list[RerunTrial]) -> dict[tuple, bytes]:
    """Each trial's materialized row, as its bytes: read at the line the reducer saw it on and
    checked by its key (else the whole file is searched by key)."""
    if not state.inputs_file:
        raise RetryRefused("the run has no materialized inputs (<stem>_materialized_inputs.jsonl): "
                           "the rows to rerun cannot be read")
    path = os.path.join(state.root, state.inputs_file)
    by_line = {p.input_line: (p.task_index, p.rollout_index) for p in todo}
    found = {}
    for n, raw in lines_at(path, by_line):
        if _row_key(raw) == by_line[n]:
            found[by_line[n]] = raw
    if len(found) < len(by_line):
        want = set(by_line.values())
        for _, raw in _all_lines(path):
            key = _row_key(raw)
            if key in want and key not in found:
                found[key] = raw
    lost = sorted(set(by_line.values()) - set(found))
    if lost:
        raise RetryRefused(f"{state.inputs_file}: no row for task {lost[0][0]} rollout {lost[0][1]} any more "
                           "(the file changed since it was read)")
    return {key: raw + b"\n" for key, raw in found.items()}


def _row_key(raw: bytes) -> Optional[tuple]:
    try:
        facts = records.materialized_facts(raw)
    except records.BadLine:
        return None
    return None if facts.task is None or facts.rollout is None else (facts.task, facts.rollout)


def _all_lines(path: str):
    try:
        with open(path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                yield n, line[:-1] if line.endswith(b"\n") else line
    except OSError as exc:
        raise RetryRefused(f"{path}: cannot read ({exc.strerror})") from None


def _create(target: Path, data: bytes) -> None:
    """Write a new file, never over an existing one (O_EXCL); nothing is left if writing fails."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise RetryRefused(f"{target}: already exists; gymwatch does not overwrite it: name a new file", usage=True) from None
    except OSError as exc:
        raise RetryRefused(f"{target}: cannot create ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        target.unlink(missing_ok=True)
        raise RetryRefused(f"{target}: cannot write ({exc.strerror})") from None


def _new_output(target: Path) -> Path:
    """`<FILE stem>-rollouts/rollouts.jsonl` beside FILE, in a dir that does not exist yet (Gym
    clears an output it is given, and its sidecars beside it)."""
    base = target.parent / f"{target.stem}-rollouts"
    d, n = base, 1
    while os.path.lexists(d):
        n += 1
        d = base.with_name(f"{base.name}-{n}")
    return d / ROLLOUTS_NAME


# --- the run's own command ---------------------------------------------------------------------
def eval_command(state: RunState, layout: RunLayout) -> tuple[list[str], str]:
    """The run's `gym eval run` command line and where it was read: the manifest of a run gymwatch
    launched, else Hydra's overrides of the collection, else the agent and concurrency known."""
    argv = _manifest_argv(layout, ("eval", "run"))
    if argv is not None:
        return argv, "manifest"
    overrides = _hydra_overrides(layout, collection=True)
    if overrides is not None:
        return ["gym", "eval", "run", *overrides], "Hydra config"
    argv = ["gym", "eval", "run"]
    if state.info.agent:
        argv += ["--agent", state.info.agent]
    if state.info.concurrency:
        argv += ["--concurrency", str(state.info.concurrency)]
    return argv, "report's settings"


def _manifest_argv(layout: RunLayout, words: tuple[str, str]) -> Optional[list[str]]:
    for proc in (layout.manifest or {}).get("processes") or []:
        argv = proc.get("argv") if isinstance(proc, dict) else None
        if isinstance(argv, list) and _after(argv, words) is not None:
            return [str(a) for a in argv]
    return None


def _after(argv: list[str], words: tuple[str, str]) -> Optional[int]:
    """Index just after `eval run` (or `env start`) in a gym command line."""
    return next((i + 2 for i in range(len(argv) - 1) if (argv[i], argv[i + 1]) == words), None)


def _hydra_overrides(layout: RunLayout, collection: bool) -> Optional[list[str]]:
    """The overrides of the run's collection (its Hydra config names an input or an output) or
    of its servers (a config with `config_paths` and neither)."""
    import yaml

    for d in layout.hydra_dirs:
        try:
            cfg = yaml.safe_load((d / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
            overrides = yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if not isinstance(cfg, dict) or not isinstance(overrides, list):
            continue
        collects = "input_jsonl_fpath" in cfg or "output_jsonl_fpath" in cfg
        if collects if collection else not collects and "config_paths" in cfg:
            return [str(o) for o in overrides]
    return None


def _rerun_argv(argv: list[str], file: Path, output: Path) -> list[str]:
    """The run's command with its input, output, repeats and routing replaced: the retry file,
    a new output, one rollout a row, against the servers that are up (`--no-serve`)."""
    at = _after(argv, ("eval", "run")) or len(argv)
    head, rest = argv[:at], argv[at:]
    routed = any(_key(a) in ROUTING for a in rest)
    kept: list[str] = []
    skip = False
    for a in rest:
        if skip:
            skip = False
            continue
        flag = a.partition("=")[0]
        if flag in VALUE_FLAGS:
            if VALUE_FLAGS[flag] in DROPPED or VALUE_FLAGS[flag] == "agent_name" and routed:
                skip = "=" not in a
                continue
        elif flag in BOOL_FLAGS or _key(a) in DROPPED or _key(a) == "agent_name" and routed or _glued(a):
            continue
        kept.append(a)
    if "--no-serve" not in kept:
        kept.insert(0, "--no-serve")
    kept += ["--input", str(file), "--output", str(output), "--num-repeats", "1"]
    return _relocated(head + kept, output.parent, "eval_run", rest)


def _relocated(argv: list[str], new_dir: Path, which: str, original: Optional[list[str]] = None) -> list[str]:
    """argv with the dirs a gym command writes besides its output (Hydra's run dir, the servers'
    logs) moved under `new_dir`: the run's own are never written again."""
    keys = {_key(a) for a in (original if original is not None else argv)}
    out = [a for a in argv if _key(a) not in RELOCATED]
    if "hydra.run.dir" in keys:
        out.append(f"hydra.run.dir={new_dir / 'hydra' / which}")
    for a in argv:
        if _key(a) == "nemo_gym_log_dir":
            out.append(f"{a.partition('=')[0]}={new_dir / 'logs'}")
    return out


def _key(arg: str) -> str:
    """The key of a Hydra override (`key=v`, `+key=v`, `++key=v`, `~key`), else ''."""
    if arg.startswith("-"):
        return ""
    name = arg.partition("=")[0]
    return name.lstrip("+~") if "=" in arg or arg.startswith("~") else ""


def _glued(arg: str) -> bool:
    """`-iFILE` / `-oFILE`: argparse's short flag with its value joined."""
    return len(arg) > 2 and arg[:2] in ("-i", "-o") and not arg.startswith("--")


def _servers_note(state: RunState, layout: RunLayout, output: Path) -> str:
    """`gym eval run --no-serve` needs the run's servers up: how to start them again (logs and
    Hydra's dir beside the new output), unless they are up."""
    if state.parent.alive:
        return ""
    argv = _manifest_argv(layout, ("env", "start"))
    if argv is None:
        overrides = _hydra_overrides(layout, collection=False)
        argv = ["gym", "env", "start", *overrides] if overrides is not None else None
    if argv is None:
        return "with the run's servers up: `gym env start` with the run's server settings"
    return "with the run's servers up: " + shlex.join(redact_argv(_relocated(argv, output.parent, "env_start")))
