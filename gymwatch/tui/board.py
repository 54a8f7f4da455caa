"""The readiness board: one DataTable row per server, updated cell by cell."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import DataTable

from ..core.model import FAILED, READY, EXITED, RunState, Server
from .fmt import STATE_LOOK, body, duration, plain

COLUMNS = (("server", "Server"), ("state", "State"), ("why", "Phase / why not ready"),
           ("in", "In state"), ("ttr", "To ready"), ("err", "Err"), ("last", "Last line"))
WHY_WIDTH = 48
SLOW_FACTOR, SLOW_MIN = 3.0, 60.0   # waiting > 3x the slowest ready sibling, and > 1 min


class ReadinessBoard(DataTable):
    BINDINGS = [("l", "open_log", "Log")]

    def __init__(self, **kw):
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self._cells: dict[str, tuple] = {}
        self.probes: dict[str, str] = {}    # server -> last head-server probe result

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)
        self.border_title = "Servers"

    def rebuild(self, state: Optional[RunState], now: Optional[float]) -> None:
        self.clear()
        self._cells.clear()
        if state is not None:
            self.update(state, set(state.servers), now)

    def update(self, state: RunState, names: set[str], now: Optional[float]) -> None:
        """Update rows of `names`, and the time cells of every row (they move with the clock)."""
        slow = slow_servers(state, now)
        for name in [n for n in self._cells if n not in state.servers]:   # renamed (a_b -> a/b)
            self.remove_row(name)
            del self._cells[name]
        for name, s in state.servers.items():   # few rows: recompute all, write only what differs
            self._set_row(name, self._row(state, s, now, name in slow))
        ready = sum(1 for s in state.servers.values() if s.became_ready)
        self.border_title = f"Servers {ready}/{len(state.servers)} ready"

    def _set_row(self, name: str, cells: tuple) -> None:
        old = self._cells.get(name)
        if old is None:
            self.add_row(*cells, key=name)
        else:
            for (key, _), a, b in zip(COLUMNS, old, cells):
                if a != b:
                    self.update_cell(name, key, b, update_width=True)
        self._cells[name] = cells

    def _row(self, state: RunState, s: Server, now: Optional[float], slow: bool) -> tuple:
        sym, style = STATE_LOOK.get(s.state, ("?", ""))
        st = Text(f"{sym} {s.state}", style=style)
        if slow:
            st.append(" ⚠ slow", style="bold black on yellow")
        in_state = now - s.state_since if now is not None and s.state_since is not None else None
        waited = now - s.first_seen if now is not None and s.first_seen is not None else in_state
        ttr = s.ready_at - s.first_seen if s.ready_at is not None and s.first_seen is not None else None
        err = Text(str(s.error_count), style="bold red" if s.error_count else "dim")
        why = why_text(state, s, slow, waited)
        if s.name in self.probes:
            why = Text.assemble(plain(self.probes[s.name], 30, "cyan"), " ", why)
        return (Text(s.name, style="bold"), st, why,
                Text(duration(in_state)), Text("—" if ttr == 0 else duration(ttr)), err, plain(body(s.last_line), 90))

    def server_at_cursor(self) -> Optional[str]:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return key.value

    def select(self, name: str) -> None:
        if name in self._cells:
            self.move_cursor(row=self.get_row_index(name))

    def action_open_log(self) -> None:
        name = self.server_at_cursor()
        if name:
            self.app.open_server_log(name, force=True)   # type: ignore[attr-defined]


def why_text(state: RunState, s: Server, slow: bool, in_state: Optional[float]) -> Text:
    if s.state == FAILED:
        why = "died silently after installing (Gym pipefail bug, see GYM_REFERENCE §3)" \
            if s.silent_death else (s.failure_reason or "failed")
        return plain(why, WHY_WIDTH, "red")
    if s.became_ready or s.state in (READY, EXITED):
        return plain(s.phase or s.state, WHY_WIDTH)
    if s.phase:
        why = s.phase
    elif s.last_line:
        why = "starting"
    else:
        why = "no output yet" + ("; Gym waiting for it" if s.name in (state.parent.pending or []) else "")
    if slow:
        took = max(_ttrs(state), default=0.0)
        return plain(f"{duration(in_state)}; siblings took ≤{duration(took) or '0s'}; {why}", WHY_WIDTH, "yellow")
    return plain(why, WHY_WIDTH)


def slow_servers(state: RunState, now: Optional[float]) -> set[str]:
    """Servers not ready for far longer than the slowest sibling that became ready."""
    if now is None:
        return set()
    ttrs = _ttrs(state)
    if not ttrs:
        return set()
    limit = max(SLOW_MIN, SLOW_FACTOR * max(ttrs))
    return {s.name for s in state.servers.values()
            if not s.became_ready and s.state != FAILED and s.first_seen is not None
            and now - s.first_seen > limit}


def _ttrs(state: RunState) -> list[float]:
    return [s.ready_at - s.first_seen for s in state.servers.values()
            if s.ready_at is not None and s.first_seen is not None]
