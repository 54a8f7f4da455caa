"""Summaries cached outside the runs, in the user cache dir (never a byte written into a run).

One JSON file, `$XDG_CACHE_HOME/gymwatch/browse.json` (default ~/.cache/gymwatch): per
run path, the signature of its files (name, size, mtime) and the summary made from them.
A run whose signature changed is summarised again.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

import msgspec

from .. import __version__
from ..core.session import bulk_load

VERSION = f"3:{__version__}"     # summaries depend on the reducer: a new gymwatch rereads
MAX_ENTRIES = 50_000


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gymwatch"


class SummaryCache:
    def __init__(self, path: Optional[Path] = None, enabled: bool = True):
        self.path = path or cache_dir() / "browse.json"
        self.enabled = enabled
        self.hits = self.misses = 0
        self._dirty = False
        self._runs: dict[str, dict] = self._load() if enabled else {}

    def _load(self) -> dict[str, dict]:
        try:
            raw = self.path.read_bytes()
        except OSError:
            return {}
        # msgspec: ~3x faster than json for 1,000 summaries (~33 ms of a warm listing); without
        # cyclic collections over the objects being made (they took half of the decode)
        with bulk_load():
            try:
                data = msgspec.json.decode(raw)
            except msgspec.DecodeError:     # what json writes and msgspec refuses (NaN), or not JSON
                try:
                    data = json.loads(raw.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    return {}
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("runs"), dict):
            return {}
        return data["runs"]

    def get(self, run: str, sig: list) -> Optional[dict[str, Any]]:
        entry = self._runs.get(run)
        if entry is not None and entry.get("sig") == sig:
            self.hits += 1
            return entry.get("summary")
        self.misses += 1
        return None

    def knows(self, run: str) -> bool:
        """A summary of this run is cached (whether still true or not)."""
        return run in self._runs

    def put(self, run: str, sig: list, summary: dict[str, Any]) -> None:
        if self.enabled:
            self._runs[run] = {"sig": sig, "summary": summary}
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
            with os.fdopen(fd, "w", encoding="utf-8") as fh:   # dumps: the C encoder, dump is not
                fh.write(json.dumps({"version": VERSION, "runs": self._runs}, separators=(",", ":")))
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError:
            pass
