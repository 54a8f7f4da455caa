"""Turn `gymwatch run -- env start ... --then eval run ...` into the exact gym command lines
(and `gymwatch run -- eval submit ...` into a `SubmitPlan`: gymwatch adds only `--json`).

What gymwatch adds: `hydra.run.dir=<run>/hydra/<env_start|eval_run>` (unless given),
`--output <run>/rollouts.jsonl` (unless given), `--no-serve` on an eval after env start.
It never adds `+nemo_gym_log_dir` (docs/gym-formats.md §4: the pipefail bug on cold builds).
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..core.config import SPINUP_KEY, override_value
from ..core.gymversion import SPINUP_FROM
from ..core.layout import ENV
from .manifest import DEFAULT_HEAD

GYM_NAMES = ("gym", "ng")
ENV_START, EVAL_RUN, EVAL_SUBMIT = ("env", "start"), ("eval", "run"), ("eval", "submit")
THEN = "--then"
JSON = "--json"
PASS_THROUGH = ("--dry-run", "--resolve-only")   # submit nothing: Gym's output is all there is


class PlanError(ValueError):
    pass


class PlanUsage(PlanError):
    """The words after `--` are not a gym command gymwatch can run: a usage error."""


# What a launch starts (the manifest's "mode"): `gym env start`, then `gym eval run --no-serve` once
# it is ready; `gym env start` alone; one `gym eval run` that serves and collects.
ENV_THEN_EVAL, ENV_ONLY, ONE_PROCESS = "env+eval", "env", "e2e"
ROLLOUTS_NAME = "rollouts.jsonl"   # the collection's output in the run dir, unless the command names one


@dataclass
class Plan:
    gym: list[str]                       # the gym CLI: [path] or [python, -m, gymwatch.sim]
    env_args: Optional[list[str]]        # ["env", "start", ...] or None
    eval_args: Optional[list[str]]       # ["eval", "run", ...] or None
    run_dir: Path
    cwd: Path
    output: Optional[Path] = None
    logs_dir: Optional[Path] = None
    head: str = DEFAULT_HEAD
    gym_version: str = "unknown"
    notes: list[str] = field(default_factory=list)

    @property
    def mode(self) -> str:
        if self.env_args and self.eval_args:
            return ENV_THEN_EVAL
        return ENV_ONLY if self.env_args else ONE_PROCESS

    def argv(self, which: str) -> list[str]:
        """The command line of the `ENV` process (`gym env start`) or the `EVAL` one."""
        return [*self.gym, *(self.env_args if which == ENV else self.eval_args or [])]


@dataclass
class SubmitPlan:
    """`gym eval submit ...` as gymwatch runs it: the user's flags kept, `--json` added to learn
    the gym job id and the Slurm job ids from Gym's record."""

    gym: list[str]
    args: list[str]                      # ["eval", "submit", ...] as given
    cwd: Path

    @property
    def pass_through(self) -> bool:
        """--dry-run / --resolve-only: nothing is submitted, Gym's output goes to the user as it is."""
        return any(a in PASS_THROUGH for a in self.args)

    @property
    def user_json(self) -> bool:
        """The user asked for Gym's JSON themselves: it goes to stdout as Gym printed it."""
        return JSON in self.args

    def argv(self) -> list[str]:
        if self.pass_through or self.user_json:
            return [*self.gym, *self.args]
        return [*self.gym, *self.args, JSON]


def submit_args(tokens: list[str]) -> Optional[list[str]]:
    """["eval", "submit", ...] when the words after `--` are one `eval submit`, else None.
    Raises PlanUsage when `eval submit` is joined to another command with --then."""
    if tokens and tokens[0] == "--":
        tokens = tokens[1:]
    parts = [p[1:] if p and os.path.basename(p[0]) in GYM_NAMES else p for p in _parts(tokens)]
    if not any(tuple(p[:2]) == EVAL_SUBMIT for p in parts):
        return None
    if len(parts) > 1:
        raise PlanUsage("`eval submit` runs alone: Slurm runs the servers and the collection, give no --then")
    return list(parts[0])


def _parts(tokens: list[str]) -> list[list[str]]:
    parts, cur = [], []
    for t in tokens:
        if t == THEN:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return parts


