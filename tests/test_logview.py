"""Pilot tests of the LogView widget."""

from __future__ import annotations

import time
from contextlib import contextmanager

from textual.app import App, ComposeResult

from gymwatch.tui.logscreens import LineScreen
from gymwatch.tui.logview import LogView, external_command

SIZE = (90, 16)


class ViewApp(App):
    def __init__(self, path=None, line=None, merged=None, follow=False):
        super().__init__()
        self.path, self.line, self.merged, self.start_follow = path, line, merged, follow
        self.new_lines: list[int] = []
        self.copied: list[str] = []

    def compose(self) -> ComposeResult:
        yield LogView(id="lv")

    def on_mount(self) -> None:
        lv = self.query_one(LogView)
        lv.follow = self.start_follow
        if self.merged:
            lv.open_merged(self.merged)
        elif self.path:
            lv.open(self.path, line=self.line)
        lv.focus()

    def on_log_view_new_lines(self, event: LogView.NewLines) -> None:
        self.new_lines.append(event.count)

    def copy_to_clipboard(self, text: str) -> None:
        self.copied.append(text)


def numbered(tmp_path, n=100, name="a.log", fmt="line {i} beta" ):
    p = tmp_path / name
    p.write_text("".join((fmt.format(i=i) if i % 10 == 0 else f"line {i}") + "\n" for i in range(1, n + 1)))
    return p


def screen_text(lv: LogView) -> list[str]:
    return [lv.render_line(y).text for y in range(lv.size.height)]


async def settle(pilot, cond, tries=100):
    for _ in range(tries):
        if cond():
            return True
        await pilot.pause(0.02)
    return cond()


async def test_open_at_line_highlights_it(tmp_path):
    app = ViewApp(numbered(tmp_path), line=57)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        await pilot.pause()
        assert lv.current()[1] == 57
        row = [y for y, t in enumerate(screen_text(lv)) if t.split()[:1] == ["57"]]
        assert row, screen_text(lv)
        strip = lv.render_line(row[0])
        assert any(seg.style and seg.style.bgcolor for seg in strip)     # marked
        lv.goto_line(3, highlight=False)
        await pilot.pause()
        assert lv.current()[1] == 3 and screen_text(lv)[0].split()[0] == "1"


