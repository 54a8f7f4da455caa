"""A benchmark's `job.sh` (the batch script `gym eval submit` writes) read into what gymwatch needs.

- `#SBATCH` directives: time limit, partition, nodes, job name, account, begin, dependency, ...
- service steps: each `# service: NAME` block, its `srun ... --output=LOG CMD &` line, and the
  health loop Gym writes for it (`Waiting for NAME at URL...`, `seq 1 N` attempts, `curl URL`,
  `sleep S`); a service may have no health loop;
- the driver step: the `srun ... --output=logs/driver-...` line, and the `GYM_CMD=( gym eval run
  ... )` array it runs, whose `+output_jsonl_fpath=` says where the rollouts go;
- the auto-resume prologue, when the benchmark is resumable (its retry limit, its walltime cap).

The script holds resolved secrets (Gym makes it owner-only): commands kept here are redacted.
Parsing is tolerant: what is not found is left empty, never an error.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from ..redact import redact_text
from . import slurmtime

DEFAULT_BATCH_LOG = "slurm-%j.out"   # sbatch's own default, in the job's --chdir
_SHORT = {"t": "time", "p": "partition", "N": "nodes", "J": "job-name", "A": "account", "b": "begin",
          "d": "dependency", "D": "chdir", "o": "output", "e": "error", "n": "ntasks", "c": "cpus-per-task",
          "G": "gpus", "q": "qos", "w": "nodelist", "C": "constraint", "x": "exclude"}
_SRUN_VALUE_OPTS = {"-o", "-e", "-N", "-n", "-w", "-c", "-J", "-p", "-t", "-x", "-C", "-G", "-D", "-r"}
_SERVICE_RE = re.compile(r"^# service: (\S+)\s*$", re.M)
_WAIT_RE = re.compile(r'^echo "Waiting for (\S+) at (\S*?)\.\.\."', re.M)
_ATTEMPTS_RE = re.compile(r"\$\(seq 1 (\d+)\)")
_CURL_RE = re.compile(r'curl\b[^"\n]*"([^"]+)"')
_SLEEP_RE = re.compile(r"^\s*sleep (\d+)\s*$", re.M)
_GAVE_UP_RE = re.compile(r'did not become healthy after (\d+) attempts')
_GYM_CMD_RE = re.compile(r"^GYM_CMD=\($(.*?)^\)", re.M | re.S)
_SRUN_LINE_RE = re.compile(r"^(?:env\s[^\n]*?\s)?srun\s", re.M)   # env values may be quoted, with spaces
_PORT_FLAG_RE = re.compile(r"--port[ =](\d+)")
_OUTPUT_KEYS = ("+output_jsonl_fpath=", "++output_jsonl_fpath=", "output_jsonl_fpath=")
_RETRY_LIMIT_RE = re.compile(r"Infra retry limit \((\d+)\)")
_WALLTIME_CAP_RE = re.compile(r"max_walltime cap \([^)]*= (\d+)s\)")
RESUME_MARK = "# --- Auto-resume chain ---"


@dataclass(frozen=True)
class HealthCheck:
    """Gym's health loop for one service: `attempts` probes `interval` seconds apart."""

    urls: tuple[str, ...]          # what each attempt curls (one, or several tried in turn)
    attempts: Optional[int]
    interval: Optional[int]

    @property
    def url(self) -> str:
        return self.urls[0] if self.urls else ""

    @property
    def path(self) -> str:
        return urlsplit(self.url).path if self.url else ""

    @property
    def patience(self) -> Optional[int]:
        """Seconds the loop waits at most before it gives up."""
        return self.attempts * self.interval if self.attempts and self.interval else None


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    command: str                   # what srun runs, redacted
    output: str                    # srun --output as written, e.g. logs/policy-$SLURM_JOB_ID.log
    port: Optional[int]
    health: Optional[HealthCheck]