def split_command(tokens: list[str]) -> tuple[Optional[list[str]], Optional[list[str]]]:
    """(env start args, eval run args) from the words after `--`."""
    if tokens and tokens[0] == "--":
        tokens = tokens[1:]
    env = ev = None
    for part in _parts(tokens):
        if part and os.path.basename(part[0]) in GYM_NAMES:
            part = part[1:]
        if tuple(part[:2]) == ENV_START and env is None and ev is None:
            env = part
        elif tuple(part[:2]) == EVAL_RUN and ev is None:
            ev = part
        else:
            shown = " ".join(part[:2]) or "nothing"
            raise PlanUsage(f"expected `env start ...` then optionally `--then eval run ...`, "
                            f"or one `eval run ...`, or one `eval submit ...`; got `{shown}`")
    if env is None and ev is None:
        raise PlanUsage("no gym command: give `-- env start ARGS... [--then eval run ARGS...]`, `-- eval run ARGS...` "
                        "or `-- eval submit -c FILE ...`")
    return env, ev


def flag_value(args: list[str], flag: str) -> Optional[str]:
    found = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(flag + "="):
            found = a.split("=", 1)[1]
    return found


def _abs(value: str, cwd: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (cwd / p).resolve()


def head_of(args: list[str]) -> str:
    host = override_value(args, "head_server.host") or "127.0.0.1"
    port = override_value(args, "head_server.port") or "11000"
    return f"{host}:{port}"


def find_gym(gym: Optional[str]) -> list[str]:
    exe = shutil.which(gym or "gym")
    if exe is None:
        raise PlanError(f"`{gym or 'gym'}` not found on PATH: install nemo-gym, activate its venv, or pass --gym PATH")
    return [exe]


def gym_version(gym: list[str]) -> str:
    """nemo-gym's version from the dist-info next to the gym script (no slow import)."""
    bindir = Path(gym[0]).resolve().parent if len(gym) == 1 else None
    if bindir is None:
        return "unknown"
    for pattern in ("../lib/python*/site-packages/nemo_gym-*.dist-info",):
        hits = sorted(glob.glob(str(bindir / pattern)))
        if hits:
            return Path(hits[-1]).name[len("nemo_gym-"):-len(".dist-info")]
    return "unknown"


def make_plan(tokens: list[str], run_dir: Path, cwd: Path, gym: list[str]) -> Plan:
    env, ev = split_command(tokens)
    plan = Plan(gym=gym, env_args=list(env) if env else None, eval_args=list(ev) if ev else None,
                run_dir=run_dir, cwd=cwd)
    for which, args in (("env_start", plan.env_args), ("eval_run", plan.eval_args)):
        if args is not None and override_value(args, "hydra.run.dir") is None:
            args.append(f"hydra.run.dir={run_dir / 'hydra' / which}")
    first = plan.env_args or plan.eval_args or []
    log_dir = override_value(first, "nemo_gym_log_dir")
    plan.logs_dir = _abs(log_dir, cwd) if log_dir else None
    plan.head = head_of(first)
    if plan.eval_args is not None:
        args = plan.eval_args
        if plan.env_args is not None and "--no-serve" not in args:
            args.insert(2, "--no-serve")
        out = flag_value(args, "--output") or override_value(args, "output_jsonl_fpath")
        if out is None:
            plan.output = run_dir / ROLLOUTS_NAME
            args += ["--output", str(plan.output)]
        else:
            plan.output = _abs(out, cwd)
    return plan


def _release(version: str) -> Optional[tuple[int, int]]:
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def pass_startup_timeout(plan: Plan, startup_timeout: Optional[float]) -> None:
    """Gym 0.7 gives up on servers that are not ready after its own spin-up limit (600 s unless
    set): a longer --startup-timeout would never be reached, and a shorter one would kill a run
    Gym could have shut down cleanly. So gymwatch passes it to Gym as that limit, unless the
    command sets one itself."""
    release = _release(plan.gym_version)
    if not startup_timeout or plan.env_args is None or release is None or release < SPINUP_FROM:
        return
    if override_value(plan.env_args, SPINUP_KEY) is not None:
        plan.notes.append(f"--startup-timeout is gymwatch's; gym keeps the {SPINUP_KEY} you gave")
        return
    plan.env_args.append(f"++{SPINUP_KEY}={startup_timeout:g}")
    plan.notes.append(f"passed --startup-timeout to gym as ++{SPINUP_KEY}={startup_timeout:g}")