async def test_find_next_prev_keys(tmp_path):
    app = ViewApp(numbered(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        await pilot.press("slash")
        await pilot.press(*"BETA", "enter")
        await pilot.pause()
        assert lv.current()[1] == 10
        await pilot.press("n")
        assert lv.current()[1] == 20
        await pilot.press("N", "N")
        assert lv.current()[1] == 100                  # wrapped backwards
        assert lv.find("line 42") == 42
        assert "line 42" in screen_text(lv)[lv.cursor - int(lv.scroll_y)]


async def test_filter_invert_and_errors_only(tmp_path):
    p = tmp_path / "e.log"
    p.write_text("INFO: start\nTraceback (most recent call last):\nValueError: boom\n"
                 "INFO: ok\n[Errno 98] address in use\n")
    app = ViewApp(p)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        lv.set_filter("info")
        assert lv.row_count == 2
        lv.set_filter("!info")
        assert lv.row_count == 3
        lv.set_filter("")
        assert lv.row_count == 5
        await pilot.press("e")
        assert lv.errors_only and lv.row_count == 3
        assert [t.split()[0] for t in screen_text(lv)[:3]] == ["2", "3", "5"]  # real line numbers
        await pilot.press("F")
        await pilot.press(*"errno", "enter")
        await pilot.pause()
        assert lv.row_count == 1 and lv.current()[1] == 5
        await pilot.press("e")
        assert lv.row_count == 1 and not lv.errors_only


async def test_follow_scrolls_and_counts_new_lines_when_paused(tmp_path):
    p = numbered(tmp_path, 50)
    app = ViewApp(p, follow=True)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        await settle(pilot, lambda: lv.scroll_y == lv.max_scroll_y > 0)
        with p.open("a") as fh:
            fh.write("".join(f"new {i}\n" for i in range(5)))
        assert lv.refresh_file() == 5
        assert await settle(pilot, lambda: "new 4" in screen_text(lv)[-1])
        lv.scroll_to(y=0, animate=False, immediate=True)            # the user scrolls up
        await pilot.pause()
        with p.open("a") as fh:
            fh.write("more 1\nmore 2\n")
        lv.refresh_file()
        with p.open("a") as fh:
            fh.write("more 3\n")
        lv.refresh_file()
        await settle(pilot, lambda: app.new_lines[-1:] == [3])
        assert app.new_lines == [2, 3] and lv.scroll_y == 0
        await pilot.press("G")                                          # back to the end: resumes
        assert await settle(pilot, lambda: app.new_lines[-1] == 0)
        assert "more 3" in screen_text(lv)[-1]


async def test_truncation_reindexes(tmp_path):
    p = numbered(tmp_path, 30)
    app = ViewApp(p)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        p.write_text("fresh\n")
        lv.refresh_file()
        await pilot.pause()
        assert lv.row_count == 1 and screen_text(lv)[0].split()[1] == "fresh"


async def test_untrusted_text_renders_literally(tmp_path):
    p = tmp_path / "evil.log"
    p.write_bytes(b"[b]bold[/b] [@click=app.quit]click[/]\n"
                  b"\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b]52;c;aGk=\x07\n"
                  b"[red]x[/red] \\[y]\n")
    app = ViewApp(p)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        text = screen_text(lv)
        assert "[b]bold[/b] [@click=app.quit]click[/]" in text[0]
        assert "red link " in text[1] and "\x1b" not in text[1] and "52;" not in text[1]
        assert "[red]x[/red] \\[y]" in text[2]
        await pilot.click(LogView, offset=(20, 0))
        await pilot.pause()
        assert app.is_running                              # the [@click] did nothing
        for y in range(3):
            assert all(not (seg.style and seg.style.meta) for seg in lv.render_line(y))


async def test_long_line_capped_enter_shows_whole(tmp_path):
    p = tmp_path / "long.log"
    p.write_text("x" * 10_000 + "END\nshort\n")
    app = ViewApp(p)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        first = list(lv.render_line(0))
        assert first[-1].text == "…" and first[-1].style.color.name == "red"   # capped
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LineScreen) and app.screen.text.endswith("END")
        await pilot.press("escape")
        assert not isinstance(app.screen, LineScreen)


async def test_copy_path_line_and_line_text(tmp_path):
    p = numbered(tmp_path, 20)
    app = ViewApp(p, line=7)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c", "C")
        assert app.copied == [f"{p}:7", "line 7"]


async def test_jump_prompt(tmp_path):
    app = ViewApp(numbered(tmp_path, 500))
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        await pilot.press("colon", *"321", "enter")
        await pilot.pause()
        assert lv.current()[1] == 321
        await pilot.press("g")
        assert lv.current()[1] == 1
        await pilot.press("ctrl+g", *"12", "enter")
        await pilot.pause()
        assert lv.current()[1] == 12


async def test_merged_view_prefixes_labels(tmp_path):
    a = tmp_path / "a.log"
    b = tmp_path / "b.log"
    a.write_text("from a\n")
    b.write_text("from b\n")
    app = ViewApp(merged=[("policy_model", str(a)), ("mcqa", str(b))])
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        await settle(pilot, lambda: lv.row_count == 2)
        text = screen_text(lv)
        assert "policy_model │ from a" in text[0] and "mcqa         │ from b" in text[1]
        colours = {seg.style.color.name for y in (0, 1) for seg in lv.render_line(y)
                   if seg.style and seg.style.color and "│" in seg.text}
        assert len(colours) == 2
        b.write_text("from b\nb again\n")
        lv.refresh_file()
        assert lv.row_count == 3 and lv.current() is not None


def test_external_command(monkeypatch):
    monkeypatch.setenv("PAGER", "less -R")
    assert external_command("/x.log", 12) == ["less", "-R", "+12", "/x.log"]
    monkeypatch.delenv("PAGER")
    monkeypatch.setenv("EDITOR", "nano")
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert external_command("/x.log", 3) == ["nano", "+3", "/x.log"]


def test_snapshot_filtered_view(snap_compare, tmp_path):
    p = tmp_path / "snap.log"
    p.write_text("INFO: server up\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
                 "ValueError: [b]not bold[/b]\nINFO: done\nERROR: failed \x1b[31mhard\x1b[0m\n")
    app = ViewApp(p)

    async def run_before(pilot):
        lv = app.query_one(LogView)
        lv.set_filter("", errors_only=True)
        lv.find("error")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(70, 8), run_before=run_before)


async def test_big_logs_filter_and_find_in_a_thread(tmp_path, monkeypatch):
    monkeypatch.setattr("gymwatch.tui.logview.BIG_BYTES", 0)
    p = numbered(tmp_path, 300)
    app = ViewApp(p)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        lv.set_filter("beta")
        assert await settle(pilot, lambda: not lv.filtering)
        assert lv.row_count == 30
        lv.set_filter("")
        assert lv.find("line 25") is None                    # answered by the worker
        assert await settle(pilot, lambda: lv.current()[1] == 25)
        await pilot.press("n")
        assert await settle(pilot, lambda: lv.current()[1] == 250)
        await pilot.press("N")
        assert await settle(pilot, lambda: lv.current()[1] == 25)


