"""Real nemo-gym 0.7.0 submissions (`gym eval submit`) on the test Slurm, watched from outside.

`Workspace` prepares what a submission needs (mcqa's config with a local dataset, the config of
`gym eval submit` from tests/slurm_configs with a case's changes merged in, the environment);
`Submission` runs `gym eval submit --json` against a started rig (tests/slurmrig.py) and then
watches the jobs as a person at the cluster would: one `squeue` call for all of the submission's
jobs per poll, `scontrol show job -o` at each state change, the files of the run dir growing, and
`sacct` at the end. With a `meta` dir it writes all of that down (scripts/record_submission.py).

Locks: the rig holds /tmp/realslurm.lock; `gym_lock()` takes /tmp/realgym.lock after it (real Gym
runs in the jobs). Both stay with the process that took them: a child (the recorder run by a test)
is told it runs inside them and takes neither.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import yaml

from slurmrig import REPO, SlurmRig

VENV = Path(os.environ.get("GYMWATCH_GYM07_VENV", "/tmp/gymwatch-gymvenv-0.7.0"))
CONFIGS = REPO / "tests" / "slurm_configs"
GYM_LOCK = Path("/tmp/realgym.lock")
SQUEUE_FORMAT = "%i|%j|%T|%r|%M|%l|%C|%N|%E|%Z"
SQUEUE_HEADER = "JOBID|NAME|STATE|REASON|TIME|TIME_LIMIT|CPUS|NODELIST|DEPENDENCY|WORK_DIR"
SACCT_FIELDS = "JobID,JobName,State,ExitCode,DerivedExitCode,Reason,Submit,Start,End,ElapsedRaw,NodeList,WorkDir"
TERMINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"}
KEEP_LIMIT = 1_000_000      # a recorded file above this many bytes is left out (and listed)


class GymMissing(RuntimeError):
    pass


# ---------------------------------------------------------------- locks
_held: dict[Path, tuple[object, int]] = {}      # lock file -> (open file, depth) in this process


@contextlib.contextmanager
def gym_lock(path: Path = GYM_LOCK) -> Iterator[None]:
    """/tmp/realgym.lock, reentrant within this process (a second flock on a new descriptor of the
    same file would wait for ourselves)."""
    fh, depth = _held.get(path, (None, 0))
    if fh is None:
        fh = open(path, "a")
        fcntl.flock(fh, fcntl.LOCK_EX)
    _held[path] = (fh, depth + 1)
    try:
        yield
    finally:
        fh, depth = _held.pop(path)
        if depth > 1:
            _held[path] = (fh, depth - 1)
        else:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()


# ---------------------------------------------------------------- workspace
def deep_merge(base: dict, patch: dict) -> dict:
    """`patch` over `base`; a None value deletes the key."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class Workspace:
    """Where submissions are configured and written: ROOT/configs, ROOT/data, ROOT/runs/<name>.
    Server venvs go to `venvs` (default: the Gym venv's `work` dir, which the other real-Gym tests
    use too, so a warm machine builds none)."""

    def __init__(self, root: Path, venv: Path = VENV, venvs: Path | None = None, policy_port: int = 29861):
        self.root = Path(root)
        self.venv = Path(venv)
        self.venvs = Path(venvs) if venvs else self.venv / "work"
        self.policy_port = policy_port
        self.ray_tmpdir = ""

    def check_gym(self) -> str:
        gym, pybin = self.venv / "bin" / "gym", self.venv / "gym-python-bin"
        if not gym.exists() or not pybin.exists():
            raise GymMissing(f"no real NeMo Gym 0.7.0 at {self.venv}: run `bash .ci/install_gym.sh 0.7.0` "
                             "(make test does)")
        return pybin.read_text().strip()

    def prepare(self) -> Workspace:
        self.check_gym()
        for sub in ("configs", "data", "runs", "cache", "xdgcache"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.venvs.mkdir(parents=True, exist_ok=True)
        # Ray's socket paths must fit in 107 bytes: a short dir of its own
        self.ray_tmpdir = tempfile.mkdtemp(prefix="gwsr-ray-", dir="/tmp")
        example = next((self.venv / "lib").glob("python3.*/site-packages/resources_servers/mcqa/data/example.jsonl"))
        data = self.root / "data" / "mcqa_validation.jsonl"
        shutil.copyfile(example, data)
        text = (CONFIGS / "mcqa_local_env.yaml").read_text().replace("@DATA@", str(data))
        (self.root / "configs" / "mcqa_local_env.yaml").write_text(text)
        return self

    def cleanup(self) -> None:
        if self.ray_tmpdir:
            shutil.rmtree(self.ray_tmpdir, ignore_errors=True)

    def base_config(self) -> dict:
        text = (CONFIGS / "local-mcqa.yaml").read_text()
        for key, value in {"@WORK@": str(self.root), "@VENVS@": str(self.venvs),
                           "@POLICY_PORT@": str(self.policy_port)}.items():
            text = text.replace(key, value)
        return yaml.safe_load(text)

    def config(self, name: str, patch: dict | None = None) -> Path:
        """configs/<name>.yaml: the base config with `patch` merged in, its runs under runs/<name>."""
        cfg = deep_merge(self.base_config(), patch or {})
        cfg["job"]["output_path"] = str(self.root / "runs" / name)
        path = self.root / "configs" / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return path

    def env(self, rig: SlurmRig) -> dict:
        """The submitter's environment (sbatch hands it to the job and its steps)."""
        env = rig.env()
        env["PATH"] = f"{self.venv / 'bin'}:{self.check_gym()}:{env['PATH']}"
        env.update(UV_PYTHON_DOWNLOADS="never", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONDONTWRITEBYTECODE="1",
                   RAY_TMPDIR=self.ray_tmpdir or tempfile.gettempdir(),
                   XDG_CACHE_HOME=str(self.root / "xdgcache"))
        for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):      # not the test runner's
            env.pop(var, None)
        return env


