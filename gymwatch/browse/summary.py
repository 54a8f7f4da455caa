"""A run's one-line summary for the list: the core's reducer and verdict, fed cheaply.

Same conclusions as `gymwatch report`: rows (rollouts, failures, materialized inputs) are
read whole first, because trial counts need every row. When the aggregate metrics exist
and collection started, the verdict follows from the rows alone (see `verdict.verdict`),
so the logs are not read at all (`logs_read: false`; servers are counted from logs/, or
unknown (null) when the servers' output is only in a merged log, as in evaluator bundles).
Otherwise logs are read whole up to HEAD + TAIL bytes; a bigger log contributes its first
HEAD and last TAIL bytes only (`sampled`), which keeps startup lines and the end. Names come from a line scan of Hydra's
`config.yaml` (no YAML parser: that alone cost more than the rest of a small run).
No process checks: a listed run is judged from its files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Optional

from ..core import config
from ..core.layout import RunLayout
from ..core.model import FAILED, RunInfo
from ..core.session import RunSession
from ..core.tail import Batch, Tailer
from ..core.verdict import counts, mean_reward, verdict

HEAD = 256 << 10
TAIL = 256 << 10
_EOL = re.compile(rb"\r\n|\r|\n")
_AGENT_RE = re.compile(r"^agent_name:\s*['\"]?([^'\"\s#]+)", re.M)
_MODEL_RE = re.compile(r"^policy_model_name:\s*['\"]?([^'\"\s#]+)", re.M)


class HeadTail:
    """Reads a big log once: its first HEAD and last TAIL bytes as complete lines (Tailer-like)."""

    def __init__(self, path: str):
        self.path, self.done = path, False

    def read(self, final: bool = False, max_bytes: Optional[int] = None) -> Batch:
        batch = Batch()
        if self.done:
            return batch
        self.done = True
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(HEAD)
                fh.seek(-TAIL, os.SEEK_END)
                tail = fh.read(TAIL)
        except OSError as exc:
            batch.error = exc.strerror or str(exc)
            return batch
        lines = _EOL.split(head)[:-1]            # the cut last line is dropped
        lines += _EOL.split(tail)[1:]            # and so is the cut first line of the tail
        batch.lines = [(i + 1, raw) for i, raw in enumerate(lines)]   # numbers are not real
        return batch


class SummarySession(RunSession):
    """A RunSession with cheap names, rows first, and logs only when they can matter."""

    sampled = False
    rows_only = False

    _info: Optional[RunInfo] = None
    _rows: Optional[set] = None

    def _refresh_info(self) -> None:
        if self._info is None:
            self._info = quick_info(self.layout)
        self.state.info = self._info

    def _is_rows(self, path: Path) -> bool:
        if self._rows is None:
            lay = self.layout
            self._rows = {lay.rollouts, lay.materialized, lay.failures} - {None}
        return path in self._rows

    def _rediscover(self) -> bool:
        return False           # a one-shot read of a run just discovered

    def _read(self, path, final, feed, offset_key: str = "") -> bool:
        if self.rows_only and path is not None and not self._is_rows(path):
            return False
        return super()._read(path, final, feed, offset_key)

    def _tailer(self, path: Path, offset_key: str):
        if self._is_rows(path) or offset_key and self.layout.log_offsets.get(offset_key):
            return super()._tailer(path, offset_key)
        try:
            big = os.path.getsize(path) > HEAD + TAIL
        except OSError:
            big = False
        if not big:
            return Tailer(str(path))
        self.sampled = True
        return HeadTail(str(path))

    def read(self) -> bool:
        """Rows first; logs only if the verdict still depends on them. True: logs were read."""
        self.rows_only = True
        self.poll(final=True)
        st = self.state
        if st.aggregate_written and st.collector.started:
            return False     # verdict and counts follow from the rows alone (verdict.verdict)
        self.rows_only = False
        self.poll(final=True)
        return True


def quick_info(lay: RunLayout) -> RunInfo:
    info = RunInfo()
    for d in lay.hydra_dirs:
        text = _read_text(d / ".hydra" / "config.yaml")
        for kind, name in config._KIND_RE.findall(text):
            if kind == "resources_servers":
                info.environment = info.environment or name
        info.agent = info.agent or _first(_AGENT_RE, text)
        info.model = info.model or _first(_MODEL_RE, text)
    if lay.bundle_meta is not None and lay.bundle_meta.is_file():
        config._from_bundle(info, lay.bundle_meta)
    if lay.manifest:
        config._from_manifest(info, lay.manifest)
    return info


def _read_text(path: Path, limit: int = 1 << 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return ""


def _first(pattern: re.Pattern, text: str) -> str:
    m = pattern.search(text)
    return m.group(1) if m else ""


def summarize(path: str | os.PathLike, layout: RunLayout, sig: list) -> dict[str, Any]:
    """The list's facts about one run. Never raises: a broken run is listed as an error."""
    out: dict[str, Any] = {"path": str(path), "kind": layout.kind}
    out.update(_times(layout, sig))
    try:
        session = SummarySession(layout, check_processes=False)
        logs_read = session.read()
    except Exception as exc:  # noqa: BLE001 - one bad run must not stop the listing
        out.update(verdict="error", reason=f"{type(exc).__name__}: {exc}")
        return out
    state, v = session.state, verdict(session.state)
    names = set(state.servers) | set(layout.server_logs())
    servers = len(names) if names or logs_read else None      # None: not known without the logs
    out["started"] = state.info.started_at or out["started"]
    out.update(
        environment=state.info.environment or None, agent=state.info.agent or None,
        model=state.info.model or None, servers=servers,
        servers_failed=sum(1 for s in state.servers.values() if s.state == FAILED) if logs_read else None,
        trials=counts(state), expected=state.expected_total, mean_reward=mean_reward(state),
        verdict=v.name, reason=v.reason, logs_read=logs_read, sampled=session.sampled)
    return out


def _times(lay: RunLayout, sig: list) -> dict[str, Optional[float]]:
    """Start and duration from file times: Hydra's config is written at launch, the last
    write to any run file ends it (for a live run: so far)."""
    mtimes = [m for _, _, m in sig if m]
    starts = [_mtime(d / ".hydra" / "config.yaml") for d in lay.hydra_dirs]
    starts = [s for s in starts if s] or ([min(mtimes) / 1e9] if mtimes else [])
    started = min(starts) if starts else None
    last = max(mtimes) / 1e9 if mtimes else None
    duration = max(0.0, last - started) if started and last else None
    return {"started": started, "duration": duration}


def _mtime(path: Path) -> Optional[float]:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
