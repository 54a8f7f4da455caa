"""Summaries cached outside the runs, in the user cache dir (never a byte written into a run).

One msgpack file, `$XDG_CACHE_HOME/gymwatch/browse.msgpack` (default ~/.cache/gymwatch): per
run path, the signature of its files (name, size, mtime; kept as its msgpack bytes, compared
whole), the summary made from them, and how the walk saw its dirs then (scan.Found.shape: a
run whose dirs have not changed since is not listed again, only its files stat'ed). A run whose
signature changed is summarised again.
msgpack, not JSON: it keeps every float as it was (NaN included) and, with the signatures as
one bytes object a run, the cache loads faster (a warm listing's biggest part after its stat
calls) and saves much faster.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Optional

import msgspec

from .. import __version__
from ..core.fast import bulk_load
from .scan import Known

VERSION = f"5:{__version__}"     # summaries depend on the reducer: a new gymwatch rereads
MAX_ENTRIES = 50_000
OLD_FILE = "browse.json"         # gymwatch before the msgpack cache: never read, removed on a save
_key = msgspec.msgpack.Encoder().encode        # a signature as the bytes it is compared by


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gymwatch"


class SummaryCache:
    def __init__(self, path: Optional[Path] = None, enabled: bool = True):
        self.path = path or cache_dir() / "browse.msgpack"
        self.enabled = enabled
        self.hits = self.misses = 0
        self._dirty = False
        self._runs: dict[str, list] = self._load() if enabled else {}     # run -> [key, summary, shape]

    def _load(self) -> dict[str, list]:
        try:
            raw = self.path.read_bytes()
        except OSError:
            return {}
        with bulk_load():           # no cyclic collections over the objects being made
            try:
                data = msgspec.msgpack.decode(raw)
            except msgspec.DecodeError:      # not ours, or cut short
                return {}
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("runs"), dict):
            return {}
        return data["runs"]

    def _entry(self, run: str) -> Optional[list]:
        """The run's entry, when it has the shape this version writes: [key, summary, shape]
        (entries are checked as they are asked for: a warm listing loads them all)."""
        entry = self._runs.get(run)
        return entry if isinstance(entry, list) and len(entry) == 3 else None

    def matches(self, run: str, sig: Optional[list]) -> bool:
        """The run's cached summary was made from files with this signature."""
        entry = self._entry(run)
        return sig is not None and entry is not None and entry[0] == _key(sig) and isinstance(entry[1], dict)

    def get(self, run: str, sig: Optional[list]) -> Optional[dict[str, Any]]:
        if self.matches(run, sig):
            return self.hit(run)
        self.misses += 1
        return None

    def hit(self, run: str) -> dict[str, Any]:
        """The cached summary of a run whose signature matched (`matches`, maybe in another process)."""
        self.hits += 1
        return self._runs[run][1]

    def knows(self, run: str) -> bool:
        """A summary of this run is cached (whether still true or not)."""
        return run in self._runs

    def known(self, run: str) -> Optional[Known]:
        """How the run's files and dirs were when its cached summary was made (None: not cached,
        or not known: its dirs are listed again)."""
        entry = self._entry(run)
        if entry is None or not isinstance(entry[2], list):
            return None
        try:
            when, dirs = entry[2]
        except (ValueError, TypeError):
            return None
        if not (isinstance(when, int) and isinstance(dirs, dict) and isinstance(dirs.get(""), int)):
            return None
        return Known(entry[0], dirs, when)

    def reshape(self, run: str, shape: Optional[list]) -> None:
        """A cached summary still true to its run's files, whose dirs a listing had to list (their
        times changed, or were too close to the listing that cached it): keep how they were this
        time, for the next listing to trust."""
        entry = self._entry(run)
        if self.enabled and shape is not None and entry is not None and entry[2] != shape:
            entry[2] = shape
            self._dirty = True

    def put(self, run: str, sig: list, summary: dict[str, Any], shape: Optional[list] = None) -> None:
        """`shape`: how the walk saw the run's dirs before they were listed (scan.Found.shape)."""
        if self.enabled:
            self._runs[run] = [_key(sig), summary, shape]
            self._dirty = True

    def save(self) -> None:
        """Write atomically (temp file + rename); a cache that cannot be written is skipped."""
        if not (self.enabled and self._dirty):
            return
        if len(self._runs) > MAX_ENTRIES:
            self._runs = {k: v for k, v in self._runs.items() if os.path.isdir(k)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".browse-", suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(msgspec.msgpack.encode({"version": VERSION, "runs": self._runs}))
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError:
            return
        if self.path == cache_dir() / "browse.msgpack":      # only in our own dir: never a file a caller named
            try:
                (self.path.parent / OLD_FILE).unlink(missing_ok=True)
            except OSError:
                pass
