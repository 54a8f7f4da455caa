"""The live screen's driver when `gymwatch serve` shows it in a browser tab (`ServedDriver`).

A served screen is read-only and its only reader is one tab, so once that tab is gone (or the
screen is told to stop) the process has nothing left to do, and it must end in any phase of its
start. Textual's WebDriver does not ensure that, and this driver adds what is missing:

- the end of its input (serve closed the pipe, or serve itself is gone) means the tab is gone:
  Textual's input thread just returned there, leaving the screen running for nobody;
- leaving is bounded: an app asked to exit while it starts can wedge in Textual (two sizes sent by
  the page before it drew, and the screen re-posting each to itself for ever while the exit holds
  its repaints: a core at ~100%, and a SIGTERM only asks it again to exit). Nothing is lost by
  ending such a process outright: it writes nothing, and the run is not its child.
- SIGTERM, SIGINT and SIGHUP all mean leave, the same bounded way.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

from textual import messages
from textual.drivers.web_driver import WebDriver

# How long a screen told to leave may take to end by itself (it takes well under a second when
# nothing wedges it) before it is ended outright.
LEAVE_GRACE = 2.0
LEAVE_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class ServedDriver(WebDriver):
    """Textual's WebDriver (the packet protocol textual-serve speaks) that ends its process when
    its tab goes away or it is told to stop, within LEAVE_GRACE seconds, whatever the app does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._leaving = threading.Event()

    def start_application_mode(self) -> None:
        self._loop = asyncio.get_running_loop()
        super().start_application_mode()
        for sig in LEAVE_SIGNALS:        # in place of WebDriver's, which only ask the app to exit
            self._loop.add_signal_handler(sig, self.leave)

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():  # not stopped by the app: the input ended, the tab is gone
            self.leave()

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "quit":         # serve's word that the tab closed
            self.leave()
            return
        super().on_meta(packet_type, payload)

    def leave(self) -> None:
        """Ask the app to exit, and end the process LEAVE_GRACE seconds later if it has not.
        From any thread; once is enough."""
        if self._leaving.is_set():
            return
        self._leaving.set()
        deadline = threading.Timer(LEAVE_GRACE, os._exit, (0,))
        deadline.daemon = True
        deadline.start()
        if not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._app.post_message, messages.ExitApp())
            except RuntimeError:          # the loop closed meanwhile: the app has ended
                pass
