"""The Ray dashboard asked for the sessions of a run whose services span nodes (`--ray URL`):
once for a report, or every `interval` seconds for a screen, in a thread of its own (a poll of the
session never waits for the dashboard: its timeout, an unreachable head), the session taking the
answer the poll after it came. Each answer is numbered, so a session applies it once.

Ray names nodes by IP; Slurm by hostname. The feed resolves each node's IP to its names (reverse
DNS) in its own thread, so the reducer can match a Slurm node to a Ray node without asking anyone.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Optional

from .cluster import ray
from .cluster.ray import RayState

INTERVAL = 10.0        # seconds between asks while a screen is open

Resolver = Callable[[str], list[str]]


def names_of(ip: str) -> list[str]:
    """The hostnames an IP resolves back to ([] when it does not)."""
    try:
        name, aliases, _ = socket.gethostbyaddr(ip)
    except (OSError, UnicodeError, ValueError):
        return []
    return [name, *aliases]


@dataclass(frozen=True)
class RayAnswer:
    state: RayState
    asked_at: datetime                                          # local time
    number: int                                                 # 1, 2, ...: applied once each
    names: dict[str, list[str]] = field(default_factory=dict)   # per node IP, its hostnames


class RayFeed:
    def __init__(self, url: str, interval: Optional[float] = INTERVAL,
                 reader: Callable[[str], RayState] = ray.read, resolve: Resolver = names_of,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], datetime] = datetime.now):
        """`interval`: seconds between asks; None: one ask for the feed's life (a report)."""
        self.url = url
        self.interval = interval
        self.reader, self.resolve, self.clock, self.now = reader, resolve, clock, now
        self._last: Optional[RayAnswer] = None
        self._asked: Optional[float] = None
        self._busy = False
        self._names: dict[str, list[str]] = {}       # resolved once per IP
        self._lock = threading.Lock()

    def answer(self) -> Optional[RayAnswer]:
        """The latest answer, asked for first when the last ask is `interval` old: at once for a
        feed asked once, else in the background (this call returns the one before)."""
        with self._lock:
            now = self.clock()
            due = self._asked is None or (self.interval is not None and now - self._asked >= self.interval)
            if not due or self._busy:
                return self._last
            self._asked, self._busy = now, True
        if self.interval is None:
            self._ask()
        else:
            threading.Thread(target=self._ask, name="ray", daemon=True).start()
        with self._lock:
            return self._last

    def _ask(self) -> None:
        try:
            state = self.reader(self.url)
            for node in state.nodes:
                if node.ip and node.ip not in self._names:
                    self._names[node.ip] = self.resolve(node.ip)
            names = {ip: list(n) for ip, n in self._names.items() if n}
            with self._lock:
                number = self._last.number + 1 if self._last is not None else 1
                self._last = RayAnswer(state, self.now(), number, names)
        finally:
            with self._lock:
                self._busy = False