@dataclass(frozen=True)
class DriverSpec:
    command: str                   # the `gym eval run ...` it runs (or srun's command), redacted
    output: str                    # srun --output as written, e.g. logs/driver-$SLURM_JOB_ID.log
    rollouts: str                  # +output_jsonl_fpath ("" when not found)
    step: Optional[int] = None     # its Slurm step number: the sruns before it (every service's) come first


@dataclass(frozen=True)
class JobScript:
    directives: tuple[tuple[str, str], ...]    # (long option name, value), in script order
    services: tuple[ServiceSpec, ...] = ()
    driver: Optional[DriverSpec] = None
    resumable: bool = False
    max_retries: Optional[int] = None
    max_walltime: Optional[int] = None         # seconds, the chain's accumulated cap
    notes: tuple[str, ...] = field(default=())

    def directive(self, name: str) -> str:
        """The last value of a directive (sbatch takes the last), "" when absent."""
        values = [v for k, v in self.directives if k == name]
        return values[-1] if values else ""

    @property
    def job_name(self) -> str:
        return self.directive("job-name")

    @property
    def time_limit(self) -> Optional[int]:
        return slurmtime.duration(self.directive("time"))

    @property
    def partition(self) -> str:
        return self.directive("partition")

    @property
    def nodes(self) -> str:
        return self.directive("nodes")

    @property
    def account(self) -> str:
        return self.directive("account")

    @property
    def begin(self) -> str:
        return self.directive("begin")

    @property
    def dependency(self) -> str:
        return self.directive("dependency")

    @property
    def batch_log(self) -> str:
        """The batch script's output file template (`--output`, else sbatch's default)."""
        return self.directive("output") or DEFAULT_BATCH_LOG

    def service(self, name: str) -> Optional[ServiceSpec]:
        return next((s for s in self.services if s.name == name), None)


