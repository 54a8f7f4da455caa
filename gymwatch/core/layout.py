"""Recognise a run from the path a user gives and name every file gymwatch should watch.

Three kinds (docs/gym-formats.md §1): a Gym output dir, a run dir gymwatch launched (its
manifest), and a NeMo evaluator SDK bundle (`gym_run/` under the bundle). Files that
do not exist yet are still named, so a live watcher picks them up when they appear.
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .tail import read_head

MANIFEST_NAME = "gymwatch-manifest.json"
REPLAY_MARKER = ".gymwatch-replay"      # `gymwatch replay` writes the run: no processes to look for
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
# Layout kinds beside Gym's own dir and a bundle: a run gymwatch launched, a directory not a run yet.
LAUNCHED, WAITING = "launched", "waiting"


class NotARun(Exception):
    """The path is not something gymwatch can read as a Gym run."""


def list_dir(d: str | os.PathLike[str]) -> dict[str, os.DirEntry]:
    """A directory's entries by name ({} when it cannot be listed)."""
    try:
        with os.scandir(d) as it:
            return {e.name: e for e in it}
    except OSError:
        return {}


class Listings:
    """Directory listings for one look at a run's shape: each directory is listed once, however
    often its names are asked about (discovery asks about the run dir a dozen times; on a network
    filesystem each listing or stat is a round trip). `seed`: listings a caller has just taken."""

    __slots__ = ("_dirs",)

    def __init__(self, seed: Optional[dict[str, dict[str, os.DirEntry]]] = None):
        self._dirs: dict[str, dict[str, os.DirEntry]] = dict(seed) if seed else {}

    def entries(self, d: str | os.PathLike) -> dict[str, os.DirEntry]:
        key = os.fspath(d)
        got = self._dirs.get(key)
        if got is None:
            got = self._dirs[key] = list_dir(key)
        return got

    def is_dir(self, d: str | os.PathLike, name: str) -> bool:
        return self._is(d, name, os.DirEntry.is_dir)

    def is_file(self, d: str | os.PathLike, name: str) -> bool:
        return self._is(d, name, os.DirEntry.is_file)

    def stat(self, path: str | os.PathLike) -> os.stat_result:
        """`path`'s stat as its directory's listing has it (a DirEntry keeps the stat it made once):
        FileNotFoundError when the listing has no such name. A path in a directory not listed
        here is stat'ed now."""
        d, name = os.path.split(os.fspath(path))
        entries = self._dirs.get(d)
        if entries is None:
            return os.stat(path)
        e = entries.get(name)
        if e is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
        return e.stat()

    def _is(self, d: str | os.PathLike, name: str, test) -> bool:
        e = self.entries(d).get(name)
        try:
            return e is not None and test(e)
        except OSError:
            return False


@dataclass(slots=True)
class Stream:
    path: Path
    role: str            # env / eval / both / validate
    stderr: bool         # captured stderr (or merged stdout+stderr)


@dataclass(slots=True)
class Refreshed:
    """What `RunLayout.refresh()` saw: `new`, the path is now another run (or a run at last): read
    it afresh; `names`, the files names and settings come from changed: read them again."""

    new: bool = False
    names: bool = False