async def test_open_in_pager_at_the_line(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setenv("PAGER", "mypager")
    monkeypatch.setattr("gymwatch.tui.logview.subprocess.call", lambda cmd: calls.append(cmd) or 0)
    p = numbered(tmp_path, 40)
    app = ViewApp(p, line=12)
    async with app.run_test(size=SIZE) as pilot:
        monkeypatch.setattr(type(app), "suspend", _fake_suspend)
        await pilot.press("o")
        assert calls == [["mypager", "+12", str(p)]]


@contextmanager
def _fake_suspend(self):
    yield


async def test_a_jump_right_after_a_following_open_is_kept(tmp_path):
    """Opening a log follows it to its end once laid out; an evidence jump that comes before
    that deferred scroll must win (it used to be overridden, landing far from the line)."""
    p = numbered(tmp_path, n=5000)
    app = ViewApp(p, follow=True)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        lv.follow = False                 # what the log pane does to show an evidence line
        lv.open(str(p), line=57)
        await pilot.pause(0.3)
        assert lv.cursor == 56 and lv.scroll_y <= 56 < lv.scroll_y + lv.size.height


async def test_lines_a_first_index_finds_are_not_new_lines(tmp_path, monkeypatch):
    """A big file is indexed in the background after it opens; the lines found meanwhile
    were there all along: scrolled up while following, only true appends count as new."""
    from gymwatch.core import eolcount, logindex
    monkeypatch.setattr(logindex, "CHUNK", 256)
    monkeypatch.setattr(eolcount, "CHUNK", 256)
    monkeypatch.setattr(logindex, "SYNC_BYTES", 0)
    monkeypatch.setattr(logindex, "SYNC_LINES", 20)
    step = eolcount.EolScan.step

    def slow_step(self, fd, size):                           # a first index that takes a while
        time.sleep(0.0005)
        return step(self, fd, size)
    monkeypatch.setattr(eolcount.EolScan, "step", slow_step)
    p = numbered(tmp_path, 20_000)
    app = ViewApp(p, follow=True)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        assert not lv.logs.done                              # still indexing
        await pilot.pause()
        lv.scroll_to(y=0, animate=False, immediate=True)     # the user scrolls up: paused
        assert await settle(pilot, lambda: lv.logs.done and lv.row_count == 20_000, tries=500)
        assert lv.refresh_file() == 0
        assert not any(app.new_lines) and lv.scroll_y == 0
        with p.open("a") as fh:
            fh.write("appended 1\nappended 2\n")
        lv.refresh_file()                                    # (indexed in the background here)
        assert await settle(pilot, lambda: app.new_lines[-1:] == [2])


async def test_errors_only_while_following_keeps_following(tmp_path, monkeypatch):
    monkeypatch.setattr("gymwatch.tui.logview.BIG_BYTES", 0)     # the filter runs in a thread
    p = tmp_path / "a.log"
    p.write_text("".join(f"ERROR: bad {i}\n" if i % 7 == 0 else f"fine {i}\n" for i in range(2000)))
    app = ViewApp(p, follow=True)
    async with app.run_test(size=SIZE) as pilot:
        lv = app.query_one(LogView)
        assert await settle(pilot, lambda: lv.scroll_y == lv.max_scroll_y > 0)
        await pilot.press("e")
        assert await settle(pilot, lambda: not lv.filtering and lv.row_count == 286)
        assert await settle(pilot, lambda: lv.scroll_y == lv.max_scroll_y)
        assert lv.follow and not lv.paused and "ERROR: bad 1995" in screen_text(lv)[-1]
        with p.open("a") as fh:
            fh.write("fine x\nERROR: appended\n")
        lv.refresh_file()
        assert await settle(pilot, lambda: "ERROR: appended" in screen_text(lv)[-1])


async def test_a_resize_keeps_following_at_the_end_and_a_jumped_line_in_view(tmp_path):
    """Made smaller while following (a terminal resized, panes stacked), the view showed a stale
    middle of the file until a new line came."""
    p = numbered(tmp_path, 300)
    app = ViewApp(p, follow=True)
    async with app.run_test(size=(200, 50)) as pilot:
        lv = app.query_one(LogView)
        assert await settle(pilot, lambda: lv.row_count == 300 and lv.scroll_y == lv.max_scroll_y > 0)
        await pilot.resize_terminal(80, 12)
        assert await settle(pilot, lambda: lv.scroll_y == lv.max_scroll_y and "line 300" in screen_text(lv)[-1])
    app = ViewApp(p, line=40)
    async with app.run_test(size=(200, 50)) as pilot:
        lv = app.query_one(LogView)
        assert await settle(pilot, lambda: any("line 40 beta" in t for t in screen_text(lv)))
        await pilot.resize_terminal(80, 8)
        assert await settle(pilot, lambda: any("line 40 beta" in t for t in screen_text(lv)))