def read(path: Path) -> JobScript:
    """`job.sh` at `path`; an unreadable file gives an empty script with a note."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return JobScript(directives=(), notes=(f"{path}: cannot read it: {e.strerror or e}",))
    return parse(text)


def parse(text: str) -> JobScript:
    services = tuple(_services(text))
    resumable = RESUME_MARK in text
    retry = _RETRY_LIMIT_RE.search(text) if resumable else None
    cap = _WALLTIME_CAP_RE.search(text) if resumable else None
    return JobScript(
        directives=tuple(_directives(text)), services=services, driver=_driver(text, services),
        resumable=resumable, max_retries=int(retry.group(1)) if retry else None,
        max_walltime=int(cap.group(1)) if cap else None)


def expand(template: str, job_id: str, job_name: str = "") -> str:
    """A Slurm output file name for one job: `$SLURM_JOB_ID` / `%j` (and `%x`) filled in."""
    out = template.replace("${SLURM_JOB_ID}", job_id).replace("$SLURM_JOB_ID", job_id)
    out = out.replace("%%", "\0").replace("%j", job_id).replace("%J", job_id)
    if job_name:
        out = out.replace("%x", job_name)
    return out.replace("\0", "%")


def _directives(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break                      # sbatch reads no directive after the first command
        body = re.sub(r"\s+#.*$", "", stripped[len("#SBATCH"):]).strip()
        if body.startswith("--"):
            key, sep, value = body[2:].partition("=")
            if not sep:
                key, _, value = body[2:].partition(" ")
            out.append((key.strip(), value.strip()))
        elif body.startswith("-") and len(body) > 1 and body[1] in _SHORT:
            out.append((_SHORT[body[1]], body[2:].strip()))
    return out


def _services(text: str) -> list[ServiceSpec]:
    marks = list(_SERVICE_RE.finditer(text))
    waits = {m.group(1): m for m in _WAIT_RE.finditer(text)}
    out = []
    for i, mark in enumerate(marks):
        name = mark.group(1)
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        pid_line = re.search(rf"^{re.escape(_bash_var(name))}_PID=\$!", text[mark.end():end], re.M)
        block = text[mark.end():mark.end() + pid_line.start()] if pid_line else text[mark.end():end]
        output, command = _srun(block)
        health = _health(text, waits[name]) if name in waits else None
        port = _port(health.url) if health else None
        if port is None and (flag := _PORT_FLAG_RE.search(command)):
            port = int(flag.group(1))
        out.append(ServiceSpec(name=name, command=redact_text(command), output=output, port=port, health=health))
    return out


def _health(text: str, wait: re.Match[str]) -> HealthCheck:
    rest = text[wait.end():]
    gave_up = _GAVE_UP_RE.search(rest)
    nxt = _WAIT_RE.search(rest)
    stop = min(m.end() for m in (gave_up, nxt) if m) if (gave_up or nxt) else len(rest)
    block = rest[:stop]
    attempts = _ATTEMPTS_RE.search(block)
    sleep = _SLEEP_RE.search(block)
    urls = tuple(dict.fromkeys(_CURL_RE.findall(block))) or ((wait.group(2),) if wait.group(2) else ())
    return HealthCheck(urls=urls, attempts=int(attempts.group(1)) if attempts else None,
                       interval=int(sleep.group(1)) if sleep else None)


def _driver(text: str, services: tuple[ServiceSpec, ...]) -> Optional[DriverSpec]:
    service_outputs = {s.output for s in services}
    candidates = []
    for n, m in enumerate(_SRUN_LINE_RE.finditer(text)):
        output, command = _srun(_statement(text, m.start()))
        if output not in service_outputs:
            candidates.append((output, command, n))
    if not candidates:
        return None
    output, command, step = next((c for c in candidates if Path(c[0]).name.startswith("driver")), candidates[-1])
    gym_cmd = _gym_cmd(text)
    # The GYM_CMD array of Gym 0.7; an inline `gym eval run ...` otherwise.
    rollouts = next((a.split("=", 1)[1] for a in gym_cmd or command.split() if a.startswith(_OUTPUT_KEYS)), "")
    shown = " ".join(gym_cmd) if gym_cmd and "GYM_CMD" in command else command
    # Slurm numbers a job's steps in the order they start, and Gym starts the driver only once
    # every service (each an srun above it, started in the background) is up: so its number is
    # the count of sruns before it.
    return DriverSpec(command=redact_text(shown), output=output, rollouts=rollouts, step=step)


def _gym_cmd(text: str) -> list[str]:
    m = _GYM_CMD_RE.search(text)
    if not m:
        return []
    items = []
    for line in m.group(1).splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            items.extend(shlex.split(line))
        except ValueError:
            items.append(line)
    return items


def _statement(text: str, start: int) -> str:
    """From `start` to the end of the shell statement (quotes may span lines)."""
    lines = text[start:].splitlines()
    for n in range(1, min(len(lines), 400) + 1):
        chunk = "\n".join(lines[:n])
        if not chunk.endswith("\\") and _balanced(chunk):
            return chunk
    return lines[0] if lines else ""


def _balanced(chunk: str) -> bool:
    try:
        shlex.split(chunk)
    except ValueError:
        return False
    return True


def _srun(block: str) -> tuple[str, str]:
    """(its --output, the command it runs) for the srun in a block of script."""
    m = re.search(r"(?:^|\s)srun\s", block)
    if not m:
        return "", ""
    try:
        tokens = shlex.split(block[m.end():])
    except ValueError:
        tokens = block[m.end():].split()
    output = ""
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        tok = tokens[i]
        if tok.startswith("--output="):
            output = tok.split("=", 1)[1]
        elif tok in _SRUN_VALUE_OPTS and i + 1 < len(tokens):
            if tok == "-o":
                output = tokens[i + 1]
            i += 1
        i += 1
    rest = tokens[i:]
    if rest and rest[-1] == "&":
        rest = rest[:-1]
    return output, " ".join(" ".join(rest).split())     # one line: a `bash -c` script spans several


def _port(url: str) -> Optional[int]:
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def _bash_var(name: str) -> str:
    """Gym's shell variable for a service name (its `NAME_PID`)."""
    return re.sub(r"[^A-Z0-9]", "_", name.upper())