@dataclass(slots=True)
class RunLayout:
    root: Path
    kind: str                                   # gym_dir / launched / evaluator_bundle / waiting
    rollouts: Optional[Path] = None
    logs_dir: Optional[Path] = None
    streams: list[Stream] = field(default_factory=list)
    hydra_dirs: list[Path] = field(default_factory=list)
    manifest: Optional[dict] = None
    bundle_meta: Optional[Path] = None
    log_offsets: dict[str, int] = field(default_factory=dict)  # launched runs: where this run began
    waiting: str = ""                           # kind `waiting`: why the directory is not a run yet
    fixed: bool = False                         # the user named the rollouts file: its layout stays
    logs_given: bool = False                    # the user named the logs dir (--logs)
    # files named after the rollouts, made once for the rollouts they were made from (asked for often)
    _beside: dict[str, tuple[Path, Path]] = field(default_factory=dict, repr=False, compare=False)
    _names_sig: Optional[tuple] = field(default=None, repr=False, compare=False)      # (see refresh)
    _manifest_sig: Optional[tuple] = field(default=None, repr=False, compare=False)

    def refresh(self, whole: bool = True) -> "Refreshed":
        """Look at the run's files again: the one place the run's shape follows its files. A live
        run grows into its final shape: a directory not a run yet becomes one, the rollouts and
        their sidecars, a `logs/` dir, Gym's captured output, Hydra's configs and a launcher's
        manifest appear or change. What is cheap is looked at each time (a `logs/` dir appeared,
        captured output appeared); `whole`: what the path is, looked at afresh (a full discovery:
        the session does it about once a second, and at once when it needs the rows file)."""
        out = Refreshed()
        if self.kind == WAITING:      # (looked at each time: a directory waiting to be a run is small)
            try:
                fresh = _discover(self.root)
            except NotARun as exc:
                self.waiting = str(exc)
                return out
            self._adopt(fresh)
            out.new = out.names = True
            return out
        if self.logs_dir is None and self.kind != LAUNCHED and (self.root / "logs").is_dir():
            self.logs_dir = self.root / "logs"
        if self.kind != LAUNCHED:
            known = {s.path for s in self.streams}
            self.streams += [s for s in run_streams(self.root, self.rollouts) if s.path not in known]
        if whole:
            if self.kind == LAUNCHED:
                self._follow_manifest()
            elif not self.fixed and self.root.is_dir():
                try:
                    now = discover(self.root, str(self.logs_dir) if self.logs_given else None)
                except NotARun:
                    now = self
                if (now.kind, now.rollouts, now.logs_dir) != (self.kind, self.rollouts, self.logs_dir):
                    self._adopt(now)
                    out.new = out.names = True
            if self.root.is_dir():
                self.hydra_dirs = find_hydra_dirs(self.root)
            out.names = out.names or self.names_sig() != self._names_sig
        return out

    def names_read(self) -> None:
        """Names and settings are read now (core/config.py): `refresh()` says when their files change."""
        self._names_sig = self.names_sig()
        if self.kind == LAUNCHED:
            self._manifest_sig = _stat_sig(self.root / MANIFEST_NAME)

    def names_sig(self) -> tuple:
        """What names and settings are read from, as the files are now."""
        return tuple(_stat_sig(d / ".hydra" / n) for d in self.hydra_dirs for n in ("config.yaml", "overrides.yaml")) \
            + (_stat_sig(self.root / MANIFEST_NAME) if self.kind == LAUNCHED else ())

    def _follow_manifest(self) -> None:
        """The launcher updates its manifest (the eval process starts after readiness): follow it."""
        sig = _stat_sig(self.root / MANIFEST_NAME)
        if sig == self._manifest_sig:
            return
        self._manifest_sig = sig
        try:
            fresh = _launched(self.root, Listings())
        except NotARun:
            return
        self.manifest = fresh.manifest
        self.rollouts = self.rollouts or fresh.rollouts
        known = {s.path for s in self.streams}
        self.streams += [s for s in fresh.streams if s.path not in known]

    def _adopt(self, fresh: "RunLayout") -> None:
        for name in ("kind", "rollouts", "logs_dir", "streams", "hydra_dirs", "manifest", "bundle_meta",
                     "log_offsets", "waiting"):
            setattr(self, name, getattr(fresh, name))
        self._beside = {}

    # --- which logs belong to a server --------------------------------------------------------
    def own_log(self, name: str, ls: Optional[Listings] = None) -> Optional[Path]:
        """The server's own log (`<logs>/<name>.log`; a name with `/` has its log named with `_`)."""
        logs = self.server_logs(ls)
        return logs.get(name) or logs.get(name.replace("/", "_"))

    def gym_output(self, roles: tuple[str, ...] = (ENV,)) -> list[Stream]:
        """Gym's captured output of these roles, by file name: where Gym tees every server's output
        with its `(name) ` prefix (`gym env start`'s; BOTH: a one-process `gym eval run`), the
        lines of a server with no log of its own."""
        return sorted((s for s in self.streams if s.role in roles), key=lambda s: str(s.path))

    def all_logs(self) -> list[tuple[str, Path]]:
        """Every log of the run, as (label, path): the servers' own, then Gym's captured output."""
        out = sorted(self.server_logs().items())
        out += [(os.path.basename(str(s.path)).rsplit(".", 1)[0], s.path) for s in self.streams
                if os.path.isfile(s.path)]
        return out

    def sidecar(self, suffix: str, ext: str = ".jsonl") -> Optional[Path]:
        return self._named(self.rollouts.stem + suffix + ext) if self.rollouts is not None else None

    def _named(self, name: str) -> Optional[Path]:
        """`name` beside the rollouts."""
        rollouts = self.rollouts
        if rollouts is None:
            return None
        made = self._beside.get(name)
        if made is None or made[0] is not rollouts:
            made = self._beside[name] = (rollouts, rollouts.with_name(name))
        return made[1]

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
        return self._named(HEALTH_VERDICTS)

    @property
    def health_summary(self) -> Optional[Path]:
        return self._named(HEALTH_SUMMARY)

    def rel(self, path: Path | str) -> str:
        """A path as shown in evidence: relative to the run root when inside it."""
        text, root = str(path), str(self.root)
        if text.startswith(root + os.sep) and "/." not in text and "//" not in text and text[-1] != os.sep:
            return text[len(root) + 1:]          # (what relpath says, without its cost)
        try:
            return os.path.relpath(path, self.root) if text.startswith(root) else text
        except ValueError:
            return text

    def server_logs(self, ls: Optional[Listings] = None) -> dict[str, Path]:
        """`<logs>/<name>.log` by name, as the logs dir is now, or as `ls` (listings just taken:
        the runs browser's) has it."""
        d = self.logs_dir
        if d is None or not (d.is_dir() if ls is None else ls.is_dir(d.parent, d.name)):
            return {}
        out = {}
        try:
            entries = os.scandir(d) if ls is None else ls.entries(d).values()
            for entry in sorted(entries, key=lambda e: e.name):
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


