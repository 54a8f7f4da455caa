"""Command palette (ctrl+p): domain commands - filters, sorts, logs, failures - run on the main
screen (`GymwatchApp.main`), whatever screen the palette opened over."""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content

from .trials import FILTERS, SORTS


def highlight(matcher: Matcher, text: str) -> Content:
    """Matcher.highlight parses markup; server names are data, so highlight plain content."""
    content = Content(text)
    score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for i in offsets if score else ():
        content = content.stylize(matcher.match_style, i, i + 1)
    return content


class GymwatchCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        main = self.app.main         # type: ignore[attr-defined]
        cmds: list[tuple[str, Callable[[], object], str]] = []
        for f in FILTERS:
            cmds.append((f"Trials: show {f.replace('_', '-')}", partial(main.set_trial_filter, f),
                         "filter the trials table"))
        for s in SORTS:
            cmds.append((f"Trials: sort by {s}", partial(main.set_trial_sort, s), "sort the trials table"))
        cmds += [
            ("Go to next failure", main.action_next_failure, "a failed server or a failed, never-ran or missing trial"),
            ("Go to previous failure", main.action_prev_failure, "back to the previous one"),
            ("Open verdict evidence", main.action_verdict_evidence, "the line the verdict rests on"),
            ("Log: toggle follow", main.action_toggle_follow, "tail the log"),
            ("Log: errors only", main.action_errors_only, "filter the log to error lines"),
            ("Log: all servers merged", main.action_all_logs, "every server's log in one view"),
            ("Retry file: trials that did not complete", main.action_retry_input,
             "write their inputs for gym eval run --input, and show the command"),
            ("Charts: startup timeline", partial(main.action_charts, "timeline"),
             "each server's steps on one time axis, the critical path marked"),
            ("Charts: throughput, rewards, tokens, cost", partial(main.action_charts, "throughput"),
             "results per minute, how rewards and tokens spread, cost and speed per agent"),
        ]
        with main.live.lock:
            state = main.live.state
            names = sorted(state.servers) if state else []
        for name in names:
            cmds.append((f"Open log: {name}", partial(main.navigator.open_server_log, name), "this server's output"))
        return cmds

    async def discover(self) -> Hits:
        for name, cb, help_ in self._commands():
            yield DiscoveryHit(Content(name), cb, text=name, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, cb, help_ in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, highlight(matcher, name), cb, text=name, help=help_)
