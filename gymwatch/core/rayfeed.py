"""The Ray dashboard asked for the sessions of a run whose services span nodes (`--ray URL`):
once for a report, or every `interval` seconds for a screen, in a thread of its own (a poll of the
session never waits for the dashboard: its timeout, an unreachable head), the session taking the
answer the poll after it came. Each answer is numbered, so a session applies it once.

Ray names nodes by IP; Slurm by hostname. The feed resolves each node's IP to its names (reverse
DNS) in its own thread, so the reducer can match a Slurm node to a Ray node without asking anyone.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Optional

from .cluster import ray
from .cluster.ray import RayState
from .pacedfeed import PacedFeed

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


class RayFeed(PacedFeed[RayAnswer]):
    THREAD = "ray"

    def __init__(self, url: str, interval: Optional[float] = INTERVAL,
                 reader: Callable[[str], RayState] = ray.read, resolve: Resolver = names_of,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], datetime] = datetime.now):
        """`interval`: seconds between asks; None: one ask for the feed's life (a report)."""
        super().__init__(interval, clock)
        self.url = url
        self.reader, self.resolve, self.now = reader, resolve, now
        self._names: dict[str, list[str]] = {}       # resolved once per IP (only the asking thread writes it)

    def _ask(self, snapshot: None, last: Optional[RayAnswer]) -> RayAnswer:
        state = self.reader(self.url)
        for node in state.nodes:
            if node.ip and node.ip not in self._names:
                self._names[node.ip] = self.resolve(node.ip)
        names = {ip: list(n) for ip, n in self._names.items() if n}
        return RayAnswer(state, self.now(), last.number + 1 if last is not None else 1, names)