def _find_rollouts(d: Path, ls: Listings) -> Optional[Path]:
    """The `<stem>.jsonl` in `d` that has Gym sidecars (or is plainly named rollouts*)."""
    names = ls.entries(d).keys()
    if not names:
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


def find_streams(d: Path, ls: Optional[Listings] = None) -> list[Stream]:
    out: list[Stream] = []
    for name in sorted((ls or Listings()).entries(d)):
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


def run_streams(root: Path, rollouts: Optional[Path], ls: Optional[Listings] = None) -> list[Stream]:
    """Gym's captured output of the run in `root`: its own, else the output beside its rollouts one
    level down. Never both: a copied run's config can name a path on this machine that holds
    another run."""
    ls = ls or Listings()
    own = find_streams(root, ls)
    if own or rollouts is None or rollouts.parent == root:
        return own
    return find_streams(rollouts.parent, ls)


def find_hydra_dirs(d: Path, depth: int = 3, ls: Optional[Listings] = None) -> list[Path]:
    """Dirs at or up to `depth` levels under `d` that hold a `.hydra/` dir, in sorted order."""
    found: list[str] = []
    _hydra_dirs(os.fspath(d), depth, ls or Listings(), found)
    return [d if p == os.fspath(d) else Path(p) for p in found]


def _hydra_dirs(d: str, depth: int, ls: Listings, found: list[str]) -> None:
    """find_hydra_dirs by path strings (a Path a visited dir was a large part of a run's discovery)."""
    if ls.is_dir(d, ".hydra"):
        found.append(d)
    if depth == 0:
        return
    entries = ls.entries(d)
    for name in sorted(entries):
        if name in (".venv", "venv", "__pycache__", ".git", "logs", ".hydra") or not _real_dir(entries[name]):
            continue
        _hydra_dirs(os.path.join(d, name), depth - 1, ls, found)