# ---------------------------------------------------------------- one submission
class Submission:
    """`gym eval submit -c CONFIG --json [overrides]`, then its jobs watched until they end."""

    def __init__(self, rig: SlurmRig, ws: Workspace, config: Path, overrides: tuple[str, ...] = (),
                 meta: Path | None = None, poll_every: float = 1.0):
        self.rig, self.ws, self.config = rig, ws, Path(config)
        self.overrides = tuple(overrides)
        self.output_path = Path(yaml.safe_load(self.config.read_text())["job"]["output_path"])
        self.meta = meta
        self.poll_every = poll_every
        self.env = ws.env(rig)
        self.argv = [str(ws.venv / "bin" / "gym"), "eval", "submit", "-c", str(self.config), "--json",
                     *self.overrides]
        self.proc: subprocess.Popen | None = None
        self.t0 = 0.0
        self.stdout = self.stderr = ""
        self.record: dict | None = None           # what --json printed (the submission record)
        self.run_dir: Path | None = None
        self.jobs: dict[str, dict] = {}           # job id -> its latest squeue fields
        self.history: dict[str, list[str]] = {}   # job id -> states seen, in order
        self.first_seen: dict[str, float] = {}    # (job id, state) first seen, seconds since submit
        self.sizes: dict[str, int] = {}
        self.last_change = 0.0
        self._scontrol_n: dict[str, int] = {}
        self._snapshot_key: tuple = ()
        self.actions: list[str] = []

    # ---- running
    def start(self) -> Submission:
        self.output_path.mkdir(parents=True, exist_ok=True)
        self._before = {d.name for d in self.output_path.iterdir()}
        if self.meta:
            (self.meta / "scontrol").mkdir(parents=True, exist_ok=True)
        self._out = tempfile.TemporaryFile("w+")
        self._err = tempfile.TemporaryFile("w+")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.ws.root, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL, text=True)
        return self

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _submit_ended(self) -> bool:
        if self.proc is None or self.proc.poll() is None:
            return False
        if self.record is None and not self.stdout:
            for fh, attr in ((self._out, "stdout"), (self._err, "stderr")):
                fh.seek(0)
                setattr(self, attr, fh.read())
                fh.close()
            with contextlib.suppress(ValueError):
                self.record = json.loads(self.stdout)
        return True

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def poll(self) -> None:
        self._submit_ended()
        if self.record and self.record.get("run_dir"):
            self.run_dir = Path(self.record["run_dir"])
        elif self.run_dir is None:
            new = [d for d in self.output_path.iterdir() if d.is_dir() and d.name not in self._before]
            if len(new) == 1:
                self.run_dir = new[0]
        self._poll_squeue()
        self._poll_files()

    def _poll_squeue(self) -> None:
        if self.run_dir is None:       # Gym copies the run dir in place before its first sbatch
            return
        out = self.rig.run("squeue", "-t", "all", "-h", "-o", SQUEUE_FORMAT, check=False)
        if out.returncode != 0:
            return
        lines = [ln for ln in out.stdout.splitlines() if self._mine(ln)]
        changed = []
        for line in lines:
            f = dict(zip(SQUEUE_HEADER.split("|"), line.split("|"), strict=True))
            jid = f["JOBID"]
            prev = self.jobs.get(jid)
            self.jobs[jid] = f
            if prev is None or prev["STATE"] != f["STATE"]:
                self.history.setdefault(jid, []).append(f["STATE"])
                self.first_seen.setdefault(f"{jid} {f['STATE']}", round(self.now(), 1))
                changed.append((jid, line))
        key = tuple(sorted((f["JOBID"], f["STATE"], f["REASON"], f["NODELIST"], f["DEPENDENCY"])
                           for f in self.jobs.values()))
        if key != self._snapshot_key:
            self._snapshot_key = key
            self.last_change = self.now()
            self._write("squeue_snapshots.log", f"--- t={self.now():.1f}\n{SQUEUE_HEADER}\n"
                        + "".join(ln + "\n" for ln in sorted(lines, key=_job_order)))
        for jid, line in changed:
            self._write("states.log", f"{self.now():8.1f} {jid} {line}\n")
            if self.meta:
                n = self._scontrol_n[jid] = self._scontrol_n.get(jid, 0) + 1
                text = self.rig.run("scontrol", "show", "job", "-o", jid, check=False)
                (self.meta / "scontrol" / f"{jid}-{n:02d}-{self.jobs[jid]['STATE']}.txt").write_text(
                    text.stdout or text.stderr)

    def _mine(self, squeue_line: str) -> bool:
        """A job of this submission: its work dir (the last field) is in the run dir."""
        return self.run_dir is not None and squeue_line.split("|")[-1].startswith(f"{self.run_dir}/")

    def _poll_files(self) -> None:
        if self.run_dir is None:
            return
        for path in sorted(self.run_dir.rglob("*")):
            if not path.is_file():
                continue
            rel = str(path.relative_to(self.run_dir))
            try:
                size = path.stat().st_size
            except OSError:
                continue
            old = self.sizes.get(rel)
            if old != size:
                kind = "new" if old is None else ("grow" if size > old else "shrink")
                self.sizes[rel] = size
                self._write("files.log", f"{self.now():8.1f} {kind:<6} {size:>10} {rel}\n")

    def _write(self, name: str, text: str) -> None:
        if self.meta:
            with open(self.meta / name, "a") as fh:
                fh.write(text)

    def act(self, what: str, *cmd: str) -> subprocess.CompletedProcess:
        """Run a Slurm command on the submission's jobs (e.g. scancel), written to actions.log."""
        proc = self.rig.run(*cmd, check=False)
        self.actions.append(what)
        self._write("actions.log", f"{self.now():8.1f} {what}: {' '.join(cmd)} -> exit {proc.returncode}"
                                   f" {(proc.stdout + proc.stderr).strip()}\n")
        return proc

    # ---- waiting
    def job_ids(self) -> list[str]:
        return sorted(self.jobs, key=int)

    def states(self) -> dict[str, str]:
        return {jid: f["STATE"] for jid, f in self.jobs.items()}

    def done(self, settle: float = 8.0) -> bool:
        """Submit returned, every job it led to has ended, and nothing changed for `settle` s (a
        resumable chain's next link appears only once the previous one starts)."""
        return (self._submit_ended() and bool(self.jobs)
                and all(s in TERMINAL for s in self.states().values())
                and self.now() - self.last_change >= settle) or (self._submit_ended() and self._refused())

    def _refused(self) -> bool:
        """sbatch refused every job (the record has no job id): nothing will ever run."""
        return bool(self.record) and not any(b.get("job_id") for b in self.record.get("benchmarks", []))

    def wait(self, cond: Callable[[Submission], object], timeout: float, what: str,
             on_poll: Callable[[Submission], None] | None = None):
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if on_poll:
                on_poll(self)
            got = cond(self)
            if got:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; jobs: {self.states()}; "
                                   f"submit exit {self.returncode}; {self.stderr[-1500:]}")
            time.sleep(self.poll_every)

    def wait_done(self, timeout: float = 600, on_poll=None, settle: float = 8.0) -> Submission:
        self.wait(lambda s: s.done(settle), timeout, "the submission's jobs to end", on_poll)
        return self

    def job_dir(self, benchmark: str) -> Path:
        assert self.run_dir is not None, "no run dir yet"
        return self.run_dir / benchmark

    # ---- the record of what was seen
    def finish(self, extra_env: tuple[str, ...] = ()) -> None:
        """Write the final look (squeue, scontrol, sacct) and the submit's own output to meta."""
        if not self.meta:
            return
        m = self.meta
        ids = self.job_ids()
        sq = self.rig.run("squeue", "-t", "all", "-o", SQUEUE_FORMAT, check=False)
        (m / "squeue_final.txt").write_text(
            "".join(ln + "\n" for i, ln in enumerate(sq.stdout.splitlines()) if i == 0 or self._mine(ln)))
        for jid in ids:
            text = self.rig.run("scontrol", "show", "job", "-o", jid, check=False)
            (m / "scontrol" / f"{jid}-final.txt").write_text(text.stdout or text.stderr)
        if ids:
            # sacct: without accounting this says so (that is what a reader meets then)
            sa = self.rig.run("sacct", "-j", ",".join(ids), "-P", "-o", SACCT_FIELDS, check=False)
            (m / "sacct.txt").write_text(sa.stdout + sa.stderr)
        (m / "submit.argv").write_text(" ".join(self.argv) + "\n")
        (m / "submit.stdout").write_text(self.stdout)
        (m / "submit.stderr").write_text(self.stderr)
        (m / "submit.exit").write_text(f"{self.returncode}\n")
        keep = ("PATH", "SLURM_CONF", "UV_PYTHON_DOWNLOADS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_TMPDIR",
                "XDG_CACHE_HOME", "PYTHONDONTWRITEBYTECODE", *extra_env)
        (m / "env.txt").write_text("".join(f"{k}={self.env[k]}\n" for k in keep if k in self.env))
        shutil.copyfile(self.config, m / "config.yaml")
        shutil.copyfile(self.rig.conf, m / "slurm.conf")
        if self.run_dir:
            (m / "run_dir.txt").write_text(f"{self.run_dir}\n")
            (m / "tree.txt").write_text(_tree(self.run_dir))
            cached = Path(self.env["XDG_CACHE_HOME"]) / "nemo-gym" / "jobs" / f"{self.run_dir.name}.json"
            if cached.exists():
                shutil.copyfile(cached, m / "index.json")
        if self.rig.pyxis_log.exists():
            mine = {f"job={j}" for j in ids}
            lines = [ln for ln in self.rig.pyxis_log.read_text().splitlines() if ln.split(" ", 1)[0] in mine]
            (m / "fakepyxis.log").write_text("".join(ln + "\n" for ln in lines))

    def copy_run(self, dest: Path) -> list[str]:
        """The run dir copied to dest/<gym_job_id> with its layout; files over KEEP_LIMIT bytes are
        left out and returned."""
        assert self.run_dir is not None
        left_out: list[str] = []
        target = dest / self.run_dir.name

        def ignore(folder: str, names: list[str]) -> list[str]:
            out = []
            for n in names:
                p = Path(folder) / n
                if p.is_file() and p.stat().st_size > KEEP_LIMIT:
                    left_out.append(f"{p.relative_to(self.run_dir)} {p.stat().st_size}")
                    out.append(n)
            return out
        shutil.copytree(self.run_dir, target, ignore=ignore, symlinks=True)
        return left_out


def _job_order(line: str) -> int:
    head = line.split("|", 1)[0]
    return int(head) if head.isdigit() else 0


def _tree(root: Path) -> str:
    """Every dir (`name/`) and file (size, name) under root at the end: a copy kept in git loses
    the empty dirs Gym made (logs/, artifacts/ of a job that never ran)."""
    lines = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        lines.append(f"{'':>10} {rel}/" if path.is_dir() else f"{path.stat().st_size:>10} {rel}")
    return "".join(ln + "\n" for ln in lines)
