"""What the Slurm feed and the Ray feed share: an outside service asked at most every `interval`
seconds (a screen), in a thread of its own so that a poll of a session never waits for it, or
once, at once (a report: `interval` None). Its latest answer is kept; a subclass says what it
asks (`_ask`) and with what it asks (`_snapshot`, taken under the lock when an ask is due).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Generic, Optional, TypeVar

AnswerT = TypeVar("AnswerT")


class PacedFeed(Generic[AnswerT]):
    THREAD = "feed"         # the asking thread's name

    def __init__(self, interval: Optional[float], clock: Callable[[], float]):
        self.interval = interval
        self.clock = clock
        self._last: Optional[AnswerT] = None
        self._asked: Optional[float] = None
        self._busy = False                  # an ask is under way
        self._lock = threading.Lock()

    def answer(self) -> Optional[AnswerT]:
        """The latest answer, asked for first when the last ask is `interval` old: at once for a
        feed asked once (its first answer is then this call's), else in the background (this call
        returns the one before)."""
        with self._lock:
            now = self.clock()
            due = self._asked is None or (self.interval is not None and now - self._asked >= self.interval)
            if not due or self._busy:
                return self._last
            self._asked, self._busy = now, True
            snapshot = self._snapshot()
        if self.interval is None:
            self._run(snapshot)
        else:
            threading.Thread(target=self._run, args=(snapshot,), name=self.THREAD, daemon=True).start()
        with self._lock:
            return self._last

    def _run(self, snapshot: Any) -> None:
        try:
            with self._lock:
                last = self._last
            answer = self._ask(snapshot, last)
            with self._lock:
                self._last = answer
        finally:
            with self._lock:
                self._busy = False

    def _snapshot(self) -> Any:
        """What an ask needs of the feed's own state (called under the lock)."""
        return None

    def _ask(self, snapshot: Any, last: Optional[AnswerT]) -> AnswerT:
        """Ask the service (outside the lock); `last`: the answer before."""
        raise NotImplementedError