def _real_dir(e: os.DirEntry) -> bool:
    """A directory, not a symlink to one."""
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _stat_sig(path: Path) -> tuple:
    try:
        st = os.stat(path)
        return (str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        return (str(path), None, None)


def _load_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise NotARun(f"{path}: unreadable gymwatch manifest ({exc})") from None
    if not isinstance(data, dict):
        raise NotARun(f"{path}: gymwatch manifest is not a JSON object")
    return data


def discover(path: str | os.PathLike, logs: Optional[str] = None, listed: Optional[Listings] = None,
             wait: bool = False) -> RunLayout:
    """Work out what kind of run `path` is. Raises NotARun with a one-line reason. `listed`:
    listings the caller has just taken, `path`'s among them, a resolved directory (the runs
    browser's walk). `wait`: a directory that is not a run yet (a replay or a launcher is about
    to fill it) is a layout of kind `waiting`, which `refresh()` turns into the run."""
    try:
        layout = _from_dir(Path(path), listed) if listed is not None else _discover(path)
    except NotARun as exc:
        root = Path(path).expanduser()
        if not (wait and root.is_dir()):
            raise
        layout = RunLayout(root=root.resolve(), kind=WAITING, waiting=str(exc))
    if logs:
        layout.logs_dir = Path(logs).expanduser().resolve()
        layout.logs_given = True
    if listed is None:
        layout.fixed = os.path.isfile(path) and layout.kind != LAUNCHED
    return layout


def _discover(path: str | os.PathLike) -> RunLayout:
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
        layout = _from_dir(p, Listings())
    return layout


def _from_file(p: Path) -> RunLayout:
    if p.name == MANIFEST_NAME:
        return _from_dir(p.parent, Listings())
    if not is_rollouts_name(p.name):
        raise NotARun(f"{p}: not a rollouts file (expected <stem>.jsonl beside Gym's sidecars)")
    why = not_gym_rows(p)
    if why:   # before anything beside it is looked at: nothing of another run is borrowed
        raise NotARun(f"{p}: not a Gym rollouts file: {why}")
    layout = RunLayout(root=p.parent, kind="gym_dir", rollouts=p)
    _fill_gym_dir(layout, p.parent, Listings())
    return layout


ROWS_LOOKED_AT = 20         # whole lines of a named rollouts file looked at for a Gym row
HEAD_LOOKED_AT = 4 << 20    # ... in at most this many bytes from its start


def not_gym_rows(p: Path) -> str:
    """'' when `p` can be a Gym rollouts file: one of its first whole lines is a Gym row
    (records.not_a_gym_row), or it has no whole line yet (empty: a run just starting; or its first
    row still being written, which starts as a JSON object does); else what it holds instead.
    An unreadable file is the session's to report."""
    from .records import not_a_gym_row

    try:
        data = read_head(p, HEAD_LOOKED_AT)
    except OSError:
        return ""
    *whole, rest = data.replace(b"\r\n", b"\n").split(b"\n")
    seen: list[str] = []
    for lineno, raw in enumerate(whole, 1):
        if not raw.strip():
            continue
        what = not_a_gym_row(raw)
        if not what:
            return ""
        seen.append(f"line {lineno}: {what}")
        if len(seen) == ROWS_LOOKED_AT:
            break
    if not seen:
        start = rest.lstrip()[:1]
        return "" if start in (b"", b"{") else f"its first line is not a JSON object ({rest.strip()[:40]!r}...)"
    shown = "; ".join(seen[:3]) + ("; ..." if len(seen) > 3 else "")
    if len(seen) == 1:
        return f"its one line is not a Gym row ({shown})"
    which = f"its first {len(seen)}" if len(seen) == ROWS_LOOKED_AT else f"its {len(seen)}"
    return f"none of {which} lines is a Gym row ({shown})"


def _from_dir(d: Path, ls: Listings) -> RunLayout:
    if ls.is_file(d, MANIFEST_NAME):
        return _launched(d, ls)
    if any(ls.is_file(d, m) for m in BUNDLE_MARKERS) and ls.is_dir(d, "gym_run"):
        layout = RunLayout(root=d, kind="evaluator_bundle", bundle_meta=d / "metadata.json")
        _fill_gym_dir(layout, d / "gym_run", ls)
        layout.hydra_dirs = find_hydra_dirs(d, ls=ls)
        return layout
    layout = RunLayout(root=d, kind="gym_dir")
    _fill_gym_dir(layout, d, ls)
    if layout.rollouts is None and not layout.streams and layout.logs_dir is None:
        raise NotARun(f"{d}: not a Gym run (no <stem>.jsonl with sidecars, no gym_* captured "
                      f"output, no logs/ dir, no {MANIFEST_NAME})")
    rows = layout.rollouts
    if rows is not None and _rows_alone(layout, rows, ls):
        why = not_gym_rows(rows)
        if why:
            raise NotARun(f"{d}: not a Gym run: its only Gym-looking file, {layout.rel(rows)}, "
                          f"is not a Gym rollouts file: {why}")
    return layout


def _rows_alone(layout: RunLayout, rows: Path, ls: Listings) -> bool:
    """The run is only a `rollouts*.jsonl` file (no sidecar, no captured output, no logs/ dir):
    what it holds decides whether it is a run."""
    if layout.streams or layout.logs_dir is not None or not ls.is_file(rows.parent, rows.name):
        return False
    names = ls.entries(rows.parent)
    return not any(rows.stem + side in names for side in (SIDE_MATERIALIZED + ".jsonl", SIDE_FAILURES + ".jsonl",
                                                          SIDE_AGGREGATE + ".json"))


def _fill_gym_dir(layout: RunLayout, d: Path, ls: Listings) -> None:
    if layout.rollouts is None:
        layout.rollouts = _find_rollouts(d, ls)
    if layout.rollouts is None:
        for sub in _subdirs(d, ls):
            layout.rollouts = _find_rollouts(sub, ls)
            if layout.rollouts is not None:
                break
    layout.streams = run_streams(d, layout.rollouts, ls)
    if ls.is_dir(d, "logs"):
        layout.logs_dir = d / "logs"
    layout.hydra_dirs = find_hydra_dirs(d, ls=ls)
    if layout.rollouts is None and layout.hydra_dirs:
        layout.rollouts = _output_from_hydra(layout.hydra_dirs)


def _subdirs(d: Path, ls: Listings) -> list[Path]:
    entries = ls.entries(d)
    return [d / n for n in sorted(entries)
            if n not in _SKIP_DIRS and not n.startswith(".") and _real_dir(entries[n])]


def _output_from_hydra(dirs: list[Path]) -> Optional[Path]:
    """`output_jsonl_fpath` from an eval run's Hydra config: where rollouts WILL appear."""
    for d in dirs:
        cfg = d / ".hydra" / "config.yaml"
        try:
            for line in read_head(cfg).decode("utf-8", "replace").splitlines():
                if line.startswith("output_jsonl_fpath:"):
                    value = Path(line.split(":", 1)[1].strip().strip("'\""))
                    if is_rollouts_name(value.name):    # not a value cut short by a read mid-write
                        return value
        except OSError:
            continue
    return None


def _launched(d: Path, ls: Listings) -> RunLayout:
    manifest = _load_manifest(d / MANIFEST_NAME)
    layout = RunLayout(root=d, kind=LAUNCHED, manifest=manifest)
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
    layout.hydra_dirs = find_hydra_dirs(d, ls=ls)
    if layout.rollouts is None:
        layout.rollouts = _find_rollouts(d, ls)
    return layout


def replay_speed(root: Path) -> Optional[float]:
    """The speed a replay writes `root` at (1.0 when its marker names none); None when `root` is
    not a replay's."""
    try:
        marker = json.loads((root / REPLAY_MARKER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return 1.0
    speed = marker.get("speed") if isinstance(marker, dict) else None
    return float(speed) if isinstance(speed, (int, float)) and 0 < speed < float("inf") else 1.0
