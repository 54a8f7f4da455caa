"""The stand-in log view (used when logview.LogView is absent): literal text, jumps, find."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from gymwatch.tui.simplelog import SimpleLogView
from gymwatch.tui.testing import wait_for


class Host(App):
    def compose(self) -> ComposeResult:
        yield SimpleLogView(id="v")


def text(view: SimpleLogView) -> str:
    return "\n".join("".join(s.text for s in view.render_line(y)) for y in range(view.size.height))


async def test_simple_log_view_is_literal_and_jumps(tmp_path: Path):
    log = tmp_path / "x.log"
    lines = [f"line {i}" for i in range(1, 200)]
    lines[99] = "[b]bold[/] [@click=app.quit]q[/] \x1b[31mred\x1b[0m"
    log.write_text("\n".join(lines) + "\n")
    app = Host()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(SimpleLogView)
        view.open(str(log), line=100)
        assert await wait_for(pilot, lambda: "[@click=app.quit]q[/]" in text(view))
        assert "[b]bold[/]" in text(view) and "\x1b" not in text(view) and "red" in text(view)
        assert view.find("line 150") and view.current()[1] == 150
        with open(log, "a") as fh:
            fh.write("tail 1\ntail 2\n")
        assert view.refresh_file() == 2
        view.set_filter("tail")
        assert await wait_for(pilot, lambda: "tail 2" in text(view) and "line 1\n" not in text(view))
