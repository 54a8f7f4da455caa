"""Recognise a run from the path a user gives and name every file gymwatch should watch.

Three kinds (docs/gym-formats.md §1): a Gym output dir, a run dir gymwatch launched (its
manifest), and a NeMo evaluator SDK bundle (`gym_run/` under the bundle). Files that
do not exist yet are still named, so a live watcher picks them up when they appear.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

MANIFEST_NAME = "gymwatch-manifest.json"
SIDE_FAILURES = "_failures"
SIDE_MATERIALIZED = "_materialized_inputs"
SIDE_AGGREGATE = "_aggregate_metrics"
HEALTH_VERDICTS = "rollout_verdicts.jsonl"     # Gym 0.6+: its health check, beside the rollouts
HEALTH_SUMMARY = "quality_summary.json"
BUNDLE_MARKERS = ("run.json", "metadata.json", "trials.jsonl", "summary.json")
_STREAM_RE = re.compile(r"^gym_(env|eval|validate)[\w.-]*\.(log|txt)$")
_SKIP_DIRS = {".venv", "venv", "__pycache__", ".git", "node_modules", ".hydra", "logs", "_stub", "_driver"}

# Stream roles: which process wrote a captured stream.
ENV, EVAL, BOTH, VALIDATE = "env", "eval", "both", "validate"


class NotARun(Exception):
    """The path is not something gymwatch can read as a Gym run."""


@dataclass(slots=True)
class Stream:
    path: Path
    role: str            # env / eval / both / validate
    stderr: bool         # captured stderr (or merged stdout+stderr)


@dataclass(slots=True)
class RunLayout:
    root: Path
    kind: str                                   # gym_dir / launched / evaluator_bundle
    rollouts: Optional[Path] = None
    logs_dir: Optional[Path] = None
    streams: list[Stream] = field(default_factory=list)
    hydra_dirs: list[Path] = field(default_factory=list)
    manifest: Optional[dict] = None
    bundle_meta: Optional[Path] = None
    log_offsets: dict[str, int] = field(default_factory=dict)  # launched runs: where this run began

    def sidecar(self, suffix: str, ext: str = ".jsonl") -> Optional[Path]:
        if self.rollouts is None:
            return None
        return self.rollouts.with_name(self.rollouts.stem + suffix + ext)

    @property
    def failures(self) -> Optional[Path]:
        return self.sidecar(SIDE_FAILURES)

    @property
    def materialized(self) -> Optional[Path]:
        return self.sidecar(SIDE_MATERIALIZED)

    @property
    def aggregate(self) -> Optional[Path]:
        return self.sidecar(SIDE_AGGREGATE, ".json")

    @property
    def health_verdicts(self) -> Optional[Path]:
        return self.rollouts.with_name(HEALTH_VERDICTS) if self.rollouts is not None else None

    @property
    def health_summary(self) -> Optional[Path]:
        return self.rollouts.with_name(HEALTH_SUMMARY) if self.rollouts is not None else None

    def rel(self, path: Path | str) -> str:
        """A path as shown in evidence: relative to the run root when inside it."""
        try:
            return os.path.relpath(path, self.root) if str(path).startswith(str(self.root)) else str(path)
        except ValueError:
            return str(path)

    def server_logs(self) -> dict[str, Path]:
        if self.logs_dir is None or not self.logs_dir.is_dir():
            return {}
        out = {}
        try:
            for entry in sorted(os.scandir(self.logs_dir), key=lambda e: e.name):
                if entry.name.endswith(".log") and entry.is_file():
                    out[entry.name[:-4]] = Path(entry.path)
        except OSError:
            return {}
        return out

    def watch_dirs(self) -> list[Path]:
        dirs = {self.root}
        for p in (self.rollouts, self.logs_dir):
            if p is not None:
                dirs.add(p if p == self.logs_dir else p.parent)
        return sorted(d for d in dirs if d.exists())


def is_rollouts_name(name: str) -> bool:
    if not name.endswith(".jsonl") or name == HEALTH_VERDICTS:
        return False
    stem = name[:-6]
    return not (stem.endswith(SIDE_FAILURES) or stem.endswith(SIDE_MATERIALIZED))


def _find_rollouts(d: Path) -> Optional[Path]:
    """The `<stem>.jsonl` in `d` that has Gym sidecars (or is plainly named rollouts*)."""
    try:
        names = set(os.listdir(d))
    except OSError:
        return None
    best = None
    for name in sorted(names):
        if not is_rollouts_name(name):
            continue
        stem = name[:-6]
        if any(stem + s in names for s in (SIDE_MATERIALIZED + ".jsonl", SIDE_FAILURES + ".jsonl",
                                             SIDE_AGGREGATE + ".json")):
            return d / name
        if stem.startswith("rollouts") and best is None:
            best = d / name
    if best is None:
        for name in sorted(names):   # only a sidecar so far: the collector just started
            if name.endswith(SIDE_MATERIALIZED + ".jsonl"):
                return d / (name[: -len(SIDE_MATERIALIZED + ".jsonl")] + ".jsonl")
    return best


def find_streams(d: Path) -> list[Stream]:
    out: list[Stream] = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out
    for name in names:
        m = _STREAM_RE.match(name)
        if not m:
            continue
        which = m.group(1)
        stderr = "stderr" in name
        merged = "stdout" not in name and "stderr" not in name
        if which == "validate":
            role = VALIDATE
        elif which == "env":
            role = ENV
        else:
            role = EVAL
        out.append(Stream(d / name, role, stderr or merged))
    return out


def run_streams(root: Path, rollouts: Optional[Path]) -> list[Stream]:
    """Gym's captured output of the run in `root`: its own, else the output beside its rollouts one
    level down. Never both: a copied run's config can name a path on this machine that holds
    another run."""
    own = find_streams(root)
    if own or rollouts is None or rollouts.parent == root:
        return own
    return find_streams(rollouts.parent)


def find_hydra_dirs(d: Path, depth: int = 3) -> list[Path]:
    found = []
    if (d / ".hydra").is_dir():
        found.append(d)
    if depth == 0:
        return found
    try:
        entries = [e for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return found
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name in (".venv", "venv", "__pycache__", ".git", "logs", ".hydra"):
            continue
        found.extend(find_hydra_dirs(Path(entry.path), depth - 1))
    return found


def _load_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise NotARun(f"{path}: unreadable gymwatch manifest ({exc})") from None
    if not isinstance(data, dict):
        raise NotARun(f"{path}: gymwatch manifest is not a JSON object")
    return data


def discover(path: str | os.PathLike, logs: Optional[str] = None) -> RunLayout:
    """Work out what kind of run `path` is. Raises NotARun with a one-line reason."""
    p = Path(path).expanduser()
    try:
        p = p.resolve()
    except (OSError, RuntimeError) as exc:
        raise NotARun(f"{path}: cannot resolve path ({exc})") from None
    if not p.exists():
        raise NotARun(f"{path}: no such file or directory")
    if p.is_file():
        layout = _from_file(p)
    elif not os.access(p, os.R_OK | os.X_OK):
        raise NotARun(f"{path}: permission denied")
    else:
        layout = _from_dir(p)
    if logs:
        layout.logs_dir = Path(logs).expanduser().resolve()
    return layout


def _from_file(p: Path) -> RunLayout:
    if p.name == MANIFEST_NAME:
        return _from_dir(p.parent)
    if not is_rollouts_name(p.name):
        raise NotARun(f"{p}: not a rollouts file (expected <stem>.jsonl beside Gym's sidecars)")
    layout = RunLayout(root=p.parent, kind="gym_dir", rollouts=p)
    _fill_gym_dir(layout, p.parent)
    return layout


def _from_dir(d: Path) -> RunLayout:
    if (d / MANIFEST_NAME).is_file():
        return _launched(d)
    if any((d / m).is_file() for m in BUNDLE_MARKERS) and (d / "gym_run").is_dir():
        layout = RunLayout(root=d, kind="evaluator_bundle", bundle_meta=d / "metadata.json")
        _fill_gym_dir(layout, d / "gym_run")
        layout.hydra_dirs = find_hydra_dirs(d)
        return layout
    layout = RunLayout(root=d, kind="gym_dir")
    _fill_gym_dir(layout, d)
    if layout.rollouts is None and not layout.streams and layout.logs_dir is None:
        raise NotARun(f"{d}: not a Gym run (no <stem>.jsonl with sidecars, no gym_* captured "
                      f"output, no logs/ dir, no {MANIFEST_NAME})")
    return layout


def _fill_gym_dir(layout: RunLayout, d: Path) -> None:
    if layout.rollouts is None:
        layout.rollouts = _find_rollouts(d)
    if layout.rollouts is None:
        for sub in _subdirs(d):
            layout.rollouts = _find_rollouts(sub)
            if layout.rollouts is not None:
                break
    layout.streams = run_streams(d, layout.rollouts)
    if (d / "logs").is_dir():
        layout.logs_dir = d / "logs"
    layout.hydra_dirs = find_hydra_dirs(d)
    if layout.rollouts is None and layout.hydra_dirs:
        layout.rollouts = _output_from_hydra(layout.hydra_dirs)


def _subdirs(d: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(d)
                      if e.is_dir(follow_symlinks=False) and e.name not in _SKIP_DIRS
                      and not e.name.startswith("."))
    except OSError:
        return []


def _output_from_hydra(dirs: list[Path]) -> Optional[Path]:
    """`output_jsonl_fpath` from an eval run's Hydra config: where rollouts WILL appear."""
    for d in dirs:
        cfg = d / ".hydra" / "config.yaml"
        try:
            for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("output_jsonl_fpath:"):
                    value = Path(line.split(":", 1)[1].strip().strip("'\""))
                    if is_rollouts_name(value.name):    # not a value cut short by a read mid-write
                        return value
        except OSError:
            continue
    return None


def _launched(d: Path) -> RunLayout:
    manifest = _load_manifest(d / MANIFEST_NAME)
    layout = RunLayout(root=d, kind="launched", manifest=manifest)
    files = manifest["files"] if isinstance(manifest.get("files"), dict) else {}
    out = files.get("output")
    layout.rollouts = Path(out) if isinstance(out, str) and out else None
    logs = files.get("logs_dir")
    layout.logs_dir = Path(logs) if isinstance(logs, str) and logs else None
    for proc in manifest.get("processes", []) or []:
        if not isinstance(proc, dict):
            continue
        role = proc["role"] if proc.get("role") in (ENV, EVAL, BOTH) else BOTH
        for key, is_err in (("stdout", False), ("stderr", True)):
            if isinstance(proc.get(key), str):
                layout.streams.append(Stream(Path(proc[key]), role, is_err))
    offsets = manifest.get("log_offsets")
    if isinstance(offsets, dict):
        layout.log_offsets = {k: v for k, v in offsets.items() if isinstance(v, int)}
    layout.hydra_dirs = find_hydra_dirs(d)
    if layout.rollouts is None:
        layout.rollouts = _find_rollouts(d)
    return layout
